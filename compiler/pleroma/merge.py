"""Balogh's flow-limit algorithms: merge trees, cost functions, local and global greedy merging.

Balogh (MSc thesis, Stuttgart 2017, ch. 5) keeps PLEROMA within a per-switch flow limit by merging
flows of one ingress port: merging at a node ``m`` of the port's merge tree (the radix tree of its
flows' dz's, whose inner nodes are the longest common prefixes of their children) replaces every
flow below ``m`` with one flow ``(m, union of their egress ports)``. The merged flow covers
everything its flows covered (no false negatives: S2 §5.1.1) and sends some events where they were
not asked for (false positives). Merge points here are the radix tree's nodes, found as the
longest common prefixes of neighbouring dz's in sorted order; a merge at ``m`` saves ``|m| - 1``
flows.

Cost functions (what merging at ``m`` is expected to cost):

* ``ms``, minimum space (Alg. 2): per egress port of the merged flow, the share of Ω it newly
  covers. Computed exactly under longest-prefix matching: a region of ``m`` that went to port
  ``q`` before (through a flow below ``m`` or the nearest flow above it) costs nothing;
* ``traffic`` (Alg. 5): the expected network false positives, publisher traffic times the share of
  the space reaching the port that the merge wrongly covers, times the links behind the port.
  The events that reach the switch through its (already merged) upstream switches are estimated
  with uniformly drawn points of Ω published at every publisher (Balogh's uniform-publishing
  assumption, by sampling rather than by dz algebra);
* ``history`` (Alg. 6): the same with a sample of past events (the history) instead of uniform points.

Algorithms:

* ``baseline`` and ``ms`` are the local enforcers (§5.3): one switch at a time, knowing nothing of
  the others, merge at a *leaf* merge point (random, or cheapest by ``ms``) until the switch fits.
  Given the requests, they run as Balogh runs them, whenever a flow is added
  (:mod:`.configurator`); without, merge after merge on the finished table;
* ``traffic`` and ``history`` are the global optimiser (§5.4, Alg. 3-4): switches in rounds from
  the publishers outwards (each sees its upstream switches' final flows), at each the merge point
  with the least cost per flow saved that does not overshoot the limit (the cheapest of all when
  none fits exactly), until it fits.
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from compiler.base import P4subError
from compiler.network import Topology
from compiler.pleroma.flows import Tables, Tree
from compiler.pleroma.lpm import LpmTable, compile_tables, walk

METHODS = ("baseline", "ms", "traffic", "history")
Table = dict[str, frozenset[int]]


# ------------------------------------------------------------------------------------------------
# Merge trees
# ------------------------------------------------------------------------------------------------


def _lcp(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def merge_points(table: Table) -> set[str]:
    """The radix tree's merge points: every node under which two or more flows lie."""
    keys = sorted(table)
    return {_lcp(a, b) for a, b in zip(keys, keys[1:])}


def below(keys: list[str], key: str) -> list[str]:
    """The sorted flow dz's that ``key`` covers (``keys`` sorted)."""
    lo = bisect.bisect_left(keys, key)
    hi = lo
    while hi < len(keys) and keys[hi].startswith(key):
        hi += 1
    return keys[lo:hi]


def ancestor_ports(table: Table, key: str) -> frozenset[int]:
    """Egress of the nearest flow strictly above ``key`` (what its uncovered events got before)."""
    for k in range(len(key) - 1, -1, -1):
        if key[:k] in table:
            return table[key[:k]]
    return frozenset()


def merge_at(table: Table, key: str, keys: list[str] | None = None) -> Table:
    """``table`` with every flow below ``key`` replaced by ``(key, union of their egress)`` (``keys``:
    the table's dz's sorted, if the caller has them)."""
    inner = below(keys if keys is not None else sorted(table), key)
    if not inner:
        raise P4subError(f"no flow below merge point {key!r}")
    ports = ancestor_ports(table, key).union(*(table[k] for k in inner))
    out = {k: v for k, v in table.items() if not k.startswith(key)}
    out[key] = frozenset(ports)
    return out


