"""``p4sub compile SPEC RULES -o OUT``: compile subscriptions into a pipeline (and a target's files)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from backends import target_compile_options
from compiler import ir
from compiler.base import P4subError, ResourceError, limits, output_dir, paused, staged_outputs, write_files
from compiler.compile import (
    DELIVERIES,
    Budget,
    CompileOptions,
    compile_rules,
    field_order_arg,
    lanes_arg,
    like,
    parse_budget,
)
from compiler.default_path import parse_default
from compiler.dnf import DEFAULT_LIMIT
from compiler.lanes import PARTITIONS
from compiler.spec import Spec
from compiler.tables import RANGE_ENCODINGS, TableOptions
from p4sub import add_command

TARGETS = ("none", "bmv2", "tofino")
#: --max-lanes above this is refused: each lane is a chain of tables with its own metadata, and a
#: switch has a few dozen stages at most.
MAX_LANES = 64


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "compile", "compile subscriptions into a Pipeline IR and a target's P4 program and entries",
                    "p4sub compile apps/itch/itch.p4 apps/itch/rules.sub --target bmv2 -o out")
    p.add_argument("spec", nargs="?", help="P4 file with the protocol's headers, parser and @query_* annotations "
                   "(with --update: optional, default the one in OLD_OUT)")
    p.add_argument("rules", nargs="?", help="subscription rule file")
    p.add_argument("-o", "--out", required=True, help="output directory (created if missing)")
    p.add_argument("--target", choices=TARGETS, default="none", help="also render this target's program and entries")
    p.add_argument("--field-order", help="comma-separated fields tested first (default: fewest distinct predicates first)")
    p.add_argument("--range-encoding", choices=RANGE_ENCODINGS, default="range",
                   help="how non-exact fields are matched: range keys, ternary prefixes, or a compressed code")
    p.add_argument("--encode", action="append", default=[], metavar="FIELD=KIND",
                   help="match kind for one field (exact, range, ternary, lpm, compress); repeatable")
    p.add_argument("--state-bits", type=int, default=0, metavar="N",
                   help="make each lane's state at least N bits wide (room for the shadow states of hitless updates)")
    p.add_argument("--dnf-limit", type=int, default=DEFAULT_LIMIT, help="largest DNF a single rule may expand to")
    p.add_argument("--delivery", choices=DELIVERIES, default="auto",
                   help="groups: a multicast group per port set (one lane); bitmap: port bits ORed along the way, "
                        "lanes allowed; auto: whichever fits the budget and costs fewer bits (default)")
    p.add_argument("--lanes", default="auto", metavar="N|auto",
                   help="independent table chains the rules are split into (bitmap delivery); auto picks the count "
                        "up to --max-lanes with the smallest compiled size")
    p.add_argument("--max-lanes", type=int, default=8, help="most lanes auto may use (default 8)")
    p.add_argument("--lane-partition", choices=PARTITIONS, default="hub",
                   help="how rules are split into lanes: hub (default: by the attributes they test), port (by the "
                        "ports they give: a lane per port or group of ports), auto (lanes by port, one lane and lanes "
                        "by hub are tried when --lanes is auto; hub for a given count)")
    p.add_argument("--exact", action="store_true",
                   help="refuse (exit 2) rather than widen rules when no exact layout fits the budget")
    p.add_argument("--trace", metavar="PCAP|JSONL",
                   help="traffic sample: which constraints to widen first when the budget needs it, and the extra "
                        "deliveries reported (default: uniform traffic over each field's domain)")
    p.add_argument("--order-search", type=float, default=0.0, metavar="SECONDS",
                   help="search field orders per lane (sifting, the compiled size as the cost) for this long")
    p.add_argument("--budget", default=None, type=budget_text, metavar="entries=N,groups=M,stages=S,time=S,memory=SIZE",
                   help=f"what the pipeline may use (default entries={Budget().entries},groups={Budget().groups},"
                        f"stages={Budget().stages}); auto delivery picks a layout that fits. time=SECONDS and "
                        "memory=SIZE (4G, 512M) bound the compile's search: when one runs out, the best layout found "
                        "so far is written (stats.json says search_stopped), or, if none fitted yet, the error says "
                        "by how much the last one missed and which rules cost most (default: no time bound, memory "
                        "half of this machine's)")
    p.add_argument("--allow-recirculation", action="store_true",
                   help="tofino: split a pipeline longer than the stages over two passes")
    p.add_argument("--fit-by", choices=("estimate", "bf-p4c"), default="estimate",
                   help="tofino: what judges whether a layout fits: p4sub's resource estimate (default), or also "
                        "bf-p4c (on PATH), run on every layout the estimate accepts; a layout bf-p4c cannot place "
                        "(stages, PHV) is answered with a smaller one, and resources.json holds bf-p4c's placement")
    p.add_argument("--batch", choices=("auto", "single", "first", "union", "split"),
                   help="how a packet with several messages is evaluated (see docs/bmv2.md, docs/tofino.md); "
                        "tofino: union (a copy of the tables per message, one pass), split (one copy of the "
                        "tables, each message recirculated and evaluated alone, two passes), auto (union when "
                        "it fits the chip, else split)")
    p.add_argument("--like", metavar="OLD_OUT",
                   help="keep the state width and table sizes of a previous compile's output (growing them only "
                        "where needed), so that an update renders the same program and installs as entry changes")
    p.add_argument("--update", metavar="OLD_OUT",
                   help="incremental compile: the new rules' pipeline computed from OLD_OUT's and the rule delta, "
                        "keeping OLD_OUT's program; also writes delta.json (entries and groups to add, modify, delete)")
    p.add_argument("--session", action="store_true",
                   help="also keep the incremental session (session.pickle) beside the output: a later --update "
                        "or p4sub serve loads it instead of reading the pipeline and every rule back (costs a few "
                        "seconds here; an --update output always keeps one)")
    p.add_argument("--default", default=None, metavar="drop|fwd(PORT)|table",
                   help="packets that carry no header a rule reads: dropped (default), sent to PORT, or through "
                        "the p4sub_default_l2/_l3 tables the user fills (an L2/L3 hook); with --emit control they are "
                        "left to your program unless fwd(PORT) or table is given")
    p.add_argument("--emit", choices=("program", "control"), default="program",
                   help="bmv2, tofino: a whole program (default), or only the subscription control p4sub_control.p4 "
                        "and its entries, to #include in your own v1model or TNA program (include mode, "
                        "docs/bmv2.md, docs/tofino.md)")
    p.add_argument("--headers-type", metavar="NAME",
                   help="--emit control: your program's headers struct type (default: the spec's, 'headers' for "
                        "a pragma-only spec); its members are the header instances the rules name")
    p.add_argument("--instance", default=None, metavar="CONTROL.NAME",
                   help="--emit control: where your program instantiates the control, which names the tables in "
                        "the entries (default MyIngress.p4sub on bmv2, SwitchIngress.p4sub on tofino: "
                        "P4subIngress() p4sub; inside that ingress control)")
    p.add_argument("--dot", help="also write the decision diagram as Graphviz to this file")
    p.set_defaults(func=run)


def reserved_ports(target: str) -> dict[int, str]:
    """Ports ``target`` gives another meaning, which rules may not ``fwd`` to: v1model's drop port
    (511; BMv2 refuses it in a multicast group and silently drops what is sent to it). ``check
    --target`` and ``compile --target`` both pass these to the type checker, so they agree."""
    if target == "bmv2":
        from backends.bmv2.target import V1MODEL

        return {V1MODEL.drop_port: f"v1model's drop port, not an egress port (bmv2 ports are 0..{V1MODEL.drop_port - 1})"}
    return {}


def target_port_bits(target: str) -> int | None:
    """The width of ``target``'s port numbers (PortId_t), None for no target."""
    if target == "bmv2":
        from backends.bmv2.target import V1MODEL

        return V1MODEL.port_width
    if target == "tofino":
        from backends.tofino.target import TOFINO1

        return TOFINO1.port_width
    return None


