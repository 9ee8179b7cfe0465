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
  the advertised space that reaches the switch (through the flows of the switches before it, already
  merged) and that the merge wrongly covers on a port, times the links behind the port: dz algebra,
  under Balogh's assumption that publishers publish uniformly over their advertisement;
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
import functools
import itertools
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


# ------------------------------------------------------------------------------------------------
# Sets of cells (dz algebra) and the traffic-based cost (S2 Alg. 5)
# ------------------------------------------------------------------------------------------------


def space_size(dzs: list[str]) -> float:
    """The share of Ω a set of disjoint dz's covers (a dz of length L is 2^-L of it)."""
    return sum(2.0 ** -len(d) for d in dzs)


def restrict(space: list[str], key: str, cells: set[str] | frozenset[str] | None = None) -> list[str]:
    """``space ∩ key`` for a sorted list of disjoint dz's (``cells``: the same as a set, if at hand)."""
    cells = cells if cells is not None else set(space)
    if any(key[:k] in cells for k in range(len(key) + 1)):
        return [key]
    return below(space, key)


def intersect_spaces(a: list[str], b: list[str]) -> list[str]:
    """``a ∩ b`` for sorted lists of disjoint dz's (cells overlap only when one is a prefix of the other)."""
    out = []
    bset = set(b)
    for x in a:
        if any(x[:k] in bset for k in range(len(x) + 1)):
            out.append(x)  # a cell of b covers x
        else:
            out.extend(below(b, x))  # the cells of b inside x
    return sorted(set(out))


def subtract(key: str, covered: list[str]) -> list[str]:
    """The cells of ``key`` that no dz of ``covered`` (sorted, all inside ``key``) covers."""
    inside = below(covered, key)
    if not inside:
        return [key]
    if inside[0] == key:
        return []
    return subtract(key + "0", inside) + subtract(key + "1", inside)


@dataclass(frozen=True)
class TrafficPath:
    """One publisher's path into a merging switch's ingress port (S2 Alg. 5's ``path``)."""

    traffic: float  # events the publisher sends (its access port's counter)
    input_space: list[str]  # what reaches the switch: the advertisement through every upstream switch's flows
    advertised: list[str]

    @functools.cached_property
    def cells(self) -> frozenset[str]:
        return frozenset(self.input_space)


def overlap_size(a: list[str], b: list[str]) -> float:
    """``size(a ∩ b)`` for sorted lists of disjoint dz's, without building the intersection: a cell of
    ``a`` counts whole when a cell of ``b`` covers it, else by the cells of ``b`` inside it."""
    if len(a) > len(b):
        a, b = b, a
    bset = set(b)
    sums = [0.0, *itertools.accumulate(2.0 ** -len(d) for d in b)]
    total = 0.0
    for x in a:
        if any(x[:k] in bset for k in range(len(x) + 1)):
            total += 2.0 ** -len(x)
            continue
        lo = bisect.bisect_left(b, x)
        hi = bisect.bisect_left(b, x + "2")  # "2" sorts after "0" and "1": past every extension of x
        total += sums[hi] - sums[lo]
    return total


def traffic_cost(table: Table, key: str, keys: list[str], paths: list[TrafficPath], links: Mapping[int, int]) -> float:
    """S2 Alg. 5: Σ_paths Σ_ports traffic * size(input ∩ wrongly covered) / size(advertised) * links,
    with ``size(input ∩ wrongly) = size(input ∩ key) - size(input ∩ the flows that served the port)``.

    A port the flow above ``key`` already serves is not wrongly covered there (those events went to
    it before the merge), as in :func:`ms_cost`."""
    inner = below(keys, key)
    above = ancestor_ports(table, key)
    union = above.union(*(table[k] for k in inner))
    cost = 0.0
    for path in paths:
        reach = restrict(path.input_space, key, path.cells)
        if not reach:
            continue
        reach_size = space_size(reach)
        adv = space_size(path.advertised)
        for q in sorted(union - above):
            served = _disjoint([k for k in inner if q in table[k]])
            fp = reach_size - overlap_size(reach, served)
            cost += path.traffic * fp / adv * links.get(q, 1)
    return cost


