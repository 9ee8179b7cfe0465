"""VT combined compile: subscriptions at the ingress edge, virtual-tree labels in the stack.

The network is run by :mod:`runtime.vt_sim`, which reads only the installed entries (push action
arguments, check_tree / check_hop / check_stop, groups); the oracle is the subscriptions themselves
(:func:`compiler.oracle.evaluate`), which share no code with the plan, the strategies or the encoder.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.delivery.vt.combined import plan_vt, push_words
from compiler.oracle import evaluate
from compiler.rules.typecheck import check_rules
from p4sub import main
from runtime.vt_sim import VtNetwork
from tests.compiler.delivery.test_combined import SPEC, TOPOLOGIES, frame_for, networks

STRATEGIES = ["hops", "broadcast", "topo", "random", "random-variant", "partitions", "relation", "freq-relation",
              "hybrid", "cycles"]


@settings(max_examples=100, deadline=None)
@given(networks(), st.sampled_from(STRATEGIES), st.sampled_from([None, 8, 2, 0]), st.sampled_from([None, 6, 3, 1]),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 1000)), min_size=1, max_size=4))
def test_each_subscriber_gets_exactly_one_original_copy_and_nobody_else(net, strategy, max_rules, max_labels, packets):
    topo, rules = net
    if not rules.rules:
        return
    if strategy == "topo" and not topo.is_hierarchical():
        strategy = "broadcast"
    try:
        plan = plan_vt(topo, rules, SPEC, strategy, max_rules=max_rules, max_labels=max_labels)
    except P4subError as exc:
        # A stack too deep for max_labels whose fallback VT does not fit the budget is refused, by name.
        assert "raise --max-labels or --max-rules" in exc.message
        event("refused: fallback does not fit")
        return
    event(f"fallbacks: {min(plan.fallbacks, 1)}, VTs: {min(len(plan.vts), 1)}")
    sim = VtNetwork(topo, plan)
    typed = check_rules(rules, SPEC, port_bits=32)
    hosts = topo.hosts()
    for s in plan.switches.values():
        assert len(s.trees) <= (max_rules if max_rules is not None else 10**9)
        assert all(len(p.labels) <= plan.max_labels for p in s.pushes)
    for a, b, who in packets:
        values = {"m.a": a, "m.b": b}
        publisher = hosts[who % len(hosts)]
        frame = frame_for(values)
        got = sim.publish(publisher, frame, values)
        subscribed = {topo.host_by_id(h) for h in evaluate(typed, values).ports}
        wanted = subscribed - {publisher}
        assert set(got.frames) == wanted
        for h, frames in got.frames.items():
            assert frames == [frame], h
        assert not got.switch_visits or max(got.switch_visits.values()) == 1
        # Natural drops only: nobody subscribed, or only the publisher (its switch sends nothing back).
        natural = {"no-subscriber"} | ({"no-port"} if subscribed == {publisher} else set())
        assert set(got.drops) <= natural


def test_fallback_vts_carry_deep_trees_in_one_label():
    topo = TOPOLOGIES["fat-tree-4"]
    from tests.compiler.delivery.test_combined import host_rules

    rules = host_rules([(1, topo.hosts())], topo)
    plan = plan_vt(topo, rules, SPEC, "hops", max_rules=4, max_labels=3)
    assert plan.fallbacks > 0
    pushes = [p for s in plan.switches.values() for p in s.pushes]
    assert all(len(p.labels) <= 3 for p in pushes)
    assert any(p.fallback and p.labels == (0x4000 | p.labels[0] & 0x3FFF,) for p in pushes)
    got = VtNetwork(topo, plan).publish("h1", frame_for({"m.a": 1, "m.b": 0}), {"m.a": 1, "m.b": 0})
    assert set(got.frames) == set(topo.hosts()) - {"h1"}
    with pytest.raises(P4subError, match="raise --max-labels or --max-rules"):
        plan_vt(topo, rules, SPEC, "hops", max_rules=0, max_labels=3)


def test_push_words_pad_with_zero_which_is_no_label():
    topo = TOPOLOGIES["jellyfish-8"]
    from tests.compiler.delivery.test_combined import host_rules

    plan = plan_vt(topo, host_rules([(1, topo.hosts()[:3])], topo), SPEC, "broadcast", max_labels=6)
    push = next(p for s in plan.switches.values() for p in s.pushes)
    words = push_words(plan, push)
    assert words[0] == len(push.labels) and len(words) == 1 + plan.max_labels
    assert all(w == 0 for w in words[1 + len(push.labels):])
    assert all(w >> 14 in (1, 2, 3) for w in push.labels)


def test_route_delivery_vt_writes_the_plan_and_refuses_what_it_cannot(tmp_path, capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    out = tmp_path / "vt"
    args = ["route", str(root / "examples/fat-tree-4.topo"), str(root / "examples/fat-tree-4.rules"),
            "--spec", str(root / "apps/itch/itch.p4"), "-o", str(out)]
    assert main(args + ["--delivery", "vt:relation", "--max-rules", "4", "--target", "bmv2"]) == 0
    data = json.loads((out / "delivery.json").read_text())
    assert data["strategy"] == "relation" and data["max_rules"] == 4
    assert all(len(s["check_tree"]) <= 4 for s in data["switches"].values())
    stats = json.loads((out / "stats.json").read_text())
    assert stats["pushes"] == 8 * 40
    assert (out / "e1_1" / "program.p4").read_text().count("recirculate_preserving_field_list(1)") == 1
    assert "table_add MyIngress.check_stop" in (out / "c1" / "commands.txt").read_text()
    capsys.readouterr()
    for bad in (["--delivery", "vt:nope"], ["--delivery", "header-stack", "--max-rules", "3"], ["--delivery", "vt", "--max-rules", "-1"]):
        assert main(args + bad) == 2
        assert "Traceback" not in capsys.readouterr().err


def test_switches_with_many_ports_are_served_by_clones():
    """Copies are clones (one per pass), not multicast groups of port subsets: a 14-port leaf works."""
    from compiler.network.topology import leaf_spine
    from tests.compiler.delivery.test_combined import host_rules

    topo = leaf_spine(2, 2, 12)
    hosts = topo.hosts()
    rules = host_rules([(1, hosts[1:20]), (2, hosts[::3])], topo)
    plan = plan_vt(topo, rules, SPEC, "broadcast")
    assert max(len(s.ports) for s in plan.switches.values()) == 14
    sim = VtNetwork(topo, plan)
    for values, wanted in (({"m.a": 1, "m.b": 0}, set(hosts[1:20])), ({"m.a": 0, "m.b": 2}, set(hosts[::3]))):
        got = sim.publish(hosts[0], frame_for(values), values)
        assert set(got.frames) == wanted - {hosts[0]}
        assert all(len(f) == 1 for f in got.frames.values())
        assert got.recirculations > 0


@pytest.mark.parametrize("top, bits", [(1, 8), (8, 8), (9, 16), (16, 16), (17, 32), (33, 64), (64, 64), (65, 128),
                                       (200, 256)])
def test_port_bitmaps_are_the_narrowest_container_holding_the_highest_port(top, bits):
    from compiler.delivery.vt.combined import mask_bits

    class Ports:
        def switches(self):
            return ["s"]

        def ports(self, s):
            return [1, top]

    assert mask_bits(Ports()) == bits