def options_from_args(args: argparse.Namespace) -> CompileOptions:
    per_field = {}
    for item in args.encode:
        name, _, kind = item.partition("=")
        if kind not in ("exact", "range", "ternary", "lpm", "compress"):
            raise P4subError(f"--encode {item!r}: expected FIELD=KIND with KIND one of exact, range, ternary, lpm, compress")
        per_field[name] = kind
    if not 1 <= args.max_lanes <= MAX_LANES:
        raise P4subError(f"--max-lanes {args.max_lanes}: expected a number from 1 to {MAX_LANES}")
    if not 0 <= args.state_bits <= 32:
        raise P4subError(f"--state-bits {args.state_bits}: expected a number from 0 to 32")
    if args.dnf_limit < 1:
        raise P4subError(f"--dnf-limit {args.dnf_limit}: expected a positive number")
    options = CompileOptions(field_order=tuple(field_order_arg(args.field_order)), dnf_limit=args.dnf_limit,
                             tables=TableOptions(range_encoding=args.range_encoding, per_field_encoding=per_field,
                                                 min_state_bits=args.state_bits),
                             delivery=args.delivery, lanes=lanes_arg(args.lanes), max_lanes=args.max_lanes,
                             lane_partition=args.lane_partition, budget=parse_budget(args.budget),
                             order_search=args.order_search, exact=args.exact,
                             default=parse_default(args.default or "drop"))
    if not args.order_search >= 0 or args.order_search != args.order_search or args.order_search > 86400:
        raise P4subError(f"--order-search {args.order_search}: expected seconds between 0 and 86400")
    reserved = reserved_ports(getattr(args, "target", "none"))
    if options.default.kind == "fwd" and options.default.port in reserved:
        raise P4subError(f"--default {args.default}: port {options.default.port} is {reserved[options.default.port]}")
    options = replace(options, reserved_ports=tuple(sorted(reserved.items())))
    if getattr(args, "like", None):
        options = like_options(args.like, options)
    return options


