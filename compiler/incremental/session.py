"""An incremental compile: a compiled rule set kept ready for rules to be added and removed.

:class:`Incremental` holds the rules (a multiset: a rule added twice is removed twice), the old
pipeline read back into lanes (:mod:`compiler.incremental.lane`) and what decides the program's
shape: the fields the rules test, the headers they read (guard, validity fields, queried headers),
the bitmap's ports. :meth:`Incremental.update` type-checks the added rules, turns both sides into
root residuals, and lets each lane plan its part; the delta comes from the nodes the lanes changed.

When the incremental path cannot keep the old program (:class:`~compiler.incremental.fallback.Fallback`:
a new field or header, another guard, a port outside the bitmap, a state or group id past its
width, a table past its size, a field's match kind, the root losing its stage, several lanes
without their rules' assignment, a widened pipeline, compressed domains), the update runs a full compile of the new rules with the old
program's options (``compile --like``), diffs the pipelines, says why in :attr:`Update.reason`, and
starts again from the new pipeline. :attr:`Update.program_changed` then says whether the delta
still installs as entry changes.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from compiler import bdd, ir
from compiler import rules as ast
from compiler.base import P4subError
from compiler.compile import Compiled, CompileOptions, compile_rules, layout_cost, like
from compiler.dnf import rule_actions
from compiler.incremental.assign import LaneAssignment
from compiler.incremental.delta import Delta, diff_entries, diff_groups, diff_pipelines, same_program
from compiler.incremental.fallback import Fallback
from compiler.incremental.lane import Groups, Lane
from compiler.incremental.reconstruct import read_lane
from compiler.rules import TypedRules, check_rules, validity
from compiler.spec import Spec
from compiler.tables import pipeline_stats


@dataclass
class Update:
    """What one update did."""

    delta: Delta
    incremental: bool  # False: a full compile ran (see ``reason``)
    reason: str | None = None
    program_changed: bool = False  # the full compile needs another program (install it, not the delta)
    seconds: float = 0.0
    rebuilt_root_edges: int = 0
    nodes_born: int = 0
    nodes_died: int = 0
    entries_of_changed_nodes: int = 0  # entries of the nodes that died or were born (bounds the delta)

    def to_json(self) -> dict:
        return {"incremental": self.incremental, "fallback_reason": self.reason,
                "program_changed": self.program_changed, "seconds": round(self.seconds, 6), "rebuilt_root_edges": self.rebuilt_root_edges,
                "nodes_born": self.nodes_born, "nodes_died": self.nodes_died,
                "entries_of_changed_nodes": self.entries_of_changed_nodes, **self.delta.counts()}


class Incremental:
    """The compiled pipeline of a rule set, updated in place as rules come and go.

    ``spec`` is the spec the rules are checked against; ``pipeline`` was compiled from ``rules``
    with ``options`` (``exact``: without widening). Start from scratch with :meth:`compile`.
    """

    def __init__(self, spec: Spec, rules: ast.RuleSet, pipeline: ir.Pipeline,
                 options: CompileOptions = CompileOptions(), *, exact: bool = True,
                 typed: TypedRules | None = None, stats: dict | None = None,
                 lanes: Sequence[Sequence[int]] | None = None) -> None:
        """``lanes``: for a pipeline in several lanes, the rule indexes of each (``Compiled.lanes.lanes``,
        ``lanes.json``); without it such a pipeline updates by full compiles."""
        self.base_spec = spec
        self.base_options = options
        self._load(rules, pipeline, exact, typed, stats, lanes)

    @classmethod
    def compile(cls, spec: Spec, rules: ast.RuleSet, options: CompileOptions = CompileOptions()) -> "Incremental":
        """A full compile, kept for updates."""
        compiled = compile_rules(spec, rules, options)
        return cls.from_compiled(spec, compiled, options)

    @classmethod
    def from_compiled(cls, spec: Spec, compiled: Compiled, options: CompileOptions = CompileOptions()) -> "Incremental":
        return cls(spec, compiled.typed.rules, compiled.pipeline, options, exact=compiled.widening is None,
                   typed=compiled.typed, stats=compiled.stats, lanes=compiled.lanes.lanes if compiled.lanes else None)

    # -- loading ----------------------------------------------------------------------------------
    def _load(self, rules: ast.RuleSet, pipeline: ir.Pipeline, exact: bool, typed: TypedRules | None,
              stats: dict | None, lanes: Sequence[Sequence[int]] | None) -> None:
        self.options = like(pipeline, self.base_options)  # the program's layout, state width, table sizes
        typed = typed if typed is not None else check_rules(rules, self.base_spec, port_bits=self.options.port_bits)
        self.spec = typed.spec
        self.fields = dict(typed.fields)
        self._rules: Counter | None = Counter(rules.rules)
        self._rules_source = None  # see detach_rules
        self._pending: list[tuple[list[ast.Rule], list[ast.Rule]]] = []
        self.n_rules = len(rules.rules)
        self.reads = _reads(typed)  # header -> rules (with multiplicity) that read it
        self.guard, self.validity_fields, self.queried = typed.guard, tuple(typed.validity), typed.queried
        self._required: dict[frozenset[str], tuple[str, ...]] = {}  # headers read -> validity fields tested
        self.needs = Counter(f for fs in typed.rule_validity for f in fs)  # validity field -> rules that test it
        self._pipeline = pipeline
        self._static = [e for e in pipeline.entries if not _lane_managed(pipeline, e.table)]
        self._stats = dict(stats or {})
        self.lanes: list[Lane] | None = None
        self.why_not: str | None = None
        try:
            if not exact:
                raise Fallback("the pipeline widens rules to fit its budget")
            self.assignment = LaneAssignment(typed.rules.rules, lanes, pipeline.lanes)
            built = []
            for i in range(pipeline.lanes):
                state_width = next(m.width for m in pipeline.metadata if m.name == ir.lane_state(i))
                call = self.spec.default_action if i == 0 else None
                image = read_lane(pipeline, i, typed.match_fields, call)
                groups = None if pipeline.delivery.is_bitmap else Groups.of(pipeline.multicast_groups)
                lane = Lane(image, pipeline.spec, self.options.tables, i, pipeline.delivery, state_width, call, groups)
                members = None if pipeline.lanes == 1 else lanes[i]
                lane.seed(r for r in (lane.residual(c, a) for c, a in bdd.rule_cubes(typed, self.options.dnf_limit,
                                                                                     members)) if r is not None)
                built.append(lane)
            self.lanes = built
        except Fallback as exc:
            self.why_not = exc.reason

    # -- the rules, kept or read again when asked for ------------------------------------------------
    @property
    def rules(self) -> Counter:
        """The current rules as a multiset. A session loaded from a cache (:mod:`compiler.incremental.cache`)
        does not hold them: 100,000 rules are three million objects, slower to unpickle than to parse
        again. They are read from the source the cache names the first time they are asked for, and the
        updates made since are applied to them."""
        if self._rules is None:
            rules = Counter(self._rules_source().rules)
            for add, remove in self._pending:
                rules.subtract(remove)
                rules.update(add)
            self._rules = +rules
            self._rules_source = None
            self._pending = []
        return self._rules

    def detach_rules(self, source) -> None:
        """Drop the rule multiset; ``source()`` (a RuleSet equal to the current rules) gives it back when
        :attr:`rules` is asked for. Updates whose removals the caller vouches for (``update(...,
        checked=True)``) do not need it."""
        self._rules, self._rules_source, self._pending = None, source, []

    def warm(self) -> None:
        """Build what the first update would otherwise build (see :meth:`IncrementalBuilder.warm`)."""
        for lane in self.lanes or ():
            lane.builder.warm()

    def __getstate__(self) -> dict:
        if self._rules is not None:
            raise ValueError("detach the rules (detach_rules) before pickling a session")
        return {k: v for k, v in vars(self).items() if k != "_rules_source"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._rules_source = None

    # -- reading ----------------------------------------------------------------------------------
    @property
    def incremental(self) -> bool:
        """Whether updates can take the incremental path (else :attr:`why_not` says why)."""
        return self.lanes is not None

    def rule_set(self) -> ast.RuleSet:
        return ast.RuleSet(tuple(r for r, n in self.rules.items() for _ in range(n)))

    def lane_members(self, rules: ast.RuleSet) -> list[list[int]] | None:
        """For a pipeline in several lanes, the indexes of ``rules`` (the current rules, in any order)
        each lane holds (what ``lanes.json`` records for a later ``--update``); None for one lane."""
        if self.lanes is None or len(self.lanes) == 1:
            return None
        return self.assignment.lanes_of(rules.rules)

    def typed(self) -> TypedRules:
        """The current rules as the full compile types them (for verify and the oracle)."""
        rules = self.rule_set()
        return TypedRules(rules, dict(self.fields), self.spec, self.guard, _validity_fields(self.validity_fields),
                          tuple(self._tests(r) for r in rules), self.queried)

    def _tests(self, rule: ast.Rule) -> tuple[str, ...]:
        """The validity fields ``rule`` tests under the program's guard (as :func:`validity.plan` finds them)."""
        headers = validity.rule_headers(rule, self.spec)
        found = self._required.get(headers)
        if found is None:
            found = self._required[headers] = validity.required(headers, frozenset(self.guard), self.spec)
        return found

    def pipeline(self) -> ir.Pipeline:
        """The current pipeline (built from the lanes' entries: O(entries))."""
        if self.lanes is None:
            return self._pipeline
        entries = tuple(self._static) + tuple(e for lane in self.lanes for e in lane.all_entries())
        groups = self._pipeline.multicast_groups
        if self.lanes[0].groups is not None:
            groups = tuple(self.lanes[0].group_list())
        states = sum(len(lane.state_of) for lane in self.lanes)
        return dataclasses.replace(self._pipeline, entries=entries, multicast_groups=groups, states=states)

    def counts(self) -> tuple[int, int, int]:
        """(entries, states, multicast groups) of the current pipeline, without building it."""
        if self.lanes is None:
            p = self._pipeline
            return len(p.entries), p.states, len(p.multicast_groups)
        entries = len(self._static) + sum(sum(lane.table_counts.values()) for lane in self.lanes)
        groups = (len(self.lanes[0].groups.id_of) if self.lanes[0].groups is not None
                  else len(self._pipeline.multicast_groups))
        return entries, sum(len(lane.state_of) for lane in self.lanes), groups

    def stats(self) -> dict:
        p = self.pipeline()
        stats = {**self._stats, **pipeline_stats(p, self._stats.get("compile_seconds", 0.0))}
        stats["budget_misses"] = self.options.budget.misses(stats)
        stats["cost_bits"] = layout_cost(stats, p)
        return stats

    # -- updating ---------------------------------------------------------------------------------
    def update(self, add: Iterable[ast.Rule] = (), remove: Iterable[ast.Rule] = (), *, checked: bool = False) -> Update:
        """Add and remove rules; the delta from the pipeline before to the pipeline after. ``checked``:
        the caller knows every removed rule is in the set (a session without its rules, :meth:`detach_rules`,
        then need not read them)."""
        start = time.perf_counter()
        add, remove = list(add), list(remove)
        if not (checked and self._rules is None):
            for r, k in Counter(remove).items():
                if self.rules.get(r, 0) < k:
                    raise P4subError(f"cannot remove a rule that is not in the compiled set: {r}", r.location)
        try:
            if self.lanes is None:
                raise Fallback(self.why_not or "no incremental state")
            out = self._incremental(add, remove)
        except Fallback as exc:
            rules = self.rules.copy()
            rules.subtract(remove)
            rules.update(add)
            out = self._full(Counter({r: n for r, n in rules.items() if n > 0}), exc.reason)
        out.seconds = time.perf_counter() - start
        return out

    def diff(self, rules: ast.RuleSet) -> tuple[list[ast.Rule], list[ast.Rule]]:
        """(rules to add, rules to remove) to get from the current multiset to ``rules``."""
        new = Counter(rules.rules)
        return list((new - self.rules).elements()), list((self.rules - new).elements())

    def replace(self, rules: ast.RuleSet) -> Update:
        """Update to ``rules`` (the multiset difference against the current rules is applied)."""
        return self.update(*self.diff(rules))

    def _incremental(self, add: list[ast.Rule], remove: list[ast.Rule]) -> Update:
        typed_add = self._check(add)
        reads, needs = self.reads.copy(), self.needs.copy()
        for r in add:
            reads.update(validity.rule_headers(r, self.spec))
            needs.update(self._tests(r))
        for r in remove:
            reads.subtract(validity.rule_headers(r, self.spec))
            needs.subtract(self._tests(r))
        self._same_headers(reads, needs, self.n_rules + len(add) - len(remove))
        if self._pipeline.delivery.is_bitmap:
            ports = set(self._pipeline.delivery.ports)
            extra = sorted({p for r in add for p in r.ports} - ports)
            if extra:
                raise Fallback(f"port {extra[0]} is not in the program's port bitmap")
        changes, moves = self._route(typed_add, remove)
        plans = {i: self.lanes[i].plan(change) for i, change in enumerate(changes) if change}
        old: list[ir.Entry] = []
        new: list[ir.Entry] = []
        delta = Delta()
        total = 0
        for i, lane in enumerate(self.lanes):
            plan = plans.get(i)
            if plan is None or not plan.changed:
                total += sum(lane.table_counts.values())
                continue
            total += sum(plan.table_counts.values())
            old += plan.old_entries
            new += plan.new_entries
            if lane.groups is not None and (plan.groups_added or plan.groups_removed):
                delta.groups_added, delta.groups_modified, delta.groups_deleted = diff_groups(
                    [ir.MulticastGroup(g, p) for p, g in plan.groups_removed.items()],
                    [ir.MulticastGroup(g, p) for p, g in plan.groups_added.items()])
                groups = len(lane.groups.id_of) + len(plan.groups_added) - len(plan.groups_removed)
                if groups > self.options.budget.groups:
                    raise Fallback(f"more multicast groups than the budget of {self.options.budget.groups}")
        if total > self.options.budget.entries:
            raise Fallback(f"{total} entries pass the budget of {self.options.budget.entries}")
        delta.added, delta.modified, delta.deleted = diff_entries(old, new)
        for i, plan in plans.items():
            self.lanes[i].commit(plan)
        self.assignment.commit(moves)
        if self._rules is None:
            self._pending.append((add, remove))
        else:
            for r in remove:
                self._rules[r] -= 1
                if not self._rules[r]:
                    del self._rules[r]
            self._rules.update(add)
        self.n_rules += len(add) - len(remove)
        self.reads, self.needs = +reads, +needs
        return Update(delta, True, rebuilt_root_edges=sum(p.rebuilt_edges for p in plans.values()),
                      nodes_born=sum(len(p.born) for p in plans.values()),
                      nodes_died=sum(len(p.died) for p in plans.values()), entries_of_changed_nodes=len(old) + len(new))

    def _route(self, typed_add: TypedRules, remove: list[ast.Rule]) -> tuple[list[Counter], list]:
        """Per lane, the change of each root residual's count; and the rule moves between lanes."""
        changes = [Counter() for _ in self.lanes]
        moves: list[tuple[ast.Rule, int, int]] = []
        limit = self.options.dnf_limit
        typed_remove = self._typed_subset(remove)
        taken: Counter = Counter()
        for i, r in enumerate(remove):
            lane = self.assignment.holder(r, taken)
            moves.append((r, lane, -1))
            for cube, actions in bdd.rule_cubes(typed_remove, limit, (i,)):
                res = self.lanes[lane].residual(cube, actions, changing=True)
                if res is not None:
                    changes[lane][res] -= 1
        lane_fields = [lane.level_names for lane in self.lanes]
        hubs = [lane.levels[0].field.name if lane.levels else None for lane in self.lanes]
        given = [0] * len(self.lanes)
        for i, r in enumerate(typed_add.rules.rules):
            cubes = bdd.rule_cubes(typed_add, limit, (i,))
            fields = {name for cube, _ in cubes for name, _ in cube}
            lane = self.assignment.choose(fields, bool(rule_actions(r).calls), lane_fields, hubs, given)
            given[lane] += 1
            moves.append((r, lane, 1))
            for cube, actions in cubes:
                res = self.lanes[lane].residual(cube, actions, changing=True)
                if res is not None:
                    changes[lane][res] += 1
        return changes, moves

    def _check(self, add: list[ast.Rule]) -> TypedRules:
        """Type-check the added rules (errors are the user's) and refuse what needs another program."""
        typed = check_rules(ast.RuleSet(tuple(add)), self.base_spec, port_bits=self.options.port_bits)
        for name, q in typed.fields.items():
            old = self.fields.get(name)
            if old is None or (q.width, q.match_kind, q.scale, q.is_string) != (old.width, old.match_kind, old.scale,
                                                                                 old.is_string):
                raise Fallback(f"the new rules test {name}, which the program does not match")
        for name, a in typed.spec.actions.items():
            old = self.spec.actions.get(name)
            if old is None or len(old.arg_widths) != len(a.arg_widths) or any(
                    n > o for n, o in zip(a.arg_widths, old.arg_widths)):
                raise Fallback(f"action {name} needs other argument widths")
        return self._typed_subset(add)

    def _typed_subset(self, rules: list[ast.Rule]) -> TypedRules:
        """Some rules typed as members of the whole set (its fields and guard, their validity fields)."""
        return TypedRules(ast.RuleSet(tuple(rules)), self.fields, self.spec, self.guard,
                          _validity_fields(self.validity_fields), tuple(self._tests(r) for r in rules), self.queried)

    def _same_headers(self, reads: Counter, needs: Counter, n_rules: int) -> None:
        """Refuse a change of the guard, the validity fields or the queried headers (the program's shape).
        ``needs`` counts the validity fields under the current guard: right whenever the guard stays."""
        order = {h.name: i for i, h in enumerate(self.spec.headers)}
        read = frozenset(h for h, c in reads.items() if c > 0)
        common = frozenset(h for h in read if reads[h] == n_rules) if n_rules else frozenset()
        guard = tuple(sorted(validity.guard_of(common, read, self.spec), key=order.__getitem__))
        extra = tuple(sorted((f for f, c in needs.items() if c > 0),
                             key=lambda f: order[validity.header_of_validity(f)]))
        queried = tuple(sorted(read, key=order.__getitem__))
        if guard != tuple(self.guard) or extra != self.validity_fields or queried != tuple(self.queried):
            raise Fallback("the headers the rules read change (the program's guard, validity fields or default path)")

    def _full(self, rules: Counter, reason: str) -> Update:
        old = self.pipeline()
        rule_set = ast.RuleSet(tuple(r for r, n in rules.items() for _ in range(n)))
        options = self.options
        order = options.field_order or (old.field_order if old.lanes == 1 else ())
        if order:
            # Keep the field order (the old program's control order, or the one asked for) for the
            # fields the new rules still test: a field no rule tests any more cannot be ordered.
            tested = check_rules(rule_set, self.base_spec, port_bits=options.port_bits).match_fields
            options = dataclasses.replace(options, field_order=tuple(f for f in order if f in tested))
        compiled = compile_rules(self.base_spec, rule_set, options)
        new = compiled.pipeline
        delta = diff_pipelines(old, new)
        self._load(rule_set, new, compiled.widening is None, compiled.typed, compiled.stats,
                   compiled.lanes.lanes if compiled.lanes else None)
        return Update(delta, False, reason, not same_program(old, new), entries_of_changed_nodes=len(old.entries)
                      + len(new.entries))


def _reads(typed: TypedRules) -> Counter:
    """How many rules read each header. Every rule reads each scalar guard header, and beyond the
    guard the headers its validity fields name; only stacked guard headers need the rules read."""
    spec = typed.spec
    if (any(spec.header(h).stack_size for h in typed.guard) or len(typed.rule_validity) != len(typed.rules)
            or any(spec.implied_headers().values())):  # a validity field may stand for several headers
        return Counter(h for r in typed.rules for h in validity.rule_headers(r, spec))
    reads = Counter({h: len(typed.rules) for h in typed.guard})
    reads.update(validity.header_of_validity(f) for fs in typed.rule_validity for f in fs)
    return reads


def _validity_fields(names: Sequence[str]) -> dict:
    from compiler.spec import QueryField

    return {n: QueryField(n, 1, "exact") for n in names}


def _lane_managed(pipeline: ir.Pipeline, table: str) -> bool:
    t = next((t for t in pipeline.tables if t.name == table), None)
    return t is not None and t.role in ("field", "miss", "leaf", "call")
