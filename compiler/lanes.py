"""Partitioned compile: rules split into *lanes*, independent diagrams whose outputs a packet gets in union.

One diagram over every field multiplies the outcomes of rules that test different attributes: a
node must remember every combination of partly matched rules. Outputs on edges
(:mod:`compiler.bdd`, ``emit``) remove the product for rules that are already decided; lanes remove
it for rules that are still undecided at the same time, by giving each group of rules its own chain
of tables and its own state. Lanes cost tables (a target places the lanes' tables side by side in
the same stages), so their number is bounded by the target.

The partition is chosen in two steps. Rules are grouped by their *signature*, the set of attributes
they test: rules of one signature share their partial matches (Camus's ITCH rules all test stock
then price) and never multiply each other's. Signature groups are then spread over ``n`` lanes,
largest first, each to the lane whose attributes it overlaps most (Jaccard similarity), less the
lane's load as a share of a fair ``1/n`` of the rules, so that a lane stops taking groups once it is
full and unrelated groups spread out. The real compiled size is the
judge: each lane count tried is compiled (with an edge limit, so a hopeless candidate stops early)
and the smallest total wins. Rules that call user actions stay together in lane 0, where the call
tables are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from compiler.bdd import Diagram, DiagramTooLarge, build_cubes, edge_count
from compiler.dnf import Cube
from compiler.spec import QueryField

Cubes = list[tuple[Cube, tuple]]


@dataclass(frozen=True)
class LaneChoice:
    """A partition and its diagrams: ``lanes[i]`` lists the rule indexes of lane ``i``."""

    lanes: tuple[tuple[int, ...], ...]
    diagrams: tuple[Diagram, ...]
    size: int  # edges over all lanes
    tried: tuple[tuple[int, int | None], ...]  # (lane count, size or None when abandoned)


def signatures(cubes_of: Sequence[Cubes]) -> list[frozenset[str]]:
    """Per rule, the attributes its cubes test."""
    return [frozenset(name for cube, _ in cubes for name, _ in cube) for cubes in cubes_of]


def spread(sigs: Sequence[frozenset[str]], n: int, pinned: Sequence[int] = ()) -> list[list[int]]:
    """Rule indexes in ``n`` lanes (some may stay empty and are dropped); ``pinned`` rules go to lane 0."""
    groups: dict[frozenset[str], list[int]] = {}
    for i, s in enumerate(sigs):
        groups.setdefault(s, []).append(i)
    lanes: list[list[int]] = [[] for _ in range(max(1, n))]
    attrs: list[set[str]] = [set() for _ in lanes]
    pinned_set = set(pinned)
    if pinned_set:
        lanes[0].extend(sorted(pinned_set))
        for i in pinned_set:
            attrs[0] |= sigs[i]
    fair = max(1.0, len(sigs) / len(lanes))
    order = sorted(groups.items(), key=lambda kv: (-len(kv[0]), -len(kv[1]), sorted(kv[0])))
    for sig, members in order:
        members = [i for i in members if i not in pinned_set]
        if not members:
            continue

        def score(k: int) -> float:
            if not lanes[k]:
                return 0.0
            union = sig | attrs[k]
            overlap = len(sig & attrs[k]) / len(union) if union else 1.0
            return overlap - len(lanes[k]) / fair

        best = max(range(len(lanes)), key=lambda k: (score(k), -len(lanes[k]), -k))
        lanes[best].extend(members)
        attrs[best] |= sig
    return [sorted(lane) for lane in lanes if lane] or [[]]  # no rules: one empty lane


def completion_order(sigs: Sequence[frozenset[str]], fields: Sequence[str]) -> list[str]:
    """A field order that closes rules soon after it opens them.

    A rule is *open* between its first and its last field: the diagram must remember whether it
    matched so far, and open rules of different signatures multiply the nodes. Greedily, the next
    field is the one that completes the most rules and opens the fewest new ones (ties: ``fields``'
    order, the default heuristic's).
    """
    weight: dict[frozenset[str], int] = {}
    for s in sigs:
        if s:
            weight[s] = weight.get(s, 0) + 1
    placed: set[str] = set()
    order: list[str] = []
    rank = {f: i for i, f in enumerate(fields)}
    remaining = list(fields)
    while remaining:
        def gain(f: str) -> tuple[int, int]:
            score = 0
            for sig, w in weight.items():
                if f not in sig:
                    continue
                if sig - placed == {f}:
                    score += w  # completed here
                elif not sig & placed:
                    score -= w  # opened here
            return score, -rank[f]
        best = max(remaining, key=gain)
        order.append(best)
        placed.add(best)
        remaining.remove(best)
    return order


def build_lane(cubes: Cubes, fields: dict[str, QueryField], *, field_order: Sequence[str] | None,
               max_edges: int | None, search_seconds: float = 0.0) -> Diagram:
    """One lane's diagram (outputs on edges) in the better of the default and the completion order,
    then improved by sifting fields within ``search_seconds`` when asked (an explicit order is kept)."""
    if field_order:
        return build_cubes(cubes, fields, field_order=field_order, emit=True, max_edges=max_edges)
    try:
        default: Diagram | None = build_cubes(cubes, fields, emit=True, max_edges=max_edges)
    except DiagramTooLarge:
        default = None
    best, size = default, edge_count(default) if default is not None else None
    names = default.field_names if default is not None else _tested(cubes, fields)
    sigs = [frozenset(n for n, _ in cube) for cube, _ in cubes]
    other = completion_order(sigs, names)
    if other != names:
        try:
            d = build_cubes(cubes, fields, field_order=other, emit=True,
                            max_edges=size if size is not None else max_edges)
            if size is None or edge_count(d) < size:
                best, size = d, edge_count(d)
        except DiagramTooLarge:
            pass
    if best is None:
        raise DiagramTooLarge(f"a lane passed {max_edges} edges in every order tried")
    if search_seconds > 0:
        best = sift(cubes, fields, best, search_seconds)
    return best


def sift(cubes: Cubes, fields: dict[str, QueryField], start: Diagram, seconds: float) -> Diagram:
    """Rudell's sifting on field order with the compiled size (edges) as the cost: each field in turn
    is tried at every position and left where the diagram is smallest, until no move helps or time is up."""
    deadline = time.monotonic() + seconds
    best, size = start, edge_count(start)
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for f in list(best.field_names):
            order = [g for g in best.field_names if g != f]
            for pos in range(len(order) + 1):
                if time.monotonic() >= deadline:
                    return best
                trial = order[:pos] + [f] + order[pos:]
                if trial == best.field_names:
                    continue
                try:
                    d = build_cubes(cubes, fields, field_order=trial, emit=True, max_edges=size - 1)
                except DiagramTooLarge:
                    continue
                best, size, improved = d, edge_count(d), True
                order = [g for g in best.field_names if g != f]
    return best


def _tested(cubes: Cubes, fields: dict[str, QueryField]) -> list[str]:
    used = {n for cube, _ in cubes for n, _ in cube}
    return [f for f in fields if f in used]


def choose_lanes(cubes_of: Sequence[Cubes], fields: dict[str, QueryField], *, lanes: int | None,
                 max_lanes: int, field_order: Sequence[str] | None = None,
                 pinned: Sequence[int] = (), max_edges: int | None = None, search_seconds: float = 0.0,
                 progress: Callable[[str], None] | None = None) -> LaneChoice:
    """Compile the rules in ``lanes`` lanes, or (``None``) in the lane count up to ``max_lanes`` that
    gives the fewest edges (ties: fewer lanes). Counts are tried from the most lanes down, so that the
    first candidate is the one least likely to blow up and later ones stop as soon as they are worse.
    Each lane's diagram has outputs on edges. ``max_edges`` bounds every candidate."""
    sigs = signatures(cubes_of)
    counts = [lanes] if lanes is not None else sorted(_candidates(len(set(sigs)), max_lanes), reverse=True)
    best: LaneChoice | None = None
    tried: list[tuple[int, int | None]] = []
    for n in counts:
        parts = spread(sigs, n, pinned)
        limit = best.size if best is not None else max_edges
        try:
            diagrams, size = [], 0
            for part in parts:
                cubes = [c for i in part for c in cubes_of[i]]
                d = build_lane(cubes, fields, field_order=field_order,
                               max_edges=None if limit is None else limit - size,
                               search_seconds=search_seconds / len(parts))
                diagrams.append(d)
                size += edge_count(d)
        except DiagramTooLarge:
            tried.append((len(parts), None))
            if progress:
                progress(f"lanes: {len(parts)} lanes abandoned (larger than {limit} edges)")
            continue
        tried.append((len(parts), size))
        if progress:
            progress(f"lanes: {len(parts)} lanes -> {size} edges")
        if best is None or size <= best.size:
            best = LaneChoice(tuple(tuple(p) for p in parts), tuple(diagrams), size, ())
    if best is None:
        raise DiagramTooLarge(f"every lane count tried passed {max_edges} edges")
    return LaneChoice(best.lanes, best.diagrams, best.size, tuple(tried))
def _candidates(distinct: int, max_lanes: int) -> list[int]:
    """Lane counts to try: 1, 2, 4, ... up to ``max_lanes`` and no more than the distinct signatures."""
    top = max(1, min(max_lanes, distinct))
    out, n = [], 1
    while n < top:
        out.append(n)
        n *= 2
    out.append(top)
    return out
