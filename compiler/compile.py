"""The compiler's front door: spec and rules in, a checked Pipeline IR and its statistics out."""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from compiler import bdd, ir, stateful
from compiler.base import CompileError, P4subError, limits
from compiler.budget import Coverage, Selectivity, Widening, widenings
from compiler.coarsen import Coarsening, coarsen
from compiler.default_path import Default, add_default, default_of
from compiler.dnf import DEFAULT_LIMIT, ActionSet, rule_actions
from compiler.lanes import PARTITIONS, LaneChoice, choose_lanes
from compiler.rules import RuleSet, TypedRules, check_rules, read_rules
from compiler.spec import Spec
from compiler.tables import TableOptions, bitmap_delivery, build_lanes, build_pipeline, pipeline_stats

DELIVERIES = ("auto", "groups", "bitmap")
#: ``--delivery groups`` builds its one diagram up to this many times the entry budget (at least
#: GROUPS_MIN_EDGES edges), then refuses: past that it would only grow until memory ends.
GROUPS_EDGE_FACTOR = 10
GROUPS_MIN_EDGES = 1_000_000


@dataclass(frozen=True)
class Budget:
    """What one switch pipeline may use. The defaults are a Tofino-class switch's: 12 stages, 64K
    multicast groups, and a few hundred thousand entries over all tables (docs/compiler.md)."""

    entries: int = 300_000
    groups: int = 65_536
    stages: int = 12
    # Bounds on the compile itself (compiler.base.limits): the search returns the best layout found
    # when one runs out. None: no time bound; the memory ceiling then defaults to half the machine's.
    seconds: float | None = None
    memory: int | None = None

    def misses(self, stats: dict) -> list[str]:
        """What a compiled pipeline's statistics exceed, in words (empty when it fits)."""
        out = []
        if stats["total_entries"] > self.entries:
            out.append(f"{stats['total_entries']} entries > {self.entries}")
        if stats["multicast_groups"] > self.groups:
            out.append(f"{stats['multicast_groups']} multicast groups > {self.groups}")
        if stats["dependent_tables"] + 1 > self.stages:  # +1: the delivery step
            out.append(f"{stats['dependent_tables']} dependent tables + delivery > {self.stages} stages")
        return out


def parse_budget(text: str, base: Budget = Budget()) -> Budget:
    """``entries=N,groups=M,stages=S,time=SECONDS,memory=SIZE`` (any subset) over ``base``."""
    values: dict[str, int | float] = {}
    expected = "expected entries=N,groups=M,stages=S,time=SECONDS,memory=SIZE with positive numbers"
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, number = item.partition("=")
        if name == "time":
            try:
                seconds = float(number)
            except ValueError:
                seconds = -1.0
            if not 0 < seconds < float("inf"):
                raise P4subError(f"--budget {text!r}: time={number!r}: {expected}")
            values["seconds"] = seconds
        elif name == "memory":
            try:
                values["memory"] = limits.parse_size(number)
            except P4subError as exc:
                raise P4subError(f"--budget {text!r}: {exc.message}") from None
        elif name not in ("entries", "groups", "stages") or not number.isdigit() or int(number) < 1:
            raise P4subError(f"--budget {text!r}: {expected}")
        else:
            values[name] = int(number)
    return Budget(**{**base.__dict__, **values})


