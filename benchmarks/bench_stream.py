"""Subscription changes streamed into a running ``p4sub serve``: per-change latency, end to end inside the mode.

Loads OUT's session as ``p4sub serve`` does, then applies N changes (alternately one of OUT's rules
removed and a new rule on one of its stocks added, seeded) through :class:`p4sub.serve.Server`,
timing each from the change line read to its delta written (``--push``: and pushed, with the hitless
plan of ``install --hitless`` as :class:`backends.bmv2.hitless.Pusher` plans it, into an in-memory
stand-in of the switch that applies every write as P4Runtime keys it). Prints one JSON line with the
median and p99 and the machine's load.

    .venv/bin/python benchmarks/bench_stream.py OUT --changes 100 [--push]
    .venv/bin/python benchmarks/bench_stream.py OUT --write-changes FILE --changes 100   # the lines only

OUT: ``p4sub compile apps/itch/itch.p4 100k.sub --target bmv2 --session -o OUT``.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def changes(out: Path, n: int, seed: int = 7) -> list[str]:
    """N change lines: even ones remove a rule OUT holds (each at most once), odd ones add a new rule."""
    lines = [line for line in (out / "compiled_rules.sub").read_text().split("\n")
             if line.strip() and not line.lstrip().startswith("#")]
    rng = random.Random(seed)
    picked = rng.sample(range(len(lines)), n)
    out_lines = []
    for i in range(n):
        line = lines[picked[i]]
        if i % 2 == 0:
            out_lines.append("- " + line)
        else:
            stock = line.split('"')[1] if '"' in line else "GOOGL"
            out_lines.append(f'+ add_order.stock == "{stock}" and add_order.price > {rng.uniform(1, 999):.4f} : '
                             f'fwd({rng.randint(1, 200)});')
    return out_lines


class StandIn:
    """The switch in memory: entities keyed as P4Runtime keys them; every write accepted."""

    def __init__(self) -> None:
        from backends.bmv2 import update_plan

        self.up = update_plan
        self.state: dict = {}
        self.writes = 0

    def write(self, ops: list) -> list:
        for op in ops:
            key = self.up.entity_key(op.entity)
            if op.type == self.up.DELETE:
                self.state.pop(key, None)
            else:
                self.state[key] = op.entity
        self.writes += len(ops)
        return [None] * len(ops)


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--push", action="store_true", help="push each change hitlessly into the in-memory stand-in")
    ap.add_argument("--write-changes", type=Path, help="only write the change lines to this file")
    args = ap.parse_args()
    lines = changes(args.out, args.changes)
    if args.write_changes:
        args.write_changes.write_text("\n".join(lines) + "\n")
        return 0
    from compiler.base import bulk_objects
    from p4sub.serve import Server, load_session

    before = load()
    t = time.perf_counter()
    with bulk_objects():
        session = load_session(args.out)
    loaded = time.perf_counter() - t
    push = None
    switch = StandIn()
    if args.push:
        from backends.bmv2.hitless import Pusher, options_of

        push = Pusher(session.pipeline(), switch.write, options_of(args.out)).push
    with tempfile.TemporaryDirectory(prefix="p4sub-stream-") as deltas:
        server = Server(session, deltas=Path(deltas), push=push, out=io.StringIO())
        for i, line in enumerate(lines, 1):
            server.handle(i, line)
    print(json.dumps({"what": "serve, change read -> delta written" + (" and pushed to the stand-in" if args.push else ""),
                      "out": str(args.out), "session_load_s": round(loaded, 2), **server.summary(),
                      "stand_in_writes": switch.writes if args.push else None, "load_before": before,
                      "load_after": load()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
