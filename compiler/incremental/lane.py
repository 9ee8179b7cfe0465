"""One lane's diagram, states and entries, updated by the rules that change in it.

The lane keeps what a full compile throws away: the builder with its hash-consing tables
(:mod:`compiler.incremental.builder`), the state id of every reachable node (stable: a node keeps
its id for as long as it is reachable), every state's entries, the reference counts of nodes and
multicast groups, and the root-level residuals of the rules indexed by their root-field intervals.

An update (:meth:`Lane.plan`, then :meth:`Lane.commit`) gets the change in the count of each
root residual. Only residuals that appear or disappear change the diagram, and only on their
root-field intervals (the *spans*): the root's edges there are swept again from the residuals
alive in the span (:meth:`compiler.bdd._Builder._sweep`), and the root's other edges are kept
(:mod:`compiler.incremental.root`: the root's cost is the regions it changes, not its width).
The new root's new descendants are found by reference counting (one reference per edge), as are
the nodes no longer reachable; only those, and the root's changed regions, change entries. A born
node takes the state id of the dead node it replaces where the two diagrams are walked in parallel
(same level, same values), so its entries mostly keep their keys and the delta is modifications;
other born nodes take freed ids, then fresh ones. Planning changes nothing (but append-only
interning) that a failed check would have to undo; the plan raises
:class:`~compiler.incremental.fallback.Fallback` when the old program cannot hold the result.
"""

from __future__ import annotations

import dataclasses
from collections import ChainMap, Counter
from dataclasses import dataclass, field
from typing import Iterable

from compiler import ir
from compiler.dnf import ActionSet
from compiler.incremental.builder import IncrementalBuilder
from compiler.incremental.fallback import Fallback
from compiler.incremental.ids import IdPool
from compiler.incremental.index import IntervalIndex
from compiler.incremental.reconstruct import LaneImage
from compiler.incremental.root import Root, RootPlan
from compiler.spec import Spec
from compiler.tables import GROUP_WIDTH, TableOptions, node_slicer


@dataclass
class Groups:
    """Multicast group ids per port set (groups layout), with how many leaves use each set."""

    id_of: dict[tuple[int, ...], int]
    uses: Counter
    pool: IdPool

    @classmethod
    def of(cls, groups: Iterable[ir.MulticastGroup]) -> "Groups":
        id_of = {tuple(g.ports): g.id for g in groups}
        return cls(id_of, Counter(), IdPool(id_of.values(), start=1))


@dataclass
class Plan:
    """What an update changes in a lane, computed before anything is changed."""

    counts: dict[int, int]  # root residual -> new count (only those that changed)
    appear: list[int]
    vanish: list[int]
    root: RootPlan | None = None  # None: the diagram stays as it is
    born: list[int] = field(default_factory=list)  # nodes other than the root
    died: list[int] = field(default_factory=list)
    refs: dict[int, int] = field(default_factory=dict)
    states: dict[int, int] = field(default_factory=dict)  # born node -> state id
    taken: list[int] = field(default_factory=list)
    freed: list[int] = field(default_factory=list)
    entries: dict[int, list[ir.Entry]] = field(default_factory=dict)  # born state -> entries
    table_counts: Counter = field(default_factory=Counter)  # entries per table after the update
    groups_added: dict[tuple[int, ...], int] = field(default_factory=dict)
    groups_removed: dict[tuple[int, ...], int] = field(default_factory=dict)
    group_uses: Counter = field(default_factory=Counter)  # port set -> change in uses
    group_taken: list[int] = field(default_factory=list)
    rebuilt_edges: int = 0  # root edges swept again
    old_entries: list[ir.Entry] = field(default_factory=list)  # entries that go (those of the nodes that died,
    new_entries: list[ir.Entry] = field(default_factory=list)  # the root's regions) and that come

    @property
    def changed(self) -> bool:
        return self.root is not None