def like_options(old_out: str, options: CompileOptions) -> CompileOptions:
    """The options that keep ``OLD_OUT``'s program: its layout (delivery, lane count, bitmap ports),
    state widths and table sizes as floors, so that an update installs as entry changes."""
    path = Path(old_out) / "pipeline.json"
    if not path.is_file():
        raise P4subError(f"--like {old_out}: {path} does not exist (give the -o directory of an earlier compile)")
    return like(ir.load(path), options)


def budget_text(text: str) -> str:
    """``--budget``'s argument, refused when it names nothing: ``--budget ''`` compiled with the default
    budget without a word, which ``--exact`` then judged against (a probe's case)."""
    if not text.strip(" ,"):
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; expected entries=N,groups=M,stages=S,time=SECONDS,memory=SIZE "
                                         "(leave --budget out for the default)")
    return text


def budget_items(text: str) -> set[str]:
    """The names ``--budget`` gives (``entries``, ``groups``, ``stages``, ``time``, ``memory``): a target's
    limits keep out of those."""
    return {item.partition("=")[0].strip() for item in text.split(",") if item.strip()}


def check_encoded_fields(encodings: dict[str, str], spec: Spec) -> None:
    """``--encode F=KIND`` names a field of the spec (or a counter, or an aggregate of them): a
    misspelt name would otherwise be ignored without a word."""
    known = [*spec.query_fields, *spec.all_fields(), *spec.counters]
    for name in encodings:
        inner = name[name.index("(") + 1:-1] if name.endswith(")") and "(" in name else name
        if spec.field_width(inner) is None and inner not in spec.counters:
            close = difflib.get_close_matches(inner, known, n=1, cutoff=0.6)
            raise P4subError(f"--encode {name}={encodings[name]}: {spec.path} has no field {inner!r}"
                             + (f"; did you mean {close[0]!r}?" if close else ""))


