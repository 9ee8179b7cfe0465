"""PLEROMA's flows: dissemination trees and, per switch, the prefix flows that carry each dz.

A flow is one table entry ``(ingress port, dz) -> egress ports``; a packet takes the longest dz
that is a prefix of its own (the priority grows with ``|dz|``, S1 §III-D). The configurator
(S1 Alg. 1) adds, for every publisher ``p`` and subscriber ``s`` whose dz's overlap, a flow for the
overlap on every switch of the route ``<p, s, t>`` in the tree ``t``; its five cases keep, per
switch, exactly this table, whatever the order of the requests (S1 §IV-C: "the final flow set is
order-independent"):

* every requested dz is a flow whose egress is the union of the ports requested for it and for
  every dz that covers it (case 4: a finer flow takes the ports of the coarser one it overrides;
  case 5: a coarser request adds its ports to the finer flows below it);
* a flow whose nearest covering flow already sends to the same ports is dropped (cases 2 and 3).

:func:`flow_tables` builds that fixed point directly. Advertisements are the whole space here (a
publisher may publish any event), so the overlap of ``DZ(p)`` and ``DZ(s)`` is ``DZ(s)``.

Trees. ``single``: one spanning tree for all publishers, a breadth-first tree from the most central
switch (S1: "a single spanning tree"; S2 §4.3, which keeps one tree for the whole event space).
``publisher``: a shortest-path tree from each publisher's switch; flows are keyed by ingress port,
so trees that share a switch keep their copies apart where they enter by different ports.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Mapping

from compiler.base import P4subError
from compiler.network import Topology

TREES = ("single", "publisher")
#: ``switch -> ingress port -> dz -> egress ports``.
Tables = dict[str, dict[int, dict[str, frozenset[int]]]]


@dataclass(frozen=True)
class Tree:
    """A spanning tree of the switches: ``parent[s]`` (None at the root), hosts hang off their switch."""

    root: str
    parent: dict[str, str | None]

    def path(self, a: str, b: str) -> list[str]:
        """Switches from ``a`` to ``b`` along the tree."""
        up_a = self._ancestors(a)
        up_b = self._ancestors(b)
        common = next(x for x in up_a if x in set(up_b))
        return up_a[:up_a.index(common) + 1] + list(reversed(up_b[:up_b.index(common)]))

    def _ancestors(self, s: str) -> list[str]:
        out = [s]
        while self.parent[out[-1]] is not None:
            out.append(self.parent[out[-1]])
        return out

    def edges(self) -> list[tuple[str, str]]:
        return [(c, p) for c, p in self.parent.items() if p is not None]


def bfs_tree(topology: Topology, root: str) -> Tree:
    """Breadth-first shortest-path tree from ``root``, neighbours in port order (deterministic)."""
    parent: dict[str, str | None] = {root: None}
    queue = deque([root])
    while queue:
        s = queue.popleft()
        for _, v in topology.neighbours(s):
            if topology.is_switch(v) and v not in parent:
                parent[v] = s
                queue.append(v)
    if len(parent) != len(topology.switches()):
        raise P4subError(f"{topology.name or 'the topology'}: its switches are not connected")
    return Tree(root, parent)


def central_switch(topology: Topology) -> str:
    """The switch with the smallest eccentricity (ties: lowest id): the root of the single tree."""
    import networkx as nx

    g = topology.switch_graph()
    ecc = nx.eccentricity(g)
    return min(topology.switches(), key=lambda s: (ecc[s], topology.node_id(s)))


def trees(topology: Topology, publishers: Iterable[str], kind: str = "single") -> dict[str, Tree]:
    """Publisher host -> the tree its events follow."""
    if kind not in TREES:
        raise P4subError(f"unknown tree {kind!r}; expected {' or '.join(TREES)}")
    pubs = list(publishers)
    if kind == "single":
        t = bfs_tree(topology, central_switch(topology))
        return {p: t for p in pubs}
    out = {}
    for p in pubs:
        out[p] = bfs_tree(topology, topology.host_attachment(p)[0])
    return out


def route(topology: Topology, tree: Tree, publisher: str, subscriber: str) -> list[tuple[str, int, int]]:
    """``<p, s, t>``: ``(switch, ingress port, egress port)`` from the publisher's host to the subscriber's."""
    a, a_port = topology.host_attachment(publisher)
    b, b_port = topology.host_attachment(subscriber)
    path = tree.path(a, b)
    out = []
    for i, s in enumerate(path):
        ingress = a_port if i == 0 else topology.port(s, path[i - 1])
        egress = b_port if i == len(path) - 1 else topology.port(s, path[i + 1])
        out.append((s, ingress, egress))
    return out


def requests(topology: Topology, host_dzs: Mapping[str, Iterable[str]], publisher_trees: Mapping[str, Tree]
             ) -> dict[str, dict[int, dict[str, set[int]]]]:
    """What Alg. 1 asks of each switch: ``switch -> ingress -> dz -> ports`` over every (p, s) pair."""
    out: dict[str, dict[int, dict[str, set[int]]]] = {}
    for p, tree in publisher_trees.items():
        for s, dzs in host_dzs.items():
            dzs = list(dzs)
            if s == p or not dzs:
                continue
            for switch, ingress, egress in route(topology, tree, p, s):
                table = out.setdefault(switch, {}).setdefault(ingress, {})
                for dz in dzs:
                    table.setdefault(dz, set()).add(egress)
    return out


def canonical(requested: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    """The flow table Alg. 1 converges to for one ingress port (module docstring)."""
    full: dict[str, frozenset[int]] = {}
    stack: list[tuple[str, frozenset[int]]] = []  # covering dz's of the current one, outermost first
    for dz in sorted(requested):
        while stack and not dz.startswith(stack[-1][0]):
            stack.pop()
        ports = frozenset(requested[dz]) | (stack[-1][1] if stack else frozenset())
        full[dz] = ports
        stack.append((dz, ports))
    out: dict[str, frozenset[int]] = {}
    stack2: list[str] = []
    for dz in sorted(full):
        while stack2 and not dz.startswith(stack2[-1]):
            stack2.pop()
        nearest = stack2[-1] if stack2 else None
        if nearest is not None and full[nearest] == full[dz]:
            continue  # cases 2/3: the covering flow already sends these events where this one would
        out[dz] = full[dz]
        stack2.append(dz)
    return out


def flow_tables(topology: Topology, host_dzs: Mapping[str, Iterable[str]], publisher_trees: Mapping[str, Tree]
                ) -> Tables:
    """Every switch's flows (switches no route crosses get none)."""
    tables: Tables = {s: {} for s in topology.switches()}
    for switch, by_ingress in requests(topology, host_dzs, publisher_trees).items():
        tables[switch] = {i: canonical(req) for i, req in sorted(by_ingress.items())}
    return tables


def flow_count(tables: Tables) -> dict[str, int]:
    return {s: sum(len(t) for t in by_in.values()) for s, by_in in tables.items()}


def lookup(table: Mapping[str, frozenset[int]], dz: str) -> frozenset[int]:
    """The egress of the longest flow covering ``dz`` (empty: no flow matches)."""
    for k in range(len(dz), -1, -1):
        ports = table.get(dz[:k])
        if ports is not None:
            return ports
    return frozenset()
