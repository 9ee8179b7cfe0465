"""PLEROMA's event space: attributes from the spec's queried fields, spatial indexing, dz-expressions.

PLEROMA (Bhowmik et al., ToN 2016, §III-A) sees an event as a point of the space Ω spanned by its
attributes and indexes Ω by halving it along one dimension after another, round robin: bit ``i``
of a dz-expression ("dz") says in which half of the current cell along dimension ``i mod D`` the
point lies (1 = upper half). A dz is a cell; a shorter dz is a larger cell and covers every dz it
is a prefix of. Here a dz is a string of ``'0'``/``'1'`` on the control plane and, for events, an
integer of ``resolution`` bits (vectorised over a trace).

Attribute domains. A field's values reach its dimension through a monotone step function,
``coordinate(v) = number of cuts <= v`` over sorted cut points, so that an interval of values is
always an interval of coordinates (an approximation can only widen a subscription, never drop an
event it wants):

* ``value`` indexing (PLEROMA's own): ``2**bits`` equal cells over the field's domain, here the
  span of the constants the subscriptions use on it, one value beyond at each end (every value
  below the smallest constant behaves like it, and so above the largest); a string field is its
  encoded integer (``compiler.rules.values.encode_string``), as S1's "linearized" strings;
* ``rank`` indexing (workload-aware, S1 ref. [3]): one cell per elementary interval between the
  subscriptions' boundaries, so each cell is a set of values no subscription tells apart and a
  decomposition at full resolution is exact.

The publisher computes an event's dz (:meth:`EventSpace.event_dz`) and writes it into the IPv6
destination address (:func:`ipv6_address`); switches only match prefixes (docs/pleroma.md says why).
"""

from __future__ import annotations

import bisect
import ipaddress
import math
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np

from compiler import rules as ast
from compiler.base import P4subError
from compiler.intervals import Interval, comparison_intervals
from compiler.spec import QueryField

Indexing = Literal["value", "rank"]
INDEXINGS = ("value", "rank")
#: Most bits one dimension gets (value indexing); events' dz must fit 64 bits (numpy uint64).
MAX_DIMENSION_BITS = 16
MAX_RESOLUTION = 64
#: ff0e::/16: IPv6 multicast, flags 0, global scope (S1 §III-B: events and filters as ff0e:<dz>::).
IPV6_PREFIX = 0xFF0E << 112
IPV6_DZ_BITS = 112



@dataclass(frozen=True)
class Dimension:
    """One attribute of Ω: ``coordinate(v) = bisect_right(cuts, v)``, ``bits`` bits of index."""

    field: str
    cuts: tuple[int, ...]
    bits: int

    @property
    def cells(self) -> int:
        return len(self.cuts) + 1

    def coordinate(self, values: np.ndarray) -> np.ndarray:
        """Coordinates of a column of field values (any integer dtype; 64-bit values stay exact)."""
        cuts = np.array(self.cuts, dtype=np.uint64)
        return np.searchsorted(cuts, np.asarray(values, dtype=np.uint64), side="right").astype(np.uint64)

    def coordinate_of(self, value: int) -> int:
        return bisect.bisect_right(self.cuts, value)

    def coordinates(self, interval: Interval) -> Interval:
        lo, hi = interval
        return self.coordinate_of(lo), self.coordinate_of(hi)

    def exact_for(self, interval: Interval, top: int) -> bool:
        """True when the cells of ``interval`` hold no value outside it (its ends are cell ends)."""
        lo, hi = interval
        a, b = self.coordinates(interval)
        first = self.cuts[a - 1] if a else 0
        last = self.cuts[b] - 1 if b < len(self.cuts) else top
        return first == lo and last == hi


