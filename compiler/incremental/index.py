"""Which root residuals an update must look at: a stabbing index over their first-field intervals.

An update rebuilds only the span of the root field that its rules cover, from the residuals alive
there. Finding them must not cost a pass over all rules (100k ITCH filters, one stock touched), so
intervals are kept by width class: class ``k`` holds intervals of fewer than ``2**k`` values in a
sorted list of their low ends, and an interval of class ``k`` meets ``[lo, hi]`` only if it starts
in ``(lo - 2**k, hi]``. Point constraints (an exact stock) are class 0: a bisection finds them.
Wide intervals land in high classes, which are scanned from further back, as they should: they do
meet more spans.
"""

from __future__ import annotations

import bisect


class IntervalIndex:
    def __init__(self) -> None:
        # class -> sorted distinct low ends, and low end -> {(hi, id)}
        self._lows: dict[int, list[int]] = {}
        self._at: dict[int, dict[int, set[tuple[int, int]]]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @staticmethod
    def _class(lo: int, hi: int) -> int:
        return (hi - lo).bit_length()  # hi - lo + 1 values < 2**k

    def add(self, ident: int, intervals: tuple[tuple[int, int], ...]) -> None:
        for lo, hi in intervals:
            k = self._class(lo, hi)
            at = self._at.setdefault(k, {})
            bucket = at.get(lo)
            if bucket is None:
                bucket = at[lo] = set()
                bisect.insort(self._lows.setdefault(k, []), lo)
            bucket.add((hi, ident))
            self._count += 1

    def remove(self, ident: int, intervals: tuple[tuple[int, int], ...]) -> None:
        for lo, hi in intervals:
            k = self._class(lo, hi)
            at = self._at[k]
            bucket = at[lo]
            bucket.remove((hi, ident))
            self._count -= 1
            if not bucket:
                del at[lo]
                lows = self._lows[k]
                del lows[bisect.bisect_left(lows, lo)]

    def query(self, lo: int, hi: int) -> set[int]:
        """Ids with an interval that meets ``[lo, hi]``."""
        out: set[int] = set()
        for k, lows in self._lows.items():
            at = self._at[k]
            first = bisect.bisect_left(lows, lo - (1 << k) + 1) if k else bisect.bisect_left(lows, lo)
            last = bisect.bisect_right(lows, hi)
            for start in lows[first:last]:
                for end, ident in at[start]:
                    if end >= lo:
                        out.add(ident)
        return out
