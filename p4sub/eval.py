"""``p4sub eval delivery|vt|pleroma``: header-stack encodings against the baselines (the dissertation's §3.5),
virtual trees, and PLEROMA with Balogh's flow limits against p4sub."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compiler.base import P4subError, report_dir, staged_report
from compiler.network import parse_topology_arg
from p4sub import add_command
from p4sub.progress import Progress

EXAMPLE = "p4sub eval delivery --topology jellyfish:255 --subscribers 10-90 --runs 100 --seed 1 --report out/delivery"


def register(sub: argparse._SubParsersAction) -> None:
    from runtime.delivery_eval import SCHEMES

    p = add_command(sub, "eval", "run an evaluation (delivery: header-stack encodings vs. baselines; vt: virtual "
                    "trees; pleroma: PLEROMA and flow limits vs. p4sub)",
                    EXAMPLE)
    evals = p.add_subparsers(dest="evaluation", metavar="EVALUATION")
    d = evals.add_parser(
        "delivery",
        help="header-stack encodings vs. unicast, broadcast, OpenFlow, LIPSIN, BIER, Elmo (dissertation Figs. 3.10-3.15)",
        description="Simulate notifications hop by hop with every delivery scheme on one topology and average the "
        "costs per subscriber fraction. Writes delivery.json, delivery.md and PNG plots to --report.",
        epilog=f"example:\n  {EXAMPLE}\n  p4sub eval delivery --topology fat-tree:8 --subscribers 10,50,90 --runs 20 --report out/ft8",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--topology", required=True,
                   help="fat-tree:K, leaf-spine:L,S,H, jellyfish:N[,DEGREE[,HOSTS]], facebook, zoo:NAME, FILE.topo or FILE.graphml")
    d.add_argument("--subscribers", default="10-90",
                   help="percent of hosts receiving each notification: A-B (steps of 10), A-B:STEP or A,B,C (default 10-90)")
    d.add_argument("--runs", type=int, default=100, help="runs per data point (default 100)")
    d.add_argument("--seed", type=int, default=1, help="seed for topology, workload and link ids (default 1)")
    d.add_argument("--payload", type=int, default=50, help="payload bytes after the Ethernet header (default 50)")
    d.add_argument("--schemes", default=",".join(SCHEMES),
                   help=f"comma-separated schemes (default all): {', '.join(SCHEMES)}")
    d.add_argument("--tree", choices=("sph", "spt"), default="sph",
                   help="delivery tree: shortest-path Steiner heuristic (default) or pruned shortest-path tree")
    d.add_argument("--widths", choices=("derived", "dissertation"), default="derived",
                   help="label field widths: from the topology (default) or the dissertation's 8/8/16 bits")
    d.add_argument("--split", type=int, default=2, help="port blocks of mcgroup-split and mixed groups (default 2)")
    d.add_argument("--static-share", type=float, default=0.7,
                   help="share of receivers the hybrid's stored tree serves (default 0.7, i.e. 30:70)")
    d.add_argument("--report", metavar="DIR", help="write delivery.json, delivery.md and plots to DIR")
    d.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=run_delivery)
    register_vt(evals)
    register_pleroma(evals)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def parse_fractions(text: str, option: str = "--subscribers", lowest: int = 1) -> tuple[float, ...]:
    """``10-90`` (step 10), ``10-90:20`` or ``10,30,50`` percent -> fractions, each ``lowest`` to 100."""
    try:
        if "-" in text:
            span, _, step = text.partition(":")
            lo, hi = (int(x) for x in span.split("-"))
            step_n = int(step) if step else 10
            if step_n <= 0 or lo > hi:
                raise ValueError
            values = list(range(lo, hi + 1, step_n))
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise P4subError(f"bad {option} {text!r}; use A-B, A-B:STEP or A,B,C (percent)") from None
    if not values or any(not lowest <= v <= 100 for v in values):
        raise P4subError(f"{option} percentages must be between {lowest} and 100")
    return tuple(v / 100 for v in values)


def run_delivery(args: argparse.Namespace) -> int:
    from runtime.delivery_eval import SCHEMES
    from runtime.delivery_eval.evaluation import EvalConfig, evaluate
    from runtime.delivery_eval.report import markdown_table, write_report

    schemes = tuple(s.strip() for s in args.schemes.split(",") if s.strip())
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown:
        raise P4subError(f"unknown scheme(s) {', '.join(unknown)}; choose from {', '.join(SCHEMES)}")
    config = EvalConfig(
        fractions=parse_fractions(args.subscribers),
        runs=args.runs,
        seed=args.seed,
        payload=args.payload,
        schemes=schemes,
        tree_method=args.tree,
        widths=args.widths,
        split=args.split,
        static_share=args.static_share,
    )
    if args.report:
        report_dir(args.report)
    topology = parse_topology_arg(args.topology, seed=args.seed)
    report = evaluate(topology, config, None if args.quiet else Progress())
    report["topology"]["spec"] = args.topology
    sys.stdout.write(markdown_table(report))
    if args.report:
        report_files(args.report, lambda stage: write_report(report, stage, plots=not args.no_plots))
    return 0


VT_EXAMPLE = "p4sub eval vt --topology facebook --density 30,70 --rules 0,5,10,15,20,30,40,50 --report out/vt"
CHURN_EXAMPLE = "p4sub eval vt --topology zoo:Dfn --scenarios uniform,nearby,distant --churn 0-100 --rules 40 --report out/dfn"


def register_vt(evals: argparse._SubParsersAction) -> None:
    from runtime.delivery_eval.vt.churn_evaluation import ChurnConfig
    from runtime.delivery_eval.vt.evaluation import VtEvalConfig

    defaults, churn = VtEvalConfig(), ChurnConfig()
    v = evals.add_parser(
        "vt",
        help="virtual trees: strategies x rules per switch, header bytes and network load (dissertation Figs. 5.11-5.13)",
        description="Install each VT strategy under each per-switch rule budget, encode notifications of a Table 5.1 "
        "workload with Algorithm 5.1 and follow them hop by hop. Writes vt.json, vt.md and PNG plots to --report.",
        epilog=f"examples:\n  {VT_EXAMPLE}\n  {CHURN_EXAMPLE}   (chapter 6: clustered clients, migration)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("--topology", default="facebook",
                   help="default facebook (64 hosts, 80 switches); any topology spec, e.g. zoo:Dfn or FILE.graphml")
    v.add_argument("--scenarios", help="chapter 6 instead of chapter 5: clustered clients and migration, comma-separated "
                                      "uniform, nearby, distant (dissertation Fig. 6.13); --density is then the "
                                      "subscribers per publisher (one value, default 30); --topology may then list "
                                      "several networks (zoo:A,zoo:B,...): one report each under --report, and "
                                      "survey.md / vt_survey.png with the best strategy per network (Fig. 6.15)")
    v.add_argument("--churn",
                   help="with --scenarios: percent of clients relocated, A-B (steps of 10), A-B:STEP or A,B,C "
                        "(default 0-100; 0 is allowed)")
    v.add_argument("--density", help="percent of hosts subscribed to a publisher (default 30,70; with --scenarios 30)")
    v.add_argument("--rules", help="rules per switch (max_rules) values (default "
                                   f"{','.join(map(str, defaults.rules))}; with --scenarios {','.join(map(str, churn.rules))})")
    v.add_argument("--strategies",
                   help="comma-separated VT strategies (hops, broadcast, topo, tree, tree-shared, path, threshold:T[:hops], "
                        "random, random-variant, cycles, partitions, clusters, relation, freq-relation[:T], hybrid[:T]); "
                        f"default {','.join(defaults.strategies)}; with --scenarios {','.join(churn.strategies)}")
    v.add_argument("--runs", type=int, help=f"workloads per density (default {defaults.runs}; with --scenarios "
                                            f"{churn.runs} per scenario)")
    v.add_argument("--messages", type=int, help=f"notifications per workload (default {defaults.messages}; with "
                                                f"--scenarios {churn.messages} per churn level)")
    v.add_argument("--publishers", type=float, default=100 * defaults.publisher_share,
                   help="percent of hosts that publish (default 30)")
    v.add_argument("--mode", choices=("single", "best"), default=defaults.mode,
                   help="Algorithm 5.1 loop: single pass as listed (default) or best gain")
    v.add_argument("--no-prefilter", action="store_true", help="try every installed VT (slower, as listed)")
    v.add_argument("--seed", type=int, default=defaults.seed)
    v.add_argument("--payload", type=int, default=defaults.payload)
    v.add_argument("--report", metavar="DIR", help="write vt.json, vt.md and plots to DIR (vt-churn.* with --scenarios)")
    v.add_argument("--no-plots", action="store_true")
    v.add_argument("--quiet", action="store_true", help="no progress")
    v.set_defaults(func=run_vt)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise P4subError(f"bad {what} {text!r}: expected comma-separated integers") from None
    if not values:
        raise P4subError(f"{what} is empty")
    return values


def _names(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def run_vt(args: argparse.Namespace) -> int:
    from runtime.delivery_eval.vt.evaluation import VtEvalConfig, evaluate
    from runtime.delivery_eval.vt.report import markdown, write_report

    if args.scenarios:
        return run_churn(args)
    if args.churn is not None:
        raise P4subError("--churn applies with --scenarios only")
    defaults = VtEvalConfig()
    densities = _ints(args.density or "30,70", "--density")
    if any(not 0 < d <= 100 for d in densities):
        raise P4subError("--density percentages must be between 1 and 100")
    if not 0 < args.publishers <= 100:
        raise P4subError("--publishers must be a percentage in (0, 100]")
    config = VtEvalConfig(
        densities=tuple(d / 100 for d in densities),
        rules=_ints(args.rules, "--rules") if args.rules else defaults.rules,
        strategies=_names(args.strategies) if args.strategies else defaults.strategies,
        runs=defaults.runs if args.runs is None else args.runs,
        messages=defaults.messages if args.messages is None else args.messages, seed=args.seed, payload=args.payload,
        publisher_share=args.publishers / 100, mode=args.mode, prefilter=not args.no_prefilter,
    )
    if args.report:
        report_dir(args.report)
    topology = parse_topology_arg(args.topology, seed=args.seed)
    report = evaluate(topology, config, None if args.quiet else Progress())
    report["topology"]["spec"] = args.topology
    sys.stdout.write(markdown(report))
    if args.report:
        report_files(args.report, lambda stage: write_report(report, stage, plots=not args.no_plots))
    return 0


def run_churn(args: argparse.Namespace) -> int:
    """``p4sub eval vt --scenarios ...``: chapter 6 (runtime.delivery_eval.vt.churn_evaluation)."""
    from runtime.delivery_eval.vt.churn_evaluation import ChurnConfig, evaluate_churn
    from runtime.delivery_eval.vt.churn_report import markdown, survey_markdown, survey_plot, write_report

    densities = _ints(args.density or "30", "--density")
    if len(densities) != 1 or not 0 < densities[0] <= 100:
        raise P4subError("--density with --scenarios: one percentage in (0, 100], the subscribers per publisher")
    if not 0 < args.publishers <= 100:
        raise P4subError("--publishers must be a percentage in (0, 100]")
    defaults = ChurnConfig()
    config = ChurnConfig(
        scenarios=_names(args.scenarios), churn=parse_fractions(args.churn or "0-100", "--churn", 0),
        rules=_ints(args.rules, "--rules") if args.rules else defaults.rules,
        strategies=_names(args.strategies) if args.strategies else defaults.strategies,
        subscriber_share=densities[0] / 100, publisher_share=args.publishers / 100,
        runs=defaults.runs if args.runs is None else args.runs,
        messages=defaults.messages if args.messages is None else args.messages, seed=args.seed,
        payload=args.payload, mode=args.mode, prefilter=not args.no_prefilter,
    )
    specs = _topology_specs(args.topology)
    if args.report:
        report_dir(args.report)
    topologies = [(spec, parse_topology_arg(spec, seed=args.seed)) for spec in specs]  # every name checked first
    reports = []
    for spec, topology in topologies:
        report = evaluate_churn(topology, config, None if args.quiet else Progress())
        report["topology"]["spec"] = spec
        reports.append(report)
        if len(specs) == 1:
            sys.stdout.write(markdown(report))
        if args.report:
            outdir = Path(args.report) / _dir_name(spec) if len(specs) > 1 else Path(args.report)
            report_files(outdir, lambda stage: write_report(report, stage, plots=not args.no_plots))
    if len(specs) > 1:
        table = survey_markdown(reports)
        sys.stdout.write(table)
        if args.report:
            def survey(stage: Path) -> list[Path]:
                (stage / "survey.md").write_text(table, encoding="utf-8")
                return [stage / "survey.md"] + ([] if args.no_plots else [survey_plot(reports, stage / "vt_survey.png")])

            report_files(args.report, survey)
    return 0


def _topology_specs(text: str) -> list[str]:
    """Several networks when every comma-separated part is ``zoo:NAME`` or a GraphML file; otherwise
    one spec (``leaf-spine:2,2,3`` has commas of its own)."""
    parts = _names(text)
    if len(parts) > 1 and all(p.startswith("zoo:") or p.lower().endswith((".graphml", ".xml")) for p in parts):
        return parts
    return [text]


def _dir_name(spec: str) -> str:
    """A report directory for one topology of a survey: ``zoo:Dfn`` -> ``Dfn``, ``a/b.graphml`` -> ``b``."""
    kind, _, rest = spec.partition(":")
    return rest if kind == "zoo" and rest else Path(spec).stem.replace(":", "-").replace(",", "-")


def report_files(report: str | Path, write) -> None:
    """Run ``write(stage)`` into a staged report directory (compiler.base.outputs.staged_report): the files
    appear in ``report`` only when all are written; say where each went."""
    with staged_report(report) as stage:
        paths = write(stage)
    for path in paths:
        print(f"wrote {Path(report) / Path(path).relative_to(stage)}", file=sys.stderr)


PLEROMA_EXAMPLE = "p4sub eval pleroma --report out/pleroma"


def register_pleroma(evals: argparse._SubParsersAction) -> None:
    from runtime.pleroma_eval import PleromaEvalConfig

    d = PleromaEvalConfig()
    v = evals.add_parser(
        "pleroma",
        help="PLEROMA (dz-expressions in IPv6 flows) with Balogh's flow limits vs. p4sub on the same networks",
        description="Give PLEROMA and p4sub the same host subscriptions (gen rules' ITCH and Siena workloads) on the "
        "same topologies; count flows or entries per switch, false positives at hosts, extra link copies, header "
        "bytes and compile time, PLEROMA at several dz resolutions and under flow limits (Balogh's baseline, MS, "
        "traffic and history merging), and Balogh's own mixed workload on a tree. Writes pleroma.json, pleroma.md "
        "and PNG plots to --report (docs/pleroma.md).",
        epilog=f"examples:\n  {PLEROMA_EXAMPLE}\n  p4sub eval pleroma --quick --report out/pleroma-quick\n"
               "  p4sub eval pleroma --topologies fat-tree:4 --workloads siena --resolutions 8,16,32 --limits 50,20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("--topologies", help=f"comma-separated topologies (default {','.join(d.topologies)}); zoo:NAME too")
    v.add_argument("--workloads", help=f"comma-separated: itch, siena, balogh (default {','.join(d.workloads)})")
    v.add_argument("--filters", type=int, help=f"subscriptions per network (default {d.filters})")
    v.add_argument("--events", type=int, help=f"events, history included (default {d.events})")
    v.add_argument("--publishers", type=int, help=f"publishing hosts (default {d.publishers})")
    v.add_argument("--resolutions", help=f"dz bits (default {','.join(map(str, d.resolutions))})")
    v.add_argument("--merge-resolution", type=int,
                   help=f"dz bits the flow limits are applied at (default {d.merge_resolution})")
    v.add_argument("--indexing", choices=("value", "rank"),
                   help=f"attribute domains: value (PLEROMA's equal halves) or rank (one cell per subscription "
                        f"boundary; default {d.indexing})")
    v.add_argument("--tree", choices=("single", "publisher"),
                   help=f"one spanning tree or one per publisher (default {d.tree})")
    v.add_argument("--max-dz", type=int, help=f"most dz's per subscription (default {d.max_dz})")
    v.add_argument("--limits", help="flow limits, percent of the unconstrained largest switch (default "
                                    f"{','.join(str(round(100 * x)) for x in d.limits)})")
    v.add_argument("--methods", help=f"merge methods (default {','.join(d.methods)})")
    v.add_argument("--no-balogh", action="store_true", help="skip Balogh's mixed workload on a tree")
    v.add_argument("--balogh-limits", help="Balogh run's flow limits, percent (default "
                                           f"{','.join(str(round(100 * x)) for x in d.balogh_limits)})")
    v.add_argument("--quick", action="store_true",
                   help="a small run (fat-tree:4, 60 subscriptions, 600 events) for tests")
    v.add_argument("--seed", type=int, help=f"seed (default {d.seed})")
    v.add_argument("--report", metavar="DIR", help="write pleroma.json, pleroma.md and plots to DIR")
    v.add_argument("--no-plots", action="store_true")
    v.add_argument("--programs", action="store_true",
                   help="with --report: also each switch's BMv2 program and entries for PLEROMA's flows at "
                        "--merge-resolution: unconstrained in DIR/bmv2/TOPOLOGY-WORKLOAD/SWITCH/, after each "
                        "merge method under each limit in DIR/bmv2/TOPOLOGY-WORKLOAD-METHOD-LIMIT/SWITCH/")
    v.add_argument("--quiet", action="store_true", help="no progress")
    v.set_defaults(func=run_pleroma)


def run_pleroma(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from runtime.pleroma_eval import QUICK, PleromaEvalConfig, evaluate
    from runtime.pleroma_eval.report import markdown, write_programs, write_report

    if args.programs and not args.report:
        raise P4subError("--programs writes into --report DIR: give one")
    config = QUICK if args.quick else PleromaEvalConfig()
    changes: dict = {}
    if args.topologies:
        text = args.topologies
        changes["topologies"] = _topology_specs(text) if "zoo:" in text else _names(text)
    if args.workloads:
        changes["workloads"] = _names(args.workloads)
    for name in ("filters", "events", "publishers", "merge_resolution", "indexing", "tree", "max_dz", "seed"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.resolutions:
        changes["resolutions"] = _ints(args.resolutions, "--resolutions")
    if args.methods:
        changes["methods"] = _names(args.methods)
    for option, key in (("limits", "limits"), ("balogh_limits", "balogh_limits")):
        text = getattr(args, option)
        if text:
            changes[key] = tuple(x / 100 for x in _ints(text, f"--{option.replace('_', '-')}"))
    if args.no_balogh:
        changes["balogh"] = False
    if args.programs:
        changes["keep_tables"] = True
    config = replace(config, **changes)
    config.validate()
    if args.report:
        report_dir(args.report)
    progress = None if args.quiet else Progress()
    report = evaluate(config, progress)
    sys.stdout.write(markdown(report))
    if args.report:
        report_files(args.report, lambda stage: write_report(report, stage, plots=not args.no_plots)
                     + (write_programs(report, stage) if args.programs else []))
    return 0