def leaf_points(table: Table) -> list[str]:
    """Merge points with no merge point below them (cardinality two or three, S2 §5.3)."""
    points = sorted(merge_points(table))
    return [p for i, p in enumerate(points) if not (i + 1 < len(points) and points[i + 1].startswith(p))]


def ms_cost(table: Table, key: str, keys: list[str] | None = None) -> float:
    """Minimum-space cost (Alg. 2, exact under longest-prefix match): Σ_port share of Ω newly sent there."""
    keys = keys if keys is not None else sorted(table)
    inner = below(keys, key)
    above = ancestor_ports(table, key)
    union = above.union(*(table[k] for k in inner))
    cost = 0.0
    # Exclusive area of each flow: its cell minus the cells of the maximal flows inside it.
    stack: list[tuple[str, float]] = [(key, 2.0 ** -len(key))]  # (dz, area left) of open flows; key as root
    owner = [above]
    pending: list[tuple[float, frozenset[int]]] = []
    for k in inner:
        while len(stack) > 1 and not k.startswith(stack[-1][0]):
            dz, area = stack.pop()
            pending.append((area, owner.pop()))
        if k == key:
            owner[0] = table[k]
            continue
        dz, area = stack[-1]
        stack[-1] = (dz, area - 2.0 ** -len(k))
        stack.append((k, 2.0 ** -len(k)))
        owner.append(table[k])
    while stack:
        dz, area = stack.pop()
        pending.append((area, owner.pop()))
    for area, ports in pending:
        cost += area * len(union - ports)
    return cost


# ------------------------------------------------------------------------------------------------
# Local enforcers
# ------------------------------------------------------------------------------------------------


def count_flows(by_ingress: Mapping[int, Table]) -> int:
    return sum(len(t) for t in by_ingress.values())


def _is_leaf_point(keys: list[str], c: str) -> bool:
    """``c`` is a leaf merge point of the sorted ``keys``: under it lie two or three flows, at most one
    on each side and maybe one at ``c`` (S2 §5.3), so no other merge point lies below it."""
    under = below(keys, c)
    if len(under) < 2:
        return False
    sides = [k for k in under if k != c]
    zero = sum(1 for k in sides if k[len(c)] == "0")
    return zero <= 1 and len(sides) - zero <= 1


def local_enforce(by_ingress: dict[int, Table], limit: int, method: str, rng: random.Random,
                  cache: dict[int, tuple[list[str], list[tuple[float, str]]]] | None = None,
                  dirty: set[int] | None = None) -> int:
    """Merge at leaf merge points until the switch holds ``limit`` flows; returns the merges made.

    A merge at a leaf point changes only the flows below it, so afterwards only that point and the
    two nodes it may now make leaves (its longest common prefixes with its neighbours) are looked at
    again. A caller that enforces on every add keeps the sorted keys and options in ``cache`` and
    names the ports whose tables it changed since in ``dirty``; those are worked out afresh."""
    state: dict[int, tuple[list[str], list[tuple[float, str]]]] = cache if cache is not None else {}

    def cost(t: Table, p: str, keys: list[str]) -> float:
        return ms_cost(t, p, keys) if method == "ms" else 0.0

    def score(i: int) -> None:
        t = by_ingress[i]
        keys = sorted(t)
        state[i] = (keys, sorted((cost(t, p, keys), p) for p in leaf_points(t)))

    for i in by_ingress:
        if cache is None or i not in state or (dirty is not None and i in dirty):
            score(i)
    merges = 0
    count = count_flows(by_ingress)
    while count > limit:
        flat = [(c, i, p) for i, (_, opts) in sorted(state.items()) if i in by_ingress for c, p in opts]
        if not flat:
            break
        if method == "baseline":
            _, i, p = flat[rng.randrange(len(flat))]
        else:
            _, i, p = min(flat)
        table = by_ingress[i]
        keys, opts = state[i]
        inner = below(keys, p)
        by_ingress[i] = table = merge_at(table, p, keys)
        lo = bisect.bisect_left(keys, p)
        keys[lo:lo + len(inner)] = [p]
        count -= len(inner) - 1
        opts = [o for o in opts if o[1] != p]
        at = keys.index(p, lo)
        fresh = {_lcp(p, keys[j]) for j in (at - 1, at + 1) if 0 <= j < len(keys)}
        known = {q for _, q in opts}
        for c in fresh - known:
            if _is_leaf_point(keys, c):
                bisect.insort(opts, (cost(table, c, keys), c))
        state[i] = (keys, opts)
        merges += 1
    return merges


