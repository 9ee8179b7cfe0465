"""``p4sub eval pleroma``: PLEROMA (with Balogh's flow limits) against p4sub on the same networks.

Per topology and workload, both systems get the same host subscriptions and the same events:

* p4sub routes the host rules with ``p4sub route``'s code (Camus TR policy,
  :func:`compiler.network.compile_network`), compiles every switch and runs netsim
  (:func:`runtime.netsim.simulate`) with each publisher's events: entries per switch, false
  positives at hosts, extra link copies; exact, and under an entry budget equal to PLEROMA's
  tightest flow limit;
* PLEROMA (:mod:`compiler.pleroma`) indexes the same fields, decomposes the subscriptions at each
  resolution, installs Alg. 1's flows and runs netsim on them (:mod:`runtime.netsim_pleroma`):
  flows per switch, the same counts by the same code (:func:`judge`); then, at one resolution,
  each of Balogh's methods under each flow limit.

The first ``history_share`` of the events is the history the history-based optimiser samples; every
figure is measured on the other events. Balogh's own workload (:mod:`.workloads`, ``balogh``) runs
on a tree, as in the thesis, to set the merge ratio against the false positives merging adds.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from compiler.base import P4subError
from compiler.compile import CompileOptions, parse_budget
from compiler.network import Topology, compile_network, from_switch_graph, parse_topology_arg
from compiler.pleroma import METHODS, PleromaNetwork, Samples, Tables, build, enforce, flow_count
from runtime.netsim import Batch, Network, network_of, simulate as netsim
from runtime.netsim_pleroma import pleroma_network
from runtime.pleroma_eval import deployment
from runtime.pleroma_eval.workloads import WORKLOADS, Workload, make

#: Extra header bytes PLEROMA's events carry: an IPv6 header (40 B) instead of IPv4's 20 B, the dz in
#: its destination address. p4sub matches the application's own fields: none.
PLEROMA_EXTRA_HEADER_BYTES = 20


@dataclass(frozen=True)
class PleromaEvalConfig:
    topologies: tuple[str, ...] = ("fat-tree:4", "fat-tree:8", "zoo:Dfn")  # zoo: the GraphML, else topohub
    workloads: tuple[str, ...] = ("itch", "siena")
    filters: int = 300
    events: int = 4000
    publishers: int = 4
    resolutions: tuple[int, ...] = (8, 16, 24, 32)
    merge_resolution: int = 24
    indexing: str = "rank"
    tree: str = "single"
    max_dz: int = 64
    limits: tuple[float, ...] = (0.5, 0.25)  # of the unconstrained max flows per switch
    methods: tuple[str, ...] = METHODS
    history_share: float = 0.25
    balogh: bool = True
    balogh_filters: int = 400
    balogh_tree: tuple[int, int, int] = (5, 2, 3)  # fanout, depth, hosts per switch
    balogh_limits: tuple[float, ...] = (0.5, 0.25, 0.1)
    balogh_indexing: str = "value"
    balogh_resolution: int = 30
    balogh_max_dz: int = 256
    #: The finest PLEROMA row per network: rank indexing at full resolution, at most this many dz's
    #: per subscription (exact when none needs more); None leaves the row out.
    finest_max_dz: int | None = 1024
    #: Keep each network's flows at the merge resolution, unconstrained (``tables``) and after each
    #: method under each limit (``merged_tables``), with the topology, workload and PLEROMA network
    #: they belong to (``programs_of``), not JSON, so that the command can write them as BMv2
    #: programs in network directories netsim loads.
    keep_tables: bool = False
    #: Change sets planned as S2 Alg. 7 deploys them (:mod:`.deployment`): this share of the subscriptions
    #: leaves and as many arrive; and every merge. 0 leaves churn out.
    churn_share: float = 0.1
    seed: int = 1

    def validate(self) -> None:
        bad = [w for w in self.workloads if w not in WORKLOADS]
        if bad:
            raise P4subError(f"unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise P4subError(f"unknown merge method(s) {', '.join(bad)}; choose from {', '.join(METHODS)}")
        if any(not 0 < x < 1 for x in (*self.limits, *self.balogh_limits)):
            raise P4subError("flow limits (--limits, --balogh-limits) are percentages of the unconstrained largest "
                             "switch, above 0 and below 100")
        if any(not 1 <= r <= 64 for r in (*self.resolutions, self.merge_resolution)):
            raise P4subError("dz resolutions must be 1..64 bits")
        if self.seed < 0:
            raise P4subError("--seed must be >= 0")
        if self.filters < 1 or self.events < 10 or self.publishers < 1:
            raise P4subError("need at least 1 filter, 10 events and 1 publisher")
        if self.max_dz < 1 or self.balogh_max_dz < 1 or (self.finest_max_dz is not None and self.finest_max_dz < 1):
            raise P4subError("--max-dz must be at least 1")
        if not 0 <= self.churn_share < 0.5:
            raise P4subError("the churn share must be at least 0 and below 0.5")
        if not 0 < self.history_share < 1:
            raise P4subError("the history share must be between 0 and 1")


QUICK = PleromaEvalConfig(topologies=("fat-tree:4",), filters=60, events=600, resolutions=(8, 24),
                          limits=(0.5,), balogh_filters=80, balogh_tree=(3, 2, 2), balogh_limits=(0.5,),
                          finest_max_dz=256)


def _publishers(topology: Topology, count: int) -> list[str]:
    hosts = topology.hosts()
    step = max(1, len(hosts) // count)
    return hosts[::step][:count]


def _split(n: int, share: float) -> int:
    return max(1, int(n * share))


def _flows(tables) -> dict[str, Any]:
    counts = list(flow_count(tables).values())
    return {"max": max(counts, default=0), "mean": round(float(np.mean(counts)), 1) if counts else 0.0,
            "total": int(sum(counts))}


def judge(network: Network, wl: Workload, pubs: list[str], pub_of: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """netsim (:func:`runtime.netsim.simulate`) on each publisher's measured events, summed: the one
    judge of both systems, with one ground truth (the host subscriptions) and one way of counting.

    The publisher never receives its own events (a switch never sends a copy back out of its ingress
    port, under either system): netsim counts its own subscriptions as missed, so its host row is
    left out. Link copies count every copy on every directed link; a copy is extra when no host
    beyond the link wants the event (beyond by the network's own structure: p4sub's up/down
    orientation, PLEROMA's dissemination tree)."""
    totals = dict.fromkeys(("delivered", "wanted", "false_positives", "false_negatives", "duplicates",
                            "link_copies", "extra_link_copies", "lost_copies"), 0)
    for k, p in enumerate(pubs):
        r = rows[pub_of[rows] == k]
        if not len(r):
            continue
        cols = {f: v[r] for f, v in wl.columns.items()}
        n = len(r)
        batch = Batch(cols, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                      np.full(n, wl.event_bytes, dtype=np.int64))
        rep = netsim(network, [batch], p, "union").report()
        for h, st in rep["hosts"].items():
            if h != p:
                for key in ("delivered", "wanted", "false_positives", "false_negatives", "duplicates"):
                    totals[key] += st[key]
        totals["link_copies"] += sum(t["packets"] for t in rep["tiers"].values())
        totals["extra_link_copies"] += sum(t["extra_packets"] for t in rep["tiers"].values())
        totals["lost_copies"] += rep["lost_copies"]
    copies, delivered = totals["link_copies"], totals["delivered"]
    return {"events": len(rows), **totals,
            "network_fpr": round(totals["extra_link_copies"] / copies, 6) if copies else 0.0,
            "subscriber_fpr": round(totals["false_positives"] / delivered, 6) if delivered else 0.0}


def run_p4sub(topology: Topology, wl: Workload, pubs: list[str], pub_of: np.ndarray, rows: np.ndarray,
              budget: int | None = None) -> dict[str, Any]:
    """Route and compile as ``p4sub route`` does (TR), then netsim every publisher's events."""
    from compiler.network import parse_network_rules

    rules = parse_network_rules(wl.rules_text, topology, f"<{wl.name} rules>")
    stacked = {h.name for h in wl.spec.headers if h.stack_size}
    delivery = "groups" if any(f.split(".", 1)[0] in stacked for f in wl.spec.query_fields) else "bitmap"
    options = CompileOptions(delivery=delivery, lane_partition="auto")
    if budget is not None:
        options = replace(options, budget=parse_budget(f"entries={budget}"))
    start = time.perf_counter()
    result = compile_network(topology, rules, wl.spec, policy="tr", options=options, jobs=1, keep_pipelines=True)
    seconds = time.perf_counter() - start
    network = network_of(topology, result.pipelines, wl.typed, {"policy": "tr"})
    per_switch = [s["total_entries"] for s in result.stats["switches"].values()]
    return {
        "system": "p4sub", "variant": "exact" if budget is None else f"budget {budget}",
        "entries": {"max": max(per_switch), "mean": round(float(np.mean(per_switch)), 1),
                    "total": int(sum(per_switch))},
        "exact": result.stats["totals"]["all_exact"], "fits": result.stats["totals"]["all_fit"],
        **judge(network, wl, pubs, pub_of, rows), "extra_header_bytes": 0, "compile_seconds": round(seconds, 3),
    }


def _events(topology: Topology, wl: Workload, config: PleromaEvalConfig) -> tuple:
    """Who publishes each event, which events are the history and which are measured."""
    pubs = _publishers(topology, config.publishers)
    n = len(next(iter(wl.columns.values())))
    pub_of = np.random.default_rng([config.seed, 7]).integers(0, len(pubs), n)
    history = np.arange(_split(n, config.history_share))
    rows = np.arange(len(history), n)
    return pubs, pub_of, history, rows


def _pleroma_row(net: PleromaNetwork, tables: Tables, topology: Topology, wl: Workload, pub_of: np.ndarray,
                 pubs: list[str], rows: np.ndarray, **extra: Any) -> dict[str, Any]:
    """One PLEROMA flow set judged by netsim, as p4sub's rows are (:func:`judge`)."""
    network = pleroma_network(topology, wl.typed, wl.spec, net.space, net.resolution, tables, net.trees, net.tree)
    return {"system": "pleroma", "resolution": net.resolution, "flows": _flows(tables),
            **judge(network, wl, pubs, pub_of, rows),
            "extra_header_bytes": PLEROMA_EXTRA_HEADER_BYTES, "dz_bytes": -(-net.resolution // 8), **extra}


def evaluate_network(topology: Topology, spec_text: str, workload: str, config: PleromaEvalConfig,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Both systems on one topology and workload (module docstring)."""
    wl = make(workload, topology, config.filters, config.events, config.seed)
    pubs, pub_of, history, rows = _events(topology, wl, config)
    out: dict[str, Any] = {"topology": spec_text, "workload": workload, "switches": len(topology.switches()),
                           "hosts": len(topology.hosts()), "subscriptions": len(wl.typed.rules),
                           "events": len(rows), "publishers": pubs, "pleroma": [], "merged": [], "p4sub": []}
    say = progress or (lambda _: None)
    say(f"{spec_text} {workload}: p4sub")
    out["p4sub"].append(run_p4sub(topology, wl, pubs, pub_of, rows))
    merge_net = None
    for res in sorted(set(config.resolutions) | {config.merge_resolution}):
        say(f"{spec_text} {workload}: PLEROMA at {res} bits")
        net = build(topology, wl.typed, pubs, res, config.indexing, config.tree, config.max_dz)
        row = _pleroma_row(net, net.tables, topology, wl, pub_of, pubs, rows,
                           requested_resolution=res, exact=net.exact, compile_seconds=round(net.seconds, 3),
                           dz_per_subscription=round(float(np.mean(net.dz_per_subscription)), 2),
                           subscription_bits=round(float(np.mean(net.subscription_bits)), 1))
        if res in config.resolutions:
            out["pleroma"].append(row)
        if res == config.merge_resolution:
            merge_net, base = net, row
            merge_dz = net.space.event_dz(wl.columns, net.resolution)  # the history's dz's, for merging
    assert merge_net is not None
    if config.finest_max_dz is not None:
        say(f"{spec_text} {workload}: PLEROMA, finest")
        net = build(topology, wl.typed, pubs, 64, "rank", config.tree, config.finest_max_dz)
        out["finest"] = _pleroma_row(net, net.tables, topology, wl, pub_of, pubs, rows,
                                     requested_resolution=64, exact=net.exact, indexing="rank",
                                     max_dz=config.finest_max_dz, compile_seconds=round(net.seconds, 3),
                                     dz_per_subscription=round(float(np.mean(net.dz_per_subscription)), 2),
                                     subscription_bits=round(float(np.mean(net.subscription_bits)), 1))
    top = base["flows"]["max"]
    uniform = np.random.default_rng([config.seed, 11]).integers(0, 1 << merge_net.resolution, len(history),
                                                                  dtype=np.uint64)
    samples = {"history": Samples(merge_dz[history], pub_of[history], pubs),
               "traffic": Samples(uniform, pub_of[history], pubs)}
    if config.keep_tables:
        out["tables"] = merge_net.tables
        out["programs_of"] = (topology, wl, merge_net)  # what a network directory needs besides the flows
    tightest = None
    merged_sets = {}
    for share in config.limits:
        limit = max(1, int(top * share))
        tightest = limit if tightest is None else min(tightest, limit)
        for method in config.methods:
            say(f"{spec_text} {workload}: {method} under {limit} flows")
            start = time.perf_counter()
            tables, st = enforce(topology, merge_net.tables, limit, method, merge_net.trees, merge_net.resolution,
                                 samples.get(method, samples["traffic"]), seed=config.seed,
                                 requests=merge_net.subscriptions)
            row = _pleroma_row(merge_net, tables, topology, wl, pub_of, pubs, rows,
                               method=method, limit=limit, limit_share=share, fits=st.fits,
                               merge_ratio=round(st.merge_ratio, 4), merges=st.merges,
                               merge_seconds=round(time.perf_counter() - start, 3))
            out["merged"].append(row)
            merged_sets[(method, limit)] = tables
            if config.keep_tables:
                out.setdefault("merged_tables", []).append((method, limit, tables))
    say(f"{spec_text} {workload}: deployment plans")
    out["deployment"] = ([deployment.churn(topology, merge_net.subscriptions, merge_net.trees, config.churn_share)]
                         if config.churn_share else []) + deployment.merges(topology, merge_net.tables, merged_sets)
    if tightest is not None:
        say(f"{spec_text} {workload}: p4sub under {tightest} entries")
        try:
            out["p4sub"].append(run_p4sub(topology, wl, pubs, pub_of, rows, budget=tightest))
        except P4subError as exc:
            out["p4sub"].append({"system": "p4sub", "variant": f"budget {tightest}", "error": str(exc)})
    return out


def balogh_topology(fanout: int, depth: int, hosts_per_switch: int) -> Topology:
    """A regular tree of switches (S2 §6.1 uses fanout 5, depth 4), hosts on every switch."""
    import networkx as nx

    g = nx.relabel_nodes(nx.balanced_tree(fanout, depth), lambda i: f"s{i + 1}")
    return from_switch_graph(g, f"tree-{fanout}-{depth}", hosts_per_switch)


def evaluate_balogh(config: PleromaEvalConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Balogh's mixed workload on a tree: merge ratio and added false positives per method and limit."""
    fanout, depth, per_switch = config.balogh_tree
    topology = balogh_topology(fanout, depth, per_switch)
    wl = make("balogh", topology, config.balogh_filters, config.events, config.seed)
    pubs, pub_of, history, rows = _events(topology, wl, config)
    say = progress or (lambda _: None)
    say(f"balogh tree-{fanout}-{depth}: unconstrained")
    net = build(topology, wl.typed, pubs, config.balogh_resolution, config.balogh_indexing, "single",
                config.balogh_max_dz)
    dz = net.space.event_dz(wl.columns, net.resolution)
    base = _pleroma_row(net, net.tables, topology, wl, pub_of, pubs, rows,
                        compile_seconds=round(net.seconds, 3))
    top = base["flows"]["max"]
    uniform = np.random.default_rng([config.seed, 11]).integers(0, 1 << net.resolution, len(history), dtype=np.uint64)
    samples = {"history": Samples(dz[history], pub_of[history], pubs),
               "traffic": Samples(uniform, pub_of[history], pubs)}
    runs = []
    for share in config.balogh_limits:
        limit = max(1, int(top * share))
        for method in config.methods:
            say(f"balogh: {method} under {limit} flows")
            start = time.perf_counter()
            tables, st = enforce(topology, net.tables, limit, method, net.trees, net.resolution,
                                 samples.get(method, samples["traffic"]), seed=config.seed, requests=net.subscriptions)
            row = _pleroma_row(net, tables, topology, wl, pub_of, pubs, rows, method=method,
                               limit=limit, limit_share=share, fits=st.fits, merge_ratio=round(st.merge_ratio, 4),
                               switch_merge_ratio=round(_switch_ratio(net.tables, tables), 4),
                               merge_seconds=round(time.perf_counter() - start, 3))
            row["added_network_fpr"] = round(row["network_fpr"] - base["network_fpr"], 6)
            row["added_subscriber_fpr"] = round(row["subscriber_fpr"] - base["subscriber_fpr"], 6)
            runs.append(row)
    return {"topology": topology.name, "switches": len(topology.switches()), "hosts": len(topology.hosts()),
            "subscriptions": len(wl.typed.rules), "events": len(rows), "publishers": pubs,
            "resolution": net.resolution, "indexing": config.balogh_indexing, "max_dz": config.balogh_max_dz,
            "unconstrained": base, "merged": runs}


def _switch_ratio(before, after) -> float:
    """S2's merge ratio, "the average flow reduction on each switch" (switches that had flows)."""
    b, a = flow_count(before), flow_count(after)
    ratios = [(b[s] - a[s]) / b[s] for s in b if b[s]]
    return float(np.mean(ratios)) if ratios else 0.0


def evaluate(config: PleromaEvalConfig, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    config.validate()
    topologies = [(t, parse_topology_arg(t, seed=config.seed)) for t in config.topologies]
    steps = len(topologies) * len(config.workloads) + int(config.balogh)
    done = [0]

    def say(label: str) -> None:
        if progress:
            progress(done[0], steps, label)

    start = time.perf_counter()
    networks = []
    for spec_text, topology in topologies:
        for workload in config.workloads:
            networks.append(evaluate_network(topology, spec_text, workload, config, say))
            done[0] += 1
            say(f"{spec_text} {workload} done")
    balogh = evaluate_balogh(config, say) if config.balogh else None
    if config.balogh:
        done[0] += 1
        say("balogh done")
    return {"config": asdict(config), "networks": networks, "balogh": balogh,
            "seconds": round(time.perf_counter() - start, 1)}