def report_widening(compiled, options: CompileOptions, trace: str | None) -> None:
    """Measure and state what widening the rules costs: extra deliveries on the trace (or uniform traffic)."""
    from runtime.extra_deliveries import measure
    from runtime.sample import uniform

    fields = dict(compiled.typed.fields)
    sample = options.sample if options.sample is not None else uniform(fields)
    counts = measure(compiled.pipeline, compiled.typed, {f: sample[f] for f in fields})
    where = f"on {trace}" if trace else "under uniform traffic"
    compiled.stats["extra_deliveries"] = {**counts.to_json(), "traffic": where}
    a = compiled.stats["approximation"]
    cut = "".join(f"{c['field']}'s thresholds cut from {c['thresholds_before']} to {c['thresholds_after']}, "
                  for c in compiled.stats.get("coarsened", ()))
    print(f"warning: no exact layout fits the budget; rules widened ({a['step']}: {cut}{a['dropped_constraints']} "
          f"constraints dropped from {a['widened_rules']} rules): {counts.extra} extra deliveries for "
          f"{counts.wanted} wanted ({100 * counts.extra_per_wanted:.2f} %) {where}, {counts.missed} missed",
          file=sys.stderr)
    if not trace and counts.wanted < UNIFORM_MIN_WANTED:
        # Uniform traffic over a field's whole domain rarely meets real thresholds (INT latencies,
        # queue depths): the widening's order and this figure then say little about real traffic.
        print(f"warning: under uniform traffic the rules want {counts.wanted} of {len(next(iter(sample.values())))} "
              "sample packets, so neither the widening's choice nor this figure reflects real traffic: give "
              "--trace with a sample of it", file=sys.stderr)


#: Below this many wanted deliveries in the uniform sample, the uniform estimate is called uninformative.
UNIFORM_MIN_WANTED = 100


def check_like(old: ir.Pipeline, new: ir.Pipeline, old_out: str) -> None:
    """Refuse a ``--like`` compile whose program would differ from the old one (other tables, another
    bitmap): installing it would need a new program, not entry changes."""
    old_tables, new_tables = {t.name for t in old.tables}, {t.name for t in new.tables}
    if old_tables != new_tables or old.delivery.ports != new.delivery.ports:
        diff = sorted(old_tables ^ new_tables)
        raise P4subError(f"--like {old_out}: the new rules need another program ("
                         + (f"tables {', '.join(diff[:6])}{' ...' if len(diff) > 6 else ''} differ"
                            if diff else f"bitmap ports {list(new.delivery.ports)} instead of {list(old.delivery.ports)}")
                         + "); compile without --like and install the new program")


def include_mode(args: argparse.Namespace) -> bool:
    """``--emit control``: check the options that go with it (BMv2 or Tofino, groups, no drop default)."""
    include = getattr(args, "emit", "program") == "control"
    if not include:
        for flag, value in (("--headers-type", args.headers_type), ("--instance", args.instance)):
            if value is not None:
                raise P4subError(f"{flag} is an include-mode option: add --emit control")
        return False
    if args.target not in ("bmv2", "tofino"):
        raise P4subError("--emit control writes a BMv2 (v1model) or Tofino (TNA) control: add --target bmv2 or "
                         "--target tofino")
    if args.delivery == "bitmap":
        raise P4subError("--emit control: port-bitmap delivery needs an egress table that drops the copies whose port "
                         "bit is clear, in your program's egress; use --delivery groups (the default in include mode)")
    if args.default is not None and args.default.strip() == "drop":
        raise P4subError("--emit control --default drop: in include mode the packets no subscription looks at are "
                         "left to your program (meta.p4sub.matched == 0): drop them there, or give --default "
                         "fwd(PORT) or --default table for the control to decide")
    return True


def include_module(target: str):
    """The target's include-mode module (``backends.bmv2.include``, ``backends.tofino.include``)."""
    return importlib.import_module(f"backends.{target}.include")


def include_options(args: argparse.Namespace, spec):
    module = include_module(args.target)
    headers_type = args.headers_type or spec.headers_struct or "headers"
    instance = args.instance or module.DEFAULT_INSTANCE
    if args.target == "tofino":
        from backends.tofino import options_from_args as tofino_options

        return module.IncludeOptions(headers_type=headers_type, instance=instance, tofino=tofino_options(args))
    return module.IncludeOptions(headers_type=headers_type, instance=instance, batch=args.batch or "auto")


#: How many layouts the target may refuse before the compile gives up (each refusal is a compile).
MAX_REFUSALS = 10


