"""``p4sub route TOPOLOGY RULES --spec SPEC -o OUT``: route host subscriptions and compile every switch."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from backends import switch_emitter, target_compile_options
from compiler.approximate import Alpha, parse_alpha
from compiler.base import P4subError, output_dir, parse_conf, staged_dir
from compiler.compile import DELIVERIES, CompileOptions, field_order_arg, lanes_arg, parse_budget
from compiler.dnf import DEFAULT_LIMIT
from compiler.lanes import PARTITIONS
from compiler.network import POLICIES, compile_network, parse_topology_arg, read_network_rules
from compiler.tables import RANGE_ENCODINGS, TableOptions
from p4sub import add_command
from p4sub.progress import Progress

TARGETS = ("none", "bmv2", "tofino")


def register(sub: argparse._SubParsersAction) -> None:
    from p4sub.compile import budget_text

    p = add_command(sub, "route", "route host subscriptions over a topology (Camus MR/TR, α) and compile every switch",
                    "p4sub route examples/fat-tree-4.topo examples/fat-tree-4.rules --spec apps/itch/itch.p4 "
                    "--policy tr -o out/net")
    p.add_argument("topology", help="fat-tree:K, leaf-spine:L,S,H, jellyfish:N[,D[,H]], facebook, zoo:NAME, a .topo or .graphml file")
    p.add_argument("rules", help="network rule file: filters with fwd(HOST, ...) naming hosts of the topology")
    p.add_argument("--spec", required=True, help="P4 spec with the protocol's headers and @query_* annotations")
    p.add_argument("-o", "--out", required=True, help="output directory (one subdirectory per switch)")
    p.add_argument("--policy", choices=POLICIES, default="tr",
                   help="mr: up port matches everything (less memory); tr: exact up port (less traffic)")
    p.add_argument("--alpha", help="discretisation unit α for every numeric field (e.g. 10; default: exact)")
    p.add_argument("--alpha-field", action="append", default=[], metavar="FIELD=A",
                   help="α for one field, overriding --alpha; repeatable")
    p.add_argument("--target", choices=TARGETS, default="none", help="also render each switch for this target")
    p.add_argument("--jobs", type=int, help="parallel compile processes (default: CPU count)")
    p.add_argument("--master", help="compile on Spark at this master URL (local[2], spark://HOST:7077) "
                                    "instead of a process pool")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting with --master (e.g. spark.pyspark.python=PATH); repeatable")
    p.add_argument("--field-order", help="comma-separated fields tested first, for every switch")
    p.add_argument("--range-encoding", choices=RANGE_ENCODINGS, default="range", help="how non-exact fields are matched")
    p.add_argument("--dnf-limit", type=int, default=DEFAULT_LIMIT, help="largest DNF a single rule may expand to")
    p.add_argument("--delivery", default="filters",
                   metavar="filters|header-stack[:port|bitmask|mcgroup|mixed]|vt[:STRATEGY]",
                   help="filters: Camus per-switch filtering (default); header-stack[:E]: the ingress edge evaluates "
                        "the subscriptions and pushes the delivery tree as E labels (default port); vt[:STRATEGY]: "
                        "the same edge pushes virtual-tree labels over VTs the strategy installs (default "
                        "broadcast); see docs/delivery.md")
    p.add_argument("--switch-delivery", choices=DELIVERIES, default=None,
                   help="--delivery filters: how each switch turns its ports into copies, as p4sub compile "
                        "--delivery: bitmap (default: port bits ORed over lanes), groups (one lane, a multicast "
                        "group per port set; the default when the spec queries a header stack, whose messages "
                        "both backends turn into port sets one by one) or auto (whichever fits and costs fewer bits)")
    p.add_argument("--lanes", default="auto", metavar="N|auto",
                   help="--delivery filters: lanes per switch (bitmap); auto picks up to --max-lanes per switch")
    p.add_argument("--max-lanes", type=int, default=8, help="most lanes auto may use per switch (default 8)")
    p.add_argument("--lane-partition", choices=PARTITIONS, default="auto",
                   help="--delivery filters: how a switch's rules are split into lanes, as p4sub compile: hub, port "
                        "or auto (default: lanes by port, one lane and lanes by hub are tried)")
    p.add_argument("--budget", default=None, type=budget_text, metavar="entries=N,groups=M,stages=S,time=S,memory=SIZE",
                   help="what each switch may use (default: the --target's limits, else p4sub compile's); a switch "
                        "that does not fit exactly is widened, its stats.json says so; time= and memory= bound each "
                        "switch's compile as p4sub compile's (no bound unless given)")
    p.add_argument("--exact", action="store_true",
                   help="refuse (exit 2) rather than widen a switch's rules when no exact layout fits its budget")
    p.add_argument("--max-rules", type=int, default=None,
                   help="vt: VT entries (check_tree) per switch (default 16)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--max-labels", type=int, help="header-stack: largest stack (default: the target's limit); "
                                                  "deeper trees fall back to stored trees")
    p.set_defaults(func=run)


def alpha_from_args(args: argparse.Namespace) -> Alpha:
    per_field = {}
    for item in args.alpha_field:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise P4subError(f"--alpha-field {item!r}: expected FIELD=A, e.g. add_order.price=10")
        per_field[name.strip()] = parse_alpha(value, f"--alpha-field {name}")
    return Alpha(parse_alpha(args.alpha) if args.alpha else None, per_field)


def check_topology_ports(topology, target: str, source: str) -> None:
    """Every switch port must be one ``target`` can address (9-bit, not v1model's drop port): said
    now, naming the topology, not as a traceback from a backend after the switches are compiled."""
    from p4sub.compile import reserved_ports, target_port_bits

    bits = target_port_bits(target)
    reserved = reserved_ports(target)
    for switch in topology.switches():
        for port in topology.ports(switch):
            if bits is not None and port >= 1 << bits:
                raise P4subError(f"{source}: switch {switch} has port {port}; --target {target} ports are {bits}-bit "
                                 f"(0..{(1 << bits) - 1})")
            if port in reserved:
                raise P4subError(f"{source}: switch {switch} has port {port}, which is {reserved[port]}")


def default_switch_delivery(spec) -> str:
    """``bitmap``, or ``groups`` when the spec queries a header stack (ITCH's ``add_order[12]``): both
    backends render a stack's messages into port sets one by one, with multicast groups only."""
    stacked = {h.name for h in spec.headers if h.stack_size}
    return "groups" if any(f.split(".", 1)[0] in stacked for f in spec.query_fields) else "bitmap"


def switch_options(args: argparse.Namespace, options: CompileOptions, spec, target: str | None) -> CompileOptions:
    """Each switch's layout and budget, as ``p4sub compile`` takes them, then the target's encodings
    and limits (:func:`backends.target_compile_options`, the path ``compile --target`` takes)."""
    from p4sub.compile import MAX_LANES, budget_items

    if not 1 <= args.max_lanes <= MAX_LANES:
        raise P4subError(f"--max-lanes {args.max_lanes}: expected a number from 1 to {MAX_LANES}")
    delivery = args.switch_delivery or default_switch_delivery(spec)
    options = replace(options, delivery=delivery, lanes=lanes_arg(args.lanes), max_lanes=args.max_lanes,
                      lane_partition=args.lane_partition, budget=parse_budget(args.budget), exact=args.exact)
    return target_compile_options(target, spec, options, budget_items(args.budget), routed=True) if target else options


def run(args: argparse.Namespace) -> int:
    from compiler.spec import read_spec

    args.budget = args.budget or ""  # not given: each target's budget

    if args.jobs is not None and args.jobs < 1:
        raise P4subError("--jobs must be at least 1")
    if args.delivery.endswith(":"):  # "vt:" or "header-stack:" would silently mean the default
        raise P4subError(f"--delivery {args.delivery!r}: nothing after ':'; name the strategy or encoding "
                         f"({args.delivery}...), or leave out ':' for the default")
    output_dir(args.out)  # an -o that would be refused is said now, not after the switches are compiled
    per_switch = [flag for flag, given in (("--switch-delivery", args.switch_delivery is not None),
                                           ("--lanes", args.lanes != "auto"), ("--max-lanes", args.max_lanes != 8),
                                           ("--lane-partition", args.lane_partition != "auto"),
                                           ("--budget", bool(args.budget)), ("--exact", args.exact)) if given]
    if args.delivery != "filters" and per_switch:
        raise P4subError(f"{', '.join(per_switch)} apply to --delivery filters only")
    topology = parse_topology_arg(args.topology)
    if args.target != "none":
        check_topology_ports(topology, args.target, args.topology)
    rules = read_network_rules(args.rules, topology)
    spec = read_spec(args.spec)
    options = CompileOptions(field_order=tuple(field_order_arg(args.field_order)), dnf_limit=args.dnf_limit,
                             tables=TableOptions(range_encoding=args.range_encoding))
    target = None if args.target == "none" else args.target
    if args.delivery == "filters":
        options = switch_options(args, options, spec, target)
    if args.delivery == "vt" or args.delivery.startswith("vt:"):
        return run_vt(args, topology, rules, spec, options, target)
    if args.max_rules is not None:
        raise P4subError("--max-rules applies to --delivery vt only")
    if args.delivery != "filters":
        return run_combined(args, topology, rules, spec, options, target)
    out = Path(args.out)
    emit = switch_emitter(target) if target else None
    with staged_dir(out, "route", args.argv) as stage:
        result = compile_network(topology, rules, spec, policy=args.policy, alpha=alpha_from_args(args),
                                 options=options, out_dir=stage, target=target, emit=emit, jobs=args.jobs,
                                 master=args.master,
                                 progress=None if args.quiet else Progress(), spark_conf=parse_conf(args.conf))
        (stage / "sources.json").write_text(json.dumps({
            "topology": args.topology, "rules": str(Path(args.rules).resolve()), "spec": str(Path(args.spec).resolve()),
        }, indent=2) + "\n", encoding="utf-8")
    s = result.stats
    print(f"{len(rules)} rules over {s['totals']['switches']} switches ({args.policy.upper()}): "
          f"{s['totals']['entries']} entries, {s['totals']['table_bits']} table bits; "
          f"route {s['route_seconds']:.3f} s, compile {s['compile_wall_seconds']:.3f} s wall")
    print(f"  {'layer':<12} {'switches':>8} {'rules':>9} {'entries':>9} {'max/switch':>10} {'max s':>8}")
    for name, layer in s["layers"].items():
        print(f"  {name:<12} {layer['switches']:>8} {layer['rules']:>9} {layer['entries']:>9} "
              f"{layer['max_entries']:>10} {layer['max_compile_seconds']:>8.3f}")
    print(f"wrote {out / 'network.json'} and one directory per switch")
    return 0


def run_combined(args: argparse.Namespace, topology, rules, spec, options: CompileOptions, target: str | None) -> int:
    """``--delivery header-stack[:E]``: backends.stack_network writes OUT."""
    from backends.stack_network import compile_combined

    kind, _, encoding = args.delivery.partition(":")
    if kind != "header-stack":
        raise P4subError(f"--delivery {args.delivery}: expected filters or header-stack[:port|bitmask|mcgroup|mixed], "
                         "or vt[:STRATEGY]")
    if args.alpha or args.alpha_field or args.master or args.conf:
        raise P4subError("--alpha, --alpha-field, --master and --conf apply to --delivery filters only")
    with staged_dir(args.out, f"route --delivery {args.delivery}", args.argv) as stage:
        plan, s = compile_combined(topology, rules, spec, encoding or "port", stage, target=target,
                                   max_labels=args.max_labels, options=options)
    print(f"{len(rules)} rules, header-stack:{plan.encoding} on {len(plan.switches)} switches: "
          f"{s['receiver_sets']} receiver sets, {s['pushes']} pushes, {s['fallbacks']} stored-tree fallbacks "
          f"(max {s['max_labels']} labels of {s['label_bytes']} bytes)")
    print(f"  stack bytes: max {s['stack_bytes']['max']}, mean {s['stack_bytes']['mean']}; "
          f"entries per transit switch: max {s['transit_entries']['max']}; recirculations per packet: 0")
    print(f"wrote {Path(args.out) / 'delivery.json'}" + (f" and one {target} program per switch" if target else ""))
    return 0


def run_vt(args: argparse.Namespace, topology, rules, spec, options: CompileOptions, target: str | None) -> int:
    """``--delivery vt[:STRATEGY]``: backends.vt_network writes OUT."""
    from backends.vt_network import compile_vt
    from compiler.delivery.vt import DEFAULT_MAX_RULES, DEFAULT_STRATEGY

    strategy = args.delivery.partition(":")[2] or DEFAULT_STRATEGY
    if args.alpha or args.alpha_field or args.master:
        raise P4subError("--alpha, --alpha-field and --master apply to --delivery filters only")
    max_rules = DEFAULT_MAX_RULES if args.max_rules is None else args.max_rules
    if max_rules < 0:
        raise P4subError("--max-rules must be >= 0")
    with staged_dir(args.out, f"route --delivery {args.delivery}", args.argv) as stage:
        plan, s = compile_vt(topology, rules, spec, strategy, stage, max_rules=max_rules, target=target,
                             max_labels=args.max_labels, options=options)
    print(f"{len(rules)} rules, vt:{plan.strategy} on {len(plan.switches)} switches (max {max_rules} VT entries each): "
          f"{s['vts']} VTs, {s['receiver_sets']} receiver sets, {s['pushes']} pushes, {s['fallbacks']} fallback VTs")
    print(f"  labels: {s['labels']['trees']} tree, {s['labels']['hops']} hop, {s['labels']['stops']} stop; "
          f"stack bytes: max {s['stack_bytes']['max']}, mean {s['stack_bytes']['mean']}; "
          f"check_tree entries per switch: max {s['check_tree_entries']['max']}")
    print(f"wrote {Path(args.out) / 'delivery.json'}" + (f" and one {target} program per switch" if target else ""))
    return 0
