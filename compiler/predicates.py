"""Atomic predicates in canonical form: a set of disjoint integer intervals per field.

Every constraint - numbers, strings (as left-aligned integers), IP prefixes, MACs, negations -
becomes an :class:`IntervalSet` over the field's domain ``[0, 2**width - 1]``. Implication is
subset, disjointness is an empty intersection, negation is the complement: all exact, including
nested prefixes (10.1.0.0/16 lies inside 10.0.0.0/8) and negated prefixes. This is what makes the
original Camus compiler's faults (``max`` returning the minimum, bounds compared as strings,
overlapping prefixes treated as disjoint) impossible by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from compiler import rules as ast
from compiler.rules import constant_value, string_prefix_range
from compiler.spec import QueryField


@dataclass(frozen=True)
class IntervalSet:
    """Sorted, disjoint, non-adjacent closed intervals ``(lo, hi)`` within ``[0, top]``."""

    intervals: tuple[tuple[int, int], ...]
    top: int

    def __hash__(self) -> int:  # cached: interval sets key the diagram builder's tables
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.intervals, self.top))
            object.__setattr__(self, "_hash", h)
        return h

    @classmethod
    def of(cls, lo: int, hi: int, top: int) -> "IntervalSet":
        lo, hi = max(lo, 0), min(hi, top)
        return cls(((lo, hi),) if lo <= hi else (), top)

    @classmethod
    def full(cls, top: int) -> "IntervalSet":
        return cls(((0, top),), top)

    @classmethod
    def empty(cls, top: int) -> "IntervalSet":
        return cls((), top)

    @classmethod
    def union_of(cls, intervals: Iterable[tuple[int, int]], top: int) -> "IntervalSet":
        out: list[list[int]] = []
        for lo, hi in sorted(intervals):
            if lo > hi:
                continue
            if out and lo <= out[-1][1] + 1:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        return cls(tuple((a, b) for a, b in out), top)

    @property
    def is_empty(self) -> bool:
        return not self.intervals

    @property
    def is_full(self) -> bool:
        return self.intervals == ((0, self.top),)

    def complement(self) -> "IntervalSet":
        out, nxt = [], 0
        for lo, hi in self.intervals:
            if lo > nxt:
                out.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= self.top:
            out.append((nxt, self.top))
        return IntervalSet(tuple(out), self.top)

    def intersect(self, other: "IntervalSet") -> "IntervalSet":
        a, b, i, j, out = self.intervals, other.intervals, 0, 0, []
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return IntervalSet(tuple(out), self.top)

    def union(self, other: "IntervalSet") -> "IntervalSet":
        return IntervalSet.union_of(self.intervals + other.intervals, self.top)

    def implies(self, other: "IntervalSet") -> bool:
        """Every value in self is in other."""
        return self.intersect(other) == self

    def disjoint(self, other: "IntervalSet") -> bool:
        return self.intersect(other).is_empty

    def __contains__(self, value: int) -> bool:
        return any(lo <= value <= hi for lo, hi in self.intervals)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.intervals)


def atom(cmp: ast.Comparison, info: QueryField) -> IntervalSet:
    """The set of field values for which ``cmp`` holds (the comparison must have passed type checking)."""
    value = cmp.value
    key = (info.name, info.width, info.scale, cmp.op, type(value), getattr(value, "value", None),
           getattr(value, "prefix_len", None))
    found = _ATOMS.get(key)
    if found is None:
        found = _ATOMS[key] = _atom(cmp, info)
        if len(_ATOMS) > 1 << 18:
            _ATOMS.clear()
    return found


_ATOMS: dict[tuple, IntervalSet] = {}


def _atom(cmp: ast.Comparison, info: QueryField) -> IntervalSet:
    top = (1 << info.width) - 1
    value, op = cmp.value, cmp.op
    if isinstance(value, ast.String) and op == "prefix":
        lo, hi = string_prefix_range(value.value, info.width)
        return IntervalSet.of(lo, hi, top)
    if isinstance(value, ast.IPAddress) and value.prefix_len < value.width:
        size = 1 << (value.width - value.prefix_len)
        block = IntervalSet.of(value.value, value.value + size - 1, top)
        return block if op == "==" else block.complement()
    v = constant_value(value, info)
    if op == "==":
        return IntervalSet.of(v, v, top)
    if op == "!=":
        return IntervalSet.of(v, v, top).complement()
    if op == "<":
        return IntervalSet.of(0, v - 1, top)
    if op == "<=":
        return IntervalSet.of(0, v, top)
    if op == ">":
        return IntervalSet.of(v + 1, top, top)
    if op == ">=":
        return IntervalSet.of(v, top, top)
    raise AssertionError(f"unchecked operator {op!r}")


def prefix_cover(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """Minimal set of aligned prefixes ``(value, prefix_len)`` whose union is exactly ``[lo, hi]``.

    At most ``2 * width - 2`` prefixes; used to turn ranges into ternary (value, mask) entries.
    """
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, width - size.bit_length() + 1))
        lo += size
    return out


def is_prefix_block(lo: int, hi: int, width: int) -> int | None:
    """The prefix length if ``[lo, hi]`` is exactly one aligned prefix block, else None."""
    size = hi - lo + 1
    if size & (size - 1) or lo & (size - 1):
        return None
    return width - size.bit_length() + 1
