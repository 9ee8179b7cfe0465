"""Combined compile: subscriptions at the ingress edge, delivery trees in a label stack.

The network is run by :mod:`runtime.stack_sim`, which reads only the installed state (push action
arguments, own ids, groups, stored trees); the oracle is the subscriptions themselves
(:func:`compiler.oracle.evaluate`), which share no code with the plan or the encoders.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.base.errors import P4subError
from compiler.delivery.combined import LIMITS, plan_combined, push_args
from compiler.delivery.wire import ETHERTYPE_STACK
from compiler.network.topology import fat_tree, jellyfish
from compiler.oracle import evaluate
from compiler.rules.typecheck import check_rules
from p4sub import main
from runtime.stack_sim import StackNetwork
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (8, {"match_kind": "range"}), "m.b": (8, {"match_kind": "range"})})
TOPOLOGIES = {"fat-tree-4": fat_tree(4), "jellyfish-8": jellyfish(8, 3, 1, seed=2)}
NATURAL = {"ingress-port", "no-subscriber"}  # the publisher subscribed too / nobody did
ENCODINGS = ["port", "bitmask", "mcgroup", "mixed"]


def host_rules(assignments: list[tuple[int, list[str]]], topo) -> ast.RuleSet:
    """Rule i: ``m.a == v_i`` (or ``m.b >= v_i`` for odd i, so filters overlap) forwarding to the hosts."""
    rules = []
    for i, (value, hosts) in enumerate(assignments):
        ids = tuple(sorted({topo.node_id(h) for h in hosts}))
        if not ids:
            continue
        field, op = ("m.a", "==") if i % 2 == 0 else ("m.b", ">=")
        rules.append(ast.Rule(ast.Comparison(ast.Field(field), op, ast.Number(value)), (ast.Forward(ids),)))
    return ast.RuleSet(tuple(rules))


def frame_for(values: dict[str, int]) -> bytes:
    payload = bytes([values["m.a"], values["m.b"]]) + b"payload-bytes"
    return b"\x02\x00\x00\x00\x00\x63" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + payload


@st.composite
def networks(draw):
    name = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topo = TOPOLOGIES[name]
    hosts = topo.hosts()
    assignments = draw(st.lists(st.tuples(st.integers(0, 7), st.lists(st.sampled_from(hosts), max_size=len(hosts))),
                                min_size=1, max_size=6))
    return topo, host_rules(assignments, topo)


@settings(max_examples=80, deadline=None)
@given(networks(), st.sampled_from(ENCODINGS), st.sampled_from([None, 6, 2, 1]),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 1000)), min_size=1, max_size=5))
def test_each_subscriber_gets_exactly_one_original_copy_and_nobody_else(net, encoding, max_labels, packets):
    topo, rules = net
    if not rules.rules:
        return
    plan = plan_combined(topo, rules, SPEC, encoding, max_labels=max_labels)
    sim = StackNetwork(topo, plan)
    typed = check_rules(rules, SPEC, port_bits=32)
    hosts = topo.hosts()
    for a, b, who in packets:
        values = {"m.a": a, "m.b": b}
        publisher = hosts[who % len(hosts)]
        frame = frame_for(values)
        got = sim.publish(publisher, frame, values)
        wanted = {topo.host_by_id(h) for h in evaluate(typed, values).ports} - {publisher}
        assert set(got.frames) == wanted
        for h, frames in got.frames.items():
            assert frames == [frame], f"{h} got {len(frames)} copies or a changed frame"
        assert set(got.drops) <= NATURAL


def test_small_header_limit_falls_back_to_stored_trees_and_still_delivers():
    topo = fat_tree(4)
    hosts = topo.hosts()
    rules = host_rules([(1, hosts[4:]), (2, hosts[8:10]), (3, [hosts[5]])], topo)
    big = plan_combined(topo, rules, SPEC, "port")
    small = plan_combined(topo, rules, SPEC, "port", max_labels=3)
    assert big.fallbacks == 0
    pushes = [p for s in small.switches.values() for p in s.pushes]
    # Trees for 12 hosts need more than 3 switch/port labels from anywhere; one host from its
    # own switch needs 1, from another pod 5.
    assert small.fallbacks == sum(1 for p in pushes if p.kind == "stored") > 0
    assert all(len(p.labels) <= 3 for p in pushes)
    assert small.stats()["fallbacks"] == small.fallbacks
    sim = StackNetwork(topo, small)
    # Rules: m.a == 1 -> hosts[4:]; m.b >= 2 -> hosts[8:10]; m.a == 3 -> hosts[5].
    for (a, b), expected in [((1, 0), set(hosts[4:])), ((0, 2), set(hosts[8:10])), ((3, 0), {hosts[5]})]:
        got = sim.publish(hosts[0], frame_for({"m.a": a, "m.b": b}), {"m.a": a, "m.b": b})
        assert set(got.frames) == expected and not got.drops


def _pushed(sim: StackNetwork, topo, publisher: str, values: dict[str, int]) -> tuple[str, int, bytes]:
    """The stack frame the publisher's switch sends on towards another switch (first such copy)."""
    switch, port = topo.host_attachment(publisher)
    for out_port, frame in sim.process(switch, port, frame_for(values), values, Counter()):
        peer, peer_port = topo.peer(switch, out_port)
        if topo.is_switch(peer):
            return peer, peer_port, frame
    raise AssertionError("no copy towards a switch")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_truncated_deep_and_foreign_stacks_are_dropped_and_counted_never_looped(encoding):
    topo = fat_tree(4)
    hosts = topo.hosts()
    rules = host_rules([(1, hosts[8:])], topo)
    plan = plan_combined(topo, rules, SPEC, encoding)
    sim = StackNetwork(topo, plan)
    peer, peer_port, frame = _pushed(sim, topo, hosts[0], {"m.a": 1, "m.b": 0})
    count = int.from_bytes(frame[16:18], "big")
    assert count > 0
    # Truncated: the count promises more labels than the frame holds.
    short = frame[:18 + count * plan.label_bytes - 1]
    got = sim.inject(peer, peer_port, short)
    assert got.drops == {"parser-error": 1} and not got.frames
    # Deeper than the program's header stack.
    deep = frame[:16] + (plan.max_labels + 1).to_bytes(2, "big") + frame[18:] + bytes(plan.label_bytes * 40)
    got = sim.inject(peer, peer_port, deep)
    assert got.drops == {"parser-error": 1} and not got.frames
    # Names only a switch id that does not exist.
    ghost = max(s.switch_id for s in plan.switches.values()) + 1
    label = (ghost << (8 * plan.value_bytes) | 1).to_bytes(plan.label_bytes, "big")
    foreign = frame[:16] + (1).to_bytes(2, "big") + label + frame[18 + count * plan.label_bytes:]
    got = sim.inject(peer, peer_port, foreign)
    assert got.drops == {"no-own-label": 1} and not got.frames


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(TOPOLOGIES)), st.sampled_from(ENCODINGS), st.data())
def test_any_stack_travels_at_most_one_hop_per_label(name, encoding, data):
    """Random labels (real and unknown ids, any values) injected anywhere: no copy outlives its stack."""
    topo = TOPOLOGIES[name]
    rules = host_rules([(1, topo.hosts()[:2])], topo)
    plan = plan_combined(topo, rules, SPEC, encoding)
    sim = StackNetwork(topo, plan)
    ids = [s.switch_id for s in plan.switches.values()] + [0, 250]
    n = data.draw(st.integers(0, plan.max_labels))
    labels = data.draw(st.lists(st.tuples(st.sampled_from(ids), st.integers(0, 255)), min_size=n, max_size=n))
    raw = b"".join((i << (8 * plan.value_bytes) | v).to_bytes(plan.label_bytes, "big") for i, v in labels)
    frame = b"\x02" * 12 + ETHERTYPE_STACK.to_bytes(2, "big") + b"\x08\x00" + n.to_bytes(2, "big") + raw + b"x"
    switch = data.draw(st.sampled_from(topo.switches()))
    in_port = data.draw(st.sampled_from(topo.ports(switch)))
    got = sim.inject(switch, in_port, frame, max_hops=plan.max_labels + 2)
    assert "hop-limit" not in got.drops
    stored = bool(labels) and labels[0][0] == 0
    if not stored:
        assert got.max_hops <= n + 1


