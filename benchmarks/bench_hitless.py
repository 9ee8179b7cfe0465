"""Hitless update benchmark (issue 16 item 2): the plan's size and time, and a replay across it.

Compiles ``bench_compile.itch_rules(N)`` (groups delivery, a state wide enough for shadows), applies
``--changes`` filters removed and as many added through the incremental compile, plans the hitless
update (:func:`compiler.incremental.hitless.plan`), and replays ``--messages`` Add Orders (stocks
of the workload, prices uniform) across it with one write landing every ``--gap`` messages
(:mod:`runtime.update_replay`); the same replay across the delta written in an ordinary install's
order is the comparison. Prints JSON lines: the plan (writes per phase, shadow states, time) and
per way of writing the messages judged, those that missed a port both rule sets want (false
negatives) and those delivered neither as the old nor as the new rules say.

    .venv/bin/python benchmarks/bench_hitless.py                      # 10k filters, 50 changed
    .venv/bin/python benchmarks/bench_hitless.py --filters 100000 --changes 1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_compile import itch_rules, spec  # noqa: E402
from compiler import rules as ast
from compiler.compile import CompileOptions
from compiler.incremental import Incremental, hitless
from compiler.rules.typecheck import check_rules
from compiler.rules.values import encode_string
from compiler.tables import TableOptions
from runtime.update_replay import delta_writes, replay_across  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filters", type=int, default=10000)
    ap.add_argument("--changes", type=int, default=50, help="filters removed, and as many added")
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--gap", type=float, default=20, help="messages between two writes (0.25: four writes a message)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delivery", default="groups", choices=("groups", "bitmap"))
    args = ap.parse_args()
    s = spec()
    rules = list(itch_rules(args.filters, seed=args.seed).rules)
    options = CompileOptions(delivery=args.delivery, tables=TableOptions(min_state_bits=20, headroom=2.0))
    t = time.perf_counter()
    inc = Incremental.compile(s, ast.RuleSet(tuple(rules)), options)
    compile_s = time.perf_counter() - t
    old, old_typed = inc.pipeline(), check_rules(inc.rule_set(), s)
    rng = random.Random(args.seed)
    gone = rng.sample(rules, args.changes)
    update = inc.update(add=list(itch_rules(args.changes, seed=args.seed + 1).rules), remove=gone)
    new, new_typed = inc.pipeline(), check_rules(inc.rule_set(), s)
    t = time.perf_counter()
    plan = hitless.plan(old, new)
    plan_s = time.perf_counter() - t
    print(json.dumps({"filters": args.filters, "changes": args.changes, "compile_s": round(compile_s, 2),
                      "incremental": update.incremental, "delta_writes": update.delta.size,
                      "plan_ms": round(plan_s * 1000, 1), **plan.counts()}), flush=True)
    syms = sorted({r.filter.items[0].value.value for r in rules})
    n = args.messages
    cols = {"add_order.stock": np.array([encode_string(rng.choice(syms), 64) for _ in range(n)], dtype=np.uint64),
            "add_order.price": np.array([rng.randrange(0, 1000 * 10000) for _ in range(n)], dtype=np.uint64)}
    for name, writes in (("hitless", [w for st in plan.steps for w in st.writes]), ("delta", delta_writes(old, new))):
        t = time.perf_counter()
        r = replay_across(old, new, old_typed, new_typed, cols, writes, start=n // 10, gap=args.gap)
        print(json.dumps({"writes_as": name, **r.to_json(), "replay_s": round(time.perf_counter() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
