"""Issue 26's route targets: Siena filters routed over fat trees, every switch in lanes and port bitmaps.

For each (k, filters, policy) the benchmark runs what a user runs, as subprocesses of the installed
``p4sub``:

    p4sub gen rules --workload siena --filters N --constraints 1-3 --topology fat-tree:K --spec-out siena.p4
    p4sub gen siena --packets M
    p4sub route fat-tree:K RULES --spec siena.p4 --policy P -o NET
    p4sub netsim NET --trace siena.pcap --publisher h1 --report REPORT

and prints, per run: the route's wall and CPU seconds (its processes and their workers), the largest
switch (entries, lanes, layout), whether every switch fits its budget and compiled exactly, and from
netsim the receivers' false negatives (every host but the publisher, which netsim counts as missing
what it subscribed to itself) and false positives, and the extra copies on aggregation-core links.
The machine's load (``/proc/loadavg``) is printed before each run: the figures are only comparable
at a similar load.

    .venv/bin/python benchmarks/bench_route_siena.py                      # k=4 1k, MR and TR
    .venv/bin/python benchmarks/bench_route_siena.py --k8                 # and k=8 10k
    .venv/bin/python benchmarks/bench_route_siena.py --runs 4:300,4:1000 --packets 5000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
P4SUB = [sys.executable, "-m", "p4sub"]
#: The issue's targets: route wall seconds per (k, filters).
TARGETS = {(4, 1000): 60.0, (8, 10000): 300.0}


def p4sub(*args: str) -> None:
    subprocess.run([*P4SUB, *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def timed(*args: str) -> tuple[float, float]:
    """Run ``p4sub ARGS``; its wall seconds and the CPU seconds of it and its workers."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p4sub(*args)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run(work: Path, k: int, filters: int, policy: str, packets: int, seed: int) -> dict[str, Any]:
    rules, spec, trace = work / f"k{k}-{filters}.rules", work / "siena.p4", work / "siena.pcap"
    if not rules.exists():
        p4sub("gen", "rules", "--workload", "siena", "--filters", str(filters), "--constraints", "1-3",
              "--topology", f"fat-tree:{k}", "--seed", str(seed), "--spec-out", str(spec), "-q", "-o", str(rules))
    if not trace.exists():
        p4sub("gen", "siena", "--packets", str(packets), "--seed", str(seed), "-q", "-o", str(trace))
    net, report = work / f"net-k{k}-{filters}-{policy}", work / f"netsim-k{k}-{filters}-{policy}"
    at_load = load()
    wall, cpu = timed("route", f"fat-tree:{k}", str(rules), "--spec", str(spec), "--policy", policy,
                      "-o", str(net), "--quiet")
    p4sub("netsim", str(net), "--trace", str(trace), "--publisher", "h1", "--report", str(report))
    stats = json.loads((net / "stats.json").read_text())
    sim = json.loads((report / "netsim.json").read_text())
    receivers = {h: row for h, row in sim["hosts"].items() if h != "h1"}
    core = sim["tiers"].get("aggregation-core", {})
    totals = stats["totals"]
    return {
        "k": k, "filters": filters, "policy": policy, "load": at_load, "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1), "target_seconds": TARGETS.get((k, filters)),
        "largest": totals["largest"], "all_fit": totals["all_fit"], "all_exact": totals["all_exact"],
        "entries": totals["entries"], "compiles": totals["compiles"],
        "false_negatives": sum(r["false_negatives"] for r in receivers.values()),
        "false_positives": sum(r["false_positives"] for r in receivers.values()),
        "wanted": sum(r["wanted"] for r in receivers.values()), "messages": sim["messages"],
        "extra_core_percent": round(100 * core.get("extra_share_packets", 0.0), 2),
    }


def line(r: dict[str, Any]) -> str:
    big = r["largest"]
    target = f" (target {r['target_seconds']:.0f} s)" if r["target_seconds"] else ""
    return (f"fat-tree:{r['k']} {r['filters']:>6} Siena {r['policy'].upper()}: route {r['wall_seconds']:.1f} s wall"
            f"{target}, {r['cpu_seconds']:.1f} s CPU; {r['entries']} entries in all, largest {big['switch']} "
            f"{big['entries']} entries in {big['lanes']} lane(s) ({big['delivery']}"
            + (f", by {big['lane_partition']}" if big.get("lane_partition") else "") + "); every switch fits: "
            f"{r['all_fit']}, exact: {r['all_exact']}; netsim {r['messages']} messages: receivers' false negatives "
            f"{r['false_negatives']}, false positives {r['false_positives']} of {r['wanted']} wanted; extra "
            f"aggregation-core copies {r['extra_core_percent']} %; load {r['load']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="4:1000", help="K:FILTERS,... (default 4:1000)")
    ap.add_argument("--k8", action="store_true", help="add 8:10000")
    ap.add_argument("--policies", default="mr,tr")
    ap.add_argument("--packets", type=int, default=20000, help="Siena messages netsim publishes (20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    runs = [tuple(int(x) for x in item.split(":")) for item in args.runs.split(",") if item]
    if args.k8:
        runs.append((8, 10000))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-route-siena-") as tmp:
        for k, filters in runs:
            for policy in args.policies.split(","):
                rows.append(run(Path(tmp), k, filters, policy, args.packets, args.seed))
                print(line(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
