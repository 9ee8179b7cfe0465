"""Does the compile fit a switch? Camus Fig. 12 (Siena) and Table 1 (ITCH, INT), measured.

For each point: entries, table bits, multicast groups, dependent tables (a lower bound on stages),
lanes, delivery, compile seconds and peak memory of the compile (``ru_maxrss`` of a fresh process
per point, so points do not share memory), and for comparison the first compiler's layout (one
diagram, a multicast group per port set: "today") and the one-big-table baseline (one entry per
root-to-leaf path of that diagram), both given up when they pass ``--today-limit`` edges. When the
exact compile does not fit the budget and the rules were widened, the extra deliveries are
measured on a Siena trace (``apps.siena.trace.siena_packets``, the rules' value distribution) and
reported against the deliveries the rules want; the widening chose its drops on that same trace
(``--trace``), so they are measured again on a trace drawn with another seed (``extra_other_trace``).

    .venv/bin/python benchmarks/bench_fit.py --quick                 # 1k filters, 1 to 5 constraints
    .venv/bin/python benchmarks/bench_fit.py --out docs/fit          # 1k, 10k, 100k + ITCH/INT; JSON + PNG

Each point runs in its own process with ``--timeout`` seconds; a point that runs out is reported
as such, not dropped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent


def _siena_spec():
    from apps.siena.spec import siena_spec_text
    from apps.workloads import SienaConfig
    from compiler.spec.reader import parse_spec

    return parse_spec(siena_spec_text(SienaConfig()), "siena.p4")


def _point(kind: str, filters: int, constraints: int, today_limit: int, sample: int, queue: mp.Queue) -> None:
    """One measurement, in a child process; puts a JSON-ready row on ``queue``."""
    from compiler import bdd
    from compiler.compile import CompileOptions, compile_rules
    from compiler.rules.parser import parse_rules
    from compiler.tables import build_pipeline, pipeline_stats

    row: dict = {"workload": kind, "filters": filters, "constraints": constraints}
    if kind == "siena":
        from apps.siena.trace import siena_packets
        from apps.workloads import SienaConfig, siena_rules, workload_text

        config = SienaConfig(constraints=(constraints, constraints))
        spec = _siena_spec()
        rules = parse_rules(workload_text(siena_rules(filters, config, seed=1)))
        columns = siena_packets(sample, config, seed=1)
    else:
        from apps.workloads import int_rules, itch_rules, workload_text
        from compiler.spec.reader import read_spec

        if kind == "itch":
            spec = read_spec(ROOT / "apps/itch/itch.p4")
            rules = parse_rules(workload_text(itch_rules(filters, constraints=constraints, integer_prices=True, seed=1)))
        else:
            spec = read_spec(ROOT / "apps/int/int.p4")
            rules = parse_rules(workload_text(int_rules(filters, seed=1)))
        columns = None
    start = time.perf_counter()
    options = CompileOptions(sample=columns)
    compiled = compile_rules(spec, rules, options)
    row["compile_s"] = round(time.perf_counter() - start, 2)
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    s = compiled.stats
    row.update(entries=s["total_entries"], table_bits=s["table_bits"], groups=s["multicast_groups"],
               dependent_tables=s["dependent_tables"], lanes=s["lanes"], delivery=s["delivery"], exact=s["exact"],
               fits=not s["budget_misses"], budget_misses=s["budget_misses"])
    if not s["exact"]:
        row["approximation"] = s["approximation"]
        if columns is not None:
            from runtime.extra_deliveries import measure

            row["extra"] = measure(compiled.pipeline, compiled.typed, columns).to_json()
            # The widening chose its drops on ``columns``: a trace it never saw says how far that carries.
            other = siena_packets(sample, config, seed=2)
            row["extra_other_trace"] = measure(compiled.pipeline, compiled.typed, other).to_json()
    # The first compiler's layout on the same rules, for comparison (given up past the limit).
    try:
        t = time.perf_counter()
        diagram = bdd.build(compiled.typed, max_edges=today_limit)
        legacy = pipeline_stats(build_pipeline(diagram, spec), 0.0)
        row["today"] = {"entries": legacy["total_entries"], "groups": legacy["multicast_groups"],
                        "table_bits": legacy["table_bits"], "seconds": round(time.perf_counter() - t, 2),
                        "one_big_table": diagram.path_count()}
    except bdd.DiagramTooLarge:
        row["today"] = {"entries": None, "note": f"more than {today_limit} diagram edges (given up)"}
    if kind in ("itch", "int"):
        import backends.tofino as tofino
        from backends.tofino import compile_options
        from backends.tofino.layout import TofinoOptions

        tof = compile_rules(spec, rules, CompileOptions(tables=compile_options(spec)))
        try:  # per message, as Camus Table 1 counts (--batch first)
            est = tofino.build(tof.pipeline, TofinoOptions(batch="first")).resources
            row["tofino"] = {"batch": "first", "stages": est.get("stages"), **est.get("camus_table1", {})}
        except Exception as exc:  # a resource refusal is a finding, not a crash of the benchmark
            row["tofino"] = {"error": str(exc)}
    queue.put(row)


def run_point(kind: str, filters: int, constraints: int, timeout: float, today_limit: int, sample: int) -> dict:
    queue: mp.Queue = mp.get_context("fork").Queue()
    proc = mp.get_context("fork").Process(target=_point, args=(kind, filters, constraints, today_limit, sample, queue))
    start = time.perf_counter()
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"workload": kind, "filters": filters, "constraints": constraints, "timeout_s": timeout}
    if queue.empty():
        return {"workload": kind, "filters": filters, "constraints": constraints,
                "error": f"exit code {proc.exitcode} after {time.perf_counter() - start:.0f} s"}
    return queue.get()


def small_points() -> None:
    """The issue's own table: a few dozen Siena filters (seed 0), each compiled, proved by ``verify``."""
    from apps.workloads import SienaConfig, siena_rules, workload_text
    from compiler.compile import compile_rules
    from compiler.rules.parser import parse_rules
    from compiler.verify import verify

    spec = _siena_spec()
    for n, c in ((20, 3), (30, 1), (30, 2), (40, 5)):
        rules = parse_rules(workload_text(siena_rules(n, SienaConfig(constraints=(c, c)))))
        start = time.perf_counter()
        compiled = compile_rules(spec, rules)
        seconds = time.perf_counter() - start
        s = compiled.stats
        print(json.dumps({"filters": n, "constraints": c, "entries": s["total_entries"], "groups": s["multicast_groups"],
                          "lanes": s["lanes"], "delivery": s["delivery"], "exact": s["exact"],
                          "proved_equal": verify(compiled.pipeline, compiled.typed).equivalent,
                          "compile_s": round(seconds, 2)}), flush=True)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    siena = [r for r in rows if r["workload"] == "siena" and "entries" in r]
    fig, (left, right, third) = plt.subplots(1, 3, figsize=(16, 4.2))
    for c in sorted({r["constraints"] for r in siena}):
        pts = sorted((r["filters"], r["entries"]) for r in siena if r["constraints"] == c)
        left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{c} constraint{'s' * (c > 1)}")
        today = sorted((r["filters"], r["today"]["entries"]) for r in siena
                       if r["constraints"] == c and r.get("today", {}).get("entries"))
        if today:
            left.plot([p[0] for p in today], [p[1] for p in today], linestyle="--", marker="x", color="grey", alpha=0.6)
    left.set(xscale="log", yscale="log", xlabel="filters", ylabel="table entries",
             title="Siena, 10 attributes: entries vs filters\n(dashed grey: one diagram with groups, where it could be built)")
    left.axhline(300_000, color="red", linewidth=0.8, linestyle=":", label="entry budget (300k)")
    left.legend(fontsize=8)
    for n in sorted({r["filters"] for r in siena}):
        pts = sorted((r["constraints"], r["entries"], r["exact"]) for r in siena if r["filters"] == n)
        line, = right.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{n:,} filters")
        approx = [p for p in pts if not p[2]]
        right.scatter([p[0] for p in approx], [p[1] for p in approx], marker="s", facecolors="none",
                      edgecolors=line.get_color(), s=90)
    right.set(yscale="log", xlabel="constraints per filter", ylabel="table entries",
              title="entries vs constraints per filter\n(squares: rules widened to fit the budget)")
    right.axhline(300_000, color="red", linewidth=0.8, linestyle=":", label="entry budget (300k)")
    right.legend(fontsize=8)
    # Extra deliveries of the widened points (exact points have none), on the trace the drops were
    # chosen on (solid) and on another trace (dashed).
    for n in sorted({r["filters"] for r in siena}):
        pts = sorted((r["constraints"], 100 * r["extra"]["extra_per_wanted"],
                      100 * r["extra_other_trace"]["extra_per_wanted"] if r.get("extra_other_trace") else None)
                     for r in siena if r["filters"] == n and r.get("extra"))
        if not pts:
            continue
        line, = third.plot([p[0] for p in pts], [max(p[1], 1e-3) for p in pts], marker="o", label=f"{n:,} filters")
        other = [p for p in pts if p[2] is not None]
        third.plot([p[0] for p in other], [max(p[2], 1e-3) for p in other], marker="x", linestyle="--",
                   color=line.get_color(), alpha=0.7)
    third.axhline(1.0, color="red", linewidth=0.8, linestyle=":", label="1 % target")
    third.set(yscale="log", xlabel="constraints per filter", ylabel="extra deliveries, % of wanted (0 drawn at 0.001)",
              title="widened points: extra deliveries\n(dashed: measured on another trace)")
    third.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(rows: list[dict]) -> str:
    """The rows as the table docs/compiler.md shows."""
    head = ("| workload | filters x constraints | entries | table bits | groups | lanes | dependent tables | exact | "
            "extra deliveries | compile s | peak MB | today (one diagram, groups) | one big table |")
    lines = [head, "|" + "|".join("---" for _ in range(13)) + "|"]
    for r in rows:
        name = f"{r['workload']} | {r['filters']:,} x {r['constraints']}"
        if "entries" not in r:
            why = f"timeout {r['timeout_s']:.0f} s" if "timeout_s" in r else r.get("error", "?")
            lines.append(f"| {name} | {why} |" + " |" * 11)
            continue
        extra = r.get("extra")
        extra_text = (f"{100 * extra['extra_per_wanted']:.2f} % ({extra['extra']:,} of {extra['wanted']:,})"
                      if extra else ("0 (exact)" if r["exact"] else "n/a"))
        if r.get("extra_other_trace"):
            extra_text += f"; other trace {100 * r['extra_other_trace']['extra_per_wanted']:.2f} %"
        today = r.get("today", {})
        today_text = (f"{today['entries']:,} entries, {today['groups']:,} groups" if today.get("entries") is not None
                      else today.get("note", ""))
        obt = f"{today['one_big_table']:,}" if today.get("one_big_table") is not None else "-"
        step = "" if r["exact"] else f" ({r['approximation']['step']})"
        if r.get("remeasured") is False:  # kept from an earlier run (--replot over a merged fit.json)
            name += " (earlier run)"
        lines.append(f"| {name} | {r['entries']:,} | {r['table_bits']:,} | {r['groups']:,} | {r['lanes']} | "
                     f"{r['dependent_tables']} | {'yes' if r['exact'] else 'no' + step} | {extra_text} | "
                     f"{r['compile_s']} | {r['peak_mb']} | {today_text} | {obt} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1k Siena filters only")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--constraints", default="1,2,3,4,5")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per point")
    ap.add_argument("--today-limit", type=int, default=2_000_000, help="give up the one-diagram layout past this many edges")
    ap.add_argument("--sample", type=int, default=20_000, help="Siena messages for the extra-delivery measurement")
    ap.add_argument("--no-tables", action="store_true", help="skip the ITCH and INT points")
    ap.add_argument("--only-tables", action="store_true", help="only the ITCH and INT points")
    ap.add_argument("--out", help="directory for fit.json, fit.md and fit.png")
    ap.add_argument("--replot", action="store_true", help="only redraw fit.png and fit.md from OUT/fit.json")
    ap.add_argument("--small", action="store_true", help="only the issue's small Siena points (20 to 40 filters)")
    args = ap.parse_args()
    if args.small:
        small_points()
        return
    if args.replot:
        rows = json.loads((Path(args.out) / "fit.json").read_text())
        plot(rows, Path(args.out) / "fit.png")
        (Path(args.out) / "fit.md").write_text(markdown(rows))
        return
    sizes = [1000] if args.quick else [int(x) for x in args.sizes.split(",")]
    points = [] if args.only_tables else [("siena", n, c) for n in sizes for c in (int(x) for x in args.constraints.split(","))]
    if args.only_tables or (not args.quick and not args.no_tables):
        points += [("itch", 100_000, 2), ("int", 100_000, 2)]
    rows: list[dict] = []
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for kind, n, c in points:
        row = run_point(kind, n, c, args.timeout, args.today_limit, args.sample)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if out:
            (out / "fit.json").write_text(json.dumps(rows, indent=1) + "\n")
    if out:
        plot(rows, out / "fit.png")
        (out / "fit.md").write_text(markdown(rows))
        print(f"wrote {out / 'fit.json'}, fit.md and fit.png", file=sys.stderr)


if __name__ == "__main__":
    main()
