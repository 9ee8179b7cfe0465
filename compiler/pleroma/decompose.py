"""Subscriptions as dz-expressions: the fewest cells of the event space that cover a filter.

A filter is first put in disjunctive form over fields (``not`` pushed onto the comparisons, which
become interval complements), each term a box: per dimension, a union of coordinate intervals.
A box is then cut the way the index cuts Ω (:mod:`.dz`): a cell inside the box is emitted whole, a
cell outside is dropped, and a cell that straddles the box's edge is halved along the next
dimension of the layout, down to the resolution, where a straddling cell is emitted whole
(S1's approximation: a false positive, never a false negative). The emitted cells are the maximal
aligned cells of the box, which no other set of disjoint dz's covers with fewer; the union over the
terms is then normalised (covered dz's dropped, sibling pairs joined).

A subscription may be given at most ``max_dz`` dz's (flows are what a switch stores): the cut goes
breadth first and stops one level before the straddling cells would exceed that, so the subscription
gets the finest resolution that fits (a coarser, wider cover; never a narrower one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from compiler import rules as ast
from compiler.base import P4subError
from compiler.intervals import Interval, comparison_intervals, complement, intersection, union
from compiler.pleroma.dz import EventSpace
from compiler.spec import QueryField

Term = dict[str, list[Interval]]  # field -> allowed values (a field absent: any value)
#: Terms a filter may expand to before the decomposition gives up on it (its fields' whole space).
MAX_TERMS = 4096


@dataclass(frozen=True)
class Decomposition:
    """A subscription's dz's at a resolution; ``exact``: they cover exactly the filter's events."""

    dzs: tuple[str, ...]
    resolution: int
    exact: bool


def terms(f: ast.Filter, fields: Mapping[str, QueryField], negate: bool = False) -> list[Term]:
    """``f`` (or its negation) as a union of boxes over field values."""
    if isinstance(f, ast.Const):
        return [{}] if f.value != negate else []
    if isinstance(f, ast.Comparison):
        info = fields[f.attribute.name]
        allowed = comparison_intervals(f, info)
        if negate:
            allowed = complement(allowed, (1 << info.width) - 1)
        return [{f.attribute.name: allowed}] if allowed else []
    if isinstance(f, ast.Not):
        return terms(f.item, fields, not negate)
    conjunction = isinstance(f, ast.And) != negate
    parts = [terms(i, fields, negate) for i in f.items]
    if not conjunction:
        return [t for p in parts for t in p]
    out: list[Term] = [{}]
    for p in parts:
        out = [m for a in out for b in p if (m := _meet(a, b)) is not None]
        if len(out) > MAX_TERMS:
            raise P4subError(f"a filter expands to more than {MAX_TERMS} boxes; PLEROMA cannot index it")
    return out


def _meet(a: Term, b: Term) -> Term | None:
    out = dict(a)
    for name, allowed in b.items():
        out[name] = intersection(out[name], allowed) if name in out else allowed
        if not out[name]:
            return None
    return out


def decompose(space: EventSpace, f: ast.Filter, fields: Mapping[str, QueryField], resolution: int,
              max_dz: int | None = None) -> Decomposition:
    """The dz's of filter ``f`` at ``resolution`` bits (at most ``max_dz`` of them, coarser if need be)."""
    resolution = min(resolution, space.max_length)
    boxes = []
    exact = True
    for term in terms(f, fields):
        box = []
        for d in space.dimensions:
            top = (1 << fields[d.field].width) - 1
            allowed = term.get(d.field, [(0, top)])
            exact &= all(d.exact_for(i, top) for i in allowed)
            last = (1 << d.bits) - 1  # cells past the last cut hold no value: free to cover
            box.append(union([[(a, last if b == d.cells - 1 else b) for a, b in map(d.coordinates, allowed)]]))
        exact &= set(term) <= {d.field for d in space.dimensions}
        boxes.append(box)
    emitted: set[str] = set()
    truncated = False
    # Breadth first, one bit per level: straddling cells go on to the next level, and when the next
    # level would give the subscription more than max_dz dz's, the straddling cells stay as they
    # are (the decomposition at that coarser resolution).
    frontier = [(box, "", [(0, (1 << d.bits) - 1) for d in space.dimensions]) for box in boxes]
    depth = 0
    while frontier:
        straddling = []
        for box, prefix, cell in frontier:
            state = _relation(box, cell)
            if state == "inside":
                emitted.add(prefix)
            elif state == "partial":
                straddling.append((box, prefix, cell))
        if not straddling:
            break
        if depth >= resolution or (max_dz is not None and len(emitted) + 2 * len(straddling) > max_dz):
            emitted.update(prefix for _, prefix, _ in straddling)
            truncated = True
            break
        d, _ = space.layout[depth]
        frontier = []
        for box, prefix, cell in straddling:
            lo, hi = cell[d]
            mid = (lo + hi + 1) // 2
            for bit, half in (("0", (lo, mid - 1)), ("1", (mid, hi))):
                sub = list(cell)
                sub[d] = half
                frontier.append((box, prefix + bit, sub))
        depth += 1
    dzs = minimise(emitted)
    return Decomposition(tuple(dzs), depth if truncated else resolution, exact and not truncated)


def _relation(box: list[list[Interval]], cell: list[Interval]) -> str:
    """``inside``, ``partial`` or ``outside``: where the cell lies against the box."""
    inside = True
    for allowed, (lo, hi) in zip(box, cell):
        hit = False
        for a, b in allowed:
            if a <= hi and b >= lo:
                hit = True
                if not (a <= lo and hi <= b):
                    inside = False
        if not hit:
            return "outside"
    return "inside" if inside else "partial"


def minimise(dzs: set[str] | list[str]) -> list[str]:
    """Drop dz's another one covers, join sibling pairs (``x0``, ``x1`` -> ``x``) until none is left."""
    kept: list[str] = []
    for dz in sorted(set(dzs)):
        if kept and dz.startswith(kept[-1]):
            continue
        kept.append(dz)
    changed = True
    while changed:
        changed = False
        present = set(kept)
        for dz in kept:
            if dz and dz[-1] == "0" and dz[:-1] + "1" in present:
                present -= {dz, dz[:-1] + "1"}
                present.add(dz[:-1])
                changed = True
        if changed:
            kept = []
            for dz in sorted(present):
                if kept and dz.startswith(kept[-1]):
                    continue
                kept.append(dz)
    return kept