class BfP4cJudge:
    """``--fit-by bf-p4c``: bf-p4c runs on every program the estimate accepts.

    Its "does not fit" goes into the compile's refusal loop like the estimate's, and the estimate is
    held to fewer stages from then on: the refused program's estimated stages less what bf-p4c needed
    beyond the chip (one for a PHV or crossbar refusal), so that the loop's next layout is one the
    estimate judges smaller. A program bf-p4c already refused is refused again without running it (a
    retry can render the same program)."""

    def __init__(self, options) -> None:
        import shutil

        from backends.tofino import bf_p4c

        compiler = shutil.which(bf_p4c.COMPILER)
        if compiler is None:
            raise P4subError(f"--fit-by bf-p4c: {bf_p4c.HOW_TO_GET}")
        self.compiler = compiler
        self.version = bf_p4c.version(compiler)
        self.options = options
        self.limit = options.target.stages  # what the estimate may use
        self.refused: dict[str, ResourceError] = {}
        self.last = None  # bf-p4c's placement of the last program it accepted
        self.first_refusal = ""

    def wrap(self, build):
        from backends.tofino import bf_p4c

        def judged(pipeline):
            target = self.options.target
            held = replace(self.options, target=replace(target, stages=self.limit))
            try:
                rendered = build(pipeline, held)  # the estimate first: it refuses most misfits in a second
            except ResourceError as exc:
                if self.limit == target.stages:
                    raise
                raise ResourceError(f"{exc} [held to {self.limit} of {target.stages} stages after bf-p4c refused a "
                                    f"layout the estimate accepted: {self.first_refusal}]", codes=exc.codes) from None
            text = rendered.program.text
            if text in self.refused:
                raise self.refused[text]
            print(f"note: bf-p4c judging a layout of {len(pipeline.entries):,} entries"
                  + (f" (the estimate held to {self.limit} stages)" if self.limit < target.stages else "") + " ...",
                  file=sys.stderr, flush=True)
            try:
                self.last = bf_p4c.judge(text, self.compiler)
            except bf_p4c.DoesNotFit as exc:
                self.refused[text] = exc
                self.first_refusal = self.first_refusal or str(exc)
                over = max(1, exc.stages_used - target.stages) if exc.stages_used else 1
                self.limit = max(1, min(self.limit, rendered.estimate.stages) - over)
                raise
            return rendered
        return judged

    def with_placement(self, rendered):
        """``rendered`` with bf-p4c's figures in ``resources.json`` (as ``p4sub build`` writes them)."""
        from backends.tofino import bf_p4c
        from p4sub.build import judged

        estimate = {**rendered.resources, "stages_available": self.options.target.stages}
        return replace(rendered, resources=judged(estimate, self.last, bf_p4c.compare(estimate, self.last),
                                                  self.version))


