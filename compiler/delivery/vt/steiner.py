"""The encoder's Steiner searches: a shortest-path heuristic over links of weight 1 or 0.

Algorithm 5.1 recomputes a Steiner tree for every VT it tries, with the links of the tentatively
chosen VTs at weight 0 and every other link at weight 1, so the search must be cheap: nodes and
links are integers here (:class:`VtGraph`, built once per topology), distances come from a 0-1
breadth-first search that is updated incrementally from the nodes each attachment adds.

Heuristic: Takahashi-Matsuyama, the destination-driven construction the dissertation cites
([103]): start at the root; repeatedly attach the terminal nearest to the tree by a shortest path;
ties go to the lowest node index, paths to the first link found in port order. Hosts are never
passed through (a host has one link).
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Sequence

from compiler.base import P4subError
from compiler.delivery.vt.labels import EdgeIds
from compiler.network import Topology

INF = 1 << 30


class VtGraph:
    """Nodes (switches in id order, then hosts in id order) as indices; links as their edge ids."""

    def __init__(self, topology: Topology, edge_ids: EdgeIds | None = None) -> None:
        self.topology = topology
        self.edge_ids = edge_ids or EdgeIds(topology)
        self.names: list[str] = topology.switches() + topology.hosts()
        self.index = {n: i for i, n in enumerate(self.names)}
        self.is_switch = [topology.is_switch(n) for n in self.names]
        self.ends: list[tuple[int, int]] = [(-1, -1)] + [
            (self.index[u], self.index[v]) for u, v in self.edge_ids.edges
        ]
        self.adj: list[list[tuple[int, int]]] = [
            [(self.index[v], self.edge_ids.id(n, v)) for _, v in topology.neighbours(n)] for n in self.names
        ]

    @staticmethod
    def of(topology: Topology) -> "VtGraph":
        """The graph of ``topology``, built once and cached on it."""
        g = topology.cache.get("vt_graph")
        if g is None:
            g = topology.cache["vt_graph"] = VtGraph(topology)
        return g

    @property
    def edge_count(self) -> int:
        return len(self.ends) - 1

    def host_edge(self, host: str) -> int:
        switch, _ = self.topology.host_attachment(host)
        return self.edge_ids.id(switch, host)


def steiner(g: VtGraph, root: int, terminals: Iterable[int], zero: Sequence[int] | None = None) -> list[int]:
    """Edge ids of a tree from node ``root`` to every node in ``terminals``; links whose ``zero[e]``
    is true weigh 0, the others 1. Edges come in attachment order (each path from the tree out)."""
    n = len(g.names)
    adj = g.adj
    dist = [INF] * n
    via_node = [-1] * n
    via_edge = [0] * n
    in_tree = [False] * n
    in_tree[root] = True
    dist[root] = 0
    zero = zero if zero is not None else bytes(g.edge_count + 1)

    def relax(sources: list[int]) -> None:
        queue = deque((s, 0) for s in sources)
        while queue:
            u, d = queue.popleft()
            if d > dist[u]:
                continue
            if not g.is_switch[u]:
                continue  # a host relays nothing
            for v, e in adj[u]:
                w = 0 if zero[e] else 1
                nd = d + w
                if nd < dist[v]:
                    dist[v] = nd
                    via_node[v] = u
                    via_edge[v] = e
                    if w:
                        queue.append((v, nd))
                    else:
                        queue.appendleft((v, nd))

    relax([root])
    remaining = set(terminals)
    remaining.discard(root)
    edges: list[int] = []
    while remaining:
        t = min(remaining, key=lambda v: (dist[v], v))
        if dist[t] >= INF:
            raise P4subError(f"{g.names[t]} is unreachable from {g.names[root]}")
        added = []
        v = t
        while not in_tree[v]:
            edges.append(via_edge[v])
            in_tree[v] = True
            dist[v] = 0
            added.append(v)
            v = via_node[v]
        remaining.difference_update(added)
        relax(added)
    return edges
