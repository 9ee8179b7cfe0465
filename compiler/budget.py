"""When no exact compile fits the budget: widen rules, fewest extra deliveries first, never a missed one.

A rule's DNF cubes are conjunctions of constraints. Dropping a constraint from a cube matches a
superset of the cube's packets, so the packet still reaches every subscriber it should (PLEROMA's
and Balogh's approximations widen filters the same way; here the unit is a constraint, because a
constraint that nobody else shares is what multiplies a lane's nodes).

Which constraints go first is decided by what the drop costs in extra deliveries. Without a
sample of the traffic, by *selectivity*, the share of packets that satisfy a constraint under
uniform traffic over each field's domain: dropping constraint ``c`` of a cube whose other
constraints hold for a share ``p`` of packets adds about ``p * (1 - sel(c))`` deliveries per
packet, so a cube keeps its most selective constraints. With a sample (``--trace``), by *coverage*
(:class:`Coverage`): the sample packets the widened cube matches that the rules do not already send
to the same port (or call), since a subscriber's other filters often cover most of what widening
one of them adds. On Siena 10k filters x 4 constraints (200 hosts, 50 filters each) all drops but
the last 600 cost 0.65 % extra deliveries in this order, against 3.1 % by selectivity (measured on
the sample the order was chosen on; 0.47 % against 2.9 % on another trace).

A drop is also worth what it removes from the diagram. The rules that keep several constraints
to the end are wide ones (``a < 600 and b > 300``), and in a lane by hub each multiplies the nodes
over the hub's intervals by its other constraints: a cube of three wide constraints costs far more
than one of two. So with a sample a drop from a cube of ``k`` constraints is ranked by its extra
deliveries divided by ``SHRINK ** (k - 2)`` (16): cubes of three or more go before cubes of two.
On Siena 10k x 5 the step that fits then keeps 757 cubes of two or more constraints (61 of three
or more) where, unweighted, no step after the keep-one one fitted. The steps, in order (the compile
bisects them for the least one that fits):

1. drop the constraints that almost every packet satisfies (``sel >= 0.99``: ``x != 5``), nearly free;
2. drop constraints one at a time, the cheapest drop over all cubes first (each cube drops the
   constraint whose drop costs least; its next drop then costs more), in 64 steps from the first
   drop to the last one that leaves every cube a single constraint;
3. last resort, which always fits: no constraint at all (each subscriber gets every packet).

The drops that cost most are made last, and they are the ones that keep wide rules (``a < 600 and
b > 300``) of several constraints: the lanes then put the rules cut to one attribute apart from
those (:func:`compiler.lanes.spread`, the flat lane), so that a late step fits.

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

    step: str  # "free", "drop-K/64" (the cheapest K/64 of all the drops), "keep-0"
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


#: With a sample, a drop from a cube of ``k`` constraints counts its extra deliveries divided by
#: SHRINK ** (k - 2): a cube of three wide constraints multiplies the diagram far more than one of two.
SHRINK = 16.0
STEPS = 64  # the drops are cut into this many steps (the compile bisects over them)


def widenings(cubes_of: Sequence[Cubes], sel: Selectivity,
              coverage: "Coverage | None" = None) -> Iterator[tuple[Widening, list[Cubes]]]:
    """The approximation steps in order, each with the rules' cubes widened (never narrowed).

    With ``coverage`` (a sample of the traffic) a drop costs the sample packets it adds beyond the
    rules' own deliveries for the cube's actions (ties by selectivity), else its selectivity cost.
    """
    current = [[(tuple((n, s) for n, s in cube if sel(n, s) < FREE), a) for cube, a in cubes] for cubes in cubes_of]
    yield _step("free", None, cubes_of, [list(c) for c in current])  # copies: later steps change ``current``
    # Every further drop, cheapest first over all cubes: a cube may lose several constraints before
    # another loses one, when that costs less (the cost of a cube's next drop grows as it loses some).
    extra_now: dict[tuple[int, int], int] = {}

    def next_drop(r: int, c: int, cube: Cube, actions: tuple) -> tuple:
        """(cost, r, c, index of the constraint to drop) of the cube's cheapest drop."""
        if coverage is None:
            i = max(range(len(cube)), key=lambda j: (sel(*cube[j]), j))  # the least selective goes
            return (_drop_cost(cube, sel), 0.0, r, c, i, 0)
        if (r, c) not in extra_now:
            extra_now[(r, c)] = coverage.extra(cube, actions)
        counts = coverage.drop_extras(cube, actions)
        i = min(range(len(cube)), key=lambda j: (counts[j], _drop_cost_of(cube, j, sel), j))
        added = counts[i] - extra_now[(r, c)]
        return (added / SHRINK ** (len(cube) - 2), _drop_cost_of(cube, i, sel), r, c, i, added)

    heap = [next_drop(r, c, cube, a) for r, cubes in enumerate(current) for c, (cube, a) in enumerate(cubes)
            if len(cube) > 1]
    heapq.heapify(heap)
    total = sum(len(cube) - 1 for cubes in current for cube, _ in cubes if cube)
    done = 0
    for k in range(1, STEPS + 1):
        target = total * k // STEPS
        while done < target and heap:
            entry = heapq.heappop(heap)
            r, c, i = entry[2:5]
            cube, actions = current[r][c]
            smaller = cube[:i] + cube[i + 1:]
            current[r] = current[r][:c] + [(smaller, actions)] + current[r][c + 1:]
            done += 1
            if coverage is not None:
                extra_now[(r, c)] += entry[5]
            if len(smaller) > 1:
                heapq.heappush(heap, next_drop(r, c, smaller, actions))
        yield _step(f"drop-{k}/{STEPS}", None, cubes_of, [list(c) for c in current])
    yield _step("keep-0", 0, cubes_of, [[((), a) for _, a in cubes] for cubes in current])