# ------------------------------------------------------------------------------------------------
# Global optimiser
# ------------------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Events the traffic- and history-based costs judge merges by: dz's, publisher of each, weight."""

    dz: np.ndarray
    publishers: np.ndarray
    publisher_names: list[str]
    weight: float = 1.0


def affected_links(topology: Topology, trees: Mapping[str, Tree]) -> dict[tuple[str, int], int]:
    """Per (switch, port): the links a copy sent there can reach in the dissemination trees, worst
    case (S2 Alg. 5's ``affectedLinks``, the most over the trees that use the port)."""
    out: dict[tuple[str, int], int] = {}
    for tree in {id(t): t for t in trees.values()}.values():
        children: dict[str, list[str]] = {}
        for c, p in tree.edges():
            children.setdefault(p, []).append(c)
            children.setdefault(c, [])
        hosts = {s: len(topology.hosts_of(s)) for s in topology.switches()}
        size: dict[str, int] = {}

        def links_under(s: str, parent: str | None) -> int:
            """Links reachable from ``s`` away from ``parent`` in the tree (hosts' links included)."""
            total, stack = 0, [(s, parent)]
            while stack:
                x, frm = stack.pop()
                total += hosts[x]
                nbrs = [c for c in children.get(x, [])] + ([tree.parent[x]] if tree.parent[x] is not None else [])
                for y in nbrs:
                    if y != frm:
                        total += 1
                        stack.append((y, x))
            return total

        for s in topology.switches():
            for q in topology.ports(s):
                peer, _ = topology.peer(s, q)
                if not topology.is_switch(peer):
                    n = 1
                elif tree.parent.get(peer) == s or tree.parent.get(s) == peer:
                    key = (peer, s)
                    if key not in size:
                        size[key] = links_under(peer, s)
                    n = 1 + size[key]
                else:
                    continue
                out[(s, q)] = max(out.get((s, q), 0), n)
    return out


def processing_order(topology: Topology, publishers: list[str]) -> list[str]:
    """Switches in rounds from the publishers (S2 Alg. 3): hop distance from the nearest publisher's
    switch, then id."""
    dist: dict[str, int] = {}
    queue = deque()
    for p in publishers:
        s = topology.host_attachment(p)[0]
        if s not in dist:
            dist[s] = 0
            queue.append(s)
    while queue:
        s = queue.popleft()
        for _, v in topology.neighbours(s):
            if topology.is_switch(v) and v not in dist:
                dist[v] = dist[s] + 1
                queue.append(v)
    return sorted(topology.switches(), key=lambda s: (dist.get(s, 1 << 30), topology.node_id(s)))