def _bits(value: int) -> set[int]:
    return {i + 1 for i in range(value.bit_length()) if value >> i & 1}


def test_mcgroup_labels_name_a_multicast_group_of_their_switch_whose_id_is_its_port_bitmap():
    topo = fat_tree(4)
    hosts = topo.hosts()
    plan = plan_combined(topo, host_rules([(1, hosts[2:]), (2, hosts[5:7]), (3, [hosts[9]])], topo), SPEC, "mcgroup")
    by_id = {s.switch_id: s for s in plan.switches.values()}
    labels = [lab for s in plan.switches.values() for p in s.pushes for lab in p.labels]
    assert labels and plan.tag_bits == 0
    for sid, gid in labels:
        groups = dict(by_id[sid].groups)
        assert gid in groups and set(groups[gid]) == _bits(gid)
    for s in plan.switches.values():
        assert len(s.groups) == 2 ** len(s.ports) - 1  # the full subset table (split = 1)


def test_mixed_takes_a_port_label_for_one_port_and_a_group_label_for_several():
    topo = fat_tree(4)
    hosts = topo.hosts()
    rules = host_rules([(1, hosts[2:]), (2, hosts[5:7]), (3, [hosts[9]])], topo)
    mixed = plan_combined(topo, rules, SPEC, "mixed")
    group = plan_combined(topo, rules, SPEC, "mcgroup")
    shift = mixed.tag_shift
    assert mixed.tag_bits == 2 and shift == 8 * mixed.value_bytes - 2
    for s in mixed.switches.values():
        other = {p.rsid: p for p in group.switches[s.name].pushes}
        for p in s.pushes:
            # One label per tree switch, as mcgroup: the same switches in the same order.
            assert [i for i, _ in p.labels] == [i for i, _ in other[p.rsid].labels]
            for (_, v), (_, gid) in zip(p.labels, other[p.rsid].labels):
                tag, rest = v >> shift, v & ((1 << shift) - 1)
                if len(_bits(gid)) == 1:
                    assert (tag, rest) == (0, min(_bits(gid)))
                else:
                    assert (tag, rest) == (2, gid)
    assert mixed.stats()["label_tags"]["port"] > 0 and mixed.stats()["label_tags"]["group"] > 0


