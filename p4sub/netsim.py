"""``p4sub netsim OUT --trace FILE --publisher HOST``: publish a trace into a routed network and follow every copy."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from compiler.base import P4subError, report_dir, staged_report
from p4sub import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "netsim", "simulate a routed network (p4sub route output, or a PLEROMA network that "
                    "p4sub eval pleroma --programs wrote) on a trace published at one host",
                    "p4sub netsim out/net --trace feed.pcap --publisher h1 --report out/netsim")
    p.add_argument("out", help="directory written by p4sub route, or one of p4sub eval pleroma --programs' "
                               "bmv2/<topology>-<workload>[-<method>-<limit>] directories")
    p.add_argument("--trace", required=True, help="pcap (read by the spec's parser) or JSON lines of field values "
                                                  "(one message each)")
    p.add_argument("--spec", help="spec whose parser reads a pcap trace (default: the one the switches were compiled "
                                  "against, in their pipeline.json)")
    p.add_argument("--publisher", required=True, help="host that publishes the trace")
    p.add_argument("--report", help="directory for netsim.json and netsim.png")
    p.add_argument("--mode", choices=("auto", "prune", "union"), default="auto",
                   help="prune: each message travels alone (ITCH); union: a packet carries all its messages "
                        "(INT); auto: as the switches' program does")
    p.add_argument("--limit", type=int, help="stop after this many messages")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runtime.netsim import simulate, trace_batches, write_report
    from runtime.pleroma_dir import load_any

    if args.limit is not None and args.limit < 1:
        raise P4subError("--limit must be at least 1")
    if args.report:
        report_dir(args.report)
    network = load_any(args.out)
    spec = None
    if args.spec:
        from compiler.spec import read_spec

        spec = read_spec(args.spec)
    batches, mode = trace_batches(args.trace, network, spec)
    sim = simulate(network, batches, args.publisher, mode if args.mode == "auto" else args.mode, limit=args.limit)
    report = sim.report()
    t = report["host_totals"]
    print(f"{report['messages']} messages in {report['packets']} packets from {args.publisher} "
          f"({report['kind']} network, {report['mode']} mode) in {report['seconds']:.2f} s "
          f"({report['messages_per_second'] or 0:,} messages/s)")
    print(f"hosts: {t['delivered']} {report['unit']} delivered, {t['wanted']} wanted, "
          f"{t['false_positives']} false positives, {t['false_negatives']} false negatives, {t['duplicates']} duplicates")
    print(f"  {'tier':<24} {'packets':>10} {'bytes':>12} {'extra pkts':>10} {'extra %':>8}")
    for name, tier in report["tiers"].items():
        print(f"  {name:<24} {tier['packets']:>10} {tier['bytes']:>12} {tier['extra_packets']:>10} "
              f"{100 * tier['extra_share_packets']:>7.2f}%")
    if report["lost_copies"]:
        print(f"warning: {report['lost_copies']} copies went to ports the switches lack")
    if args.report:
        with staged_report(args.report) as stage:
            paths = write_report(report, stage)
        print("wrote " + ", ".join(str(Path(args.report) / p.relative_to(stage)) for p in paths))
    else:
        print(json.dumps(report["host_totals"]))
    return 0
