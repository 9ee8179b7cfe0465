"""How fast ``p4sub gen itch`` writes a feed, timed as the user runs it: the whole command in a child process.

Each run is ``p4sub gen itch --messages N -o FILE`` (plus ``--generator`` and any extra options),
started fresh, so interpreter start-up, imports and the final flush count. Printed per run: wall
seconds, messages per second over the wall time, the child's CPU seconds (user + system), its peak
resident memory (``ru_maxrss`` from ``wait4``), the file's size, and the load average (/proc/loadavg)
before and after: on a shared machine read wall figures beside the load, and CPU seconds as the cost.

    .venv/bin/python benchmarks/bench_gen_itch.py                          # 10M messages, v2 (issue 29's row)
    .venv/bin/python benchmarks/bench_gen_itch.py --messages 200000 2000000 --generator v2 v1
    .venv/bin/python benchmarks/bench_gen_itch.py --messages 1000000 --extra "--format binaryfile"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def p4sub_command() -> list[str]:
    """The ``p4sub`` script of this interpreter's environment, as a user runs it (else ``python -m p4sub``)."""
    script = Path(sys.executable).parent / "p4sub"
    return [str(script)] if script.exists() else [sys.executable, "-m", "p4sub"]


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run(messages: int, generator: str, extra: list[str], out: Path) -> dict:
    cmd = [*p4sub_command(), "gen", "itch", "--messages", str(messages), "--generator", generator, *extra,
           "-q", "-o", str(out)]
    before = load()
    start = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} exited with {child.returncode}")
    return {
        "command": shlex.join(["p4sub", *cmd[len(p4sub_command()):]]),
        "messages": messages,
        "generator": generator,
        "wall_s": round(wall, 3),
        "msg_per_s": round(messages / wall),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "bytes": out.stat().st_size,
        "load_before": before,
        "load_after": load(),
        "cores": os.cpu_count(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, nargs="+", default=[10_000_000], help="feed sizes (10000000)")
    ap.add_argument("--generator", nargs="+", default=["v2"], choices=("v2", "v1"), help="format versions (v2)")
    ap.add_argument("--extra", default="", help='more gen itch options, e.g. "--seed 1 --symbols 100"')
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (1)")
    ap.add_argument("--out", type=Path, help="directory for the feeds (default: a temporary one, removed)")
    ap.add_argument("--json", action="store_true", help="one JSON object per run instead of the table")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        for generator in args.generator:
            for n in args.messages:
                for _ in range(args.repeat):
                    out = Path(tmp) / f"feed-{generator}-{n}.pcap"
                    row = run(n, generator, shlex.split(args.extra), out)
                    out.unlink()
                    rows.append(row)
                    if args.json:
                        print(json.dumps(row), flush=True)
                    else:
                        print(f"{row['command']}: {row['wall_s']:.1f} s wall = {row['msg_per_s']:,} msg/s; "
                              f"CPU {row['cpu_s']:.1f} s; peak RSS {row['peak_rss_mb']:.0f} MB; "
                              f"{row['bytes'] / 1e6:.0f} MB written; load {row['load_before']} -> "
                              f"{row['load_after']} on {row['cores']} cores", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