class _SampleCost:
    """Traffic/history cost of merge points of one ingress table, from the samples that reach it.

    Samples are sorted by dz; a merge point covers a contiguous run of them. ``miss[q]`` counts,
    cumulatively, the samples whose current flow does not send them to port ``q``.
    """

    def __init__(self, table: Table, dz: np.ndarray, resolution: int, links: Mapping[int, int], weight: float):
        self.dz = np.sort(dz)
        self.resolution = resolution
        self.links = links
        self.weight = weight
        self.refresh(table)

    def refresh(self, table: Table) -> None:
        mask = LpmTable.of(table).lookup(self.dz, self.resolution) if len(self.dz) else np.zeros(0, np.uint64)
        self.miss = {}
        for q in self.links:
            lacks = ((mask >> np.uint64(q)) & np.uint64(1)) == 0
            self.miss[q] = np.concatenate(([0], np.cumsum(lacks)))

    def cost(self, table: Table, key: str, keys: list[str]) -> float:
        if not len(self.dz):
            return 0.0
        k, r = len(key), self.resolution
        base = (int(key, 2) if key else 0) << (r - k)
        lo = int(np.searchsorted(self.dz, np.uint64(base), side="left"))
        end = base + (1 << (r - k))
        hi = len(self.dz) if end >= 1 << 64 else int(np.searchsorted(self.dz, np.uint64(end), side="left"))
        if hi <= lo:
            return 0.0
        union = ancestor_ports(table, key).union(*(table[x] for x in below(keys, key)))
        return self.weight * sum(self.links.get(q, 1) * float(self.miss[q][hi] - self.miss[q][lo])
                                 for q in union if q in self.miss)


def global_optimise(topology: Topology, tables: Tables, limit: int, samples: Samples, resolution: int,
                    trees: Mapping[str, Tree], progress=None) -> int:
    """S2 Alg. 3-4 with the traffic/history cost of ``samples``; tables are changed in place."""
    links = affected_links(topology, trees)
    merges = 0
    order = processing_order(topology, samples.publisher_names)
    for done, switch in enumerate(order):
        by_ingress = tables.get(switch, {})
        if count_flows(by_ingress) <= limit:
            continue
        lpm = compile_tables(tables)
        arriving: dict[int, list[np.ndarray]] = {}
        for s, _, q, rows in walk(topology, lpm, samples.dz, resolution, samples.publishers, samples.publisher_names):
            peer, peer_port = topology.peer(s, q)
            if peer == switch:
                arriving.setdefault(peer_port, []).append(samples.dz[rows])
        for p in samples.publisher_names:
            s, port = topology.host_attachment(p)
            if s == switch:
                idx = samples.publisher_names.index(p)
                arriving.setdefault(port, []).append(samples.dz[samples.publishers == idx])
        port_links = {q: links.get((switch, q), 1) for q in topology.ports(switch)}
        costers = {i: _SampleCost(t, np.concatenate(arriving.get(i, [np.zeros(0, np.uint64)])), resolution,
                                  port_links, samples.weight) for i, t in by_ingress.items()}
        merges += _greedy(by_ingress, limit, lambda i, t, key, keys: costers[i].cost(t, key, keys),
                          lambda i, t: costers[i].refresh(t))
        if progress:
            progress(done + 1, len(order), switch)
    return merges


def _greedy(by_ingress: dict[int, Table], limit: int, cost, refresh) -> int:
    """S2 Alg. 4: least cost per flow saved, no overshoot of the limit when avoidable."""
    cand: dict[int, dict[str, tuple[float, int]]] = {}

    def score(i: int) -> None:
        t = by_ingress[i]
        keys = sorted(t)
        cand[i] = {}
        for key in merge_points(t):
            benefit = len(below(keys, key)) - 1
            if benefit > 0:
                cand[i][key] = (cost(i, t, key, keys), benefit)

    for i in by_ingress:
        score(i)
    merges = 0
    while (excess := count_flows(by_ingress) - limit) > 0:
        best = None
        for fits in (True, False):
            for i, points in cand.items():
                for key, (c, b) in points.items():
                    if fits and b > excess:
                        continue
                    k = (c / b, -b, i, key)
                    if best is None or k < best[0]:
                        best = (k, i, key)
            if best is not None:
                break
        if best is None:
            break
        _, i, key = best
        by_ingress[i] = merge_at(by_ingress[i], key)
        refresh(i, by_ingress[i])
        score(i)
        merges += 1
    return merges
