"""simple_switch runs the VT program as runtime.vt_sim says, and a publication crosses real switches.

The plan is the shipped fat-tree example's (``p4sub route ... --delivery vt``). Per switch, the
frame the interpreter says it receives (several labels, so the program recirculates once per label)
goes into a real simple_switch loaded with that switch's program and ``commands.txt``; what comes
out on every port must equal the interpreter's copies byte for byte. Then one real ITCH order is
published from h1 and carried switch by switch through real simple_switch instances only (each one
fed what the previous one sent): the hosts that get it must be exactly the subscribers the rules
name, each with the publisher's frame.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter, deque
from pathlib import Path

import pytest

from backends.bmv2.vt_program import emit_vt
from compiler.delivery.vt.combined import VT_DROP_REASONS, VtPlan, plan_vt
from compiler.network.host_rules import read_network_rules
from compiler.network.topology import Topology
from compiler.network.topology_arg import parse_topology_arg
from compiler.oracle import evaluate
from compiler.rules.typecheck import check_rules
from compiler.spec.reader import read_spec
from runtime.vt_sim import VtNetwork
from tests.backends.bmv2.switch import Bmv2Switch, tool
from tests.backends.bmv2.test_stack_switch import exchange, itch_frame, skip_reason

ROOT = Path(__file__).resolve().parents[3]


def example(strategy: str, max_rules: int = 8) -> tuple[Topology, VtPlan, VtNetwork]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    plan = plan_vt(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), strategy, max_rules=max_rules, target="bmv2")
    return topo, plan, VtNetwork(topo, plan)


def loaded(plan: VtPlan, switch: str, tmp_path: Path, thrift_port: int) -> Bmv2Switch:
    d = tmp_path / switch
    emit_vt(plan, switch, d)
    subprocess.run([tool("p4c-bm2-ss"), "-o", str(d / "program.json"), str(d / "program.p4")],
                   check=True, capture_output=True, timeout=300)
    sw = Bmv2Switch(list(plan.switches[switch].ports), d, program_json=d / "program.json", thrift_port=thrift_port)
    try:
        sw.cli((d / "commands.txt").read_text())
    except BaseException:
        sw.close()
        raise
    return sw


def drop_counters(sw: Bmv2Switch) -> Counter:
    out = sw.cli("".join(f"counter_read MyIngress.vt_drops {i}\n" for i in range(len(VT_DROP_REASONS))))
    packets = [int(n) for n in re.findall(r"(\d+) packets", out)]
    assert len(packets) == len(VT_DROP_REASONS), out
    return +Counter(dict(zip(VT_DROP_REASONS, packets)))


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("strategy,prefix", [("broadcast", "c"), ("broadcast", "a"), ("random", "e"), ("hops", "a")])
def test_simple_switch_recirculates_label_by_label_as_the_interpreter(strategy, prefix, tmp_path):
    topo, plan, sim = example(strategy)
    rsid = max(plan.receiver_sets, key=lambda r: len(r.hosts)).rsid
    original = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(range(40))
    queue = deque([("e1_1", topo.host_attachment("h1")[1], sim.push_frame("e1_1", original, rsid))])
    visits = []
    while queue:
        s, p, frame = queue.popleft()
        outs = sim.process(s, p, frame, None, Counter())
        visits.append((s, p, frame, outs))
        for port, copy in outs:
            peer, peer_port = topo.peer(s, port)
            if topo.is_switch(peer):
                queue.append((peer, peer_port, copy))
    # A switch of the wanted layer that gets at least three labels (two recirculations or more).
    switch, in_port, frame, expected = next(v for v in visits if v[0].startswith(prefix) and v[0] != "e1_1"
                                            and int.from_bytes(v[2][16:18], "big") >= 3)
    assert expected
    sw = loaded(plan, switch, tmp_path, thrift_port=9095)
    try:
        got = exchange(sw, tmp_path, list(plan.switches[switch].ports), in_port, frame)
        assert not drop_counters(sw)
    finally:
        sw.close()
    assert Counter(got) == Counter(expected)
    if prefix == "e":
        assert any(f == original for _, f in got), "a host port gets the original frame"


@pytest.mark.bmv2
@pytest.mark.p4c
def test_a_real_itch_order_crosses_real_switches_to_exactly_its_subscribers(tmp_path):
    """h1 publishes GOOGL at 1500 (h2, h7, h12, h13, h16 subscribed): every switch on the way is a
    real simple_switch fed what the previous one sent; the hosts reached are exactly the subscribers."""
    topo, plan, sim = example("broadcast")
    frame, values = itch_frame(1, "GOOGL", "1500.0000", 60000, "B")
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    typed = check_rules(rules, read_spec(ROOT / "apps/itch/itch.p4"), port_bits=32)
    wanted = {topo.host_by_id(h) for h in evaluate(typed, values).ports} - {"h1"}
    assert len(wanted) >= 3
    predicted = sim.publish("h1", frame, values)
    assert set(predicted.frames) == wanted, "the interpreter agrees with the subscriptions"
    switch, port = topo.host_attachment("h1")
    queue = deque([(switch, port, frame)])
    got: dict[str, list[bytes]] = {}
    visited = Counter()
    thrift = 9096
    while queue:
        s, p, f = queue.popleft()
        visited[s] += 1
        sw = loaded(plan, s, tmp_path / f"{s}-{visited[s]}", thrift_port=thrift)
        try:
            outs = exchange(sw, tmp_path, list(plan.switches[s].ports), p, f)
            drops = drop_counters(sw)
        finally:
            sw.close()
        assert not drops, (s, drops)
        for out_port, copy in outs:
            peer, peer_port = topo.peer(s, out_port)
            if topo.is_switch(peer):
                queue.append((peer, peer_port, copy))
            else:
                got.setdefault(peer, []).append(copy)
    assert max(visited.values()) == 1, "no switch sees the order twice"
    assert set(got) == wanted
    assert all(frames == [frame] for frames in got.values()), "each subscriber gets the publisher's frame once"
    assert visited == predicted.switch_visits