def _own_label_frame(plan, switch_id: int, value: int) -> bytes:
    label = (switch_id << (8 * plan.value_bytes) | value).to_bytes(plan.label_bytes, "big")
    return b"\x02" * 12 + ETHERTYPE_STACK.to_bytes(2, "big") + b"\x08\x00" + (1).to_bytes(2, "big") + label + b"x"


def test_mixed_dispatches_on_the_tag_including_bitmask_labels_the_encoder_never_writes():
    topo = fat_tree(4)
    plan = plan_combined(topo, host_rules([(1, topo.hosts()[:2])], topo), SPEC, "mixed")
    sim = StackNetwork(topo, plan)
    core = plan.switches["c1"]  # no host ports: every copy keeps the (now empty) stack
    shift = plan.tag_shift
    in_port = core.ports[0]
    two = 1 << (core.ports[1] - 1) | 1 << (core.ports[2] - 1)
    for tag, value, expected in [(0, core.ports[1], {core.ports[1]}), (1, two, {core.ports[1], core.ports[2]}),
                                 (2, two, {core.ports[1], core.ports[2]})]:
        out = sim.process("c1", in_port, _own_label_frame(plan, core.switch_id, tag << shift | value), None, Counter())
        assert {port for port, _ in out} == expected
        assert all(int.from_bytes(f[16:18], "big") == 0 for _, f in out)
    for bad in (3 << shift | 1, 0 << shift | 0, 0 << shift | 17):
        drops = Counter()
        assert sim.process("c1", in_port, _own_label_frame(plan, core.switch_id, bad), None, drops) == []
        assert drops == {"no-port": 1}


