"""Incremental compile benchmark (issue 16 item 1): one filter added or removed at 100k ITCH filters.

Compiles ``bench_compile.itch_rules(N)`` once (the full compile, timed for comparison), keeps it
as an :class:`compiler.incremental.Incremental`, then times single changes through the in-memory
API: ``--changes`` random additions (new filters drawn like the workload's: one of 100 stocks, a
price threshold, one of 200 hosts) and as many removals of random existing filters, each timed
from the call to the delta in hand. Prints JSON lines: the full compile, the setup of the
incremental state, per kind the median / 90th percentile / maximum milliseconds and the delta
sizes, and the target (50 ms to the delta). ``--cli`` also times ``p4sub compile --update`` on
rule files (parsing, reading the old pipeline back, writing), which the API does not pay.

    .venv/bin/python benchmarks/bench_incremental.py                   # ITCH 100k, auto layout
    .venv/bin/python benchmarks/bench_incremental.py --delivery groups --cli
    .venv/bin/python benchmarks/bench_incremental.py --filters 10000 --quick
    .venv/bin/python benchmarks/bench_incremental.py --workload hicn     # a root 200k edges wide

Timings on a shared machine are noisy: compare medians, and runs made under similar load.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_compile import hicn_rules, itch_rules, spec  # noqa: E402
from compiler.compile import CompileOptions, compile_rules
from compiler.incremental import Incremental

TARGET_MS = 50.0


def summary(name: str, updates: list) -> dict:
    ms = sorted(1000 * u.seconds for u in updates)
    sizes = sorted(u.delta.size for u in updates)
    return {"change": name, "count": len(updates), "incremental": sum(u.incremental for u in updates),
            "fallback_reasons": sorted({u.reason for u in updates if not u.incremental}),
            "median_ms": round(statistics.median(ms), 2), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
            "max_ms": round(ms[-1], 2), "target_ms": TARGET_MS, "meets_target": statistics.median(ms) <= TARGET_MS,
            "delta_writes_median": statistics.median(sizes), "delta_writes_max": sizes[-1],
            "no_op_changes": sum(1 for s in sizes if s == 0),
            # Most random ITCH filters are covered by others (their ports are already sent there):
            # the changes that did change entries, on their own.
            "median_ms_when_the_delta_is_not_empty": round(statistics.median(
                [1000 * u.seconds for u in updates if u.delta.size] or [0.0]), 2),
            "entries_added": sum(len(u.delta.added) for u in updates),
            "entries_modified": sum(len(u.delta.modified) for u in updates),
            "entries_deleted": sum(len(u.delta.deleted) for u in updates),
            "groups_changed": sum(len(u.delta.groups_added) + len(u.delta.groups_modified) + len(u.delta.groups_deleted)
                                  for u in updates)}


WORKLOADS = {"itch": itch_rules, "hicn": hicn_rules}


def bench_api(n: int, changes: int, options: CompileOptions, seed: int,
              workload: str = "itch") -> tuple[Incremental, object]:
    make = WORKLOADS[workload]
    rules = make(n)
    t = time.perf_counter()
    compiled = compile_rules(spec(), rules, options)
    full = time.perf_counter() - t
    print(json.dumps({"workload": workload, "filters": n, "full_compile_s": round(full, 2),
                      "delivery": compiled.stats["delivery"],
                      "lanes": compiled.stats["lanes"], "entries": compiled.stats["total_entries"],
                      "states": compiled.stats["states"], "multicast_groups": compiled.stats["multicast_groups"]}),
          flush=True)
    t = time.perf_counter()
    inc = Incremental.from_compiled(spec(), compiled, options)
    print(json.dumps({"incremental_state_setup_s": round(time.perf_counter() - t, 2), "incremental": inc.incremental,
                      "why_not": inc.why_not}), flush=True)
    rng = random.Random(seed)
    fresh = make(changes, seed=seed + 1000).rules
    adds, removes = [], []
    gone = rng.sample(range(n), changes)  # distinct filters of the original set
    for i in range(changes):
        adds.append(inc.update(add=[fresh[i]]))
        removes.append(inc.update(remove=[rules.rules[gone[i]]]))
    print(json.dumps(summary("add one filter", adds)), flush=True)
    print(json.dumps(summary("remove one filter", removes)), flush=True)
    t = time.perf_counter()
    inc.pipeline()
    print(json.dumps({"materialize_pipeline_ms": round(1000 * (time.perf_counter() - t), 2),
                      "note": "the whole new Pipeline IR from the kept entries (not needed for the delta)"}),
          flush=True)
    return inc, compiled


def bench_cli(n: int, delivery: str) -> None:
    """``p4sub compile`` then ``p4sub compile --update`` with one filter more, timed by its own report."""
    from p4sub import main

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rules = itch_rules(n)
        extra = itch_rules(1, seed=4242).rules[0]
        # The spec travels inside pipeline.json: the update does not need it.
        from compiler import ir
        (d / "r.sub").write_text(str(rules))
        t = time.perf_counter()
        compiled = compile_rules(spec(), rules, CompileOptions(delivery=delivery))
        out = d / "v1"
        out.mkdir()
        ir.save(compiled.pipeline, out / "pipeline.json")
        (out / "stats.json").write_text(json.dumps(compiled.stats))
        (out / "compiled_rules.sub").write_text(str(rules))
        (d / "r2.sub").write_text(str(rules) + str(extra) + "\n")
        t = time.perf_counter()
        assert main(["compile", "--update", str(out), str(d / "r2.sub"), "-o", str(d / "v2")]) == 0
        wall = time.perf_counter() - t
        info = json.loads((d / "v2" / "delta.json").read_text())
        print(json.dumps({"cli_update_wall_s": round(wall, 2), "timings_s": info["timings"],
                          "incremental": info["incremental"], "delta_writes": sum(
                              len(info["entries"][k]) + len(info["groups"][k]) for k in ("add", "modify", "delete"))}),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--filters", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=50, help="single additions, and as many removals")
    ap.add_argument("--delivery", choices=("auto", "groups", "bitmap"), default="auto")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cli", action="store_true", help="also time compile --update on rule files")
    ap.add_argument("--quick", action="store_true", help="10 changes")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="itch",
                    help="itch (stock, price: the target) or hicn (one exact field: a root 2n edges wide)")
    args = ap.parse_args()
    changes = 10 if args.quick else args.changes
    bench_api(args.filters, changes, CompileOptions(delivery=args.delivery), args.seed, args.workload)
    if args.cli:
        bench_cli(args.filters, args.delivery)


if __name__ == "__main__":
    main()