@dataclass(frozen=True)
class CompileOptions:
    field_order: tuple[str, ...] = ()
    dnf_limit: int = DEFAULT_LIMIT
    tables: TableOptions = field(default_factory=TableOptions)
    port_bits: int = 9
    # Layout: ``groups`` is one lane whose leaves name a port or a multicast group per port set (the
    # first compiler's layout); ``bitmap`` ORs port bits on the way and allows several lanes; ``auto``
    # compiles both and keeps what fits the budget and costs fewer bits (groups for stack specs).
    delivery: str = "auto"
    lanes: int | None = None  # None: chosen (1 for groups)
    max_lanes: int = 8
    # How rules are split into lanes (compiler.lanes.choose_lanes): ``hub`` by the attributes they
    # test, ``port`` by the ports they give, ``auto`` tries both (and one lane) when the count is chosen.
    # None: ``hub`` for a lone switch (the layout --like and updates in place keep), ``auto`` for the
    # switches of a routed network (compiler.network.compile.switch_rules: few ports, many rules).
    lane_partition: str | None = None
    budget: Budget = field(default_factory=Budget)
    order_search: float = 0.0  # seconds of field-order search (sifting) over all lanes
    exact: bool = False  # refuse to widen rules when no exact layout fits the budget
    sample: dict | None = None  # packets (field -> values) for the selectivity of constraints (compiler.budget)
    default: Default = field(default_factory=Default)  # packets no rule looks at (compiler.default_path)
    # Ports the target gives another meaning (port, what it is): refused at the rules' fwd (typecheck).
    reserved_ports: tuple[tuple[int, str], ...] = ()
    # At most this many thresholds on a field (field, count): the rules' interval ends are moved
    # outward to the kept ones (compiler.coarsen); a target asks for it when a code table is too big.
    codes: tuple[tuple[str, int], ...] = ()
    # The target renders port bitmaps for packets of several messages (a bitmap per message, the
    # egress keeping per port the messages whose bitmap has its bit): ``auto`` may then choose
    # bitmaps for a spec that queries a header stack, when the groups layout does not fit.
    stack_bitmaps: bool = False


@dataclass
class Compiled:
    typed: TypedRules
    diagram: bdd.Diagram  # lane 0's
    pipeline: ir.Pipeline
    stats: dict
    diagrams: tuple[bdd.Diagram, ...] = ()
    lanes: LaneChoice | None = None
    widening: Widening | None = None  # None: exact

    def evaluate(self, values: dict[str, int]) -> ActionSet:
        """What the diagrams give one packet: the union over lanes."""
        out = ActionSet()
        for d in self.diagrams or (self.diagram,):
            out = out | d.evaluate(values)
        return out


