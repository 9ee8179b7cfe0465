"""The values a rule's comparison holds for, and sets of them, as sorted closed integer intervals.

The rules' semantics read from the operator and the constant as :mod:`compiler.oracle` reads them,
sharing nothing with :mod:`compiler.predicates` (the compiler's own reading): :mod:`compiler.verify`
proves pipelines against it, and PLEROMA's decomposition (:mod:`compiler.pleroma.decompose`) and the
replay's extra-delivery count (:mod:`runtime.extra_deliveries`) use the same reading.
"""

from __future__ import annotations

from typing import Iterable

from compiler import rules as ast
from compiler.rules import encode_string, scale_decimal
from compiler.spec import QueryField

Interval = tuple[int, int]  # closed


def comparison_intervals(cmp: ast.Comparison, info: QueryField) -> list[Interval]:
    """The field values for which ``cmp`` holds, as disjoint closed intervals."""
    top = (1 << info.width) - 1
    const = cmp.value
    if isinstance(const, ast.String):
        if cmp.op == "prefix":
            raw = const.value.encode("ascii")
            rest = info.width - 8 * len(raw)
            if rest < 0:
                return []
            lo = int.from_bytes(raw, "big") << rest
            return [(lo, lo + (1 << rest) - 1)]
        c = encode_string(const.value, info.width)
        return [(c, c)] if cmp.op == "==" else complement([(c, c)], top)
    if isinstance(const, ast.IPAddress) and const.prefix_len < const.width:
        rest = const.width - const.prefix_len
        lo = const.value >> rest << rest
        inside = [(lo, lo + (1 << rest) - 1)]
        return inside if cmp.op == "==" else complement(inside, top)
    if isinstance(const, ast.Number):
        c = scale_decimal(const.value, info.scale) if info.scale else int(const.value)
    else:
        c = const.value
    return clip({
        "==": [(c, c)], "!=": [(0, c - 1), (c + 1, top)], "<": [(0, c - 1)], "<=": [(0, c)],
        ">": [(c + 1, top)], ">=": [(c, top)],
    }[cmp.op], top)


def clip(intervals: list[Interval], top: int) -> list[Interval]:
    return [(max(lo, 0), min(hi, top)) for lo, hi in intervals if max(lo, 0) <= min(hi, top)]


def union(groups: Iterable[list[Interval]]) -> list[Interval]:
    """The union of sets of closed integer intervals, sorted, touching ones merged."""
    out: list[Interval] = []
    for lo, hi in sorted(r for g in groups for r in g):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def complement(intervals: list[Interval], top: int) -> list[Interval]:
    out, at = [], 0
    for lo, hi in sorted(intervals):
        if lo > at:
            out.append((at, lo - 1))
        at = max(at, hi + 1)
    if at <= top:
        out.append((at, top))
    return out


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The values in both ``a`` and ``b`` (sorted, touching ones merged)."""
    return union([[(max(lo1, lo2), min(hi1, hi2)) for lo1, hi1 in a for lo2, hi2 in b if max(lo1, lo2) <= min(hi1, hi2)]])
