"""Delivery trees: from the ingress switch to the receivers' switches, and on to the receivers.

A :class:`DeliveryTree` is the set of out-ports each switch uses, rooted at the ingress switch (the
publisher's). It is what every header-stack encoding encodes and decodes, and what the baselines
that need a tree (OpenFlow multicast, LIPSIN, broadcast) forward along.

Tree heuristic: the *shortest-path heuristic* (Takahashi & Matsuyama 1980), the greedy
destination-driven construction the dissertation's encoder starts from (it cites Shaikh & Shin's
destination-driven multicast routing, [103]): start with the ingress switch; repeatedly attach the
receiver switch closest (in hops) to the tree by a shortest path to the tree; ties go to a seeded
random order of switches, shortest-path choices to the lowest port. Distances to the tree are
updated incrementally by a breadth-first search from the nodes just added, so a 255-switch tree
with 230 receivers takes milliseconds. ``method="spt"`` instead prunes the breadth-first
shortest-path tree from the ingress (what LIPSIN's evaluation uses).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

from compiler.base import P4subError
from compiler.network import Topology


@dataclass(frozen=True)
class DeliveryTree:
    """Out-ports per switch of a delivery tree rooted at ``root`` (the ingress switch).

    ``branches`` holds ``(switch, ports)`` pairs sorted by switch name, ports ascending, switches
    with no ports left out, so two trees with the same forwarding compare equal.
    """

    root: str
    branches: tuple[tuple[str, tuple[int, ...]], ...]

    @staticmethod
    def from_ports(root: str, ports: Mapping[str, Iterable[int]]) -> "DeliveryTree":
        items = ((s, tuple(sorted(set(ps)))) for s, ps in ports.items())
        return DeliveryTree(root, tuple(sorted((s, ps) for s, ps in items if ps)))

    @cached_property
    def port_map(self) -> dict[str, tuple[int, ...]]:
        return dict(self.branches)

    def ports(self, switch: str) -> tuple[int, ...]:
        return self.port_map.get(switch, ())

    def edges(self) -> frozenset[tuple[str, int]]:
        """Directed links ``(switch, out_port)``."""
        return frozenset((s, p) for s, ps in self.branches for p in ps)

    def preorder(self, topology: Topology) -> list[str]:
        """Switches in preorder from the root; children visited in port order."""
        out: list[str] = []
        stack = [self.root]
        while stack:
            s = stack.pop()
            out.append(s)
            children = []
            for p in self.ports(s):
                peer = topology.peer(s, p)
                if peer is not None and topology.is_switch(peer[0]):
                    children.append(peer[0])
            stack.extend(reversed(children))
        return out

    def receivers(self, topology: Topology) -> frozenset[str]:
        """Hosts at the end of the tree's host ports."""
        out = set()
        for s, ps in self.branches:
            for p in ps:
                peer = topology.peer(s, p)
                if peer is not None and not topology.is_switch(peer[0]):
                    out.add(peer[0])
        return frozenset(out)

    def depth(self, topology: Topology) -> int:
        """Links on the longest root-to-host path (the publisher's link not counted)."""
        best = 0
        stack = [(self.root, 0)]
        while stack:
            s, d = stack.pop()
            for p in self.ports(s):
                v = topology.peer(s, p)[0]
                best = max(best, d + 1)
                if topology.is_switch(v):
                    stack.append((v, d + 1))
        return best


def check_tree(tree: DeliveryTree, topology: Topology, in_port: int | None = None) -> None:
    """Raise :class:`P4subError` unless ``tree`` is a tree over existing links: every switch with
    ports reachable from the root, no node entered twice, no port back towards the parent."""
    seen = {tree.root}
    stack = [(tree.root, in_port)]
    reached = set()
    while stack:
        s, came_in = stack.pop()
        reached.add(s)
        for p in tree.ports(s):
            peer = topology.peer(s, p)
            if peer is None:
                raise P4subError(f"tree uses port {s}:{p}, which has no link")
            if p == came_in:
                raise P4subError(f"tree sends back out of {s}:{p}, the port it arrived on")
            v, vp = peer
            if v in seen:
                raise P4subError(f"tree reaches {v} twice")
            seen.add(v)
            if topology.is_switch(v):
                stack.append((v, vp))
    stray = [s for s, _ in tree.branches if s not in reached]
    if stray:
        raise P4subError(f"tree has ports on switches it never reaches: {', '.join(stray)}")


def switch_index(topology: Topology) -> tuple[list[str], dict[str, int], list[list[tuple[int, int]]]]:
    """Switch names in id order, their indices, and per switch ``[(port, neighbour index)]`` over
    switch-to-switch links in port order. Cached on the topology."""
    cached = topology.cache.get("switch_index")
    if cached is None:
        names = topology.switches()
        index = {s: i for i, s in enumerate(names)}
        adj = [
            [(p, index[v]) for p, v in topology.neighbours(s) if v in index]
            for s in names
        ]
        cached = topology.cache["switch_index"] = (names, index, adj)
    return cached


