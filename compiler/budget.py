"""When no exact compile fits the budget: widen rules, fewest extra deliveries first, never a missed one.

A rule's DNF cubes are conjunctions of constraints. Dropping a constraint from a cube matches a
superset of the cube's packets, so the packet still reaches every subscriber it should (PLEROMA's
and Balogh's approximations widen filters the same way; here the unit is a constraint, because a
constraint that nobody else shares is what multiplies a lane's nodes).

Which constraints go first is decided by their *selectivity*, the share of packets that satisfy
them: on a sample of the traffic when one is given (``--trace``), else under uniform traffic over
each field's domain. Dropping constraint ``c`` of a cube whose other constraints hold for a share
``p`` of packets adds about ``p * (1 - sel(c))`` deliveries per packet, so a cube keeps its most
selective constraints. The steps, in order (the compile bisects them for the least one that fits):

1. drop the constraints that almost every packet satisfies (``sel >= 0.99``: ``x != 5``), nearly free;
2. drop constraints one at a time, the cheapest drop over all cubes first (each cube drops its least
   selective constraint; its next drop then costs more), in 32 steps from the first drop to the last
   one that leaves every cube a single constraint;
3. last resort, which always fits: no constraint at all (each subscriber gets every packet).

The compiler reports the step taken and how many constraints it dropped; the runtime measures the
extra deliveries on a trace (:mod:`runtime.extra_deliveries`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import numpy as np

from compiler.dnf import Cube
from compiler.predicates import IntervalSet
from compiler.spec import QueryField

FREE = 0.99
Cubes = list[tuple[Cube, tuple]]


@dataclass(frozen=True)
class Widening:
    """One approximation step: what it keeps, and what it cost in constraints."""

    step: str  # "free", "drop-K/32" (the cheapest K/32 of all the drops), "keep-0"
    max_constraints: int | None
    dropped: int
    widened_rules: int

    def to_json(self) -> dict:
        return {"step": self.step, "max_constraints": self.max_constraints, "dropped_constraints": self.dropped,
                "widened_rules": self.widened_rules}


class Selectivity:
    """The share of packets a constraint holds for: counted in a sample, or the share of the domain."""

    def __init__(self, fields: Mapping[str, QueryField], sample: Mapping[str, np.ndarray] | None = None) -> None:
        self.fields = fields
        self.sorted = {f: np.sort(np.asarray(v, dtype=object if fields[f].width > 64 else np.uint64))
                       for f, v in (sample or {}).items() if f in fields and len(v)}
        self.memo: dict[tuple[str, IntervalSet], float] = {}

    def __call__(self, name: str, s: IntervalSet) -> float:
        key = (name, s)
        found = self.memo.get(key)
        if found is None:
            column = self.sorted.get(name)
            if column is None:
                found = sum(hi - lo + 1 for lo, hi in s.intervals) / (s.top + 1)
            else:
                found = sum(int(np.searchsorted(column, hi, side="right") - np.searchsorted(column, lo, side="left"))
                            for lo, hi in s.intervals) / len(column)
            self.memo[key] = found
        return found


STEPS = 32  # the drops are cut into this many steps (the compile bisects over them)


def widenings(cubes_of: Sequence[Cubes], sel: Selectivity) -> Iterator[tuple[Widening, list[Cubes]]]:
    """The approximation steps in order, each with the rules' cubes widened (never narrowed)."""
    current = [[(tuple((n, s) for n, s in cube if sel(n, s) < FREE), a) for cube, a in cubes] for cubes in cubes_of]
    yield _step("free", None, cubes_of, [list(c) for c in current])  # copies: later steps change ``current``
    # Every further drop, cheapest first over all cubes: a cube may lose several constraints before
    # another loses one, when that costs less (the cost of a cube's next drop grows as it loses some).
    heap = [(_drop_cost(cube, sel), r, c) for r, cubes in enumerate(current) for c, (cube, _) in enumerate(cubes)
            if len(cube) > 1]
    heapq.heapify(heap)
    total = sum(len(cube) - 1 for cubes in current for cube, _ in cubes if cube)
    done = 0
    for k in range(1, STEPS + 1):
        target = total * k // STEPS
        while done < target and heap:
            _, r, c = heapq.heappop(heap)
            cube, actions = current[r][c]
            smaller = _keep(cube, len(cube) - 1, sel)
            current[r] = current[r][:c] + [(smaller, actions)] + current[r][c + 1:]
            done += 1
            if len(smaller) > 1:
                heapq.heappush(heap, (_drop_cost(smaller, sel), r, c))
        yield _step(f"drop-{k}/{STEPS}", None, cubes_of, [list(c) for c in current])
    yield _step("keep-0", 0, cubes_of, [[((), a) for _, a in cubes] for cubes in current])


def _keep(cube: Cube, k: int, sel: Selectivity) -> Cube:
    """The ``k`` most selective constraints of a cube (in the cube's order: sorted by attribute)."""
    if len(cube) <= k:
        return cube
    ranked = sorted(range(len(cube)), key=lambda i: (sel(*cube[i]), i))[:k]
    return tuple(cube[i] for i in sorted(ranked))


def _drop_cost(cube: Cube, sel: Selectivity) -> float:
    """Extra deliveries per packet from dropping the cube's least selective constraint: the share of
    packets that satisfy the others and not it (constraints taken as independent)."""
    sels = sorted(sel(n, s) for n, s in cube)
    rest = 1.0
    for x in sels[:-1]:
        rest *= x
    return rest * (1.0 - sels[-1])


def _step(name: str, k: int | None, before: Sequence[Cubes], after: list[Cubes]) -> tuple[Widening, list[Cubes]]:
    dropped = widened = 0
    for old, new in zip(before, after):
        d = sum(len(a) - len(b) for (a, _), (b, _) in zip(old, new))
        dropped += d
        widened += d > 0
    return Widening(name, k, dropped, widened), after
