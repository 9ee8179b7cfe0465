"""``p4sub eval delivery``: header-stack encodings against the baselines, as in the dissertation's §3.5."""

from __future__ import annotations

import argparse
import sys

from compiler.cli import add_command
from compiler.cli.progress import Progress
from compiler.delivery import SCHEMES
from compiler.delivery.evaluation import EvalConfig, evaluate
from compiler.delivery.report import markdown_table, write_report
from compiler.errors import P4subError
from compiler.topology import parse_topology_arg

EXAMPLE = "p4sub eval delivery --topology jellyfish:255 --subscribers 10-90 --runs 100 --seed 1 --report out/delivery"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "eval", "run an evaluation (delivery: header-stack encodings vs. baselines)", EXAMPLE)
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
                   help="fat-tree:K, leaf-spine:L,S,H, jellyfish:N[,DEGREE[,HOSTS]], facebook, FILE.topo or FILE.graphml")
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
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def parse_fractions(text: str) -> tuple[float, ...]:
    """``10-90`` (step 10), ``10-90:20`` or ``10,30,50`` percent -> fractions."""
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
        raise P4subError(f"bad --subscribers {text!r}; use A-B, A-B:STEP or A,B,C (percent)") from None
    if not values or any(not 0 < v <= 100 for v in values):
        raise P4subError("--subscribers percentages must be between 1 and 100")
    return tuple(v / 100 for v in values)


def run_delivery(args: argparse.Namespace) -> int:
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
    topology = parse_topology_arg(args.topology, seed=args.seed)
    report = evaluate(topology, config, None if args.quiet else Progress())
    report["topology"]["spec"] = args.topology
    sys.stdout.write(markdown_table(report))
    if args.report:
        for path in write_report(report, args.report, plots=not args.no_plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0
