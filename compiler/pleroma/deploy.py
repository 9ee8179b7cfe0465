"""Consistent deployment of flow change sets (S2 Alg. 7), for any change of a network's flows.

When subscriptions arrive or leave, or a merge rewrites flows, each (switch, ingress port) table goes
from ``old`` to ``new``. Switches apply one flow operation at a time (add, modify, delete), so the
order matters: deleting two flows before adding the flow they merge into drops their events in
between (S2 §5.5's example, 0000 and 0011 merged into 00). :func:`plan` orders the operations so
that, after every step, every event is forwarded by every table either exactly as the old table
forwards it or exactly as the new one does (its *region* is at its old or its new ports; regions
are the events whose longest prefix among ``old``'s and ``new``'s dz's is one dz). Two consequences,
for any order in which switches take their turn, because the dissemination trees do not change:

* no false negative for a host that wants the event before and after: each switch on its path sends
  the event towards it in the old and in the new flows, hence in every state between;
* no wildcard flood: a switch never sends an event anywhere neither its old nor its new flows send it
  (S2 rejects the wildcard flow for that reason; S2 states the aim, "without temporally spiking false
  positives", and proves nothing; this is the bound kept here).

The order, per table (proofs in the comments of :class:`_TablePlanner`):

* a dz whose flow is added or modified takes its new ports only after every added or modified dz
  below it has (then every event it decides is one the new flows give it);
* a deletion is made as soon as every event it hands to the next covering flow gets its old or its new
  ports there (checked), and the deletions left once every flow is in place go shortest dz first;
* among the steps allowed, deletions first, then modifications, then additions that cover a pending
  deletion (S2's merges: the merged flow, then the flows it replaces), then the others (S2's
  unmerges and new subscriptions: the finer flows, then the coarse flow they replace).

S2 deploys within the flow limit by keeping one entry free: a merge needs one more flow than the
switch holds before it, an unmerge one more than after it. :class:`Plan` reports each switch's peak,
so that a caller can see how far above ``max(before, after)`` a change set goes (S2 notes that its
algorithm is tailored to merges and unmerges and not to arbitrary changes; this planner keeps the
forwarding guarantee for any change, and the peak is what it is).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from compiler.pleroma.flows import Tables, lookup

Table = Mapping[str, frozenset[int]]
OPS = ("add", "modify", "delete")


@dataclass(frozen=True)
class Step:
    """One flow operation: ``ports`` are the flow's ports after it (for a delete: those it had)."""

    switch: str
    ingress: int
    op: str
    dz: str
    ports: frozenset[int]


@dataclass
class Plan:
    """The ordered steps of a change set, and per switch its flows before, after and at the peak."""

    steps: list[Step] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)

    def overshoot(self) -> int:
        """The most flows any switch holds above ``max(before, after)`` while the plan runs (S2: 1)."""
        return max((self.peak[s] - max(self.before[s], self.after[s]) for s in self.peak), default=0)

    def counts(self) -> dict[str, int]:
        return {op: sum(s.op == op for s in self.steps) for op in OPS}


