"""The virtual trees installed in a network: ids, edges, and each switch's ``check_tree`` entries.

A VT is a connected set of links with an id (dissertation §5.1). Switches hold, per VT they lie
on, one entry: VT id -> the ports of theirs on the VT. ``max_rules`` bounds those entries per
switch (Table 5.1: "0 means hop-only, and 50 means up to 50 VTs distinguishable per switch"); a VT
is installed whole or not at all, so a switch never holds half a tree.

VT ids are **never reused**: :meth:`VtTable.install` hands out ids in increasing order, and one
that was deleted stays retired. A publisher holding a stale header then names a VT no switch has
(switches skip unknown tree labels) instead of a VT that means something else: the dissertation's
argument against reuse, which would otherwise let a packet "circulate indefinitely" (§5.4).
Hosts hold no entries; a VT may include host links (the Facebook broadcast trees reach every
machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import networkx as nx

from compiler.base import P4subError
from compiler.delivery.vt.labels import MAX_ID, EdgeIds
from compiler.network import Topology


@dataclass(frozen=True)
class VirtualTree:
    """An installed VT: its id, its links (edge ids) and what installed it (``origin``)."""

    vt_id: int
    edges: frozenset[int]
    origin: str = ""


def port_mask(ports: Iterable[int]) -> int:
    """Bit ``p - 1`` for port ``p`` (the dissertation's ``1 << (port - 1)``)."""
    out = 0
    for p in ports:
        out |= 1 << (p - 1)
    return out


class VtTable:
    """Installed VTs and the per-switch entries they need, under a per-switch rule budget."""

    def __init__(self, topology: Topology, max_rules: int | None = None, edge_ids: EdgeIds | None = None) -> None:
        if max_rules is not None and max_rules < 0:
            raise P4subError("max_rules must be >= 0")
        self.topology = topology
        self.edge_ids = edge_ids or EdgeIds(topology)
        self.max_rules = max_rules
        self.trees: dict[int, VirtualTree] = {}
        self._entries: dict[str, dict[int, tuple[int, ...]]] = {s: {} for s in topology.switches()}
        self._next_id = 1
        #: Bumped on every install and delete, so that caches of switch state know when to rebuild.
        self.version = 0

    # --- budget --------------------------------------------------------------------------------
    def switches_of(self, edges: Iterable[int]) -> dict[str, list[int]]:
        """Switch -> its ports on ``edges``."""
        out: dict[str, list[int]] = {}
        topo = self.topology
        for e in edges:
            u, v = self.edge_ids.edge(e)
            for a, b in ((u, v), (v, u)):
                if topo.is_switch(a):
                    out.setdefault(a, []).append(topo.port(a, b))
        return out

    def rules(self, switch: str) -> int:
        return len(self._entries[switch])

    def room(self, switch: str) -> int | None:
        """Entries ``switch`` can still take (``None``: no limit)."""
        return None if self.max_rules is None else self.max_rules - len(self._entries[switch])

    def fits(self, edges: Iterable[int]) -> bool:
        """Whether every switch on ``edges`` has room for one more entry."""
        if self.max_rules is None:
            return True
        return all(len(self._entries[s]) < self.max_rules for s in self.switches_of(edges))

    # --- install / delete ----------------------------------------------------------------------
    def check_edges(self, edges: Iterable[int]) -> frozenset[int]:
        """``edges`` as a VT: known links, at least one, connected; raises :class:`P4subError`."""
        edges = frozenset(edges)
        if not edges:
            raise P4subError("a virtual tree needs at least one link")
        g = nx.Graph(self.edge_ids.edge(e) for e in edges)
        if not nx.is_connected(g):
            raise P4subError("a virtual tree's links must be connected")
        return edges

    def install(self, edges: Iterable[int], origin: str = "") -> VirtualTree | None:
        """Install a VT on ``edges`` with a fresh id; ``None`` (nothing installed) if a switch on it
        is full. The id counter advances only when a VT is installed."""
        edges = self.check_edges(edges)
        if not self.fits(edges):
            return None
        if self._next_id > MAX_ID:
            raise P4subError(f"VT ids are exhausted: {MAX_ID} were handed out and ids are never reused")
        vt = VirtualTree(self._next_id, edges, origin)
        self._next_id += 1
        self.version += 1
        self.trees[vt.vt_id] = vt
        for s, ports in self.switches_of(edges).items():
            self._entries[s][vt.vt_id] = tuple(sorted(set(ports)))
        return vt

    def delete(self, vt_id: int) -> None:
        vt = self.trees.pop(vt_id, None)
        if vt is None:
            raise P4subError(f"no VT {vt_id} is installed")
        self.version += 1
        for s in self.switches_of(vt.edges):
            del self._entries[s][vt_id]

    @property
    def next_id(self) -> int:
        """The id the next installed VT gets (ids already handed out are never given again)."""
        return self._next_id

    # --- what switches hold --------------------------------------------------------------------
    def entries(self, switch: str) -> dict[int, tuple[int, ...]]:
        """``check_tree`` entries of ``switch``: VT id -> its ports on that VT."""
        return dict(self._entries[switch])

    def masks(self, switch: str) -> dict[int, int]:
        return {t: port_mask(ps) for t, ps in self._entries[switch].items()}

    def view(self) -> dict[int, frozenset[int]]:
        """VT id -> edge ids: what a publisher needs to encode with the installed VTs."""
        return {t: vt.edges for t, vt in self.trees.items()}

    def max_used(self) -> int:
        return max((len(e) for e in self._entries.values()), default=0)

    def total_rules(self) -> int:
        return sum(len(e) for e in self._entries.values())