def _after_refusal(exc: ResourceError, options: CompileOptions, compiled, budget: str) -> CompileOptions:
    """The options of the next try after the target refused a layout: fewer thresholds on the fields
    whose code tables it named, else half the entries (re-raised when --budget fixed the entries)."""
    codes = {**dict(options.codes), **{f: min(n, dict(options.codes).get(f, n)) for f, n in exc.codes.items()}}
    if codes and codes != dict(options.codes):
        return replace(options, codes=tuple(sorted(codes.items())))
    if "entries" in budget or compiled.stats["total_entries"] < 2:
        raise exc
    return replace(options, budget=replace(options.budget, entries=max(1, compiled.stats["total_entries"] // 2)))


def out_of_budget(exc: limits.OutOfBudget, target: str, refusals: list[str], spec, rules,
                  options: CompileOptions) -> ResourceError:
    """The error of a search that ran out of time or memory before anything fitted: by how much the
    last candidate missed, and which rules cost most (compiler.rule_cost)."""
    from compiler.rule_cost import costliest
    from compiler.rules import check_rules

    where = f"; {target} refused the last layout tried: {refusals[-1].split(': ', 1)[1]}" if refusals else ""
    tried = f" after {len(refusals)} layout(s) the target refused" if refusals else ""
    text = f"{exc.message}{tried}; no layout fitted yet{where}"
    if exc.kind == "time":
        why = costliest(check_rules(rules, spec, port_bits=options.port_bits,
                                    reserved_ports=dict(options.reserved_ports)))
        text += (f". {why}" if why else "") + "; raise --budget time=SECONDS, or widen these rules"
    else:
        text += "; raise --budget memory=SIZE, or compile fewer rules per switch"
    return ResourceError(text)


def run(args: argparse.Namespace) -> int:
    args.budget = args.budget or ""  # not given: the default budget
    # The command keeps its rules, diagram and tables to the end: the collector would only walk them
    # again and again (at 100k rules, 3.1 of 6.3 s of CPU).
    with paused():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from compiler.rules import read_rules
    from compiler.spec import read_spec

    if args.update:
        from p4sub.compile_update import check_update_args, run_update

        spec_path, rules_path = check_update_args(args)
        return run_update(args, options_from_args(args), spec_path, rules_path)
    if not args.spec or not args.rules:
        raise P4subError("compile needs SPEC and RULES (or --update OLD_OUT RULES)")
    include = include_mode(args)
    output_dir(args.out)  # an -o that would be refused is said now, not after the compile
    spec = read_spec(args.spec)
    options = options_from_args(args)
    if include and args.delivery == "auto":
        options = replace(options, delivery="groups")
    check_encoded_fields(options.tables.per_field_encoding, spec)
    if args.trace:
        from runtime.sample import read_sample

        options = replace(options, sample=read_sample(args.trace, spec, dict(spec.query_fields)))
    backend = importlib.import_module(f"backends.{args.target}") if args.target != "none" else None
    if backend is not None:
        # The target's encodings and limits, except what --budget names: its resource estimate then judges the fit.
        options = target_compile_options(args.target, spec, options, budget_items(args.budget),
                                         batch=args.batch or "auto")
    rules = read_rules(args.rules)
    emit_options = (backend.options_from_args(args),) if backend is not None and hasattr(backend, "options_from_args") else ()
    render = None  # pipeline -> what is written (checked in memory)
    if include:
        module, opts = include_module(args.target), include_options(args, spec)
        render = lambda pipeline: module.render_include(pipeline, opts)  # noqa: E731
    elif backend is not None and hasattr(backend, "build"):
        render = lambda pipeline: backend.build(pipeline, *emit_options)  # noqa: E731
    judge = None
    if args.fit_by == "bf-p4c":
        if args.target != "tofino" or include:
            raise P4subError("--fit-by bf-p4c judges a whole Tofino program: it needs --target tofino "
                             "(and no include mode)")
        judge = BfP4cJudge(emit_options[0] if emit_options else backend.TofinoOptions())
        render = judge.wrap(backend.build)
    refusals: list[str] = []
    # The search is bounded (--budget time=,memory=; compiler.base.limits); writing the result is not.
    try:
        with limits.bounded(options.budget.seconds, options.budget.memory or limits.default_memory()):
            compiled = compile_rules(spec, rules, options)
            rendered = None
            while render is not None and not args.like:
                # The target's own resource model is the last judge of the entry budget: while it refuses
                # a pipeline that the default budget let through, halve the budget (rules get widened).
                try:
                    with limits.grace(0.5):  # the target judges what the search found
                        rendered = render(compiled.pipeline)
                    break
                except ResourceError as exc:
                    if args.exact or len(refusals) >= MAX_REFUSALS:
                        raise
                    options = _after_refusal(exc, options, compiled, args.budget)
                    refusals.append(f"{args.target}: {exc}")
                    limits.checkpoint()
                    compiled = compile_rules(spec, rules, options)
    except limits.OutOfBudget as exc:
        raise out_of_budget(exc, args.target, refusals, spec, rules, options) from None
    for note in compiled.typed.spec.notes:  # what the spec reader skipped, actions inferred from the rules
        print(note, file=sys.stderr)
    if rendered is not None and isinstance(getattr(rendered, "resources", None), dict) and "batch" in rendered.resources:
        # How a packet's messages are evaluated on the target, and what that costs (passes, recirculation).
        compiled.stats["batch"] = rendered.resources["batch"]
    if refusals:
        compiled.stats["target_refusals"] = refusals
        print(f"note: {args.target} refused {len(refusals)} larger layout(s) on resources; entry budget "
              f"{options.budget.entries}" + "".join(f", at most {n} thresholds on {f}" for f, n in options.codes),
              file=sys.stderr)
    if args.like:
        check_like(ir.load(Path(args.like) / "pipeline.json"), compiled.pipeline, args.like)
    if compiled.stats.get("budget_misses") and args.exact:
        raise ResourceError(f"{f'--budget {args.budget}' if args.budget else 'the default budget'}: the exact "
                            "compile does not fit: "
                            + "; ".join(compiled.stats["budget_misses"])
                            + " (--exact refuses rather than warn: raise the budget, or drop --exact)")
    if compiled.stats.get("budget_misses"):
        print("warning: the pipeline does not fit the budget: " + "; ".join(compiled.stats["budget_misses"]),
              file=sys.stderr)
    if not compiled.stats["exact"]:
        report_widening(compiled, options, args.trace)
    files = None
    if include:  # checked before anything is written
        files = rendered if rendered is not None else render(compiled.pipeline)
        rendered = None
    out = Path(args.out)
    with staged_outputs(out, "compile", args.dot, args.argv) as (stage, dot):
        if files is not None:
            write_files(files, stage)
        elif rendered is not None:
            if judge is not None and judge.last is not None:
                rendered = judge.with_placement(rendered)
            backend.write(rendered, stage)
        elif backend is not None:
            backend.emit(compiled.pipeline, stage, *emit_options)  # checks resources first
        ir.save(compiled.pipeline, stage / "pipeline.json")
        (stage / "stats.json").write_text(json.dumps(compiled.stats, indent=2) + "\n", encoding="utf-8")
        sources = {"spec": str(Path(args.spec).resolve()), "rules": str(Path(args.rules).resolve()),
                   "options": {"field_order": args.field_order, "range_encoding": args.range_encoding,
                               "encode": args.encode, "delivery": args.delivery, "lanes": args.lanes,
                               "max_lanes": args.max_lanes, "lane_partition": args.lane_partition,
                               "budget": args.budget, "default": args.default, "fit_by": args.fit_by,
                               "emit": args.emit, "headers_type": args.headers_type, "instance": args.instance}}
        from p4sub.compile_update import keep_lanes, keep_rules

        sources.update(keep_rules(Path(args.rules), stage))  # --update diffs a later rule file against this copy
        keep_lanes(compiled.lanes.lanes if compiled.lanes and compiled.pipeline.lanes > 1 else None, stage)
        (stage / "sources.json").write_text(json.dumps(sources, indent=2) + "\n", encoding="utf-8")
        if getattr(args, "session", False) and files is None:
            from p4sub.compile_update import keep_session

            keep_session(spec, compiled, options, rules, stage)
        if dot is not None:
            from compiler.dot import to_dot

            dot.write_text(to_dot(compiled.diagram), encoding="utf-8")
    s = compiled.stats
    print(f"{len(compiled.typed.rules)} rules -> {s['states']} states, {s['total_entries']} entries, "
          f"{s['multicast_groups']} multicast groups, {s['table_bits']} table bits in {s['compile_seconds']:.3f} s")
    layout = f"delivery {s['delivery']}" + (f" over {s['bitmap_ports']} ports, {s['lanes']} lane(s)"
                                            if s["delivery"] == "bitmap" else "")
    print(f"  {layout}" + "".join(f"\n  ({note})" for note in s.get("layout_notes", [])))
    for name, count in s["tables"].items():
        print(f"  {name:<40} {count:>8}")
    if files is not None:
        from backends.common.include import CONTROL, CONTROL_FILE, META_PARAM, METADATA_TYPE

        name = opts.instance.rsplit(".", 1)[1]
        print(f"wrote {out / 'pipeline.json'}, {out / CONTROL_FILE} and its entries "
              f"(tables {module.table_prefix(opts)}.<table>)")
        print(f"  in your program: #include \"{CONTROL_FILE}\"; a member {METADATA_TYPE} {META_PARAM}; of your "
              f"metadata; {CONTROL}() {name}; in {opts.instance.rsplit('.', 1)[0]}; {module.apply_call(opts)}")
        return 0
    print(f"wrote {out / 'pipeline.json'}" + (f" and the {args.target} files" if args.target != "none" else ""))
    return 0
