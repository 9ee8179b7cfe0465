"""simple_switch runs the header-stack program as runtime.stack_sim says, switch by switch.

A publication from h1 on the shipped fat-tree example is followed through the interpreter; at a
core, an aggregation and a remote edge switch (where the stack is stripped for the hosts) the frame
the switch receives is sent into a real simple_switch loaded with that switch's program and
``commands.txt``, and what comes out on every port must equal the interpreter's copies byte for byte.
The ingress edge e1_1 is fed real ITCH frames (Ethernet/IPv4/UDP/MoldUDP64, one Add Order each)
from its hosts: filter, push and own-label processing in one pass, against the same interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter, deque
from pathlib import Path

import pytest

from apps.itch.messages import AddOrder, encode_message, price_to_raw, stock_int
from apps.itch.moldudp import encode_mold
from apps.itch.trace import DEFAULT_ENDPOINTS, DEFAULT_SESSION
from apps.udp import build_udp_frame
from backends.bmv2.stack_program import emit_stack
from compiler.delivery.combined import DROP_REASONS, CombinedPlan, plan_combined
from compiler.delivery.wire import ETHERTYPE_STACK
from compiler.network.host_rules import read_network_rules
from compiler.network.topology import Topology
from compiler.network.topology_arg import parse_topology_arg
from compiler.spec.reader import read_spec
from runtime.stack_sim import StackNetwork
from tests.backends.bmv2.switch import Bmv2Switch, tool
from tests.compiler.delivery.mixed_frames import mixed_tag_frames

ROOT = Path(__file__).resolve().parents[3]


def skip_reason() -> str | None:
    for name in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI"):
        if tool(name) is None:
            return f"{name} is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


IO_SCRIPT = """
import json, sys, time
from scapy.all import AsyncSniffer, Raw, conf, sendp
conf.verb = 0
req = json.load(open(sys.argv[1]))
got, sniffers = [], []
for p in req["ports"]:
    s = AsyncSniffer(iface=f"h{p}", prn=lambda pkt, p=p: got.append([p, bytes(pkt).hex()]), store=False)
    s.start()
    sniffers.append(s)
time.sleep(1)
sendp(Raw(bytes.fromhex(req["frame"])), iface=f"h{req['in']}", verbose=False)
time.sleep(2)
for s in sniffers:
    s.stop()
print(json.dumps(got))
"""


def exchange(sw: Bmv2Switch, tmp_path: Path, ports: list[int], in_port: int, frame: bytes) -> list[tuple[int, bytes]]:
    """Send ``frame`` into ``in_port`` and return what comes out on every port (without the frame itself)."""
    (tmp_path / "io.py").write_text(IO_SCRIPT)
    (tmp_path / "req.json").write_text(json.dumps({"ports": ports, "in": in_port, "frame": frame.hex()}))
    r = sw.sh([sys.executable, str(tmp_path / "io.py"), str(tmp_path / "req.json")], timeout=60)
    got = [(p, bytes.fromhex(h)) for p, h in json.loads(r.stdout.strip().splitlines()[-1])]
    return [(p, f) for p, f in got if not (p == in_port and f == frame)]  # our own transmission


def example_network(encoding: str) -> tuple[Topology, CombinedPlan, StackNetwork]:
    """The shipped fat tree's combined plan for BMv2 and its interpreter; skips without the tools."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    plan = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), encoding, target="bmv2")
    return topo, plan, StackNetwork(topo, plan)


def loaded_switch(plan: CombinedPlan, switch: str, ports: list[int], tmp_path: Path, thrift_port: int) -> Bmv2Switch:
    """``switch``'s stack program built with p4c-bm2-ss, running on simple_switch with its commands.txt."""
    emit_stack(plan, switch, tmp_path)
    subprocess.run([tool("p4c-bm2-ss"), "-o", str(tmp_path / "program.json"), str(tmp_path / "program.p4")],
                   check=True, capture_output=True, timeout=300)
    sw = Bmv2Switch(ports, tmp_path, program_json=tmp_path / "program.json", thrift_port=thrift_port)
    try:
        sw.cli((tmp_path / "commands.txt").read_text())
    except BaseException:
        sw.close()
        raise
    return sw


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("encoding,prefix", [("port", "c"), ("port", "a"), ("bitmask", "c"), ("bitmask", "e"),
                                             ("mcgroup", "a"), ("mcgroup", "e"), ("mixed", "c"), ("mixed", "e")])
def test_simple_switch_forwards_prunes_and_strips_as_the_interpreter(encoding, prefix, tmp_path):
    topo, plan, sim = example_network(encoding)
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
    switch, in_port, frame, expected = next(v for v in visits if v[0].startswith(prefix) and v[0] != "e1_1")
    assert expected
    ports = list(topo.ports(switch))
    sw = loaded_switch(plan, switch, ports, tmp_path, thrift_port=9093)
    try:
        got = exchange(sw, tmp_path, ports, in_port, frame)
    finally:
        sw.close()
    assert Counter(got) == Counter(expected)
    if prefix == "e":
        assert any(f == original for _, f in got), "a host port gets the original frame"


