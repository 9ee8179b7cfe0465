"""Prefix flows as a switch runs them: longest-dz match per (switch, ingress port), vectorised.

netsim's PLEROMA switches (:mod:`runtime.netsim_pleroma`) look events up in :class:`LpmTable`s;
the traffic- and history-based cost functions of :mod:`.merge` and the independent simulator
(:mod:`runtime.pleroma_sim`) follow events through the network with :func:`walk`, which publishes
events at their publishers' hosts and yields every copy a switch sends, wave by wave (a numpy lookup
per switch, ingress port and wave, never a Python step per event per hop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np

from compiler.base import P4subError
from compiler.network import Topology

@dataclass(frozen=True)
class LpmTable:
    """One (switch, ingress port) flow table as sorted keys per prefix length, egress as port bitmasks."""

    lengths: tuple[int, ...]  # descending
    keys: tuple[np.ndarray, ...]
    masks: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, flows: Mapping[str, frozenset[int]]) -> "LpmTable":
        by_len: dict[int, list[tuple[int, int]]] = {}
        for dz, ports in flows.items():
            if any(p > 63 for p in ports):
                raise P4subError(f"port {max(ports)}: the PLEROMA simulator holds ports 0..63")
            mask = 0
            for p in ports:
                mask |= 1 << p
            by_len.setdefault(len(dz), []).append((int(dz, 2) if dz else 0, mask))
        lengths = tuple(sorted(by_len, reverse=True))
        keys, masks = [], []
        for k in lengths:
            rows = sorted(by_len[k])
            keys.append(np.array([r[0] for r in rows], dtype=np.uint64))
            masks.append(np.array([r[1] for r in rows], dtype=np.uint64))
        return cls(lengths, tuple(keys), tuple(masks))

    def lookup(self, dz: np.ndarray, resolution: int) -> np.ndarray:
        """Egress port bitmask per event (0: no flow matches)."""
        out = np.zeros(len(dz), dtype=np.uint64)
        open_ = np.ones(len(dz), dtype=bool)
        for k, keys, masks in zip(self.lengths, self.keys, self.masks):
            if not open_.any():
                break
            key = dz >> np.uint64(resolution - k) if k < resolution else dz.copy()
            if k == 0:
                key = np.zeros(len(dz), dtype=np.uint64)
            idx = np.searchsorted(keys, key)
            idx[idx >= len(keys)] = 0
            hit = open_ & (keys[idx] == key)
            out[hit] = masks[idx[hit]]
            open_ &= ~hit
        return out


Tables = Mapping[str, Mapping[int, Mapping[str, frozenset[int]]]]


def compile_tables(tables: Tables) -> dict[tuple[str, int], LpmTable]:
    return {(s, i): LpmTable.of(t) for s, by_in in tables.items() for i, t in by_in.items()}


def walk(topology: Topology, lpm: Mapping[tuple[str, int], LpmTable], event_dz: np.ndarray, resolution: int,
         publishers: np.ndarray, publisher_names: list[str]) -> Iterator[tuple[str, int, int, np.ndarray]]:
    """Every copy sent: ``(switch, ingress port, egress port, event rows)``, wave by wave.

    Event ``i`` is published at host ``publisher_names[publishers[i]]``. A switch never sends a copy
    back out of its ingress port. Flows that loop are an error (trees never do).
    """
    limit = 2 * len(topology.switches()) + 2
    ports = {s: [q for q in topology.ports(s) if q <= 63] for s in topology.switches()}
    for k, p in enumerate(publisher_names):
        rows = np.flatnonzero(publishers == k)
        if not len(rows):
            continue
        switch, port = topology.host_attachment(p)
        frontier = [(switch, port, rows)]
        hops = 0
        while frontier:
            hops += 1
            if hops > limit:
                raise P4subError(f"events published at {p} are still travelling after {limit} hops: the flows loop")
            nxt = []
            for s, ingress, r in frontier:
                table = lpm.get((s, ingress))
                if table is None:
                    continue
                mask = table.lookup(event_dz[r], resolution)
                for q in ports[s]:
                    if q == ingress:
                        continue
                    sel = r[(mask >> np.uint64(q)) & np.uint64(1) == 1]
                    if not len(sel):
                        continue
                    yield s, ingress, q, sel
                    peer, peer_port = topology.peer(s, q)
                    if topology.is_switch(peer):
                        nxt.append((peer, peer_port, sel))
            frontier = nxt
