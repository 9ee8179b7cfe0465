"""Fewer thresholds on one field: every interval's ends moved outward to a few kept cut points.

A compressed field (Camus §5.2: ``add_order.price`` on Tofino) is matched once, in a code table
whose entries are the field's elementary intervals, one per distinct threshold the rules test. With
a threshold per filter (``price > 218.0812``), 3,000 filters make 3,000 codes, and a switch that
evaluates twelve messages per packet holds twelve copies of that table: more TCAM than the chip has.
Keeping only ``limit`` of the thresholds and moving every other interval end outward to the nearest
kept one (``price > 218.0812`` becomes ``price > 218.05``) shrinks the code table to ``limit`` rows
and widens each rule a little: a packet still reaches every subscriber it should, and a few more.

Which thresholds go is decided greedily, cheapest first. Removing cut ``b`` between the kept cuts
``p < b < n`` moves the starts at ``b`` down to ``p`` and the ends at ``b`` up to ``n``; it costs
the share of traffic in ``[p, b)`` times the cubes starting at ``b`` plus the share in ``[b, n)``
times the cubes ending there (on a sample of the traffic when one is given, counted for each cube
among the packets the rest of the cube holds for, else uniform over the values the rules name). Cubes moved to a neighbour are counted there from then on, so a cut that
gathered many cubes is dear to remove. This is PLEROMA's and Balogh's coarsening of the event space
(../shared/papers) on one dimension, with the cost in deliveries rather than in flows.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from compiler.dnf import Cube
from compiler.predicates import IntervalSet

Cubes = list[tuple[Cube, tuple]]


@dataclass(frozen=True)
class Coarsening:
    """What one coarsening did: the field, its cuts before and after, the cubes it widened."""

    field: str
    cuts_before: int
    cuts_after: int
    widened_cubes: int

    @property
    def step(self) -> str:
        return f"codes-{self.field}-{self.cuts_after}/{self.cuts_before}"


def cuts_of(cubes: Sequence[Cubes], name: str) -> list[int]:
    """The distinct interval starts and ends (one past the last value) the cubes use on ``name``,
    without 0 and the top of the domain, which every code table has anyway."""
    found: set[int] = set()
    top = None
    for rule in cubes:
        for cube, _ in rule:
            for n, s in cube:
                if n == name:
                    top = s.top
                    for lo, hi in s.intervals:
                        found.add(lo)
                        found.add(hi + 1)
    if top is None:
        return []
    return sorted(c for c in found if 0 < c <= top)


#: Past this many distinct "rest of the cube" groups, the sample's whole column stands for each.
MAX_GROUPS = 256


def choose_cuts(cubes: Sequence[Cubes], name: str, limit: int,
                sample: Mapping[str, np.ndarray] | None = None) -> tuple[int, ...]:
    """At most ``limit`` of the cuts on ``name``, the rest removed cheapest first (module docstring).

    A cube's extra deliveries are packets that satisfy the rest of the cube and fall between the old
    and the new end: with a sample, the traffic of each group of cubes with the same rest is counted
    on the sample rows where that rest holds (a stock's prices, not every stock's), with one pseudo
    packet spread evenly over the span, so that a region the sample missed is cheap but not free.
    """
    cuts = cuts_of(cubes, name)
    if len(cuts) <= limit:
        return tuple(cuts)
    group_of: dict[Cube, int] = {}
    starts: dict[int, Counter] = {c: Counter() for c in cuts}
    ends: dict[int, Counter] = {c: Counter() for c in cuts}
    top = 0
    for rule in cubes:
        for cube, _ in rule:
            for n, s in cube:
                if n != name:
                    continue
                top = s.top
                g = group_of.setdefault(tuple(x for x in cube if x[0] != name), len(group_of))
                for lo, hi in s.intervals:
                    if lo in starts:
                        starts[lo][g] += 1
                    if hi + 1 in ends:
                        ends[hi + 1][g] += 1
    columns = _columns(sample, name, group_of)
    low, high = cuts[0], cuts[-1]
    rows = max(1, len(sample[name])) if columns is not None else 1
    span = max(1, high - low)

    def share(g: int, a: int, b: int) -> float:
        """The traffic of group ``g`` in [a, b), as a share of all packets."""
        if columns is None:
            return (b - a) / span
        column = columns[g] if isinstance(columns, list) else columns
        seen = np.searchsorted(column, b, side="left") - np.searchsorted(column, a, side="left")
        return (seen + min(1.0, (b - a) / span)) / (rows + 1)

    prev = {c: (cuts[i - 1] if i else 0) for i, c in enumerate(cuts)}
    nxt = {c: (cuts[i + 1] if i + 1 < len(cuts) else top + 1) for i, c in enumerate(cuts)}
    version = {c: 0 for c in cuts}

    def cost(c: int) -> float:
        return (sum(k * share(g, prev[c], c) for g, k in starts[c].items())
                + sum(k * share(g, c, nxt[c]) for g, k in ends[c].items()))

    heap = [(cost(c), c, 0) for c in cuts]
    heapq.heapify(heap)
    alive = len(cuts)
    while alive > limit and heap:
        _, c, v = heapq.heappop(heap)
        if version.get(c) != v:
            continue
        p, n = prev[c], nxt[c]
        if p in starts:
            starts[p].update(starts[c])
        if n in ends:
            ends[n].update(ends[c])
        if p in nxt:
            nxt[p] = n
        if n in prev:
            prev[n] = p
        del version[c]
        alive -= 1
        for neighbour in (p, n):
            if neighbour in version:
                version[neighbour] += 1
                heapq.heappush(heap, (cost(neighbour), neighbour, version[neighbour]))
    return tuple(sorted(version))


def _columns(sample: Mapping[str, np.ndarray] | None, name: str,
             group_of: Mapping[Cube, int]) -> list[np.ndarray] | np.ndarray | None:
    """The sorted sample values of ``name``: one column per group (rows where its rest holds), or
    the whole column for every group when there are too many groups or the rest cannot be read."""
    if not sample or name not in sample or not len(sample[name]) or sample[name].dtype == object:
        return None
    values = np.asarray(sample[name], dtype=np.uint64)
    if len(group_of) > MAX_GROUPS:
        return np.sort(values)
    out: list[np.ndarray] = [np.empty(0, dtype=np.uint64)] * len(group_of)
    for rest, g in group_of.items():
        mask = np.ones(len(values), dtype=bool)
        for n, s in rest:
            column = sample.get(n)
            if column is None or column.dtype == object:
                continue  # a validity field or a wide one: taken as holding
            held = np.zeros(len(values), dtype=bool)
            for lo, hi in s.intervals:
                held |= (column >= np.uint64(lo)) & (column <= np.uint64(hi))
            mask &= held
        out[g] = np.sort(values[mask])
    return out


def snap(s: IntervalSet, cuts: Sequence[int]) -> IntervalSet:
    """``s`` with every start moved down and every end moved up to the nearest cut (a superset)."""
    out = []
    for lo, hi in s.intervals:
        i = bisect.bisect_right(cuts, lo) - 1
        j = bisect.bisect_left(cuts, hi + 1)
        out.append((cuts[i] if i >= 0 else 0, (cuts[j] - 1) if j < len(cuts) else s.top))
    return IntervalSet.union_of(out, s.top)


def coarsen(cubes: Sequence[Cubes], limits: Mapping[str, int],
            samples: Mapping[str, np.ndarray] | None = None) -> tuple[list[Cubes], list[Coarsening]]:
    """The rules' cubes with at most ``limits[field]`` cuts on each field named, and what was done."""
    out = [list(rule) for rule in cubes]
    done = []
    for name, limit in sorted(limits.items()):
        before = cuts_of(out, name)
        kept = choose_cuts(out, name, limit, samples)
        if len(kept) == len(before):
            continue
        widened = 0
        for r, rule in enumerate(out):
            new_rule = []
            for cube, actions in rule:
                new_cube = tuple((n, snap(s, kept) if n == name else s) for n, s in cube)
                widened += new_cube != cube
                new_rule.append((new_cube, actions))
            out[r] = new_rule
        done.append(Coarsening(name, len(before), len(kept), widened))
    return out, done