def compile_rules(spec: Spec, rules: RuleSet, options: CompileOptions = CompileOptions()) -> Compiled:
    """Type-check, build the diagram(s), slice them into tables; timing covers all of it."""
    start = time.perf_counter()
    typed = check_rules(rules, spec, port_bits=options.port_bits, reserved_ports=dict(options.reserved_ports))
    state = stateful.plan(typed)  # counters the rules read (binding errors before any diagram)
    spec = typed.spec  # with the actions a pragma-only spec's rules call (compiler.rules.typecheck)
    delivery = options.delivery
    if delivery not in DELIVERIES:
        raise P4subError(f"delivery {delivery!r}: expected one of {', '.join(DELIVERIES)}")
    stacks = stacked_query_headers(spec, typed)
    if delivery == "auto" and spec.default_action:
        delivery = "groups"  # whether any rule matched is known only in one lane (compiler.tables)
    if delivery == "auto" and stacks and (options.lanes or 1) == 1 and not options.stack_bitmaps:
        # The target evaluates a stack's messages into port sets with groups only; an explicit bitmap
        # request compiles (the model runs it) and that backend refuses to render it.
        delivery = "groups"
    if options.lane_partition is not None and options.lane_partition not in PARTITIONS:
        raise P4subError(f"lane partition {options.lane_partition!r}: expected one of {', '.join(PARTITIONS)}")
    if options.lanes is not None and options.lanes < 1:
        raise P4subError(f"--lanes {options.lanes}: expected a positive number or auto")
    if delivery == "groups" and (options.lanes or 1) > 1:
        raise CompileError(f"--lanes {options.lanes} needs --delivery bitmap (lanes OR port bitmaps; "
                           "multicast group ids cannot be combined)")
    candidates: list[Compiled] = []
    notes: list[str] = []
    coarsened: list[Coarsening] = []
    most = options.budget.entries + options.budget.entries // 4  # edges: entries and each node's default
    if delivery == "auto" and stacks:
        # A stack of messages (only when the target renders bitmaps for it): groups first, one
        # diagram, what both targets have long rendered; lanes and bitmaps only when groups do not
        # fit the budget (4-constraint ITCH at 10k filters needs 94k multicast groups).
        grouped = _groups(spec, typed, options, most, notes, coarsened, required=False)
        if grouped is not None:
            candidates.append(grouped)
        if grouped is None or options.budget.misses(grouped.stats):
            candidates.append(_bitmap(spec, typed, options, notes, coarsened))
    else:
        if delivery in ("bitmap", "auto"):
            candidates.append(_bitmap(spec, typed, options, notes, coarsened))
        widened = [c for c in candidates if c.widening != _coarsening_widening(coarsened)]  # more than coarsened
        if delivery == "auto" and widened:
            # The bitmap layout needed widening even in lanes: one diagram that carries decided rules
            # to its leaves is hardly ever smaller, and on such rule sets building it ran for minutes.
            notes.append("groups: not tried (the bitmap layout did not fit exactly)")
        elif delivery in ("groups", "auto") and (options.lanes or 1) == 1:
            # Under auto, stop building a diagram that cannot fit (more edges than the entry budget)
            # or cannot win (many times the bitmap layout's edges). Asked for explicitly, the one
            # diagram may pass the entry budget (the budget misses are reported), but not by
            # GROUPS_EDGE_FACTOR times: past that it only grows until memory ends.
            limit = max(GROUPS_EDGE_FACTOR * options.budget.entries, GROUPS_MIN_EDGES)
            if delivery == "auto":
                exact = [c for c in candidates if c.widening is None]
                limit = min(most, max(2 * exact[0].lanes.size, 20_000)) if exact else most
            grouped = _groups(spec, typed, options, limit, notes, coarsened, required=delivery == "groups",
                              fallback=bool(candidates))
            if grouped is not None:
                candidates.append(grouped)
    for c in candidates:
        c.pipeline = add_default(dataclasses.replace(c.pipeline, guard=typed.guard), options.default, typed.queried)
        c.pipeline = stateful.attach(c.pipeline, state)
        c.stats["budget_misses"] = options.budget.misses(c.stats)
        c.stats["cost_bits"] = layout_cost(c.stats, c.pipeline)
    # What fits first, then exact before approximate, then (for a stack of messages, where groups
    # are the long-standing layout) groups, then the cheaper.
    best = min(candidates, key=lambda c: (bool(c.stats["budget_misses"]), c.widening is not None,
                                          bool(stacks) and c.stats["delivery"] != "groups", c.stats["cost_bits"]))
    for c in candidates:
        if c is not best:
            notes.append(f"{c.stats['delivery']}: {c.stats['total_entries']} entries, {c.stats['multicast_groups']} "
                         f"groups, cost {c.stats['cost_bits']} bits" + (" (does not fit: " + "; ".join(
                             c.stats["budget_misses"]) + ")" if c.stats["budget_misses"] else ""))
    best.stats["layout_notes"] = notes
    best.stats["exact"] = best.widening is None
    if best.widening is not None:
        best.stats["approximation"] = best.widening.to_json()
    if coarsened and best.widening is not None:
        best.stats["coarsened"] = [{"field": c.field, "thresholds_before": c.cuts_before,
                                    "thresholds_after": c.cuts_after, "widened_cubes": c.widened_cubes}
                                   for c in coarsened]
    best.stats["compile_seconds"] = round(time.perf_counter() - start, 4)
    return best


def _groups(spec: Spec, typed: TypedRules, options: CompileOptions, limit: int, notes: list[str],
            coarsened: list[Coarsening], required: bool, fallback: bool = False) -> Compiled | None:
    """The groups candidate: one diagram, leaves naming a port or a multicast group per port set;
    None (with a note) when it passes ``limit`` edges, an error when ``required`` (``--delivery
    groups``). A time or memory budget that runs out while it is built is an error unless another
    candidate can answer (``fallback``)."""
    try:
        cubes = bdd.rule_cubes(typed, options.dnf_limit)
        if options.codes:
            (cubes,), done = coarsen([cubes], dict(options.codes), options.sample)
            coarsened += [c for c in done if c not in coarsened]
        diagram = bdd.build_cubes(cubes, typed.match_fields, field_order=options.field_order or None, max_edges=limit)
    except limits.OutOfBudget as exc:
        if not fallback:
            raise
        notes.append(f"groups: not finished ({exc.message})")
        return None
    except bdd.DiagramTooLarge:
        if required:
            raise CompileError(f"--delivery groups: the one decision diagram passed {limit:,} edges (the entry "
                               f"budget is {options.budget.entries:,}) and was abandoned; use --delivery bitmap "
                               "(lanes) or raise --budget entries=N") from None
        notes.append(f"groups: one diagram passed {limit} edges")
        return None
    pipeline = build_pipeline(diagram, spec, options.tables)
    return Compiled(typed, diagram, pipeline, pipeline_stats(pipeline, 0.0), (diagram,),
                    widening=_coarsening_widening(coarsened))