@pytest.mark.bmv2
@pytest.mark.p4c
def test_simple_switch_dispatches_every_mixed_tag_as_the_interpreter(tmp_path):
    """Own labels of every tag (the encoder writes port and group labels only), an unused tag and
    out-of-range ports, behind a foreign label that reactive pruning must pop, on an aggregation switch."""
    topo, plan, sim = example_network("mixed")
    switch = "a1_1"
    ports = list(plan.switches[switch].ports)
    in_port, cases = mixed_tag_frames(plan, switch)
    frames = []
    for tag, value, copies, frame in cases:
        expected = sim.process(switch, in_port, frame, None, Counter())
        assert len(expected) == copies, (tag, value)
        assert all(int.from_bytes(f[16:18], "big") == 1 for _, f in expected)  # only (c1, 9) is left
        frames.append((frame, expected))
    sw = loaded_switch(plan, switch, ports, tmp_path, thrift_port=9093)
    try:
        for frame, expected in frames:
            assert Counter(exchange(sw, tmp_path, ports, in_port, frame)) == Counter(expected)
    finally:
        sw.close()


# One Add Order per packet (the edge evaluates the first message only), published from a host of
# e1_1: h1 subscribes to nothing, h2 subscribes to GOOGL above 120.50 (and to prices above 1000).
EDGE_ORDERS = [
    ("h1", "GOOGL", "130.0000", 1000, "B"),   # h2 (local host port) and h12 (another pod)
    ("h1", "AAPL", "170.0000", 200, "S"),     # h3, h4 (same pod) and h9
    ("h1", "MSFT", "450.0000", 300, "B"),     # h5, h6, h13
    ("h1", "NVDA", "950.0000", 2000, "S"),    # h11, h16
    ("h1", "GOOGL", "1500.0000", 60000, "B"),  # h2, h7, h12, h13, h16: the most receivers
    ("h2", "GOOGL", "1500.0000", 60000, "S"),  # the same set from h2: its own copy is dropped
    ("h1", "IBM", "130.0000", 1000, "B"),     # nobody subscribed
]


def itch_frame(sequence: int, stock: str, price: str, shares: int, side: str) -> tuple[bytes, dict[str, int]]:
    """An Ethernet/IPv4/UDP/MoldUDP64 frame holding one Add Order, and the order's query field values."""
    order = AddOrder(stock_locate=7, tracking_number=0, timestamp=34_200_000_000_000 + sequence,
                     order_ref_number=1000 + sequence, buy_sell_indicator=side, shares=shares, stock=stock,
                     price=price_to_raw(price))
    payload = encode_mold(DEFAULT_SESSION, sequence, [encode_message(order)])
    values = {"add_order.stock": stock_int(stock), "add_order.price": order.price,
              "add_order.shares": shares, "add_order.buy_sell_indicator": ord(side)}
    return build_udp_frame(payload, DEFAULT_ENDPOINTS, ident=sequence), values


def drop_counters(sw: Bmv2Switch) -> Counter:
    """The program's drop counters, packets per reason: ``MyIngress.p4sub_drops`` at the reason's
    index in ``DROP_REASONS``, except ingress-port, which egress counts in its own counter."""
    reasons = [r for r in DROP_REASONS if r != "ingress-port"]
    reads = [f"counter_read MyIngress.p4sub_drops {DROP_REASONS.index(r)}" for r in reasons]
    out = sw.cli("\n".join(reads + ["counter_read MyEgress.p4sub_ingress_port_drops 0"]) + "\n")
    packets = [int(n) for n in re.findall(r"(\d+) packets", out)]
    assert len(packets) == len(reasons) + 1, out
    return +Counter(dict(zip(reasons + ["ingress-port"], packets)))


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("encoding", ["port", "bitmask", "mcgroup", "mixed"])
def test_simple_switch_edge_filters_itch_and_pushes_as_the_interpreter(encoding, tmp_path):
    """An ingress edge switch gets real ITCH frames from its hosts: it must evaluate the subscriptions,
    push the receiver set's stack and process its own labels in one pass, sending exactly the
    interpreter's copies (pruned stacks up, the publisher's frame to local subscribers), and
    nothing at all for an order nobody subscribed to."""
    topo, plan, sim = example_network(encoding)
    switch = "e1_1"
    cases = []
    for seq, (publisher, stock, price, shares, side) in enumerate(EDGE_ORDERS, start=1):
        attached, in_port = topo.host_attachment(publisher)
        assert attached == switch
        frame, values = itch_frame(seq, stock, price, shares, side)
        drops = Counter()
        cases.append((in_port, frame, sim.process(switch, in_port, frame, values, drops), drops))
    ports = list(topo.ports(switch))
    host_ports = set(plan.switches[switch].host_ports)
    # The cases cover what the docstring promises: a local subscriber, copies up, drops.
    assert any(p in host_ports for _, _, out, _ in cases for p, _ in out)
    assert any(p not in host_ports for _, _, out, _ in cases for p, _ in out)
    assert [d["no-subscriber"] for *_, d in cases] == [0] * (len(cases) - 1) + [1]
    assert cases[-2][3]["ingress-port"] == 1
    sw = loaded_switch(plan, switch, ports, tmp_path, thrift_port=9094)
    try:
        for in_port, frame, expected, _ in cases:
            got = exchange(sw, tmp_path, ports, in_port, frame)
            assert Counter(got) == Counter(expected), (in_port, frame.hex())
        counted = drop_counters(sw)
    finally:
        sw.close()
    assert counted == +sum((d for *_, d in cases), Counter())
    for in_port, frame, expected, _ in cases:
        for port, copy in expected:
            if port in host_ports:
                assert copy == frame, "a local subscriber gets the publisher's frame byte for byte"
            else:
                assert copy[12:14] == ETHERTYPE_STACK.to_bytes(2, "big") and copy.endswith(frame[14:])
                assert int.from_bytes(copy[16:18], "big") > 0, "the next switches' labels stay on the stack"
