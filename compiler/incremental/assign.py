"""Which lane holds which rule, for pipelines whose rules are split into lanes (bitmap delivery).

Each lane's diagram was built from its own rules (:mod:`compiler.lanes`), so removing a rule must
go to the lane that holds it, and an added rule must go to a lane whose stages can test it. A new
rule goes where :func:`compiler.lanes.spread` would have put it: a lane whose hub (first field) it
tests, the least loaded, among the lanes that have a stage for each of its fields; rules that call
user actions stay in lane 0 (the call tables are there). One lane needs no bookkeeping at all.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from compiler import rules as ast
from compiler.incremental.fallback import Fallback


class LaneAssignment:
    def __init__(self, rules: Sequence[ast.Rule], lanes: Sequence[Sequence[int]] | None, count: int) -> None:
        self.count = count
        self.of: dict[ast.Rule, Counter] = {}
        self.load = [0] * count
        if count == 1:
            self.load[0] = len(rules)
            return
        if lanes is None or len(lanes) != count:
            raise Fallback(f"{count} lanes, and which lane holds which rule is not known")
        placed = [i for members in lanes for i in members]
        if len(placed) != len(set(placed)):
            # Lanes split by port (compiler.lanes.port_partition): a rule gives part of its ports in
            # each of several lanes, and an update would have to split it the same way.
            raise Fallback("a rule is in several lanes (lanes split by port)")
        for lane, members in enumerate(lanes):
            for i in members:
                self.of.setdefault(rules[i], Counter())[lane] += 1
            self.load[lane] += len(members)

    def holder(self, rule: ast.Rule, taken: Counter) -> int:
        """A lane that holds ``rule`` (``taken``: copies already picked in this update)."""
        if self.count == 1:
            return 0
        for lane, n in self.of.get(rule, Counter()).items():
            if n > taken[(rule, lane)]:
                taken[(rule, lane)] += 1
                return lane
        raise RuntimeError(f"no lane holds {rule}")

    def choose(self, fields: set[str], calls: bool, lane_fields: Sequence[set[str]], hubs: Sequence[str | None],
               extra: Sequence[int]) -> int:
        """The lane for a new rule testing ``fields`` (``extra``: rules given to each lane so far in this update)."""
        if self.count == 1:
            return 0
        fits = [i for i in range(self.count) if fields <= lane_fields[i]]
        if calls:
            fits = [i for i in fits if i == 0]
        if not fits:
            raise Fallback("no lane has a stage for every field the new rule tests")
        return min(fits, key=lambda i: (hubs[i] not in fields, self.load[i] + extra[i], i))

    def commit(self, moves: list[tuple[ast.Rule, int, int]]) -> None:
        """Apply (rule, lane, +1 or -1) moves."""
        for rule, lane, sign in moves:
            self.load[lane] += sign
            if self.count == 1:
                continue
            c = self.of.setdefault(rule, Counter())
            c[lane] += sign
            if c[lane] <= 0:
                del c[lane]
                if not c:
                    del self.of[rule]

    def lanes_of(self, rules: Sequence[ast.Rule]) -> list[list[int]]:
        """Rule indexes per lane for ``rules`` (the current multiset in some order), as ``lanes.json`` keeps them."""
        out: list[list[int]] = [[] for _ in range(self.count)]
        taken: Counter = Counter()
        for i, r in enumerate(rules):
            out[self.holder(r, taken)].append(i)
        return out