def _candidate(lanes: int, kind: str) -> str:
    """A lane candidate in the layout notes: "8 lanes by port", "1 lane", "1 lane (port lanes merged)"."""
    if lanes > 1:
        return f"{lanes} lanes by {kind}"
    return "1 lane" + (f" ({kind})" if kind not in ("one lane", "hub") else "")


def _coarsening_widening(coarsened: Sequence[Coarsening], then: Widening | None = None) -> Widening | None:
    """One :class:`Widening` for coarsened fields (and a constraint-dropping step after them)."""
    if not coarsened:
        return then
    step = "+".join([c.step for c in coarsened] + ([then.step] if then else []))
    return Widening(step, then.max_constraints if then else None, then.dropped if then else 0,
                    max(sum(c.widened_cubes for c in coarsened), then.widened_rules if then else 0))


def _bitmap(spec: Spec, typed: TypedRules, options: CompileOptions, notes: list[str],
            coarsened: list[Coarsening]) -> Compiled:
    """The port-bitmap candidate: exact in lanes when that fits the budget, else the least widening
    of the rules (:mod:`compiler.budget`) that does, unless ``options.exact``.

    The widening steps only ever widen, so the compiled size shrinks along them: after the exact
    attempt the least step that fits is found by bisection, each attempt stopped as soon as its
    diagrams pass the entry budget (an attempt that would not fit costs no more than one that does).
    """
    cubes_of = [bdd.rule_cubes(typed, options.dnf_limit, (i,)) for i in range(len(typed.rules))]
    if options.codes:
        cubes_of, done = coarsen(cubes_of, dict(options.codes), options.sample)
        coarsened += done
    pinned = [i for i, r in enumerate(typed.rules) if rule_actions(r).calls]
    ports = sorted({p for r in typed.rules for p in rule_actions(r).ports} | set(options.tables.min_ports))
    steps: list[tuple[Widening | None, list]] = [(None, cubes_of)]
    # Edges are about entries plus each node's default edge: past this many, the entries do not fit.
    limit = options.budget.entries + options.budget.entries // 4

    def attempt(i: int) -> Compiled | None:
        widening, cubes = steps[i]
        name = widening.step if widening else "exact"
        try:
            choice = choose_lanes(cubes, typed.match_fields, lanes=options.lanes, max_lanes=options.max_lanes,
                                  field_order=options.field_order or None, pinned=pinned, max_edges=limit,
                                  search_seconds=options.order_search, partition=options.lane_partition or "hub")
        except bdd.DiagramTooLarge:
            notes.append(f"bitmap {name}: more than {limit} edges in every lane count tried")
            return None
        pipeline = build_lanes(choice.diagrams, spec, bitmap_delivery(ports, len(choice.diagrams)), options.tables)
        notes.extend(f"bitmap {name}: {_candidate(n, kind)} -> " + (f"{s} edges" if s is not None else "abandoned")
                     for n, s, kind in choice.tried)
        compiled = Compiled(typed, choice.diagrams[0], pipeline, pipeline_stats(pipeline, 0.0), choice.diagrams,
                            choice, _coarsening_widening(coarsened, widening))
        several = len(choice.diagrams) > 1
        compiled.stats["lane_partition"] = ("port" if choice.ports else "hub") if several else "one lane"
        if choice.ports:
            compiled.stats["lane_ports"] = [list(p) for p in choice.ports]
        misses = options.budget.misses(compiled.stats)
        if misses:
            notes.append(f"bitmap {name}: " + "; ".join(misses))
        return compiled

    try:
        with limits.share(0.5):  # under a time budget, half of it at most: the widening must answer
            first = attempt(0)
    except limits.OutOfBudget as exc:
        if options.exact or exc.kind != "time" or not limits.remaining():
            raise exc.__class__(exc.kind, f"{exc.message} while the exact layout was built") from None
        notes.append("bitmap exact: not finished in half the time budget")
        first = None
    if first is not None and not options.budget.misses(first.stats):
        return first
    if not options.exact:  # worked out only when the exact layout does not fit
        coverage = Coverage(cubes_of, options.sample) if options.sample else None
        steps += [(w, c) for w, c in widenings(cubes_of, Selectivity(typed.match_fields, options.sample), coverage)
                  if w.dropped]
    best, lo, hi = None, 1, len(steps) - 1

    def fits(got: Compiled | None) -> bool:
        return got is not None and not options.budget.misses(got.stats)

    try:
        if limits.remaining() is not None and hi >= lo:
            # Under a time budget the search goes from the wide end, where steps are quick to build
            # and fit: first the widest (it always fits), then steps 1, 2, 4, ... narrower while they
            # fit; each improves the answer the budget's end returns. Then bisection, as without one.
            gaps = itertools.chain((1, 1), (1 << k for k in itertools.count(1)))
            while lo <= hi:
                probe = max(lo, hi + 1 - next(gaps))
                got = attempt(probe)
                if not fits(got):
                    lo = probe + 1
                    break
                best, hi = got, probe - 1
        while lo <= hi:  # the least step in [lo, hi] that fits; steps[-1] (no constraint) always does
            mid = (lo + hi) // 2
            got = attempt(mid)
            if fits(got):
                best, hi = got, mid - 1
            else:
                lo = mid + 1
    except limits.OutOfBudget as exc:
        if best is None:
            exact = ("; ".join(options.budget.misses(first.stats)) if first else
                     next((n.split(": ", 1)[1] for n in notes if n.startswith("bitmap exact: ")), "not built"))
            raise exc.__class__(exc.kind, f"{exc.message} before any widening step fitted (the exact layout: "
                                          f"{exact})") from None
        # The narrowest step tried that fits is kept: a narrower one may fit too, unknown in the time.
        notes.append(f"search stopped: {exc.message}; steps {lo} to {hi} of {len(steps) - 1} not tried")
        best.stats["search_stopped"] = exc.message
    if best is not None:
        return best
    if first is not None:
        return first  # nothing to widen (or --exact): the exact layout, with what it misses
    raise CompileError(f"the rules do not fit {options.budget.entries} entries in up to {options.max_lanes} lanes"
                       + ("" if options.exact else ", even with every rule cut to one constraint")
                       + "; raise --max-lanes or the budget")


