"""Issue 26's grid: ITCH and INT, 1 to 5 constraints, 10k and 100k filters, on Tofino and BMv2.

Each point is the user's commands, each a fresh process: ``p4sub gen rules --workload W --filters N
--constraints C``, then ``p4sub compile SPEC RULES --target T --budget time=S`` (the search always
answers within its time budget, or says what missed), then ``p4sub replay`` of a feed the compile
never saw (``gen itch`` / ``gen int``, another seed) for the extra deliveries. Printed per point:
exit status, the layout (delivery, lanes, batch mode), entries and multicast groups, stages / SRAM /
TCAM of the whole program for Tofino (``resources.json``), passes per packet, exact or the extra
deliveries on the unseen feed, compile wall and CPU seconds and peak memory, and the load average.

    .venv/bin/python benchmarks/bench_fit_grid.py --sizes 10000 --targets bmv2     # one slice
    .venv/bin/python benchmarks/bench_fit_grid.py --out docs/fit                   # all; JSON + markdown
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_tofino_fit import P4SUB, ROOT, timed  # noqa: E402

SPECS = {"itch": "apps/itch/itch.p4", "int": "apps/int/int.p4"}
#: The seed of the sample a compile gets with ``--sample`` (the feed judged has seed 7).
SAMPLE_SEED = 3
#: What ``gen rules --constraints`` takes per workload (INT's three query fields, the latency twice).
MAX_CONSTRAINTS = {"itch": 5, "int": 4}


def feed(workload: str, work: Path, seed: int) -> Path:
    path = work / f"{workload}-feed-{seed}.pcap"
    if not path.exists():
        args = (["gen", "itch", "--messages", "300000"] if workload == "itch" else ["gen", "int", "--packets", "50000"])
        subprocess.run(P4SUB + args + ["--seed", str(seed), "-o", str(path)], cwd=ROOT, check=True, capture_output=True)
    return path


def point(workload: str, n: int, constraints: int, target: str, work: Path, seconds: float, timeout: float,
          sample: bool = False) -> dict:
    rules = work / f"{workload}-{n}-{constraints}.sub"
    if not rules.exists():
        subprocess.run(P4SUB + ["gen", "rules", "--workload", workload, "--filters", str(n), "--constraints",
                                str(constraints), "-o", str(rules)], cwd=ROOT, check=True, capture_output=True)
    out = work / f"out-{workload}-{n}-{constraints}-{target}"
    args = ["compile", SPECS[workload], str(rules), "--target", target, "--budget", f"time={seconds:g}", "-o", str(out)]
    if sample:  # a sample of the traffic, as a user who has one gives it (seed 3; the judged feed is seed 7)
        out = out.with_name(out.name + "-traced")
        args[-1] = str(out)
        args += ["--trace", str(feed(workload, work, SAMPLE_SEED))]
    row = {"workload": workload, "filters": n, "constraints": constraints, "target": target,
           "traffic": "sample (--trace)" if sample else "uniform (no --trace)", **timed(args, timeout)}
    if row["status"] != 0:
        return row
    stats = json.loads((out / "stats.json").read_text())
    row.update(delivery=stats["delivery"], lanes=stats.get("lanes", 1), entries=stats["total_entries"],
               groups=stats["multicast_groups"], exact=stats["exact"],
               search_stopped=stats.get("search_stopped"), approximation=stats.get("approximation"),
               coarsened=stats.get("coarsened"))
    res_path = out / "resources.json"
    if res_path.exists():
        res = json.loads(res_path.read_text())
        notes = res.get("notes", {})
        row.update(stages=res["stages"], sram_blocks=res["sram_blocks"], tcam_blocks=res["tcam_blocks"],
                   sram_percent=round(res["sram_percent"], 1), tcam_percent=round(res["tcam_percent"], 1),
                   batch_mode=notes.get("batch_mode"), passes=res.get("passes"),
                   messages_per_packet=notes.get("messages_per_packet"))
    report = work / f"report-{out.name}"
    replay = timed(["replay", str(out), "--trace", str(feed(workload, work, 7)), "--app", workload,
                    "--report", str(report)], timeout)
    if replay["status"] == 0:
        totals = json.loads((report / "summary.json").read_text())["totals"]
        row["unseen_feed"] = {k: totals[k] for k in ("wanted", "delivered", "false_positives", "false_negatives")}
        row["unseen_feed"]["extra_percent"] = round(100 * totals["false_positives"] / max(1, totals["wanted"]), 3)
    else:
        row["unseen_feed"] = {"replay": replay["said"]}
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| workload | filters x constraints | target | traffic the compile saw | status | layout | entries | groups "
            "| stages / SRAM / TCAM | passes | exact / extra on unseen feed | wall s | peak MB | load |\n|" + "---|" * 14 + "\n")
    lines = []
    for r in rows:
        layout = f"{r.get('delivery', '-')}" + (f", {r['lanes']} lanes" if r.get("lanes", 1) > 1 else "")
        layout += f", {r['batch_mode']}" if r.get("batch_mode") else ""
        res = (f"{r['stages']} / {r['sram_blocks']} / {r['tcam_blocks']}" if "stages" in r else "-")
        feed_ = r.get("unseen_feed", {})
        extra = ("exact" if r.get("exact") else f"{feed_.get('extra_percent', '?')} %") if r["status"] == 0 else "-"
        if feed_.get("false_negatives"):
            extra += f" ({feed_['false_negatives']} FALSE NEGATIVES)"
        status = "ok" if r["status"] == 0 else (r["said"][0][:80] if r["said"] else str(r["status"]))
        lines.append(f"| {r['workload']} | {r['filters']:,} x {r['constraints']} | {r['target']} "
                     f"| {r.get('traffic', 'uniform (no --trace)')} | {status} | {layout} "
                     f"| {r.get('entries', '-')} | {r.get('groups', '-')} | {res} | {r.get('passes', '-')} | {extra} "
                     f"| {r['wall_s']} | {r['peak_mb']} | {r['load']} |")
    return head + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="itch,int")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--constraints", default="1,2,3,4,5")
    ap.add_argument("--targets", default="bmv2,tofino")
    ap.add_argument("--seconds", type=float, default=120.0, help="each compile's --budget time= (default 120)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds for each command before it is stopped")
    ap.add_argument("--work", type=Path, help="keep rules, feeds and outputs here (default: a temporary directory)")
    ap.add_argument("--sample", action="store_true",
                    help="give each compile a traffic sample (--trace, a feed of another seed), as a user with one would")
    ap.add_argument("--out", type=Path, help="write fit_grid.json and fit_grid.md here")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="p4sub-grid-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for workload in args.workloads.split(","):
        for n in map(int, args.sizes.split(",")):
            for c in map(int, args.constraints.split(",")):
                if c > MAX_CONSTRAINTS[workload]:
                    continue
                for target in args.targets.split(","):
                    row = point(workload, n, c, target, work, args.seconds, args.timeout, args.sample)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print(markdown(rows))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fit_grid.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.out / "fit_grid.md").write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