def test_push_arguments_are_count_then_packed_labels():
    topo = fat_tree(4)
    hosts = topo.hosts()
    plan = plan_combined(topo, host_rules([(1, hosts[1:3])], topo), SPEC, "port")
    push = plan.switches[topo.host_attachment(hosts[0])[0]].pushes[0]
    args = push_args(plan, push)
    assert len(args) == 1 + plan.max_labels and args[0] == len(push.labels)
    assert args[1] == push.labels[0][0] << 8 | push.labels[0][1]
    assert all(a == 0 for a in args[1 + len(push.labels):])


def test_limits_and_refusals():
    assert LIMITS["tofino"].max_labels <= LIMITS["bmv2"].max_labels
    topo = fat_tree(4)
    rules = host_rules([(1, topo.hosts()[:2])], topo)
    with pytest.raises(P4subError, match="unknown encoding"):
        plan_combined(topo, rules, SPEC, "mcgroup-split2")
    with pytest.raises(P4subError, match="at least 1"):
        plan_combined(topo, rules, SPEC, "port", max_labels=0)
    tofino = plan_combined(topo, rules, SPEC, "port", target="tofino", max_labels=100)
    assert tofino.max_labels == LIMITS["tofino"].max_labels


def test_receiver_sets_are_shared_between_leaves():
    topo = fat_tree(4)
    h = topo.hosts()
    # Two different filters with the same hosts: one receiver set.
    rules = host_rules([(1, [h[3], h[7]]), (5, [h[7], h[3]])], topo)
    plan = plan_combined(topo, rules, SPEC, "bitmask")
    sets = {r.hosts for r in plan.receiver_sets}
    assert (topo.node_id(h[3]), topo.node_id(h[7])) in sets
    ingress = [s for s in plan.switches.values() if s.ingress]
    assert len(ingress) == 8
    assert all(len(s.pushes) == len(plan.receiver_sets) and {p.kind for p in s.pushes} == {"stack"} for s in ingress)


ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = [str(ROOT / "examples/fat-tree-4.topo"), str(ROOT / "examples/fat-tree-4.rules"),
           "--spec", str(ROOT / "apps/itch/itch.p4")]


def test_route_cli_compiles_the_shipped_example_for_bmv2(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["route", *EXAMPLE, "--delivery", "header-stack:port", "--target", "bmv2", "-o", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["delivery"] == "header-stack:port" and stats["fallbacks"] == 0 and stats["receiver_sets"] == 40
    assert stats["recirculations_per_packet"] == 0
    for switch in ("e1_1", "a2_1", "c4"):
        assert {"program.p4", "entries.p4rt.json", "commands.txt", "bmv2.json"} <= {p.name for p in (out / switch).iterdir()}
    assert "p4sub_push_stack" in (out / "e1_1" / "program.p4").read_text()
    small = tmp_path / "small"
    assert main(["route", *EXAMPLE, "--delivery", "header-stack:bitmask", "--max-labels", "8", "-o", str(small)]) == 0
    assert json.loads((small / "stats.json").read_text())["fallbacks"] > 0


@pytest.mark.parametrize("extra,message", [
    (["--delivery", "header-stack:mcgroup-split2"], "unknown encoding"),
    (["--delivery", "stacks"], "expected filters or header-stack"),
    (["--delivery", "header-stack:mixed", "--target", "tofino", "--alpha", "10"], "apply to --delivery filters only"),
])
def test_route_cli_refuses_what_it_cannot_render_before_writing(tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert main(["route", *EXAMPLE, *extra, "-o", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