@dataclass(frozen=True)
class EventSpace:
    """The dimensions in interleaving order and the positions of a full-length dz.

    ``layout[i] = (d, k)``: bit ``i`` of a dz is bit ``k`` (from the most significant) of dimension
    ``d``'s coordinate; dimensions take turns while they have bits left.
    """

    dimensions: tuple[Dimension, ...]
    layout: tuple[tuple[int, int], ...]
    indexing: str
    widths: tuple[int, ...]  # field widths, for the domain ends

    @property
    def max_length(self) -> int:
        return len(self.layout)

    def event_dz(self, columns: Mapping[str, np.ndarray], resolution: int) -> np.ndarray:
        """Each event's dz as a ``resolution``-bit integer (uint64), the first dz bit the highest."""
        resolution = min(resolution, self.max_length)
        n = len(next(iter(columns.values()))) if columns else 0
        coords = [d.coordinate(columns[d.field]) if d.field in columns else np.zeros(n, dtype=np.uint64)
                  for d in self.dimensions]
        out = np.zeros(n, dtype=np.uint64)
        for i in range(resolution):
            d, k = self.layout[i]
            bit = (coords[d] >> np.uint64(self.dimensions[d].bits - 1 - k)) & np.uint64(1)
            out |= bit << np.uint64(resolution - 1 - i)
        return out

    def dz_of(self, values: Mapping[str, int], resolution: int) -> str:
        """One event's dz as a string (the control plane's spelling)."""
        resolution = min(resolution, self.max_length)
        coords = [d.coordinate_of(values[d.field]) for d in self.dimensions]
        return "".join(str(coords[d] >> (self.dimensions[d].bits - 1 - k) & 1) for d, k in self.layout[:resolution])


def interleave(bits: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Round-robin positions over dimensions with ``bits[d]`` bits each (S2 Fig. 5.1's Z-order)."""
    layout, taken = [], [0] * len(bits)
    while len(layout) < sum(bits):
        for d, b in enumerate(bits):
            if taken[d] < b:
                layout.append((d, taken[d]))
                taken[d] += 1
    return tuple(layout)


def event_space(fields: Mapping[str, QueryField], filters: Iterable[ast.Filter], indexing: Indexing = "value",
                dimension_bits: int = MAX_DIMENSION_BITS, order: Sequence[str] | None = None) -> EventSpace:
    """The event space of a set of subscriptions: one dimension per field they test.

    Dimensions come in ``order`` if given, else most-tested field first (PLEROMA indexes the
    dimensions that tell events apart first; S1 §III-C selects them by variance on a trace, which
    needs traffic this function does not have). ``dimension_bits`` caps value indexing's cells.
    """
    if indexing not in INDEXINGS:
        raise P4subError(f"unknown indexing {indexing!r}; expected {' or '.join(INDEXINGS)}")
    if not 1 <= dimension_bits <= MAX_DIMENSION_BITS:
        raise P4subError(f"dimension bits must be 1..{MAX_DIMENSION_BITS}")
    bounds: dict[str, set[int]] = {}
    uses: dict[str, int] = {}
    for f in filters:
        for cmp in ast.comparisons(f):
            name = cmp.attribute.name
            if name not in fields:
                continue
            uses[name] = uses.get(name, 0) + 1
            for lo, hi in comparison_intervals(cmp, fields[name]):
                edges = bounds.setdefault(name, set())
                edges.add(lo)
                edges.add(hi + 1)
    names = list(order) if order is not None else sorted(uses, key=lambda n: (-uses[n], n))
    dims = []
    for name in names:
        width = fields[name].width
        top = (1 << width) - 1
        edges = sorted(e for e in bounds.get(name, ()) if 0 < e <= top)
        if indexing == "rank":
            cuts = tuple(edges)
        else:
            lo = max(0, (edges[0] if edges else 1) - 1)
            hi = min(top, (edges[-1] if edges else top))
            span = hi - lo + 1
            bits = max(1, min(dimension_bits, math.ceil(math.log2(span)) if span > 1 else 1))
            step = -(-span // (1 << bits))
            cuts = tuple(c for c in (lo + k * step for k in range(1, 1 << bits)) if c <= top)
        bits = max(1, math.ceil(math.log2(len(cuts) + 1)))
        dims.append(Dimension(name, cuts, bits))
    if not dims:
        raise P4subError("the subscriptions test no field: nothing to index")
    layout = interleave([d.bits for d in dims])
    return EventSpace(tuple(dims), layout, indexing, tuple(fields[d.field].width for d in dims))


# ------------------------------------------------------------------------------------------------
# Addresses (S1 §III-B)
# ------------------------------------------------------------------------------------------------


def ipv6_prefix(dz: str) -> tuple[int, int]:
    """``(address, prefix length)`` of a dz: ff0e::/16 | dz << (112 - |dz|), length 16 + |dz|."""
    if len(dz) > IPV6_DZ_BITS:
        raise P4subError(f"a dz of {len(dz)} bits does not fit the 112 bits of an IPv6 multicast address")
    value = int(dz, 2) if dz else 0
    return IPV6_PREFIX | (value << (IPV6_DZ_BITS - len(dz))), 16 + len(dz)


def ipv6_text(address: int) -> str:
    return str(ipaddress.IPv6Address(address))