class _TablePlanner:
    """The steps of one (switch, ingress port) table, offered one at a time (module docstring).

    Invariant: after every step each region (a dz ``u`` of ``old`` or ``new``: the events whose
    longest prefix among those dz's is ``u``) is forwarded to ``lookup(old, u)`` or ``lookup(new, u)``.

    * Setting ``k`` to its new ports once every added or modified dz below ``k`` has its new ports:
      the events it then decides have no present dz below ``k``, so no dz of ``new`` below ``k``
      either (all are present), so ``new`` decides them at ``k`` too.
    * A deletion is checked: each region it hands over gets the ports of the nearest present dz
      above, which must be the region's old or new ports.
    * Once every flow has its new ports, deleting the shortest remaining dz is safe without the check:
      the nearest present dz above it is one of ``new`` (every shorter deletion is done), and no dz of
      ``new`` lies between it and the events handed over (all are present), so they get their new ports.
    """

    def __init__(self, old: Table, new: Table) -> None:
        self.old, self.new = old, new
        self.cur: dict[str, frozenset[int]] = dict(old)
        self.keys = sorted(set(old) | set(new))
        self.pending_set = {k for k in new if old.get(k) != new[k]}
        self.pending_del = {k for k in old if k not in new}
        self.below = {k: 0 for k in self.pending_set}  # pending set-dz's strictly below k
        for k in self.pending_set:
            for p in _prefixes(k):
                if p in self.below:
                    self.below[p] += 1
        self.ready: list[tuple[int, int, str]] = []
        for k in self.pending_set:
            if not self.below[k]:
                self._push_ready(k)
        self.safe: set[str] = {d for d in self.pending_del if self._safe_delete(d)}
        self.growth = len(new) - len(old)

    def _subtree(self, k: str) -> list[str]:
        lo = bisect.bisect_left(self.keys, k)
        hi = lo
        while hi < len(self.keys) and self.keys[hi].startswith(k):
            hi += 1
        return self.keys[lo:hi]

    def _push_ready(self, k: str) -> None:
        if k in self.old:
            rank = 1  # a modification: the table keeps its size
        elif any(d in self.pending_del for d in self._subtree(k)):
            rank = 2  # a merge: the flows it covers can go once it is in
        else:
            rank = 3
        heapq.heappush(self.ready, (rank, -len(k), k))

    def _safe_delete(self, d: str) -> bool:
        above = next((p for p in _prefixes(d) if p in self.cur), None)
        ports = self.cur[above] if above is not None else frozenset()
        skip = None
        for u in self._subtree(d):
            if skip is not None and u.startswith(skip):
                continue
            if u != d and u in self.cur:
                skip = u  # its region and those below it stay where they are
                continue
            if ports != lookup(self.old, u) and ports != lookup(self.new, u):
                return False
        return True

    def next_rank(self) -> int | None:
        """0: a deletion; 1, 2, 3: a modification, a merge, another addition; None: done."""
        if self.safe or (self.pending_del and not self.pending_set):
            return 0
        return self.ready[0][0] if self.ready else None

    def step(self) -> tuple[str, str, frozenset[int]]:
        if self.safe:
            return self._delete(min(self.safe, key=lambda k: (-len(k), k)))
        if not self.pending_set:  # every flow in place: the shortest deletion is safe (class docstring)
            return self._delete(min(self.pending_del, key=lambda k: (len(k), k)))
        _, _, k = heapq.heappop(self.ready)
        op = "modify" if k in self.cur else "add"
        self.cur[k] = self.new[k]
        self.pending_set.discard(k)
        for p in _prefixes(k):
            if p in self.below:
                self.below[p] -= 1
                if p in self.pending_set and not self.below[p]:
                    self._push_ready(p)
        self._recheck(k)
        return op, k, self.new[k]

    def _delete(self, d: str) -> tuple[str, str, frozenset[int]]:
        ports = self.cur.pop(d)
        self.pending_del.discard(d)
        self.safe.discard(d)
        self._recheck(d)
        return "delete", d, ports

    def _recheck(self, k: str) -> None:
        """A step at ``k`` changes what deletions above and below it hand over."""
        for d in [*(p for p in _prefixes(k) if p in self.pending_del),
                  *(u for u in self._subtree(k) if u in self.pending_del)]:
            if self._safe_delete(d):
                self.safe.add(d)
            else:
                self.safe.discard(d)

    def size(self) -> int:
        return len(self.cur)


def _prefixes(k: str) -> Iterable[str]:
    """The proper prefixes of ``k``, longest first."""
    return (k[:i] for i in range(len(k) - 1, -1, -1))


def plan(old: Tables, new: Tables, switches: Iterable[str] | None = None) -> Plan:
    """The steps taking every switch from ``old`` to ``new``, switch after switch (``switches``' order,
    else ``old``'s then ``new``'s), each switch's steps ordered as the module docstring says; within
    a switch the ingress ports' tables take turns by the rank of their next step, then shrinking tables
    before growing ones, so that deletions and merges on one port free entries before additions on
    another use them."""
    order = list(switches) if switches is not None else list(dict.fromkeys([*old, *new]))
    out = Plan()
    for s in order:
        o, n = old.get(s, {}), new.get(s, {})
        planners = {i: _TablePlanner(o.get(i, {}), n.get(i, {})) for i in sorted(set(o) | set(n))}
        size = sum(p.size() for p in planners.values())
        out.before[s] = size
        out.peak[s] = size
        while True:
            ranked = [(r, p.growth, i) for i, p in planners.items() if (r := p.next_rank()) is not None]
            if not ranked:
                break
            _, _, i = min(ranked)
            op, dz, ports = planners[i].step()
            size += 1 if op == "add" else -1 if op == "delete" else 0
            out.peak[s] = max(out.peak[s], size)
            out.steps.append(Step(s, i, op, dz, ports))
        out.after[s] = size
    return out


def apply(tables: Tables, steps: Iterable[Step]) -> Tables:
    """A copy of ``tables`` with ``steps`` done (empty ingress tables dropped)."""
    out = {s: {i: dict(t) for i, t in by_in.items()} for s, by_in in tables.items()}
    for st in steps:
        table = out.setdefault(st.switch, {}).setdefault(st.ingress, {})
        if st.op == "delete":
            del table[st.dz]
        else:
            table[st.dz] = st.ports
    return {s: {i: t for i, t in by_in.items() if t} for s, by_in in out.items()}
