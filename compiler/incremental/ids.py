"""Stable small ids (states, multicast groups) that updates take and give back.

An update plans first and commits only when every check passed, so taking ids does not consume
them: :meth:`IdPool.peek` says which ids ``n`` new owners would get (freed ids first, lowest
first, then fresh ones), :meth:`IdPool.commit` makes that so and returns the ids freed meanwhile.
"""

from __future__ import annotations

import heapq
from typing import Iterable


class IdPool:
    def __init__(self, used: Iterable[int], start: int = 0) -> None:
        used = set(used)
        self.next = max(used, default=start - 1) + 1
        self.free = [i for i in range(start, self.next) if i not in used]
        heapq.heapify(self.free)

    def peek(self, n: int, freed: Iterable[int] = ()) -> list[int]:
        """The ids ``n`` new owners get when ``freed`` ids are given back first."""
        pool = sorted(set(heapq.nsmallest(n, self.free)) | set(freed))[:n]
        fresh = n - len(pool)
        return pool + list(range(self.next, self.next + fresh))

    def commit(self, taken: list[int], freed: Iterable[int]) -> None:
        taken_set = set(taken)
        for i in freed:
            if i not in taken_set:
                heapq.heappush(self.free, i)
        stale = set()
        for i in taken:
            if i >= self.next:
                self.next = i + 1
            else:
                stale.add(i)
        if stale:
            self.free = [i for i in self.free if i not in stale]
            heapq.heapify(self.free)