def steiner_tree(
    topology: Topology,
    ingress: str,
    receivers: Iterable[str],
    *,
    method: str = "sph",
    seed: int = 0,
    initial: DeliveryTree | None = None,
) -> DeliveryTree:
    """A hop-minimal delivery tree heuristic from switch ``ingress`` to the receiver hosts.

    ``method="sph"``: shortest-path heuristic (see the module docstring); ``"spt"``: the pruned
    shortest-path tree. ``initial`` (sph only) is a tree from the same ingress to grow instead of
    starting from the ingress alone (the stored-tree hybrid extends its installed tree this way).
    Deterministic for a given ``seed``.
    """
    names, index, adj = switch_index(topology)
    if ingress not in index:
        raise P4subError(f"{ingress!r} is not a switch")
    ports: dict[str, set[int]] = {}
    targets = []
    for h in receivers:
        if h not in topology.graph or topology.is_switch(h):
            raise P4subError(f"receiver {h!r} is not a host")
        s, p = topology.host_attachment(h)
        ports.setdefault(s, set()).add(p)
        targets.append(index[s])
    if method == "spt":
        edges = _pruned_spt(adj, index[ingress], set(targets))
    elif method == "sph":
        start = [index[ingress]]
        if initial is not None:
            if initial.root != ingress:
                raise P4subError("the initial tree must start at the ingress switch")
            start = [index[s] for s in initial.preorder(topology)]
            for s, ps in initial.branches:
                ports.setdefault(s, set()).update(ps)
        edges = _shortest_path_heuristic(adj, start, set(targets), seed)
    else:
        raise P4subError(f"unknown tree method {method!r}; use sph or spt")
    for u, p in edges:
        ports.setdefault(names[u], set()).add(p)
    return DeliveryTree.from_ports(ingress, ports)


def _shortest_path_heuristic(
    adj: list[list[tuple[int, int]]], start: list[int], terminals: set[int], seed: int
) -> list[tuple[int, int]]:
    n = len(adj)
    inf = n + 1
    dist = [inf] * n
    via = [-1] * n  # neighbour one hop closer to the tree
    via_port = [0] * n  # that neighbour's port towards this node
    in_tree = [False] * n
    for s in start:
        in_tree[s] = True
        dist[s] = 0
    _relax(adj, deque(start), dist, via, via_port)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    rank = [0] * n
    for r, v in enumerate(order):
        rank[v] = r
    remaining = {t for t in terminals if not in_tree[t]}
    edges: list[tuple[int, int]] = []
    while remaining:
        t = min(remaining, key=lambda v: (dist[v], rank[v]))
        if dist[t] >= inf:
            raise P4subError("a receiver is unreachable from the ingress switch")
        added = []
        v = t
        while not in_tree[v]:
            edges.append((via[v], via_port[v]))
            in_tree[v] = True
            dist[v] = 0
            added.append(v)
            v = via[v]
        remaining.difference_update(added)
        _relax(adj, deque(reversed(added)), dist, via, via_port)
    return edges


def _relax(adj, queue: deque, dist: list[int], via: list[int], via_port: list[int]) -> None:
    while queue:
        u = queue.popleft()
        du = dist[u] + 1
        for p, w in adj[u]:
            if du < dist[w]:
                dist[w] = du
                via[w] = u
                via_port[w] = p
                queue.append(w)


def _pruned_spt(adj: list[list[tuple[int, int]]], root: int, terminals: set[int]) -> list[tuple[int, int]]:
    parent = {root: (-1, 0)}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for p, w in adj[u]:
            if w not in parent:
                parent[w] = (u, p)
                queue.append(w)
    if any(t not in parent for t in terminals):
        raise P4subError("a receiver is unreachable from the ingress switch")
    keep: set[int] = set()
    edges = []
    for t in terminals:
        v = t
        while v != root and v not in keep:
            keep.add(v)
            u, p = parent[v]
            edges.append((u, p))
            v = u
    return edges


def hops(adj: list[list[tuple[int, int]]], start: int) -> list[int]:
    """Switch hops from switch index ``start`` to every switch (-1: unreachable), breadth first over
    ``switch_index``'s adjacency."""
    dist = [-1] * len(adj)
    dist[start] = 0
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for _, w in adj[u]:
            if dist[w] < 0:
                dist[w] = dist[u] + 1
                queue.append(w)
    return dist


def next_hop_ports(topology: Topology) -> list[list[int]]:
    """``table[src][dst]``: the port at switch index ``src`` on a shortest path to switch ``dst``
    (lowest such port; 0 when ``src == dst``). The unicast routing every MAC- or BIER-style baseline
    uses. Cached on the topology."""
    cached = topology.cache.get("next_hops")
    if cached is not None:
        return cached
    _, _, adj = switch_index(topology)
    n = len(adj)
    table = [[0] * n for _ in range(n)]
    for dst in range(n):
        dist = hops(adj, dst)
        for v in range(n):
            if v == dst:
                continue
            for p, w in adj[v]:
                if dist[w] == dist[v] - 1:
                    table[v][dst] = p
                    break
    topology.cache["next_hops"] = table
    return table


def prune(tree: DeliveryTree, topology: Topology, keep: Iterable[str]) -> DeliveryTree:
    """The part of ``tree`` that reaches the hosts in ``keep`` (the other branches cut off)."""
    keep = set(keep)
    order = tree.preorder(topology)
    useful: set[str] = set()
    kept: dict[str, list[int]] = {}
    for s in reversed(order):  # children before parents
        for p in tree.ports(s):
            v = topology.peer(s, p)[0]
            if v in keep or v in useful:
                kept.setdefault(s, []).append(p)
        if s in kept:
            useful.add(s)
    return DeliveryTree.from_ports(tree.root, kept)
