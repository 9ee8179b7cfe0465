"""The shipped k=4 fat tree on real BMv2 switches delivers exactly what netsim says.

``p4sub route examples/fat-tree-4.topo examples/fat-tree-4.rules --target bmv2`` compiles 20
switches; ``p4sub build`` runs p4c on each distinct program (switches whose programs differ only in
entries share one build); 20 ``simple_switch`` processes run in one network namespace, wired by veth
pairs exactly as the topology's ports say (tests/runtime/bmv2_fabric.py), each loaded with its
``commands.txt``. ITCH packets published at one host are captured at all 16 hosts and compared,
host by host, with ``runtime.netsim`` on the same messages:

* packets of one Add Order: the multiset of frames each host receives;
* packets of three Add Orders: the multiset of orders each host receives (BMv2 prunes each copy to
  the orders its port wants, and the target files choose the up port per leaf state rather than
  per packet, so one packet's orders may travel up different ports and arrive in several frames).

Needs p4c-bm2-ss, simple_switch, simple_switch_CLI (with the system python3's thrift) and root;
skips with the reason otherwise. See docs/topology.md for how to run it.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from p4sub import main
from runtime.netsim import Batch, load_network, simulate
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import tool
from tests.runtime.bmv2_fabric import Bmv2Fabric

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI")


def skip_reason() -> str | None:
    missing = [t for t in TOOLS if tool(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (see docs/bmv2.md)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


pytestmark = [pytest.mark.bmv2, pytest.mark.p4c,
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

STOCKS = [b"GOOGL", b"AAPL", b"MSFT", b"AMZN", b"NFLX", b"TSLA", b"NVDA", b"META", b"IBM"]
PRICES = [500000, 1205000, 1205001, 1499999, 1799999, 1800000, 2500001, 4000000, 4000001, 9000000, 10000001]
SHARES = [10, 11, 99, 100, 499, 500, 1000, 1001, 50000, 50001]


def orders_for(seed: int, singles: int, triples: int) -> list[list[pk.AddOrder]]:
    rng = random.Random(seed)

    def order(ref: int) -> pk.AddOrder:
        return pk.AddOrder(rng.choice(STOCKS), rng.choice(PRICES), rng.choice(SHARES), rng.choice([b"B", b"S"]), ref)

    sizes = [1] * singles + [3] * triples
    rng.shuffle(sizes)
    out, ref = [], 1
    for n in sizes:
        out.append([order(ref + i) for i in range(n)])
        ref += n
    return out


def refs_of(frame: bytes) -> list[int]:
    """Order reference numbers in an ITCH frame (Ethernet, IPv4 without options, UDP, MoldUDP64)."""
    (count,) = struct.unpack_from("!H", frame, 14 + 20 + 8 + 18)
    at, out = 14 + 20 + 8 + 20, []
    for _ in range(count):
        (length,) = struct.unpack_from("!H", frame, at)
        out.append(struct.unpack_from("!Q", frame, at + 2 + 11)[0])
        at += 2 + length
    return out


def build_programs(out: Path, switches: list[str]) -> dict[str, Path]:
    """``p4sub build`` once per distinct program text; switch -> its program.json."""
    built: dict[str, Path] = {}
    programs = {}
    for s in switches:
        text = (out / s / "program.p4").read_text()
        if text not in built:
            assert main(["build", str(out / s), "--p4c", tool("p4c-bm2-ss")]) == 0
            built[text] = out / s / "program.json"
        programs[s] = built[text]
    return programs


def netsim_deliveries(out: Path, packets: list[list[pk.AddOrder]], publisher: str) -> dict[str, list[int]]:
    """Host -> the trace rows netsim delivers there (one row per order, in publishing order)."""
    network = load_network(out)
    flat = [(i, o) for i, orders in enumerate(packets) for o in orders]
    cols = {f: np.array([o.values()[f] for _, o in flat], dtype=np.uint64) for f in network.inputs}
    batch = Batch(cols, np.array([i for i, _ in flat], dtype=np.int64), np.full(len(flat), 38, dtype=np.int64),
                  np.zeros(len(flat), dtype=np.int64))
    sim = simulate(network, [batch], publisher, "prune", record=True)
    assert sim.lost_copies == 0
    return {h: np.concatenate(rows).tolist() for h, rows in sim.deliveries.items()}


@pytest.mark.parametrize(("policy", "publisher"), [("tr", "h1"), ("mr", "h11")])
def test_bmv2_fat_tree_delivers_what_netsim_says(tmp_path, policy, publisher):
    out = tmp_path / "net"
    assert main(["route", str(REPO / "examples/fat-tree-4.topo"), str(REPO / "examples/fat-tree-4.rules"),
                 "--spec", str(REPO / "apps/itch/itch.p4"), "--policy", policy, "--target", "bmv2", "--jobs", "1",
                 "-o", str(out)]) == 0
    network = load_network(out)
    topo = network.topology
    programs = build_programs(out, topo.switches())

    packets = orders_for(seed=7 if policy == "tr" else 8, singles=36, triples=8)
    frames = [pk.itch_packet(orders, seq) for seq, orders in enumerate(packets, start=1)]
    rows = [(p, o) for p, orders in enumerate(packets) for o in orders]
    want_rows = netsim_deliveries(out, packets, publisher)
    assert any(want_rows[h] for h in topo.hosts() if h != publisher), "the trace reaches no subscriber"

    fabric = Bmv2Fabric(topo, programs, tmp_path)
    try:
        fabric.load({s: (out / s / "commands.txt").read_text() for s in topo.switches()})
        got = fabric.exchange([(publisher, f) for f in frames], [pk.ITCH_PORT], timeout=8)
    finally:
        fabric.close()

    seen = {h: Counter() for h in topo.hosts()}
    for h, frame in got:
        seen[h][frame] += 1
    sent = Counter(frames)
    assert seen[publisher] & sent == sent, "the capture missed frames the publisher sent"
    seen[publisher] -= sent
    single = {frames[p] for p, orders in enumerate(packets) if len(orders) == 1}
    for h in topo.hosts():
        want = want_rows[h]
        want_frames = Counter(frames[rows[r][0]] for r in want if len(packets[rows[r][0]]) == 1)
        got_frames = Counter({f: n for f, n in seen[h].items() if f in single})
        assert got_frames == want_frames, (h, sorted(refs_of(f) for f in got_frames.elements()),
                                           sorted(refs_of(f) for f in want_frames.elements()))
        want_refs = Counter(rows[r][1].ref for r in want)
        got_refs = Counter(ref for f, n in seen[h].items() for ref in refs_of(f) for _ in range(n))
        assert got_refs == want_refs, h