def traffic_paths(topology: Topology, tables: Tables, trees: Mapping[str, Tree], switch: str,
                  traffic: Mapping[str, float]) -> dict[int, list[TrafficPath]]:
    """Per ingress port of ``switch``: the publishers whose tree enters there, each with the space
    its (whole-space) advertisement keeps through the flows of the switches before (S2 Alg. 5's
    ``inputSpace``: per upstream switch, the flows of the path's ingress port that send to the path)."""
    out: dict[int, list[TrafficPath]] = {}
    for p, tree in trees.items():
        start, host_port = topology.host_attachment(p)
        path = tree.path(start, switch)
        space = [""]
        for n, u in enumerate(path[:-1]):
            ingress = host_port if n == 0 else topology.port(u, path[n - 1])
            egress = topology.port(u, path[n + 1])
            sends = sorted(k for k, ports in tables.get(u, {}).get(ingress, {}).items() if egress in ports)
            space = intersect_spaces(space, _disjoint(sends))
            if not space:
                break
        ingress = host_port if len(path) == 1 else topology.port(switch, path[-2])
        out.setdefault(ingress, []).append(TrafficPath(traffic.get(p, 1.0), space, [""]))
    return out


def _disjoint(dzs: list[str]) -> list[str]:
    """Sorted dz's without those another covers (their union as disjoint cells)."""
    kept: list[str] = []
    for d in sorted(dzs):
        if kept and d.startswith(kept[-1]):
            continue
        kept.append(d)
    return kept


def global_optimise(topology: Topology, tables: Tables, limit: int, samples: Samples, resolution: int,
                    trees: Mapping[str, Tree], method: str = "history", progress=None) -> int:
    """S2 Alg. 3-4; tables are changed in place. ``history``: the cost of the sampled events
    (Alg. 6); ``traffic``: Alg. 5 in dz algebra, each publisher's traffic its count in ``samples``."""
    links = affected_links(topology, trees)
    merges = 0
    order = processing_order(topology, samples.publisher_names)
    for done, switch in enumerate(order):
        by_ingress = tables.get(switch, {})
        if count_flows(by_ingress) <= limit:
            continue
        port_links = {q: links.get((switch, q), 1) for q in topology.ports(switch)}
        if method == "traffic":
            sent = {p: float(np.count_nonzero(samples.publishers == k)) for k, p in enumerate(samples.publisher_names)}
            paths = traffic_paths(topology, tables, trees, switch, sent)
            merges += _greedy(by_ingress, limit,
                              lambda i, t, key, keys: traffic_cost(t, key, keys, paths.get(i, []), port_links),
                              lambda i, t: None)
            if progress:
                progress(done + 1, len(order), switch)
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
        costers = {i: _SampleCost(t, np.concatenate(arriving.get(i, [np.zeros(0, np.uint64)])), resolution,
                                  port_links, samples.weight) for i, t in by_ingress.items()}
        merges += _greedy(by_ingress, limit, lambda i, t, key, keys: costers[i].cost(t, key, keys),
                          lambda i, t: costers[i].refresh(t))
        if progress:
            progress(done + 1, len(order), switch)
    return merges


def _greedy(by_ingress: dict[int, Table], limit: int, cost, refresh) -> int:
    """S2 Alg. 4: least cost per flow saved, no overshoot of the limit when avoidable.

    A merge at ``key`` changes only the flows below it: the merge points below it vanish, those above
    it (its prefixes) see fewer flows and are costed again, and no other merge point changes."""
    cand: dict[int, dict[str, tuple[float, int]]] = {}
    sorted_keys: dict[int, list[str]] = {}

    def score(i: int, key: str, keys: list[str]) -> None:
        benefit = len(below(keys, key)) - 1
        if benefit > 0:
            cand[i][key] = (cost(i, by_ingress[i], key, keys), benefit)
        else:
            cand[i].pop(key, None)

    for i, t in by_ingress.items():
        keys = sorted_keys[i] = sorted(t)
        cand[i] = {}
        for key in merge_points(t):
            score(i, key, keys)
    merges = 0
    count = count_flows(by_ingress)
    while (excess := count - limit) > 0:
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
        keys = sorted_keys[i]
        inner = below(keys, key)
        by_ingress[i] = merge_at(by_ingress[i], key, keys)
        lo = bisect.bisect_left(keys, key)
        keys[lo:lo + len(inner)] = [key]
        count -= len(inner) - 1
        refresh(i, by_ingress[i])
        for point in [p for p in cand[i] if p.startswith(key)]:
            del cand[i][point]
        for k in range(len(key)):
            if key[:k] in cand[i]:
                score(i, key[:k], keys)
        merges += 1
    return merges
