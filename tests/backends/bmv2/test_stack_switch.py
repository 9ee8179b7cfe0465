"""simple_switch runs the header-stack program as runtime.stack_sim says, switch by switch.

A publication from h1 on the shipped fat-tree example is followed through the interpreter; at a
core, an aggregation and a remote edge switch (where the stack is stripped for the hosts) the frame
the switch receives is sent into a real simple_switch loaded with that switch's program and
``commands.txt``, and what comes out on every port must equal the interpreter's copies byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, deque
from pathlib import Path

import pytest

from backends.bmv2.stack_program import emit_stack
from compiler.delivery.combined import plan_combined
from compiler.network_rules import read_network_rules
from compiler.spec_reader import read_spec
from compiler.topology import parse_topology_arg
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


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("encoding,prefix", [("port", "c"), ("port", "a"), ("bitmask", "c"), ("bitmask", "e"),
                                             ("mcgroup", "a"), ("mcgroup", "e"), ("mixed", "c"), ("mixed", "e")])
def test_simple_switch_forwards_prunes_and_strips_as_the_interpreter(encoding, prefix, tmp_path):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    plan = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), encoding, target="bmv2")
    sim = StackNetwork(topo, plan)
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
    emit_stack(plan, switch, tmp_path)
    subprocess.run([tool("p4c-bm2-ss"), "-o", str(tmp_path / "program.json"), str(tmp_path / "program.p4")],
                   check=True, capture_output=True, timeout=300)
    ports = list(topo.ports(switch))
    sw = Bmv2Switch(ports, tmp_path, program_json=tmp_path / "program.json", thrift_port=9093)
    try:
        sw.cli((tmp_path / "commands.txt").read_text())
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
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    plan = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), "mixed", target="bmv2")
    sim = StackNetwork(topo, plan)
    switch = "a1_1"
    ports = list(plan.switches[switch].ports)
    in_port, cases = mixed_tag_frames(plan, switch)
    frames = []
    for tag, value, copies, frame in cases:
        expected = sim.process(switch, in_port, frame, None, Counter())
        assert len(expected) == copies, (tag, value)
        assert all(int.from_bytes(f[16:18], "big") == 1 for _, f in expected)  # only (c1, 9) is left
        frames.append((frame, expected))
    emit_stack(plan, switch, tmp_path)
    subprocess.run([tool("p4c-bm2-ss"), "-o", str(tmp_path / "program.json"), str(tmp_path / "program.p4")],
                   check=True, capture_output=True, timeout=300)
    sw = Bmv2Switch(ports, tmp_path, program_json=tmp_path / "program.json", thrift_port=9093)
    try:
        sw.cli((tmp_path / "commands.txt").read_text())
        for frame, expected in frames:
            assert Counter(exchange(sw, tmp_path, ports, in_port, frame)) == Counter(expected)
    finally:
        sw.close()
