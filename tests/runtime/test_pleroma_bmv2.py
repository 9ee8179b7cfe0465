"""PLEROMA's switch programs on real BMv2: every switch of a fat tree forwards as its flows say.

A fat-tree:4 PLEROMA network (20 ITCH subscriptions from the evaluation's workload, three publishers,
rank indexing at 16 bits, at most 16 dz per subscription) is built, and each switch's flows are
rendered by :mod:`backends.bmv2.pleroma_program` (``program.p4``, ``commands.txt``), compiled by
p4c-bm2-ss and run on ``simple_switch``, one network switch after the other on one BMv2 process
(``reset_state`` between them; programs that differ only in their header comment are compiled once).
Into every switch go IPv6/UDP events whose destination carries their dz, as the publisher writes it
(``ff0e::/16 | dz << (112 - |dz|)``, computed here without the compiler's code):

* every copy that reaches that switch, on the port it arrives by, when 30 trace events are published
  at their publishers (:func:`compiler.pleroma.lpm.walk`, the simulator's forwarding);
* one probe per flow (an address inside the flow's dz, random bits below it) and one random address,
  on every ingress port that has flows.

The ports ``simple_switch`` sends each event to must be exactly those the flows say: ``walk``'s
copies for the trace events, :class:`compiler.pleroma.lpm.LpmTable`'s lookup of the (switch, ingress
port) flows for the probes, never the ingress port. The trace's copies, counted per link and per host
from what BMv2 sent, must be :func:`runtime.pleroma_sim.simulate`'s counts (each hop was given
exactly the copies it gets in the network, so BMv2's copies chained hop by hop are the network's).

Three flow sets: unconstrained, and under a limit of half the largest switch by ``ms`` (Balogh's local
enforcer on every flow add) and by ``history`` (the global optimiser). Needs p4c-bm2-ss,
simple_switch, simple_switch_CLI and root (network namespaces); skips with the reason otherwise.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from backends.bmv2.pleroma_program import COMMANDS, PROGRAM, render
from compiler.network import fat_tree
from compiler.pleroma import LpmTable, Samples, build, compile_tables, enforce, flow_count, walk
from runtime.pleroma_eval.workloads import make
from runtime.pleroma_sim import simulate, tree_behind_masks, wanted_matrix
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import Bmv2Switch, require_cli_switch, tool

pytestmark = [pytest.mark.bmv2, pytest.mark.p4c]

TOPO = fat_tree(4)
PUBLISHERS = [TOPO.hosts()[0], TOPO.hosts()[6], TOPO.hosts()[13]]
RESOLUTION = 16
TRACE = 30


def event_address(dz: int, resolution: int) -> int:
    """S1 §III-B, independently of ``compiler.pleroma.dz``: ff0e::/16, then the dz's bits."""
    return 0xFF0E << 112 | dz << (112 - resolution)


def compile_programs(base: Path, switches: list[str]) -> dict[str, Path]:
    """p4c-bm2-ss once per program text (header comment aside); switch -> its program.json."""
    built: dict[str, Path] = {}
    out = {}
    for s in switches:
        body = re.sub(r"\A/\*.*?\*/", "", (base / s / PROGRAM).read_text(), count=1, flags=re.S)
        if body not in built:
            json_path = base / s / "program.json"
            subprocess.run([tool("p4c-bm2-ss"), str(base / s / PROGRAM), "-o", str(json_path)], check=True,
                           capture_output=True, text=True)
            built[body] = json_path
        out[s] = built[body]
    return out


def arrivals(tables, dz: np.ndarray, resolution: int, pubs: np.ndarray):
    """Per (switch, ingress port): the trace rows that reach it, and per (switch, ingress, row) the
    egress ports ``walk`` sends that row to."""
    at: dict[tuple[str, int], list[int]] = {}
    out: dict[tuple[str, int, int], set[int]] = {}
    for k, p in enumerate(PUBLISHERS):
        at.setdefault(TOPO.host_attachment(p), []).extend(np.flatnonzero(pubs == k).tolist())
    for s, i, q, rows in walk(TOPO, compile_tables(tables), dz, resolution, pubs, PUBLISHERS):
        peer, peer_port = TOPO.peer(s, q)
        for r in rows.tolist():
            out.setdefault((s, i, r), set()).add(q)
            if TOPO.is_switch(peer):
                at.setdefault((peer, peer_port), []).append(r)
    return at, out