class Lane:
    def __init__(self, image: LaneImage, spec: Spec | None, tables: TableOptions, lane: int,
                 delivery: ir.Delivery, state_width: int, no_match_call: str | None,
                 groups: Groups | None) -> None:
        self.lane = lane
        self.levels = image.levels
        self.width = state_width
        self.no_match_call = no_match_call
        self.builder = IncrementalBuilder([lv.field for lv in image.levels], emit=delivery.is_bitmap)
        self.builder.adopt(image.diagram, image.next_id)
        self.diagram = image.diagram
        self.root = image.diagram.root
        self.empty = image.empty_leaf
        self.tables = image.tables
        self.fold_end = image.fold_end
        self.state_of: dict[int, int] = dict(image.state_of)
        self.entries: dict[int, list[ir.Entry]] = dict(image.entries)
        self.refs: Counter = Counter()  # node -> edges of reachable nodes that lead to it
        for node in self.diagram.reachable():
            for child in self._children(node):
                self.refs[child] += 1
        self.ids = IdPool(self.state_of.values())
        if self.empty in self.refs and self.empty not in self.state_of:
            # The empty leaf is reached only through values no entry matches: it has no id yet.
            (sid,) = self.ids.peek(1)
            self.ids.commit([sid], ())
            self.state_of[self.empty] = sid
            self.entries[sid] = []
        options = dataclasses.replace(tables, min_state_bits=state_width)
        self.slicer = node_slicer(self.diagram, spec, options, lane, delivery, self.state_of)
        self.slicer.empty_leaf = self.empty
        self.slicer.no_entry = None if no_match_call else self.slicer.target(self.empty, 0)
        self.root_state = self.state_of[self.root]
        self.rootk = Root(self.root, self.diagram, self.levels[0], self.slicer, self.entries.pop(self.root_state),
                          self.root_state, self.fold_end)
        self.table_counts = Counter(e.table for e in self.all_entries())
        self.groups = groups
        if groups is not None:
            for node, sid in self.state_of.items():
                if node in self.diagram.leaves:
                    ports = tuple(sorted(self.diagram.leaves[node].ports))
                    if len(ports) > 1:
                        groups.uses[ports] += 1
        # Root residuals: how many cubes stand for each, and the index of those present.
        self.count: dict[int, int] = {}
        self.index = IntervalIndex()
        self.flagged: set[int] = set()
        self.top = (1 << self.levels[0].field.width) - 1
        self.level_names = {lv.field.name for lv in self.levels}

    # -- residuals --------------------------------------------------------------------------------
    def residual(self, cube: tuple, actions: tuple, changing: bool = False) -> int | None:
        """The root residual of a cube (None for a cube that gives nothing: a drop rule).

        A cube that tests a field the lane has no stage for is interned without that constraint, so
        its residual may stand for other cubes too: it is *flagged*, a rebuild that meets it falls
        back, and so does adding or removing such a cube (``changing``)."""
        items = self.builder.items(actions)
        if not items:
            return None
        placed = dict(cube)
        r = self.builder.residual(placed, items)
        if not self.level_names.issuperset(placed):
            if changing:
                raise Fallback("a rule tests a field that has no table in this program")
            self.flagged.add(r)
        elif changing and r in self.flagged:
            raise Fallback("a rule's residual is shared with one that tests a field with no table")
        return r

    def intervals(self, r: int) -> tuple[tuple[int, int], ...]:
        cons = self.builder._res_cons[0][r]
        return ((0, self.top),) if cons is None else cons.intervals

    def seed(self, residuals: Iterable[int]) -> None:
        """Count the residuals the lane's diagram was built from (no rebuild)."""
        for r in residuals:
            n = self.count.get(r, 0)
            self.count[r] = n + 1
            if n == 0:
                self.index.add(r, self.intervals(r))

    def _inner(self, node: int) -> bool:
        """A node inside the folded validity run below the root: it has no state and no entries
        (the root's folded entries pass through it)."""
        n = self.diagram.nodes.get(node)
        return n is not None and n.level < self.fold_end

    def _children(self, node: int) -> list[int]:
        """The node's children, one per edge (references are counted per edge)."""
        n = self.diagram.nodes.get(node)
        return [c for _, _, c in n.edges] if n is not None else []

    # -- planning ---------------------------------------------------------------------------------
    def plan(self, delta: dict[int, int]) -> Plan:
        counts = {r: self.count.get(r, 0) + d for r, d in delta.items() if d}
        for r, c in counts.items():
            if c < 0:
                raise RuntimeError("a residual removed more often than it was added")
        appear = [r for r, c in counts.items() if c > 0 and not self.count.get(r, 0)]
        vanish = [r for r, c in counts.items() if c == 0 and self.count.get(r, 0)]
        plan = Plan(counts, appear, vanish)
        spans = _merge([iv for r in appear + vanish for iv in self.intervals(r)])
        if not spans:
            return plan
        appear_set, vanish_set = set(appear), set(vanish)
        pieces = []
        for a, b in spans:
            objs = self.index.query(a, b) - vanish_set
            objs |= {r for r in appear_set if any(lo <= b and hi >= a for lo, hi in self.intervals(r))}
            if objs & self.flagged:
                raise Fallback("a rule tests a field that has no table in this program")
            edges, emits = self.builder.sweep(0, objs, a, b)
            pieces.append((a, b, edges, emits))
            plan.rebuilt_edges += len(edges)
        plan.root = self.rootk.plan(pieces, self.builder.new_id)
        if plan.root is not None:
            self._liveness(plan)
            self._assign_states(plan)
            self._make_entries(plan)
        return plan

    def _liveness(self, plan: Plan) -> None:
        """Nodes that become reachable (born) and that stop being reachable (died), from the edges
        the root's regions remove and add."""
        refs, tref, live = self.refs, plan.refs, self.state_of
        born, died = plan.born, plan.died

        def inc(n: int) -> None:
            c = tref.get(n, refs.get(n, 0))
            tref[n] = c + 1
            if c == 0 and n not in live:
                born.append(n)
                for ch in self._children(n):
                    inc(ch)

        def dec(n: int) -> None:
            c = tref.get(n, refs.get(n, 0)) - 1
            tref[n] = c
            if c == 0:
                died.append(n)
                for ch in self._children(n):
                    dec(ch)

        for (_, _, child), _ in plan.root.added:
            inc(child)
        for (_, _, child), _ in plan.root.removed:
            dec(child)

    def _assign_states(self, plan: Plan) -> None:
        """Born nodes take the ids of the dead nodes they replace (walking the old and new root
        regions and then the paired nodes side by side), then freed ids, then fresh ones."""
        d = self.diagram
        died = set(plan.died)
        born = set(plan.born)
        states = plan.states
        reused: set[int] = set()
        stack: list[tuple[list, list]] = []
        old_edges = self.rootk.edges
        for r in plan.root.regions:
            stack.append((old_edges[r.i0:r.i1], r.edges))
        while stack:
            a, b = stack.pop()
            i = j = 0
            while i < len(a) and j < len(b):
                o, n = a[i][2], b[j][2]
                if self._inner(o) and self._inner(n) and o != n:
                    stack.append((d.nodes[o].edges, d.nodes[n].edges))  # no states: pair what is below
                elif (o != n and o in died and n in born and o not in reused and n not in states
                        and _same_kind(d, o, n)):
                    states[n] = self.state_of[o]
                    reused.add(o)
                    if n in d.nodes:
                        stack.append((d.nodes[o].edges, d.nodes[n].edges))
                if a[i][1] < b[j][1]:
                    i += 1
                elif a[i][1] > b[j][1]:
                    j += 1
                else:
                    i += 1
                    j += 1
        rest = [n for n in plan.born if n not in states and not self._inner(n)]
        freed = [self.state_of[o] for o in plan.died if o not in reused and not self._inner(o)]
        fresh = self.ids.peek(len(rest), freed)
        if fresh and fresh[-1] >= 1 << self.width:
            raise Fallback(f"more states than the {self.width}-bit state of the program holds")
        states.update(zip(rest, fresh))
        plan.taken, plan.freed = fresh, freed

    def _make_entries(self, plan: Plan) -> None:
        d = self.diagram
        counts = Counter(self.table_counts)
        old = plan.old_entries
        for n in plan.died:
            if not self._inner(n):
                old += self.entries[self.state_of[n]]
        if self.groups is not None:
            self._plan_groups(plan)
        group_of = ChainMap(plan.groups_added, self.groups.id_of) if self.groups is not None else {}
        tentative = ChainMap({plan.root.node: self.root_state}, plan.states, self.state_of)
        self.rootk.plan_entries(plan.root, tentative)
        old += plan.root.old_entries
        plan.new_entries += plan.root.new_entries
        for e in old:
            counts[e.table] -= 1
        self.slicer.state_of = tentative
        try:
            for n in plan.born:
                if self._inner(n):
                    continue
                sid = plan.states[n]
                self.slicer.entries = []
                if n in d.nodes:
                    lv = self.levels[d.nodes[n].level]
                    if lv.kind == "exact" and not self.slicer._exact_ok(self.slicer.labelled(n)):
                        raise Fallback(f"{lv.field.name} is matched exact, and the new rules split it into ranges")
                    self.slicer.node_entries(n, lv.field, lv.kind, lv.table, lv.miss)
                else:
                    actions = d.leaves[n]
                    if self.no_match_call and actions.is_empty:
                        actions = ActionSet(calls=frozenset({(self.no_match_call, ())}))
                    self.slicer.leaf_entries(sid, actions, group_of)
                plan.entries[sid] = self.slicer.entries
                plan.new_entries += self.slicer.entries
                for e in self.slicer.entries:
                    counts[e.table] += 1
                    t = self.tables.get(e.table)
                    if t is None:
                        raise Fallback(f"the new rules need table {e.table}, which the program does not have")
                    if e.action not in t.actions:
                        raise Fallback(f"the new rules need action {e.action} in table {e.table}")
        finally:
            self.slicer.state_of = self.state_of
            self.slicer.entries = []
        for e in plan.root.new_entries:
            counts[e.table] += 1
        for table, n in counts.items():
            if n > self.tables[table].size:
                raise Fallback(f"table {table} would hold {n} entries, more than its size {self.tables[table].size}")
        plan.table_counts = counts

    def _plan_groups(self, plan: Plan) -> None:
        d, groups = self.diagram, self.groups
        uses = plan.group_uses
        for n, sign in [(n, -1) for n in plan.died] + [(n, 1) for n in plan.born]:
            if n in d.leaves:
                ports = tuple(sorted(d.leaves[n].ports))
                if len(ports) > 1:
                    uses[ports] += sign
        gone = [p for p, k in uses.items() if k and groups.uses[p] + k == 0]
        new = sorted(p for p, k in uses.items() if k and groups.uses[p] == 0 and k > 0)
        plan.groups_removed = {p: groups.id_of[p] for p in gone}
        ids = groups.pool.peek(len(new), plan.groups_removed.values())
        if ids and ids[-1] >= 1 << GROUP_WIDTH:
            raise Fallback(f"more multicast groups than {GROUP_WIDTH}-bit ids")
        plan.groups_added = dict(zip(new, ids))
        plan.group_taken = ids

    # -- committing -------------------------------------------------------------------------------
    def commit(self, plan: Plan) -> None:
        for r in plan.appear:
            self.index.add(r, self.intervals(r))
        for r in plan.vanish:
            self.index.remove(r, self.intervals(r))
        for r, c in plan.counts.items():
            if c:
                self.count[r] = c
            else:
                self.count.pop(r, None)
        if plan.root is None:
            return
        for n, c in plan.refs.items():
            if c:
                self.refs[n] = c
            else:
                self.refs.pop(n, None)
        for n in plan.died:
            if not self._inner(n):
                del self.entries[self.state_of.pop(n)]
        self.state_of.update(plan.states)
        self.entries.update(plan.entries)
        del self.state_of[self.root]
        self.rootk.commit(plan.root)
        self.root = self.diagram.root = plan.root.node
        self.state_of[self.root] = self.root_state
        self.ids.commit(plan.taken, plan.freed)
        self.table_counts = plan.table_counts
        if self.groups is not None:
            g = self.groups
            for p in plan.groups_removed:
                del g.id_of[p]
            g.id_of.update(plan.groups_added)
            g.uses.update(plan.group_uses)
            for p in [p for p, k in g.uses.items() if k <= 0]:
                del g.uses[p]
            g.pool.commit(plan.group_taken, plan.groups_removed.values())
            if plan.groups_removed or plan.groups_added:
                self._group_list = None
        total = len(self.diagram.nodes) + len(self.diagram.leaves)
        if total > 2 * len(self.state_of) + 4096:
            self.forget()

    def forget(self) -> None:
        """Drop unreachable nodes from the builder (and its memo), and the slicer's stale targets."""
        inner = {n for n in self.refs if self._inner(n)}  # counted references: the reachable ones
        self.builder.forget(set(self.state_of) | {self.empty} | inner)
        pair = self.rootk.default_pair()
        self.slicer.targets.clear()
        self.slicer.target_of.clear()
        self.slicer.no_entry = None if self.no_match_call else self.slicer.target(self.empty, 0)
        self.rootk.reweigh(pair)

    # -- reading ----------------------------------------------------------------------------------
    def all_entries(self) -> Iterable[ir.Entry]:
        yield from self.rootk.entries.values()
        for es in self.entries.values():
            yield from es

    def group_list(self) -> list[ir.MulticastGroup]:
        """The groups by id; kept until an update adds or removes one (a pipeline is built per change in
        ``p4sub serve``, and 20,000 groups made again each time cost more than the update)."""
        if self.groups is None:
            return []
        cached = getattr(self, "_group_list", None)
        if cached is None:
            cached = self._group_list = sorted((ir.MulticastGroup(i, p) for p, i in self.groups.id_of.items()),
                                               key=lambda g: g.id)
        return list(cached)


def _same_kind(d, a: int, b: int) -> bool:
    """Two nodes one state id can pass between: inner nodes of one level, or two leaves."""
    na, nb = d.nodes.get(a), d.nodes.get(b)
    if na is None or nb is None:
        return na is None and nb is None
    return na.level == nb.level


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]
