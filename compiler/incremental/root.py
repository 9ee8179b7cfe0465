"""The root of a lane: the one node every update changes, kept so that a change costs what it touches.

A root can be very wide (one edge per content id: 200k edges for 100k hICN names), and every update
replaces it. Rebuilding it as a node (merging, hash-consing, one entry per edge, one reference per
child) would cost its width per update, so the root is kept apart:

* its edges are sorted lists (low ends for bisection); an update replaces *regions*, the runs of
  edges its spans cover, widened so that equal neighbours merge as a full build would merge them;
* children are referenced per edge, so the region's old and new edges say which references go;
* its entries are a dict by identity, and only the regions' entries are made again, as long as
  the miss entry's target (the default) stays the best one: the default's weight (values for an
  exact key, edges otherwise, as :meth:`compiler.tables._Slicer.default_child` weighs) is kept per
  target, and only when another target would now beat it, or for lpm and ternary keys (whose
  prefix tables span regions, ORTC), are all the root's entries made again.

The root is never hash-consed (nothing else is at its level); a new root gets a fresh node id.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from compiler import ir
from compiler.bdd import Diagram, Node
from compiler.incremental.delta import entry_key
from compiler.incremental.fallback import Fallback
from compiler.incremental.reconstruct import Level

Edge = tuple[int, int, int]


@dataclass
class Region:
    """Old edges ``[i0, i1)`` replaced by ``edges`` (with ``emits``)."""

    i0: int
    i1: int
    edges: list[Edge]
    emits: list[int]


@dataclass
class RootPlan:
    node: int  # the new root's node id
    regions: list[Region]
    edges: list[Edge]
    emits: list[int]
    los: list[int]
    removed: list[tuple[Edge, int]] = field(default_factory=list)  # old region edges with their emissions
    added: list[tuple[Edge, int]] = field(default_factory=list)
    weight: dict[int, int] = field(default_factory=dict)  # target -> new weight (changed ones)
    wide: dict[int, int] = field(default_factory=dict)
    default: int | None = None
    whole: bool = False  # every root entry made again
    old_entries: list[ir.Entry] = field(default_factory=list)
    new_entries: list[ir.Entry] = field(default_factory=list)


class Root:
    def __init__(self, node_id: int, diagram: Diagram, level: Level, slicer, entries: list[ir.Entry],
                 state: int, fold_end: int = 0) -> None:
        """``fold_end``: the root heads a run of that many validity levels folded into one table
        (:meth:`compiler.tables._Slicer.validity_entries`): its entries follow paths through the run,
        so an update makes all of them again (2^k entries for k bits)."""
        node = diagram.nodes[node_id]
        self.id = node_id
        self.d = diagram
        self.level = level
        self.slicer = slicer
        self.state = state
        self.fold_end = fold_end
        self.edges: list[Edge] = list(node.edges)
        self.emits: list[int] = list(node.emits or (0,) * len(node.edges))
        self.los = [lo for lo, _, _ in self.edges]
        self.entries = {entry_key(e): e for e in entries}
        self.limit = slicer.options.exact_expand_limit
        self.weight: Counter = Counter()
        self.wide: Counter = Counter()
        for edge, e in zip(self.edges, self.emits):
            self._weigh(edge, e, 1, self.weight, self.wide)
        self.default = None if fold_end else self._installed_default(entries)

    def _installed_default(self, entries: list[ir.Entry]) -> int | None:
        """The target the installed miss entry sends the root to (no miss entry: the empty leaf),
        when the other entries are exactly the non-default edges' (else None: remake them all)."""
        slicer, lv = self.slicer, self.level
        if lv.kind not in ("exact", "range"):
            return None
        misses = [e for e in entries if e.table == lv.miss]
        default = slicer.no_entry if not misses else None
        for t in self.weight if misses else ():
            slicer.entries = []
            slicer.add(lv.miss, (ir.Exact(self.state),), t)
            if slicer.entries == misses:
                default = t
                break
        slicer.entries = []
        if default is None:
            return None
        saved = slicer.state_of
        made = self._region_entries(list(zip(self.edges, self.emits)), default, saved)
        slicer.state_of, slicer.entries = saved, []
        return default if set(made) | set(misses) == set(entries) else None

    def _weigh(self, edge: Edge, emit: int, sign: int, weight, wide) -> int:
        lo, hi, child = edge
        t = self.slicer.target(child, emit)
        if self.level.kind == "exact":
            weight[t] = weight.get(t, self.weight.get(t, 0)) + sign * (hi - lo + 1)
            if hi - lo + 1 > self.limit:
                wide[t] = wide.get(t, self.wide.get(t, 0)) + sign
        else:
            weight[t] = weight.get(t, self.weight.get(t, 0)) + sign
        return t

    # -- planning -----------------------------------------------------------------------------------
    def plan(self, pieces: list[tuple[int, int, list[Edge], list[int] | None]], new_id) -> RootPlan | None:
        """The root with ``pieces`` (span, its swept edges) in place, its node registered under the id
        ``new_id()`` gives; None when the pieces change nothing."""
        regions = self._regions(pieces)
        edges, emits, los = self.edges, self.emits, self.los
        if all(r.edges == edges[r.i0:r.i1] and r.emits == emits[r.i0:r.i1] for r in regions):
            return None
        new_id = new_id()
        new_edges: list[Edge] = []
        new_emits: list[int] = []
        pos = 0
        plan = RootPlan(new_id, regions, [], [], [])
        for r in regions:
            new_edges += edges[pos:r.i0]
            new_emits += emits[pos:r.i0]
            new_edges += r.edges
            new_emits += r.emits
            plan.removed += zip(edges[r.i0:r.i1], emits[r.i0:r.i1])
            plan.added += zip(r.edges, r.emits)
            pos = r.i1
        new_edges += edges[pos:]
        new_emits += emits[pos:]
        if len(new_edges) == 1 and not new_emits[0] and not self.fold_end:  # a folded root's entries need no split
            raise Fallback("the root would no longer test the first field (the program's first stage)")
        plan.edges, plan.emits = new_edges, new_emits
        plan.los = [lo for lo, _, _ in new_edges] if len(regions) > 8 else _los(los, regions)
        self.d.nodes[new_id] = Node(0, tuple(new_edges), tuple(new_emits) if self.d.emit else ())
        return plan

    def _regions(self, pieces) -> list[Region]:
        """Runs of old edges the pieces cover (with one untouched edge or less between pieces: one
        run), each made again from the pieces and the old edges' uncovered parts, merged."""
        spans = []
        for a, b, new_edges, new_emits in pieces:
            i0 = bisect.bisect_right(self.los, a) - 1
            i1 = bisect.bisect_right(self.los, b)  # exclusive
            spans.append([i0, i1, [(a, b, new_edges, new_emits or [0] * len(new_edges))]])
        runs: list[list] = []
        for s in spans:
            if runs and s[0] <= runs[-1][1] + 1:
                runs[-1][1] = max(runs[-1][1], s[1])
                runs[-1][2] += s[2]
            else:
                runs.append(s)
        out = []
        for i0, i1, parts in runs:
            i0, i1 = max(0, i0 - 1), min(len(self.edges), i1 + 1)  # neighbours: merged if equal
            raw: list[list[int]] = []
            pos = self.edges[i0][0]
            j = i0
            for a, b, new_edges, new_emits in parts:
                while pos < a:  # old edges (clipped) before this piece
                    lo, hi, child = self.edges[j]
                    if hi < pos:
                        j += 1
                        continue
                    end = min(hi, a - 1)
                    raw.append([pos, end, child, self.emits[j]])
                    pos = end + 1
                for (lo, hi, child), e in zip(new_edges, new_emits):
                    raw.append([lo, hi, child, e])
                pos = b + 1
            last = self.edges[i1 - 1][1]
            while pos <= last:
                lo, hi, child = self.edges[j]
                if hi < pos:
                    j += 1
                    continue
                raw.append([pos, hi, child, self.emits[j]])
                pos = hi + 1
            merged: list[list[int]] = []
            for lo, hi, child, e in raw:
                if merged and merged[-1][2] == child and merged[-1][3] == e:
                    merged[-1][1] = hi
                else:
                    merged.append([lo, hi, child, e])
            out.append(Region(i0, i1, [(a, b, c) for a, b, c, _ in merged], [e for _, _, _, e in merged]))
        return out

    def plan_entries(self, plan: RootPlan, state_of) -> None:
        """The root's old and new entries that differ in kind (region entries, or all of them when the
        default changes or the key is lpm or ternary), under the tentative state ids ``state_of``."""
        weight, wide = plan.weight, plan.wide
        for edge, e in plan.removed:
            self._weigh(edge, e, -1, weight, wide)
        for edge, e in plan.added:
            self._weigh(edge, e, 1, weight, wide)
        default = self._keep_default(weight, wide)
        slicer, lv = self.slicer, self.level
        saved = slicer.state_of
        try:
            if default is None:
                plan.whole = True
                plan.old_entries = list(self.entries.values())
                slicer.state_of, slicer.entries = state_of, []
                if self.fold_end:
                    slicer.validity_entries(plan.node, 0, self.fold_end, lv.table)
                else:
                    plan.default = slicer.node_entries(plan.node, lv.field, lv.kind, lv.table, lv.miss)
                plan.new_entries = slicer.entries
            else:
                plan.default = default
                plan.old_entries = self._region_entries([x for x in plan.removed], default, saved)
                plan.new_entries = self._region_entries([x for x in plan.added], default, state_of)
        finally:
            slicer.state_of, slicer.entries = saved, []

    def _keep_default(self, weight: dict[int, int], wide: dict[int, int]) -> int | None:
        """The installed default when it is still a best target (then only regions change), else None."""
        cur = self.default
        if self.level.kind == "exact":
            wides = {t for t, n in wide.items() if n > 0} | {t for t, n in self.wide.items() if n > 0 and t not in wide}
            if len(wides) > 1:
                raise Fallback(f"{self.level.field.name} is matched exact, and the new rules split it into ranges")
            if wides:
                return cur if wides == {cur} else None
        if cur is None or self.fold_end or self.level.kind not in ("exact", "range"):
            return None

        def w(t: int) -> int:
            return weight.get(t, self.weight.get(t, 0)) + (1 if t == self.slicer.no_entry else 0)
        if weight.get(cur, self.weight.get(cur, 0)) <= 0:
            return None  # no edge goes to the default any more
        mine = w(cur)
        if mine < self.weight.get(cur, 0) + (1 if cur == self.slicer.no_entry else 0):
            rivals = set(self.weight) | set(weight)  # the default lost weight: any target may beat it now
        else:
            rivals = set(weight)
        return None if any(w(t) > mine for t in rivals) else cur

    def _region_entries(self, edges: list[tuple[Edge, int]], default: int, state_of) -> list[ir.Entry]:
        slicer, lv = self.slicer, self.level
        slicer.state_of, slicer.entries = state_of, []
        s = self.state
        for (lo, hi, child), e in edges:
            t = slicer.target(child, e)
            if t == default:
                continue
            if lv.kind == "exact":
                for v in range(lo, hi + 1):
                    slicer.add(lv.table, (ir.Exact(s), ir.Exact(v)), t)
            else:
                slicer.add(lv.table, (ir.Exact(s), ir.Range(lo, hi)), t, priority=1)
        return slicer.entries

    def default_pair(self) -> tuple[int, int] | None:
        """The default as (child, emission): what survives the slicer's targets being renumbered."""
        return self.slicer.targets[self.default] if self.default is not None else None

    def reweigh(self, pair: tuple[int, int] | None) -> None:
        """Weights and default again, after the slicer's targets were renumbered (:meth:`Lane.forget`)."""
        self.weight, self.wide = Counter(), Counter()
        for edge, e in zip(self.edges, self.emits):
            self._weigh(edge, e, 1, self.weight, self.wide)
        self.default = self.slicer.target(*pair) if pair is not None else None

    # -- committing ---------------------------------------------------------------------------------
    def commit(self, plan: RootPlan) -> None:
        del self.d.nodes[self.id]
        self.id = plan.node
        self.edges, self.emits, self.los = plan.edges, plan.emits, plan.los
        for t, n in plan.weight.items():
            if n:
                self.weight[t] = n
            else:
                self.weight.pop(t, None)
        for t, n in plan.wide.items():
            if n:
                self.wide[t] = n
            else:
                self.wide.pop(t, None)
        if plan.whole:
            self.entries = {entry_key(e): e for e in plan.new_entries}
        else:
            for e in plan.old_entries:
                del self.entries[entry_key(e)]
            for e in plan.new_entries:
                self.entries[entry_key(e)] = e
        self.default = plan.default


def _los(los: list[int], regions: list[Region]) -> list[int]:
    out: list[int] = []
    pos = 0
    for r in regions:
        out += los[pos:r.i0]
        out += [lo for lo, _, _ in r.edges]
        pos = r.i1
    out += los[pos:]
    return out