def flow_sets():
    wl = make("itch", TOPO, 20, 200, seed=3)
    net = build(TOPO, wl.typed, PUBLISHERS, RESOLUTION, "rank", "single", max_dz=16)
    dz = net.space.event_dz(wl.columns, net.resolution)
    pubs = np.random.default_rng(5).integers(0, len(PUBLISHERS), len(dz))
    return wl, net, dz, pubs


@pytest.mark.parametrize("method", [None, "ms", "history"])
def test_every_switch_on_simple_switch_forwards_as_its_flows_and_the_simulator_say(tmp_path, method):
    require_cli_switch()
    wl, net, dz, pubs = flow_sets()
    tables = net.tables
    if method is not None:
        limit = max(flow_count(tables).values()) // 2
        tables, stats = enforce(TOPO, tables, limit, method, net.trees, net.resolution,
                                Samples(dz[:100], pubs[:100], PUBLISHERS), seed=1, requests=net.subscriptions)
        assert stats.fits and max(flow_count(tables).values()) <= limit
    R = net.resolution
    trace = np.arange(100, 100 + TRACE)  # the first 100 events were the history sample
    at, expected = arrivals(tables, dz[trace], R, pubs[trace])
    base = tmp_path / "programs"
    for s in TOPO.switches():
        render(s, tables[s], base / s)
    programs = compile_programs(base, TOPO.switches())
    rng = np.random.default_rng(11)

    sends: dict[str, list[tuple[int, int, object]]] = {s: [] for s in TOPO.switches()}  # (ingress, dz, why)
    for (s, i), rows in at.items():
        sends[s] += [(i, int(dz[trace][r]), ("trace", r)) for r in rows]
    for s, by_in in tables.items():
        for i, flows in by_in.items():
            for f in sorted(flows):
                below = R - len(f)
                value = (int(f, 2) << below if f else 0) | int(rng.integers(0, 1 << below)) if below else int(f, 2)
                sends[s].append((i, value, ("probe", f)))
            sends[s].append((i, int(rng.integers(0, 1 << R)), ("probe", "random")))

    copies: Counter = Counter()  # (switch, port) -> copies of trace events BMv2 sent there
    switch = None
    running = None
    try:
        for s in TOPO.switches():
            if programs[s] != running:
                if switch is not None:
                    switch.close()
                switch = Bmv2Switch(list(TOPO.ports(s)), tmp_path, program_json=programs[s])
                running = programs[s]
            text = switch.cli("reset_state\n" + (base / s / COMMANDS).read_text())
            assert "Error" not in text and "Invalid" not in text, (s, text[-2000:])
            frames = [pk.ipv6_udp(event_address(v, R), struct.pack("!I", k)) for k, (_, v, _) in enumerate(sends[s])]
            got = switch.exchange([(i, f) for (i, _, _), f in zip(sends[s], frames)], list(TOPO.ports(s)),
                                  [pk.PLEROMA_PORT], gap=0.005, settle=0.5)
            seen: dict[bytes, Counter] = {}
            for port, data in got:
                seen.setdefault(data, Counter())[port] += 1
            lpm = {i: LpmTable.of(t) for i, t in tables[s].items()}
            for k, ((i, value, why), frame) in enumerate(zip(sends[s], frames)):
                ports = seen.get(frame, Counter())
                assert ports[i] >= 1, (s, i, why, "the capture missed a frame the test sent")
                ports[i] -= 1  # the frame as sent, seen on its own port
                out = {q for q, n in ports.items() if n}
                assert all(n <= 1 for n in ports.values()), (s, i, why, ports)
                if why[0] == "trace":
                    want = expected.get((s, i, why[1]), set())
                    copies.update((s, q) for q in out)
                else:
                    mask = int(lpm[i].lookup(np.array([value], dtype=np.uint64), R)[0]) if i in lpm else 0
                    want = {q for q in TOPO.ports(s) if mask >> q & 1 and q != i}
                assert out == want, (s, i, why, sorted(out), sorted(want))
    finally:
        if switch is not None:
            switch.close()

    wanted = wanted_matrix(wl.typed, TOPO, wl.columns, len(dz))[trace]
    result = simulate(TOPO, tables, dz[trace], R, pubs[trace], PUBLISHERS, wanted, tree_behind_masks(TOPO, net.trees))
    assert {k: v[0] for k, v in result.links.items()} == dict(copies)
    hosts = TOPO.hosts()
    delivered = Counter()
    for (s, q), n in copies.items():
        peer, _ = TOPO.peer(s, q)
        if not TOPO.is_switch(peer):
            delivered[peer] += n
    assert [delivered[h] for h in hosts] == result.delivered.tolist()
    assert result.summary()["false_negatives"] == 0 and sum(delivered.values()) > 0
