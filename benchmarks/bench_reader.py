"""How fast replay reads a trace: the spec's parse graph on batches (runtime/columnar.py) against
the old hand-written ITCH reader (apps/itch/columnar.py), on a generated feed, one core.

Both read the same pcap chunk by chunk (32,768 packets, replay's default batch) and produce the
Add Order columns the benchmark pipeline matches on (stock, price). The old reader also checks IPv4
and UDP checksums and message lengths and reads 'F' messages as add orders, which the switch does
not; the rows differ by those, and the figure that matters is messages (MoldUDP64 blocks) per
second. Each reader runs ``--repeat`` times; the best time counts (the machine is shared).

    nice .venv/bin/python benchmarks/bench_reader.py --feed feed.pcap   # an existing `p4sub gen itch` feed
    nice .venv/bin/python benchmarks/bench_reader.py --messages 1000000  # generate one first
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIELDS = ["add_order.stock", "add_order.price"]


def time_new(feed: Path, batch_packets: int) -> dict:
    from compiler.spec.reader import read_spec
    from runtime.spec_trace import SpecTraceReader

    source = SpecTraceReader(feed, read_spec(ROOT / "apps/itch/itch.p4"), FIELDS, batch_packets=batch_packets)
    t = time.perf_counter()
    rows = sum(len(b["packet_index"]) for b in source)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "rows": rows, "messages": source.messages_read, "packets": source.packets_read}


def time_old(feed: Path, batch_packets: int) -> dict:
    from apps.itch.columnar import read_itch_batches

    source = read_itch_batches(feed, batch_packets=batch_packets)
    t = time.perf_counter()
    rows = sum(len(b["packet_index"]) for b in source)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "rows": rows, "messages": source.messages_read, "packets": source.packets_read}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--feed", type=Path, help="an ITCH pcap (default: generate one with --messages)")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages of the generated feed (1000000)")
    ap.add_argument("--batch-packets", type=int, default=1 << 15)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    feed = args.feed
    if feed is None:
        feed = ROOT / "benchmarks" / "out" / f"itch-{args.messages}-seed1.pcap"
        if not feed.is_file():
            feed.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "p4sub", "gen", "itch", "--messages", str(args.messages),
                            "--seed", "1", "-q", "-o", str(feed)], check=True, cwd=ROOT)
    out = {"feed": str(feed), "bytes": os.path.getsize(feed), "batch_packets": args.batch_packets,
           "load_start": [round(x, 2) for x in os.getloadavg()]}
    for name, run in (("spec_reader", time_new), ("old_itch_reader", time_old)):
        runs = [run(feed, args.batch_packets) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        best["messages_per_s"] = round(best["messages"] / best["seconds"])
        best["rows_per_s"] = round(best["rows"] / best["seconds"])
        best["seconds"] = round(best["seconds"], 3)
        best["all_seconds"] = [round(r["seconds"], 3) for r in runs]
        out[name] = best
        print(f"{name}: {best['messages']:,} messages ({best['rows']:,} rows) in {best['seconds']} s: "
              f"{best['messages_per_s']:,} messages/s", file=sys.stderr)
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
