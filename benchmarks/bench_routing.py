"""Camus Fig. 13 on fat trees: entries per layer, α and extra core traffic, recompile time, k=8 scale.

The workload is Camus §7.5's: 3-field ITCH filters ``stock == S and price > P and shares > Q``
(S among 100 symbols, P a whole dollar in (0, 1000), Q a multiple of 100) from
:func:`apps.workloads.itch_rules`, each assigned to one random host. Whole-dollar prices make
α = 1 the identity, as in the paper (α = 1 means "no approximation"); α is global, and since every
``shares`` constant is a multiple of 100, α in {1, 10, 100} only ever rewrites prices.

For every (policy, α, filter count) on ``fat_tree(4)`` (20 switches, 16 hosts) the network is
routed and compiled with :func:`compiler.network.compile.compile_network` in a process pool,
written to a scratch directory as ``p4sub route`` would, loaded back and simulated with
:mod:`runtime.netsim` on random ITCH Add Order rows published at h1 (one message per packet,
62 + 38 bytes). Reported:

  (a) entries per switch in each layer, MR and TR, α = 1 (Fig. 13a/b);
  (b) the same for every α, and the extra traffic on aggregation-core links: copies on a link
      behind which no host wanted the message (Fig. 13c/d);
  (c) recompile time per layer: the largest per-switch compile time of the layer (Fig. 13e/f);
  (d) ``fat_tree(8)`` (80 switches, 128 hosts): whole-network compile wall time and netsim
      throughput.

A configuration whose compile is predicted (from the previous size, quadratic in the filter
count, linear in the switch count) to exceed ``--config-limit`` or the remaining ``--budget`` is
skipped and listed as such; the largest size's exact (α = 1) runs go last, after k=8, since they
cost most. Machine load is recorded at the start, the end and per configuration.

    .venv/bin/python benchmarks/bench_routing.py                # full run (about 40 min on 2 cores)
    .venv/bin/python benchmarks/bench_routing.py --quick        # small sizes, a few minutes
    .venv/bin/python benchmarks/bench_routing.py --resume       # run what an earlier run skipped or missed
    .venv/bin/python benchmarks/bench_routing.py --from-json benchmarks/out/routing/routing.json  # tables, plots
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.itch.symbols import symbol_names  # noqa: E402
from apps.workloads import MAX_PRICE_RAW, itch_rules  # noqa: E402
from compiler import rules as ast
from compiler.approximate import Alpha
from compiler.network.compile import compile_network
from compiler.network.topology import Topology, fat_tree
from compiler.rules.parser import parse_rules
from compiler.rules.values import encode_string
from compiler.spec.model import Spec
from compiler.spec.reader import read_spec
from runtime.netsim import Batch, load_network, simulate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "apps" / "itch" / "itch.p4"
LAYERS = ("edge", "aggregation", "core")
CORE_TIER = "aggregation-core"
SYMBOLS = 100
PACKET_BYTES = 62  # Ethernet 14 + IPv4 20 + UDP 8 + MoldUDP64 header 20
MESSAGE_BYTES = 38  # MoldUDP64 length 2 + Add Order 36
BATCH_ROWS = 262144
PUBLISHER = "h1"
# Issue 16 item 3: route and compile the k=8 fat tree with 100k filters, MR and TR, alpha=10, in
# at most this many wall seconds on 2 cores.
TARGET_K8 = {"k": 8, "filters": 100000, "alpha": 10, "wall_seconds": 60.0, "cpus": 2}


# ------------------------------------------------------------------------------------------------
# Workload
# ------------------------------------------------------------------------------------------------


def network_rules(filters: int, hosts: int, seed: int) -> ast.RuleSet:
    """``filters`` 3-field ITCH rules, each forwarding to one host id in 1..hosts.

    The generator's header comment is dropped so the parser takes its fast path; host ids are
    ``fat_tree``'s dense host ids, which is what :func:`compile_network` expects in ``fwd``.
    """
    lines = itch_rules(filters, symbols=SYMBOLS, hosts=hosts, constraints=3, integer_prices=True, seed=seed)
    next(lines)
    return parse_rules("\n".join(lines) + "\n", f"itch-3x{filters}")


def message_batches(messages: int, inputs: list[str], seed: int) -> Iterator[Batch]:
    """Random Add Order rows: uniform symbol (of the rules' 100), price in [$0, $1000) with 4
    decimals, shares in 1..10000, side B/S; one message per packet."""
    known = {"add_order.stock", "add_order.price", "add_order.shares", "add_order.buy_sell_indicator"}
    unknown = [f for f in inputs if f not in known]
    if unknown:
        raise SystemExit(f"the network reads fields this benchmark does not generate: {unknown}")
    rng = np.random.default_rng(seed)
    syms = np.array([encode_string(s, 64) for s in symbol_names(SYMBOLS)], dtype=np.uint64)
    sides = np.array([encode_string("B", 8), encode_string("S", 8)], dtype=np.uint64)
    done = 0
    while done < messages:
        n = min(BATCH_ROWS, messages - done)
        cols = {
            "add_order.stock": syms[rng.integers(0, SYMBOLS, n)],
            "add_order.price": rng.integers(0, MAX_PRICE_RAW, n).astype(np.uint64),
            "add_order.shares": rng.integers(1, 10001, n).astype(np.uint64),
            "add_order.buy_sell_indicator": sides[rng.integers(0, 2, n)],
        }
        packet = np.arange(done, done + n, dtype=np.int64)
        yield Batch({f: cols[f] for f in inputs}, packet, np.full(n, MESSAGE_BYTES, dtype=np.int64),
                    np.full(n, PACKET_BYTES, dtype=np.int64))
        done += n


# ------------------------------------------------------------------------------------------------
# One configuration
# ------------------------------------------------------------------------------------------------


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def progress(start: float, text: str) -> None:
    print(f"[{time.perf_counter() - start:7.1f} s] {text}", file=sys.stderr, flush=True)


def run_config(topology: Topology, k: int, rules: ast.RuleSet, spec: Spec, policy: str, alpha: int,
               args: argparse.Namespace, messages: int, scratch: Path, start: float) -> dict[str, Any]:
    label = f"k={k} {policy.upper()} alpha={alpha} filters={len(rules)}"
    load_before = os.getloadavg()
    out = scratch / f"k{k}-{policy}-a{alpha}-{len(rules)}"
    shutil.rmtree(out, ignore_errors=True)
    progress(start, f"{label}: routing and compiling {len(topology.switches())} switches (jobs={args.jobs})")
    t = time.perf_counter()
    cpu_self, cpu_children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    result = compile_network(topology, rules, spec, policy=policy, alpha=Alpha(Decimal(alpha)),
                             out_dir=out, jobs=args.jobs)
    total = time.perf_counter() - t
    # CPU seconds do not grow when other jobs share the cores (wall seconds do); the pool's workers
    # are joined when compile_network returns, so RUSAGE_CHILDREN holds all of their time.
    cpu_self, cpu_children = _cpu(resource.RUSAGE_SELF) - cpu_self, _cpu(resource.RUSAGE_CHILDREN) - cpu_children
    s = result.stats
    row: dict[str, Any] = {
        "k": k, "policy": policy, "alpha": alpha, "filters": len(rules),
        "switches": s["totals"]["switches"], "hosts": len(topology.hosts()),
        "route_seconds": s["route_seconds"], "compile_wall_seconds": s["compile_wall_seconds"],
        "network_compile_seconds": round(total, 3),
        "cpu_seconds": {"main": round(cpu_self, 2), "workers": round(cpu_children, 2),
                        "total": round(cpu_self + cpu_children, 2)},
        "layers": s["layers"], "totals": s["totals"],
        "max_switch_compile_seconds": max(r["compile_seconds"] for r in s["switches"].values()),
    }
    progress(start, f"{label}: compiled in {total:.1f} s (route {s['route_seconds']:.1f} s, "
                    f"switch compiles {s['compile_wall_seconds']:.1f} s wall; {cpu_self + cpu_children:.1f} CPU s), "
                    f"{s['totals']['entries']} entries")
    if messages:
        t = time.perf_counter()
        network = load_network(out)
        load_s = time.perf_counter() - t
        progress(start, f"{label}: network loaded in {load_s:.1f} s; netsim {messages} messages from {PUBLISHER}")
        t = time.perf_counter()
        sim = simulate(network, message_batches(messages, network.inputs, args.seed + 1), PUBLISHER, "prune")
        sim_total = time.perf_counter() - t
        rep = sim.report()
        # The publisher's own subscriptions count as false negatives in netsim's host totals (a
        # switch never sends a packet back out of its ingress port); the receivers are what matters.
        receivers = {key: sum(v[key] for h, v in rep["hosts"].items() if h != PUBLISHER)
                     for key in ("delivered", "wanted", "false_positives", "false_negatives", "duplicates")}
        row["netsim"] = {
            "messages": rep["messages"], "load_seconds": round(load_s, 3),
            "seconds": rep["seconds"], "total_seconds": round(sim_total, 3),
            "messages_per_second": rep["messages_per_second"],
            "messages_per_second_total": round(rep["messages"] / sim_total) if sim_total else None,
            "receivers": receivers, "publisher": PUBLISHER, "publisher_wanted": rep["hosts"][PUBLISHER]["wanted"],
            "host_totals": rep["host_totals"], "lost_copies": rep["lost_copies"], "tiers": rep["tiers"],
        }
        core = rep["tiers"].get(CORE_TIER, {})
        progress(start, f"{label}: netsim {rep['seconds']:.1f} s ({rep['messages_per_second'] or 0:,} msg/s), "
                        f"core copies {core.get('packets', 0)}, extra {core.get('extra_packets', 0)}, "
                        f"receivers FN {receivers['false_negatives']}, FP {receivers['false_positives']}")
    if not args.keep_networks:
        shutil.rmtree(out, ignore_errors=True)
    row["loadavg_before"] = [round(x, 2) for x in load_before]
    row["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return row


def predict(rows: list[dict[str, Any]], k: int, policy: str, alpha: int, filters: int, switches: int) -> float | None:
    """Compile seconds expected for a configuration from the largest smaller one already measured
    with the same policy and α: quadratic in filters (the per-switch compile measured 10k -> 30k
    grows about 9x), linear in switches."""
    done = [r for r in rows if r.get("policy") == policy and r.get("alpha") == alpha and "network_compile_seconds" in r
            and r["filters"] <= filters and (r["k"], r["filters"]) != (k, filters)]
    if not done:
        return None
    ref = max(done, key=lambda r: (r["filters"], r["k"]))
    return ref["network_compile_seconds"] * (filters / ref["filters"]) ** 2 * (switches / ref["switches"])


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------


def _rows(data: dict[str, Any], k: int) -> list[dict[str, Any]]:
    return [r for r in data["results"] if r["k"] == k and "layers" in r]


def _mean(r: dict[str, Any], layer: str) -> str:
    lay = r["layers"].get(layer)
    return f"{lay['mean_entries']:.0f}" if lay else "-"


def _tc(r: dict[str, Any], layer: str) -> str:
    lay = r["layers"].get(layer)
    return f"{lay['max_compile_seconds']:.2f}" if lay else "-"


def table_a(data: dict[str, Any]) -> str:
    rows = {(r["policy"], r["alpha"], r["filters"]): r for r in _rows(data, 4)}
    sizes = sorted({f for _, a, f in rows if a == 1})
    out = ["(a) entries per switch (mean over the layer), alpha=1, k=4 fat tree",
           f"{'filters':>8} | {'MR edge':>8} {'MR agg':>8} {'MR core':>8} | {'TR edge':>8} {'TR agg':>8} {'TR core':>8}"]
    for n in sizes:
        cells = []
        for pol in ("mr", "tr"):
            r = rows.get((pol, 1, n))
            cells.append(" ".join(f"{(_mean(r, lay) if r else 'skip'):>8}" for lay in LAYERS))
        out.append(f"{n:>8} | {cells[0]} | {cells[1]}")
    return "\n".join(out)


def table_b(data: dict[str, Any]) -> str:
    out = ["(b) alpha: entries per switch per layer and traffic on aggregation-core links, both directions (k=4; "
           "published at h1; FN/FP over the receivers, h1 excluded)",
           f"{'policy':>6} {'alpha':>5} {'filters':>8} | {'edge':>6} {'agg':>6} {'core':>6} | "
           f"{'core copies':>11} {'extra':>9} {'extra %':>7} {'extra bytes':>12} | {'FN':>3} {'FP':>3}"]
    for r in sorted(_rows(data, 4), key=lambda r: (r["policy"], r["alpha"], r["filters"])):
        ns = r.get("netsim")
        core = ns["tiers"].get(CORE_TIER, {}) if ns else {}
        traffic = (f"{core.get('packets', 0):>11} {core.get('extra_packets', 0):>9} "
                   f"{100 * core.get('extra_share_packets', 0):>6.2f}% {core.get('extra_bytes', 0):>12}"
                   if ns else f"{'-':>11} {'-':>9} {'-':>7} {'-':>12}")
        errs = (f"{ns['receivers']['false_negatives']:>3} {ns['receivers']['false_positives']:>3}"
                if ns else f"{'-':>3} {'-':>3}")
        out.append(f"{r['policy'].upper():>6} {r['alpha']:>5} {r['filters']:>8} | {_mean(r, 'edge'):>6} "
                   f"{_mean(r, 'aggregation'):>6} {_mean(r, 'core'):>6} | {traffic} | {errs}")
    return "\n".join(out)


def table_c(data: dict[str, Any]) -> str:
    rows = {(r["policy"], r["alpha"], r["filters"]): r for r in _rows(data, 4)}
    out = ["(c) recompile time per layer: the largest per-switch compile seconds in the layer (k=4, jobs="
           f"{data['machine']['jobs']}); speedup = alpha=1 / this alpha, on the slowest switch",
           f"{'policy':>6} {'alpha':>5} {'filters':>8} | {'edge s':>7} {'agg s':>7} {'core s':>7} | {'speedup':>7}"]
    for (pol, a, n), r in sorted(rows.items()):
        base = rows.get((pol, 1, n))
        speed = (f"{base['max_switch_compile_seconds'] / r['max_switch_compile_seconds']:>6.1f}x"
                 if base and a != 1 and r["max_switch_compile_seconds"] else f"{'':>7}")
        out.append(f"{pol.upper():>6} {a:>5} {n:>8} | {_tc(r, 'edge'):>7} {_tc(r, 'aggregation'):>7} "
                   f"{_tc(r, 'core'):>7} | {speed}")
    return "\n".join(out)


def table_d(data: dict[str, Any]) -> str:
    out = ["(d) k=8 fat tree (80 switches, 128 hosts): whole-network compile (wall; CPU s: main process + "
           "workers, unaffected by other load) and netsim throughput",
           f"{'policy':>6} {'alpha':>5} {'filters':>8} | {'route s':>7} {'compile s':>9} {'total s':>7} "
           f"{'CPU s':>7} {'entries':>9} | {'messages':>9} {'sim s':>7} {'msg/s':>9} {'FN':>3} {'FP':>3}"]
    for r in sorted(_rows(data, 8), key=lambda r: (r["policy"], r["alpha"], r["filters"])):
        ns = r.get("netsim")
        sim = (f"{ns['messages']:>9} {ns['seconds']:>7.1f} {ns['messages_per_second'] or 0:>9} "
               f"{ns['receivers']['false_negatives']:>3} {ns['receivers']['false_positives']:>3}"
               if ns else f"{'-':>9} {'-':>7} {'-':>9} {'-':>3} {'-':>3}")
        out.append(f"{r['policy'].upper():>6} {r['alpha']:>5} {r['filters']:>8} | {r['route_seconds']:>7.1f} "
                   f"{r['compile_wall_seconds']:>9.1f} {r['network_compile_seconds']:>7.1f} "
                   f"{(format(r['cpu_seconds']['total'], '.1f') if 'cpu_seconds' in r else '-'):>7} "
                   f"{r['totals']['entries']:>9} | {sim}")
    return "\n".join(out)


def target_lines(data: dict[str, Any]) -> list[str]:
    """The k=8 whole-network target against what was measured (wall, and CPU seconds with the
    load average, since other jobs on the machine inflate wall seconds but not CPU seconds)."""
    t = TARGET_K8
    out = [f"target (issue 16): k={t['k']}, {t['filters']} filters, alpha={t['alpha']}: route + compile "
           f"<= {t['wall_seconds']:.0f} s wall on {t['cpus']} cores"]
    for r in sorted(_rows(data, t["k"]), key=lambda r: r["policy"]):
        if r["filters"] != t["filters"] or r["alpha"] != t["alpha"]:
            continue
        wall = r["network_compile_seconds"]
        cpu = r.get("cpu_seconds", {}).get("total")
        out.append(f"  {r['policy'].upper()}: measured {wall:.1f} s wall "
                   f"({'met' if wall <= t['wall_seconds'] else 'NOT met'}), "
                   f"{cpu if cpu is not None else '-'} CPU s, {r['totals'].get('compiles', '-')} compiles for "
                   f"{r['totals']['switches']} switches, load average {r['loadavg_before'][0]} -> "
                   f"{r['loadavg_after'][0]} on {data['machine']['cpus']} CPUs")
    return out if len(out) > 1 else []


def skipped_lines(data: dict[str, Any]) -> list[str]:
    return [f"skipped: k={r['k']} {r['policy'].upper()} alpha={r['alpha']} filters={r['filters']}: {r['skipped']}"
            for r in data["results"] if "skipped" in r]


def tables(data: dict[str, Any]) -> str:
    m = data["machine"]
    runs = data.get("runs") or [{"command": data.get("command"), "loadavg_start": m["loadavg_start"],
                                 "loadavg_end": m.get("loadavg_end"), "wall_seconds": data.get("wall_seconds")}]
    head = "\n".join([f"machine: {m['cpus']} CPUs, {m.get('jobs')} compile processes"] + [
        f"run {i + 1}: {r.get('command')}: wall {r.get('wall_seconds', '?')} s, load average (1/5/15 min) at start "
        f"{r.get('loadavg_start')}, at end {r.get('loadavg_end')}" for i, r in enumerate(runs)])
    return "\n\n".join([head, table_a(data), table_b(data), table_c(data), table_d(data),
                        "\n".join(target_lines(data)), *skipped_lines(data)]).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------------------


def plot(data: dict[str, Any], path: Path) -> None:
    """Fig. 13 in six panels: entries per layer (MR, TR at α=1; both at α=10), extra core traffic
    against α, recompile time per layer (MR, TR; α=10 solid, α=1 dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _rows(data, 4)
    colors = {"edge": "tab:blue", "aggregation": "tab:orange", "core": "tab:green"}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))

    def series(pol: str, a: int, key: str) -> dict[str, tuple[list[int], list[float]]]:
        sel = sorted((r for r in rows if r["policy"] == pol and r["alpha"] == a), key=lambda r: r["filters"])
        return {lay: ([r["filters"] for r in sel if lay in r["layers"]],
                      [r["layers"][lay][key] for r in sel if lay in r["layers"]]) for lay in LAYERS}

    def entries_panel(ax, title: str, lines: list[tuple[str, int, str]]) -> None:
        for pol, a, style in lines:
            for lay, (x, y) in series(pol, a, "mean_entries").items():
                if x:
                    ax.plot(x, y, style, color=colors[lay], marker="o", ms=3,
                            label=f"{lay} {pol.upper()} α={a}")
        ax.set(xscale="log", yscale="log", xlabel="filters", ylabel="entries per switch", title=title)
        ax.legend(fontsize=7)

    entries_panel(axes[0, 0], "(a) MR, α=1", [("mr", 1, "-")])
    entries_panel(axes[0, 1], "(b) TR, α=1", [("tr", 1, "-")])
    entries_panel(axes[0, 2], "(c) α=10: MR solid, TR dashed", [("mr", 10, "-"), ("tr", 10, "--")])

    ax = axes[1, 0]
    sizes = sorted({r["filters"] for r in rows})
    shade = {n: plt.cm.viridis(i / max(1, len(sizes) - 1)) for i, n in enumerate(sizes)}
    for pol, style in (("mr", "-"), ("tr", "--")):
        for n in sizes:
            sel = sorted((r for r in rows if r["policy"] == pol and r["filters"] == n and r.get("netsim")),
                         key=lambda r: r["alpha"])
            if sel:
                ax.plot([r["alpha"] for r in sel],
                        [100 * r["netsim"]["tiers"].get(CORE_TIER, {}).get("extra_share_packets", 0) for r in sel],
                        style, color=shade[n], marker="o", ms=3, label=f"{pol.upper()} {n}")
    ax.set(xscale="log", xlabel="α", ylabel="extra copies on agg-core links (%)",
           title="(d) extra core traffic (MR solid, TR dashed)")
    ax.legend(fontsize=6, ncol=2)

    for ax, pol, tag in ((axes[1, 1], "mr", "e"), (axes[1, 2], "tr", "f")):
        for a, style in ((10, "-"), (1, "--")):
            for lay, (x, y) in series(pol, a, "max_compile_seconds").items():
                if x:
                    ax.plot(x, y, style, color=colors[lay], marker="o", ms=3, label=f"{lay} α={a}")
        ax.set(xscale="log", yscale="log", xlabel="filters", ylabel="slowest switch compile (s)",
               title=f"({tag}) {pol.upper()} recompile time per layer")
        ax.legend(fontsize=7)
    fig.suptitle(f"Camus Fig. 13 on fat_tree(4), 3-field ITCH filters (load average at start "
                 f"{data['machine']['loadavg_start'][0]}, {data['machine']['cpus']} CPUs)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _configs(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        if item.strip():
            pol, _, a = item.strip().partition(":")
            out.append((pol, int(a or 1)))
    return out


def finish(data: dict[str, Any], report: Path) -> None:
    (report / "routing.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    text = tables(data)
    (report / "routing.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    if _rows(data, 4):
        plot(data, report / "routing.png")
        print(f"\nwrote {report / 'routing.json'}, {report / 'routing.txt'}, {report / 'routing.png'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (300..3000 filters, k=8 at 3000)")
    ap.add_argument("--sizes", help="k=4 filter counts (default 1000,3000,10000,30000,100000; none: k=8 only)")
    ap.add_argument("--alphas", default="1,10,100", help="α values (global; default 1,10,100)")
    ap.add_argument("--policies", default="mr,tr")
    ap.add_argument("--messages", type=int, help="netsim messages per k=4 configuration (default 100000; 0: no netsim)")
    ap.add_argument("--k8-filters", type=int, help="filters for the k=8 runs (default 100000; 0 skips k=8)")
    ap.add_argument("--k8-configs", default="mr:10,tr:10", help="POLICY:ALPHA,... for k=8 (default mr:10,tr:10)")
    ap.add_argument("--k8-messages", type=int, help="netsim messages at k=8 (default 1000000)")
    ap.add_argument("--jobs", type=int, default=2, help="compile processes (default 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=float, default=2400.0,
                    help="seconds; a configuration predicted to end past it is skipped (default 2400)")
    ap.add_argument("--config-limit", type=float, default=900.0,
                    help="skip a configuration whose compile is predicted to take longer (default 900 s)")
    ap.add_argument("--report", default=str(ROOT / "benchmarks" / "out" / "routing"),
                    help="directory for routing.json, routing.txt, routing.png (default benchmarks/out/routing)")
    ap.add_argument("--keep-networks", action="store_true", help="keep the compiled network directories")
    ap.add_argument("--resume", action="store_true",
                    help="keep the measured configurations of --report's routing.json and run the others")
    ap.add_argument("--from-json", help="print the tables and redraw the plot of an earlier run, then exit")
    args = ap.parse_args()
    report = Path(args.report)
    report.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        finish(json.loads(Path(args.from_json).read_text(encoding="utf-8")), report)
        return
    sizes = _ints(args.sizes.replace("none", "")) if args.sizes is not None else ([300, 1000, 3000] if args.quick else [1000, 3000, 10000, 30000, 100000])
    alphas = _ints(args.alphas)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    messages = args.messages if args.messages is not None else (20000 if args.quick else 100000)
    k8_filters = args.k8_filters if args.k8_filters is not None else (3000 if args.quick else 100000)
    k8_messages = args.k8_messages if args.k8_messages is not None else (100000 if args.quick else 1000000)

    start = time.perf_counter()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    run = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": commit,
           "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    previous = report / "routing.json"
    if args.resume and previous.exists():
        data = json.loads(previous.read_text(encoding="utf-8"))
        data["results"] = [r for r in data["results"] if "skipped" not in r]  # tried again below
        if "runs" not in data:  # written before runs were recorded one by one
            m = data["machine"]
            data["runs"] = [{"command": data.pop("command", None), "commit": m.pop("commit", None),
                             "loadavg_start": m["loadavg_start"], "loadavg_end": m.get("loadavg_end"),
                             "wall_seconds": data.pop("wall_seconds", None)}]
        data["runs"].append(run)
    else:
        data = {
            "benchmark": "routing (Camus Fig. 13)",
            "workload": {"generator": "apps.workloads.itch_rules", "constraints": 3, "symbols": SYMBOLS,
                         "integer_prices": True, "seed": args.seed, "alpha": "global (only prices change)",
                         "messages": "uniform symbol, price [0, 1000) dollars with 4 decimals, shares 1..10000; "
                                     f"one message per packet, {PACKET_BYTES} + {MESSAGE_BYTES} bytes; publisher h1"},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "jobs": args.jobs,
                        "loadavg_start": run["loadavg_start"]},
            "runs": [run],
            "results": [],
        }
    done = {(r["k"], r["policy"], r["alpha"], r["filters"]) for r in data["results"]}
    spec = read_spec(SPEC)
    scratch = report / "networks"
    # Smaller sizes first; at the largest size the approximated runs, then k=8, then exact α=1 (the
    # slowest by far), so that a budget that runs out cuts the configurations that cost most.
    k4 = [(4, pol, a, n, messages) for n in sizes for pol in policies for a in alphas]
    largest = max(sizes, default=0)
    plan = [c for c in k4 if c[3] < largest] + [c for c in k4 if c[3] == largest and c[2] != 1]
    if k8_filters:
        plan += [(8, pol, a, k8_filters, k8_messages) for pol, a in _configs(args.k8_configs)]
    plan += [c for c in k4 if c[3] == largest and c[2] == 1]
    topologies = {k: fat_tree(k) for k in sorted({p[0] for p in plan})}
    workloads: dict[tuple[int, int], ast.RuleSet] = {}
    for k, pol, a, n, msgs in plan:
        if (k, pol, a, n) in done:
            continue
        topo = topologies[k]
        guess = predict(data["results"], k, pol, a, n, len(topo.switches()))
        elapsed = time.perf_counter() - start
        if guess is not None and (guess > args.config_limit or elapsed + guess > args.budget):
            why = (f"predicted compile {guess:.0f} s "
                   + (f"> --config-limit {args.config_limit:.0f} s" if guess > args.config_limit
                      else f"would end past --budget {args.budget:.0f} s (elapsed {elapsed:.0f} s)"))
            progress(start, f"k={k} {pol.upper()} alpha={a} filters={n}: skipped, {why}")
            data["results"].append({"k": k, "policy": pol, "alpha": a, "filters": n, "skipped": why})
            continue
        key = (len(topo.hosts()), n)
        if key not in workloads:
            t = time.perf_counter()
            workloads[key] = network_rules(n, len(topo.hosts()), args.seed)
            progress(start, f"generated and parsed {n} filters for {len(topo.hosts())} hosts in "
                            f"{time.perf_counter() - t:.1f} s")
        data["results"].append(run_config(topo, k, workloads[key], spec, pol, a, args, msgs, scratch, start))
        run["wall_seconds"] = round(time.perf_counter() - start, 1)
        previous.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if not args.keep_networks:
        shutil.rmtree(scratch, ignore_errors=True)
    run["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    run["wall_seconds"] = round(time.perf_counter() - start, 1)
    data["machine"]["loadavg_end"] = run["loadavg_end"]
    finish(data, report)


if __name__ == "__main__":
    main()
