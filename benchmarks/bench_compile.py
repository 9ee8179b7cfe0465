"""Compile-time benchmark on the Camus workloads (issue: compiler core).

Prints, per workload and size: compile seconds (type check + diagram + tables), peak memory,
entries per table, multicast groups, table bits, states, and the one-big-table baseline size
(Camus Fig. 12: one entry per root-to-leaf path). Rule sets are built as ASTs with a fixed seed,
so parsing is not counted here (``bench_parse`` below times it separately).

    .venv/bin/python benchmarks/bench_compile.py            # ITCH 1k/10k/100k, 3 and 5 fields, hICN 1M, model
    .venv/bin/python benchmarks/bench_compile.py --quick    # smaller sizes
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules
from compiler.rules.parser import parse_rules
from compiler.rules.values import encode_string
from compiler.spec.model import FieldDef, HeaderInstance, HeaderType, QueryField, Spec
from runtime.model import Model  # noqa: E402

FIELDS = {
    "add_order.stock": QueryField("add_order.stock", 64, "exact", is_string=True),
    "add_order.price": QueryField("add_order.price", 32, "range", scale=4),
    "add_order.shares": QueryField("add_order.shares", 32, "range"),
    "add_order.buy_sell_indicator": QueryField("add_order.buy_sell_indicator", 8, "exact", is_string=True),
    "add_order.stock_locate": QueryField("add_order.stock_locate", 16, "range"),
    "hicn.name_id": QueryField("hicn.name_id", 64, "exact"),
}


def spec() -> Spec:
    by_header: dict[str, list[FieldDef]] = {}
    for ref, q in FIELDS.items():
        h, f = ref.split(".")
        by_header.setdefault(h, []).append(FieldDef(f, q.width))
    return Spec(path="bench", header_types={f"{h}_t": HeaderType(f"{h}_t", tuple(fs)) for h, fs in by_header.items()},
                headers=tuple(HeaderInstance(h, f"{h}_t") for h in by_header), query_fields=dict(FIELDS))


def itch_rules(n: int, fields: int = 2, seed: int = 1) -> ast.RuleSet:
    """Camus §7: stock == S and price > P : fwd(H); S in 100 symbols, P in (0, 1000) dollars, H in 200 hosts."""
    rng = random.Random(seed)
    syms = [f"S{i:03d}" for i in range(100)]
    f = ast.Field
    out = []
    for _ in range(n):
        cmps = [ast.Comparison(f("add_order.stock"), "==", ast.String(rng.choice(syms))),
                ast.Comparison(f("add_order.price"), ">", ast.Number(rng.randint(1, 999)))]
        if fields >= 3:
            cmps.append(ast.Comparison(f("add_order.shares"), "<", ast.Number(rng.randint(1, 100) * 100)))
        if fields >= 4:
            cmps.append(ast.Comparison(f("add_order.buy_sell_indicator"), "==", ast.String(rng.choice("BS"))))
        if fields >= 5:
            cmps.append(ast.Comparison(f("add_order.stock_locate"), ">", ast.Number(rng.randint(0, 1000))))
        out.append(ast.Rule(ast.And(tuple(cmps)), (ast.Forward((rng.randint(1, 200),)),)))
    return ast.RuleSet(tuple(out))


def hicn_rules(n: int, seed: int = 1) -> ast.RuleSet:
    """hICN: n unique exact content ids, each to one of 200 hosts."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 2**40), n)
    f = ast.Field("hicn.name_id")
    return ast.RuleSet(tuple(ast.Rule(ast.Comparison(f, "==", ast.Number(i)), (ast.Forward((rng.randint(1, 200),)),)) for i in ids))


OPTIONS = CompileOptions()


def measure(name: str, rules: ast.RuleSet, results: list, memory: bool = True) -> object:
    """Time one compile; then, if asked, compile again under tracemalloc (which slows it) for peak memory."""
    t = time.perf_counter()
    compiled = compile_rules(spec(), rules, OPTIONS)
    seconds = time.perf_counter() - t
    peak = None
    if memory:
        tracemalloc.start()
        compile_rules(spec(), rules, OPTIONS)
        peak = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    row = {"workload": name, "filters": len(rules), "compile_s": round(seconds, 2), "peak_mb": peak,
           "entries": compiled.stats["total_entries"], "per_table": {k: v for k, v in compiled.stats["tables"].items() if v},
           "multicast_groups": compiled.stats["multicast_groups"], "table_bits": compiled.stats["table_bits"],
           "states": compiled.stats["states"], "delivery": compiled.stats["delivery"], "lanes": compiled.stats["lanes"],
           "one_big_table": sum(d.path_count() for d in compiled.diagrams)}
    results.append(row)
    print(json.dumps(row), flush=True)
    return compiled


def bench_model(compiled, n: int = 1_000_000) -> None:
    model = Model(compiled.pipeline)
    rng = np.random.default_rng(0)
    syms = np.array([encode_string(f"S{i:03d}", 64) for i in range(100)], dtype=np.uint64)
    cols = {"add_order.stock": syms[rng.integers(0, 100, n)],
            "add_order.price": rng.integers(0, 10_000_000, n).astype(np.uint64)}
    model.run(cols)  # warm
    t = time.perf_counter()
    res = model.run(cols)
    seconds = time.perf_counter() - t
    delivered = int((res.group > 0).sum() + ((res.port >= 0) & ~res.dropped).sum())
    print(json.dumps({"model_packets": n, "seconds": round(seconds, 3), "packets_per_s": round(n / seconds),
                      "forwarded": delivered}), flush=True)


def bench_parse(n: int) -> None:
    """Parse time of n printed rules, plain and after a generator's '#' header line (both take the fast path)."""
    text = str(itch_rules(n))
    for comment, body in ((False, text), (True, "# itch_rules, seed 1\n" + text)):
        t = time.perf_counter()
        parse_rules(body)
        print(json.dumps({"parse_rules": n, "comment_line": comment, "seconds": round(time.perf_counter() - t, 2)}),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--only", choices=("model", "parse"),
                    help="model: only the largest ITCH compile and the model batch; parse: only bench_parse")
    ap.add_argument("--delivery", choices=("auto", "groups", "bitmap"), default="auto", help="compile layout (auto)")
    args = ap.parse_args()
    global OPTIONS
    OPTIONS = CompileOptions(delivery=args.delivery)
    sizes = [1000, 10000] if args.quick else [1000, 10000, 100000]
    if args.only == "parse":
        bench_parse(sizes[-1])
        return
    if args.only == "model":
        sizes = sizes[-1:]
    results: list = []
    compiled = None
    for n in sizes:
        compiled = measure("itch-2", itch_rules(n), results)
    bench_model(compiled)
    if args.only != "model":
        bench_parse(sizes[-1])
        for fields in (3, 5):
            for n in sizes[:-1]:
                measure(f"itch-{fields}", itch_rules(n, fields), results)
        measure("hicn", hicn_rules(100_000 if args.quick else 1_000_000), results, memory=args.quick)
    print(json.dumps({"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
