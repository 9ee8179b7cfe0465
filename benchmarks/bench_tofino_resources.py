"""Tofino resource estimate for the Camus workloads, next to Camus Table 1 (CoNEXT'20, §7.4).

Workloads (rule ASTs built here with fixed seeds, drawn as :mod:`apps.workloads` draws them; one
message per packet, as in Camus' pipeline, which matched ``hdr.add_order.*`` of a single Add Order):

* ITCH: 100k filters ``add_order.stock == S and add_order.price > P : fwd(H)``, 100 symbols,
  P in (0, 1000) dollars, 200 hosts;
* INT: 100k filters ``int_hop.switch_id == X and int_hop.hop_latency > L : fwd(H)``, 100 switches,
  1000 latency thresholds, 200 hosts;
* hICN: 1M distinct exact content ids (32-bit ``hicn.name_id``), 200 hosts.

Tables are laid out with :func:`backends.tofino.compile_options` (32-bit range fields are
domain-compressed; the code table of each is cut in a ternary high and a native range low slice,
:mod:`backends.tofino.slices`) and estimated by :mod:`backends.tofino.resources` without the fit check, so a
workload that does not fit still prints its percentages (and says that it does not fit).

    .venv/bin/python benchmarks/bench_tofino_resources.py            # the Table 1 sizes
    .venv/bin/python benchmarks/bench_tofino_resources.py --quick    # 10k / 10k / 100k
    .venv/bin/python benchmarks/bench_tofino_resources.py --itch-prices cents   # P with 4 decimals
    .venv/bin/python benchmarks/bench_tofino_resources.py --bf-p4c OUT  # and bf-p4c's placement of each

With ``--bf-p4c OUT`` each workload's program is written to ``OUT/<workload>`` (what ``compile --target
tofino`` writes) and bf-p4c (on PATH) places it in a scratch directory: its SRAM/TCAM percentages
and stages (from its ``pipe/logs/resources.json``) are printed beside the estimate's; ``p4sub build
OUT/<workload>`` keeps its logs.
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from apps import workloads  # noqa: E402
from apps.itch.symbols import symbol_names  # noqa: E402
from backends.tofino import bf_p4c, build, compile_budget, compile_options, write  # noqa: E402
from backends.tofino.layout import plan  # noqa: E402
from backends.tofino.resources import estimate  # noqa: E402
from compiler import rules as ast
from compiler.base.errors import P4subError, ResourceError
from compiler.compile import CompileOptions, compile_rules
from compiler.spec.model import (
    Extract,
    FieldDef,
    HeaderInstance,
    HeaderType,
    ParserState,
    QueryField,
    SelectCase,
    Spec,
)

CAMUS_TABLE1 = {"ITCH": (3.7, 4.17, 46.0), "INT": (0.73, 3.45, 0.0), "hICN": (74.9, 0.69, 0.0)}


def scalar_spec(header: str, fields: list[tuple[str, int, str | None, bool, int]]) -> Spec:
    """A one-header spec: (field, width, match kind hint, is_string, scale) per queried field."""
    htype = HeaderType(f"{header}_t", tuple(FieldDef(f, w) for f, w, _, _, _ in fields))
    return Spec(path=f"<bench {header}>", header_types={htype.name: htype}, headers=(HeaderInstance(header, htype.name),),
                parser_states={"start": ParserState("start", (Extract(header),), (), (SelectCase((), "accept", True),))},
                query_fields={f"{header}.{f}": QueryField(f"{header}.{f}", w, kind, scale=scale, is_string=s)
                              for f, w, kind, s, scale in fields})


def _rule(comparisons: list[ast.Comparison], host: int) -> ast.Rule:
    body = comparisons[0] if len(comparisons) == 1 else ast.And(tuple(comparisons))
    return ast.Rule(body, (ast.Forward((host,)),))


def itch_rules(n: int, dollars: bool, seed: int = 1) -> ast.RuleSet:
    """stock == S (100 of the feed's symbols) and price > P (0 < P < 1000 dollars) : fwd(H) (200 hosts)."""
    rng = np.random.default_rng(seed)
    names = symbol_names(100)
    sym, host = rng.integers(0, 100, n), rng.integers(1, 201, n)
    price = rng.integers(1, 1000, n) if dollars else rng.integers(1, 1000 * 10_000, n)
    stock, p = ast.Field("add_order.stock"), ast.Field("add_order.price")
    return ast.RuleSet(tuple(
        _rule([ast.Comparison(stock, "==", ast.String(names[sym[i]])),
               ast.Comparison(p, ">", ast.Number(int(price[i]) if dollars else Decimal(int(price[i])) / 10_000))],
              int(host[i])) for i in range(n)))


def int_rules(n: int, seed: int = 1) -> ast.RuleSet:
    """switch_id == X (100 switches) and hop_latency > L (1000 log-spaced thresholds) : fwd(H)."""
    rng = np.random.default_rng(seed)
    levels = workloads.latency_thresholds(1000)
    sw, lat, host = rng.integers(1, 101, n), rng.integers(0, len(levels), n), rng.integers(1, 201, n)
    x, y = ast.Field("int_hop.switch_id"), ast.Field("int_hop.hop_latency")
    return ast.RuleSet(tuple(_rule([ast.Comparison(x, "==", ast.Number(int(sw[i]))),
                                    ast.Comparison(y, ">", ast.Number(levels[lat[i]]))], int(host[i]))
                             for i in range(n)))


def hicn_rules(n: int, seed: int = 1) -> ast.RuleSet:
    """name_id == ID (n distinct 32-bit ids) : fwd(H)."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(1 << 32, size=n, replace=False)
    host = rng.integers(1, 201, n)
    f = ast.Field("hicn.name_id")
    return ast.RuleSet(tuple(_rule([ast.Comparison(f, "==", ast.Number(int(ids[i])))], int(host[i])) for i in range(n)))


def workloads_for(args: argparse.Namespace) -> list[tuple[str, Spec, ast.RuleSet]]:
    itch = scalar_spec("add_order", [("stock", 64, "exact", True, 0), ("price", 32, "range", False, 4),
                                     ("shares", 32, "range", False, 0)])
    intw = scalar_spec("int_hop", [("switch_id", 32, "exact", False, 0), ("hop_latency", 32, "range", False, 0)])
    hicn = scalar_spec("hicn", [("name_id", 32, "exact", False, 0)])
    n_itch, n_int, n_hicn = (10_000, 10_000, 100_000) if args.quick else (100_000, 100_000, 1_000_000)
    return [("ITCH", itch, itch_rules(n_itch, args.itch_prices == "dollars")),
            ("INT", intw, int_rules(n_int)),
            ("hICN", hicn, hicn_rules(n_hicn))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k ITCH/INT filters and 100k hICN ids")
    parser.add_argument("--itch-prices", choices=("dollars", "cents"), default="dollars",
                        help="ITCH thresholds in whole dollars (default) or with 4 decimals")
    parser.add_argument("--delivery", choices=("auto", "groups", "bitmap"), default="auto",
                        help="compile layout (auto: the compiler's choice)")
    parser.add_argument("--only", help="comma-separated workloads (ITCH,INT,hICN)")
    parser.add_argument("--bf-p4c", type=Path, metavar="OUT", help="write each program under OUT and run bf-p4c on it")
    args = parser.parse_args()
    judged: dict[str, str] = {}
    rows = []
    for name, spec, rules in workloads_for(args):
        if args.only and name not in args.only.split(","):
            continue
        t1 = time.perf_counter()
        compiled = compile_rules(spec, rules, CompileOptions(tables=compile_options(spec), budget=compile_budget(),
                                                             delivery=args.delivery))
        t2 = time.perf_counter()
        rendered = None
        try:  # what `compile --target tofino` renders (miss tables folded where that helps) and its estimate
            rendered = build(compiled.pipeline)
            est = rendered.estimate
            fits = "yes"
        except ResourceError as exc:
            est = estimate(plan(compiled.pipeline), check=False)
            fits = f"no: {exc}"
        t3 = time.perf_counter()
        rows.append((name, len(rules), est, fits))
        if args.bf_p4c and rendered is not None:
            judged[name] = judge(rendered, args.bf_p4c / name)
        print(f"{name}: {len(rules)} filters; compile {t2 - t1:.1f} s, layout+estimate "
              f"{t3 - t2:.1f} s; {compiled.stats['states']} states, {compiled.stats['total_entries']} IR entries, "
              f"{len(compiled.pipeline.multicast_groups)} multicast groups; fits: {fits}")
        for u in est.tables:
            print(f"    {u.name:<34} {u.memory:<4} entries {u.entries:>8}  size {u.size:>8}  "
                  f"SRAM {u.sram_blocks:>4}  TCAM {u.tcam_blocks:>3}  ({u.entry_bits} b/entry)")
    print()
    print(f"{'workload':<10} {'filters':>9} | {'SRAM %':>7} {'TCAM %':>7} {'mcast %':>8} | "
          f"{'Camus SRAM':>10} {'TCAM':>6} {'mcast':>6} | stages  fits  TCAM<=Camus")
    for name, n, est, fits in rows:
        c = CAMUS_TABLE1[name]
        stages = est.stages if fits == "yes" else "-"
        print(f"{name:<10} {n:>9} | {est.sram_percent:>7.2f} {est.tcam_percent:>7.2f} {est.multicast_percent:>8.2f} | "
              f"{c[0]:>10.2f} {c[1]:>6.2f} {c[2]:>6.1f} | {stages:>6}  {fits.split(':')[0]:<4}  "
              f"{'yes' if round(est.tcam_percent, 2) <= c[1] else 'no'}")
    for name, line in judged.items():
        print(f"bf-p4c {name}: {line}")


def judge(rendered, out: Path) -> str:
    """bf-p4c's placement of the rendered program (written to ``out`` as compile writes it): SRAM %,
    TCAM %, stages, or its refusal (:func:`backends.tofino.bf_p4c.judge`, as ``--fit-by bf-p4c`` runs it)."""
    write(rendered, out)
    started = time.perf_counter()
    try:
        m = bf_p4c.judge(rendered.program.text)
    except P4subError as exc:
        return f"refused after {time.perf_counter() - started:.0f} s: {exc}"
    return (f"SRAM {m.sram_percent:.2f} % ({m.sram_blocks} blocks), TCAM {m.tcam_percent:.2f} % "
            f"({m.tcam_blocks} blocks), {m.stages} stages, in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