def stacked_query_headers(spec: Spec, typed: TypedRules) -> list[str]:
    """The header stacks the rules query (a packet then carries several messages)."""
    queried = {name.split(".", 1)[0] for name in typed.fields}
    return sorted(h.name for h in spec.headers if h.stack_size and h.name in queried)


def layout_cost(stats: dict, pipeline: ir.Pipeline) -> int:
    """What a layout costs, in bits: its table bits, and for multicast groups a 32-bit replication
    node per member (a Tofino PRE L1/L2 node is about that), so that groups and bitmaps compare."""
    return stats["table_bits"] + 32 * sum(len(g.ports) for g in pipeline.multicast_groups)


def compile_files(spec_path: str | Path, rules_path: str | Path, options: CompileOptions = CompileOptions()) -> Compiled:
    from compiler.spec import read_spec

    return compile_rules(read_spec(spec_path), read_rules(rules_path), options)


def like(old: ir.Pipeline, options: CompileOptions) -> CompileOptions:
    """The options that keep ``old``'s program for an update in place: its layout (delivery, lane
    count, bitmap ports), and its state widths and table sizes as floors."""
    from dataclasses import replace

    state_bits = max((m.width for m in old.metadata if m.name.startswith(ir.STATE)), default=0)
    tables = replace(options.tables, min_state_bits=state_bits, min_sizes={t.name: t.size for t in old.tables},
                     min_ports=old.delivery.ports)
    return replace(options, tables=tables, delivery=old.delivery.kind, lanes=old.lanes, default=default_of(old))


def lanes_arg(text: str | None) -> int | None:
    """``--lanes``: a positive count, or ``auto`` (None)."""
    if text is None or text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise P4subError(f"--lanes {text!r}: expected a positive number or auto")
    return int(text)


def field_order_arg(text: str | None) -> Sequence[str]:
    return tuple(f.strip() for f in text.split(",") if f.strip()) if text else ()
