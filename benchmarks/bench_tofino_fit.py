"""Does the flagship workload fit the flagship target? The user's commands, timed as a user runs them.

For each filter count: ``p4sub gen rules --workload itch --filters N`` (the defaults: two constraints,
100 symbols, 200 hosts), then ``p4sub compile apps/itch/itch.p4 RULES --target tofino`` with a feed
sample (``--trace``, one ITCH feed) and without, each a fresh process with its wall and CPU seconds and
peak memory (``ru_maxrss`` of the child) and a time limit. For a compile that fits: stages, SRAM and
TCAM of the whole program (``resources.json``: every message slot's copy of the tables), the
thresholds the compile kept on each compressed field, and the extra deliveries, measured by
``p4sub replay`` on a second feed that the compile never saw (another seed).

    .venv/bin/python benchmarks/bench_tofino_fit.py --quick            # 1k and 3k
    .venv/bin/python benchmarks/bench_tofino_fit.py --out docs/fit     # 1k, 3k, 10k, 100k; JSON

The machine's load average is printed beside every figure: these machines are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
P4SUB = [sys.executable, "-m", "p4sub"]
#: The command in a fresh interpreter that says its own peak memory last (children's ru_maxrss is
#: the largest of all children so far, which would carry one point's peak into the next).
PEAK = "PEAK_KB"
CHILD = [sys.executable, "-c", "import resource, sys\nfrom p4sub import main\ntry:\n    code = main(sys.argv[1:])\n"
         "finally:\n    sys.stderr.write(f'\\nPEAK_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n"
         "sys.exit(code)"]


def timed(args: list[str], timeout: float) -> dict:
    """Run ``p4sub ARGS`` in a fresh process: exit status, seconds, peak memory, the last line it said."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(CHILD + args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        status, said = done.returncode, (done.stderr.strip().splitlines() or [""])
    except subprocess.TimeoutExpired:
        status, said = None, [f"no answer in {timeout:.0f} s"]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = [int(line.split()[1]) for line in said if line.startswith(PEAK)]
    return {"status": status, "wall_s": round(time.perf_counter() - start, 2),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "peak_mb": round(peak[0] / 1024) if peak else None, "load": round(os.getloadavg()[0], 2),
            "said": [line for line in said if line.startswith(("p4sub: error", "warning", "note"))] or said[-1:]}


def point(n: int, work: Path, feed: Path, unseen: Path, trace: bool, timeout: float) -> dict:
    rules = work / f"itch{n}.sub"
    if not rules.exists():
        subprocess.run(P4SUB + ["gen", "rules", "--workload", "itch", "--filters", str(n), "-o", str(rules)],
                       cwd=ROOT, check=True, capture_output=True)
    out = work / f"out{n}{'t' if trace else ''}"
    args = ["compile", "apps/itch/itch.p4", str(rules), "--target", "tofino", "-o", str(out)]
    row = {"filters": n, "trace": trace, **timed(args + (["--trace", str(feed)] if trace else []), timeout)}
    if row["status"] == 0:
        res = json.loads((out / "resources.json").read_text())
        stats = json.loads((out / "stats.json").read_text())
        row.update(stages=res["stages"], sram_percent=round(res["sram_percent"], 1),
                   tcam_percent=round(res["tcam_percent"], 1), messages_per_packet=res["notes"]["messages_per_packet"],
                   batch_mode=res["notes"]["batch_mode"], batch_cost=res.get("batch"),
                   exact=stats["exact"], coarsened=stats.get("coarsened", []),
                   entries_file_mb=round((out / "entries.bfrt.json").stat().st_size / 2**20, 1))
        report = work / f"report{n}{'t' if trace else ''}"
        replay = timed(["replay", str(out), "--trace", str(unseen), "--report", str(report)], timeout)
        if replay["status"] == 0:
            totals = json.loads((report / "summary.json").read_text())["totals"]
            row["unseen_feed"] = {k: totals[k] for k in ("wanted", "delivered", "false_positives", "false_negatives")}
            row["unseen_feed"]["extra_percent"] = round(100 * totals["false_positives"] / max(1, totals["wanted"]), 3)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k and 3k filters only")
    ap.add_argument("--sizes", help="comma-separated filter counts")
    ap.add_argument("--messages", type=int, default=300_000, help="messages in each feed")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds for each command")
    ap.add_argument("--out", type=Path, help="write tofino_fit.json here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([1000, 3000] if args.quick else
                                                                        [1000, 3000, 10000, 100000])
    rows = []
    with tempfile.TemporaryDirectory(prefix="p4sub-fit-") as tmp:
        work = Path(tmp)
        feeds = {}
        for name, seed in (("feed", 1), ("unseen", 2)):
            feeds[name] = work / f"{name}.pcap"
            subprocess.run(P4SUB + ["gen", "itch", "--messages", str(args.messages), "--symbols", "100", "--zipf", "1.1",
                                    "--batch", "1-12", "--seed", str(seed), "-o", str(feeds[name])],
                           cwd=ROOT, check=True, capture_output=True)
        for n in sizes:
            for trace in (False, True):
                row = point(n, work, feeds["feed"], feeds["unseen"], trace, args.timeout)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tofino_fit.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
