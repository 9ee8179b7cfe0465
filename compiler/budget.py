"""When no exact compile fits the budget: widen rules, fewest extra deliveries first, never a missed one.

A rule's DNF cubes are conjunctions of constraints. Dropping a constraint from a cube matches a
superset of the cube's packets, so the packet still reaches every subscriber it should (PLEROMA's
and Balogh's approximations widen filters the same way; here the unit is a constraint, because a
constraint that nobody else shares is what multiplies a lane's nodes).

Which constraints go first is decided by their *selectivity*, the share of packets that satisfy
them: on a sample of the traffic when one is given (``--trace``), else under uniform traffic over
each field's domain. Dropping constraint ``c`` of a cube whose other constraints hold for a share
``p`` of packets adds about ``p * (1 - sel(c))`` deliveries per packet, so a cube keeps its most
selective constraints. The steps, each compiled and kept as soon as it fits:

1. drop the constraints that almost every packet satisfies (``sel >= 0.99``: ``x != 5``), nearly free;
2. keep at most ``k`` constraints per cube, for ``k`` from the largest cube's size down to 0 (at 0
   every subscriber gets every packet it could: the last resort, which always fits).

The compiler reports the step taken and how many constraints it dropped; the runtime measures the
extra deliveries on a trace (:mod:`runtime.extra_deliveries`).
"""

from __future__ import annotations

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

    step: str  # "exact", "free" or "keep-K"
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


def widenings(cubes_of: Sequence[Cubes], sel: Selectivity) -> Iterator[tuple[Widening, list[Cubes]]]:
    """The approximation steps in order, each with the rules' cubes widened (never narrowed)."""
    largest = max((len(cube) for cubes in cubes_of for cube, _ in cubes), default=0)
    free = [[(tuple((n, s) for n, s in cube if sel(n, s) < FREE), a) for cube, a in cubes] for cubes in cubes_of]
    yield _step("free", None, cubes_of, free)
    for k in range(largest - 1, -1, -1):
        kept = [[(_keep(cube, k, sel), a) for cube, a in cubes] for cubes in free]
        yield _step(f"keep-{k}", k, cubes_of, kept)


def _keep(cube: Cube, k: int, sel: Selectivity) -> Cube:
    """The ``k`` most selective constraints of a cube (in the cube's order: sorted by attribute)."""
    if len(cube) <= k:
        return cube
    ranked = sorted(range(len(cube)), key=lambda i: (sel(*cube[i]), i))[:k]
    return tuple(cube[i] for i in sorted(ranked))


def _step(name: str, k: int | None, before: Sequence[Cubes], after: list[Cubes]) -> tuple[Widening, list[Cubes]]:
    dropped = widened = 0
    for old, new in zip(before, after):
        d = sum(len(a) - len(b) for (a, _), (b, _) in zip(old, new))
        dropped += d
        widened += d > 0
    return Widening(name, k, dropped, widened), after