def _drop_cost(cube: Cube, sel: Selectivity) -> float:
    """Extra deliveries per packet from dropping the cube's least selective constraint: the share of
    packets that satisfy the others and not it (constraints taken as independent)."""
    sels = sorted(sel(n, s) for n, s in cube)
    rest = 1.0
    for x in sels[:-1]:
        rest *= x
    return rest * (1.0 - sels[-1])


def _drop_cost_of(cube: Cube, i: int, sel: Selectivity) -> float:
    """Extra deliveries per packet from dropping constraint ``i`` of a cube (constraints independent)."""
    rest = 1.0
    for j, (n, s) in enumerate(cube):
        if j != i:
            rest *= sel(n, s)
    return rest * (1.0 - sel(*cube[i]))


#: At most this many sample rows are read for the coverage costs (evenly spaced over the sample).
COVERAGE_ROWS = 20_000


class Coverage:
    """Extra deliveries of a widened cube, counted on a sample of packets against the rules' own.

    ``wanted[a]`` marks the sample packets the rules (unwidened) give action ``a`` (a port, a call):
    a widened cube with action ``a`` costs only the packets it matches outside that, since the
    subscriber's other filters already bring it the rest. Fields the sample lacks, or holds wider
    than 64 bits, are taken as satisfied (the cube is counted as wider: a dearer drop, never a
    cheaper one). Constraint masks are computed as needed, not kept, so that memory stays one
    boolean row per action.
    """

    def __init__(self, cubes_of: Sequence[Cubes], sample: Mapping[str, np.ndarray],
                 rows: int = COVERAGE_ROWS) -> None:
        lengths = {len(v) for v in sample.values()}
        n = min(lengths) if lengths else 0
        pick = np.unique(np.linspace(0, n - 1, min(n, rows)).astype(np.int64)) if n else np.zeros(0, np.int64)
        self.rows = len(pick)
        self.columns: dict[str, np.ndarray] = {}
        for name, values in sample.items():
            array = np.asarray(values)
            if array.dtype != object and len(array) >= n:
                self.columns[name] = array[pick].astype(np.uint64)
        self.wanted: dict[tuple, np.ndarray] = {}
        for cubes in cubes_of:
            for cube, actions in cubes:
                m = self.mask(cube)
                for a in actions:
                    w = self.wanted.get(a)
                    self.wanted[a] = m.copy() if w is None else (w | m)

    def _constraint(self, name: str, s: IntervalSet) -> np.ndarray | None:
        column = self.columns.get(name)
        if column is None:
            return None
        held = np.zeros(self.rows, dtype=bool)
        for lo, hi in s.intervals:
            if lo > 0xFFFF_FFFF_FFFF_FFFF:
                continue
            held |= (column >= np.uint64(lo)) & (column <= np.uint64(min(hi, 0xFFFF_FFFF_FFFF_FFFF)))
        return held

    def mask(self, cube: Cube) -> np.ndarray:
        """The sample packets ``cube`` matches."""
        out = np.ones(self.rows, dtype=bool)
        for name, s in cube:
            held = self._constraint(name, s)
            if held is not None:
                out &= held
        return out

    def _count(self, m: np.ndarray, actions: tuple) -> int:
        return sum(int(np.count_nonzero(m & ~self.wanted[a])) if a in self.wanted else int(np.count_nonzero(m))
                   for a in actions)

    def extra(self, cube: Cube, actions: tuple) -> int:
        """Sample deliveries ``cube`` makes for ``actions`` that the rules do not."""
        return self._count(self.mask(cube), actions)

    def drop_extras(self, cube: Cube, actions: tuple) -> list[int]:
        """For each constraint of ``cube``, :meth:`extra` of the cube without it."""
        held = [self._constraint(n, s) for n, s in cube]
        ones = np.ones(self.rows, dtype=bool)
        prefix = [ones]
        for h in held:
            prefix.append(prefix[-1] if h is None else prefix[-1] & h)
        out = [0] * len(cube)
        suffix = ones
        for i in range(len(cube) - 1, -1, -1):
            out[i] = self._count(prefix[i] & suffix, actions)
            if held[i] is not None:
                suffix = suffix & held[i]
        return out


def _step(name: str, k: int | None, before: Sequence[Cubes], after: list[Cubes]) -> tuple[Widening, list[Cubes]]:
    dropped = widened = 0
    for old, new in zip(before, after):
        d = sum(len(a) - len(b) for (a, _), (b, _) in zip(old, new))
        dropped += d
        widened += d > 0
    return Widening(name, k, dropped, widened), after
