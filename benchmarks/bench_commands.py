"""Issue 29's table: the commands a user runs, timed whole, with the machine's load beside each figure.

Each row runs the installed ``p4sub`` (or the README's script) as a subprocess, as a user would, and
prints one JSON line: the command, wall and CPU seconds of the process and its children, peak
resident memory (the largest of its processes), the load average before and after, and the
target. Inputs a row needs but does not time (a rule set, a feed, a compiled pipeline) are made
first, in ``--work`` (kept between runs, so a second run skips them; ``--fresh`` remakes them).

    .venv/bin/python benchmarks/bench_commands.py                         # every row (about 15 min)
    .venv/bin/python benchmarks/bench_commands.py --rows verify,compile   # some rows
    .venv/bin/python benchmarks/bench_commands.py --rows readme           # the README's main job in a fresh clone
    .venv/bin/python benchmarks/bench_commands.py --json out/commands.json

Rows (issue 29): ``replay`` (10M ITCH messages against gen rules' 100k filters, default master),
``gen`` (``gen itch`` of 10M messages), ``verify`` (of the 100k-filter BMv2 compile), ``compile``
(``compile --target bmv2`` of the 100k filters), ``update`` (``compile --update`` from the 100k compile
kept with ``--session``, one rule's threshold lowered so that entries really change), ``stream`` (100
changes through ``p4sub serve``, per-change latency; then 30 pushed hitlessly into the installer's
in-memory stand-in, benchmarks/bench_stream.py), ``routing`` (``bench_routing.py --sizes none --k8-messages 0``: k=8, 100k filters, MR and
TR), ``readme`` (``bash examples/run-itch.sh`` in a fresh clone of this repository's HEAD, venv
included).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
P4SUB = str(Path(sys.executable).with_name("p4sub"))
TARGETS = {"replay": "≥ 1M msg/s", "gen": "≥ 1M msg/s", "verify": "≤ 10 s", "compile": "≤ 5 s, ≤ 1 GB",
           "update": "≤ 1 s", "routing": "MR and TR each ≤ 30 s", "readme": "≤ 60 s",
           "stream": "≤ 50 ms per change, end to end"}


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def timed(cmd: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall seconds, CPU seconds and peak RSS of it and its children (``wait4``)."""
    before = load()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{output[-3000:]}")
    return {"command": " ".join(cmd), "wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "load_before": before, "load_after": load(),
            "output_tail": output.strip().splitlines()[-1:] if output.strip() else [],
            "_lines": output.strip().splitlines()[-5:]}


def p4sub(*args: str | Path) -> list[str]:
    return [P4SUB, *map(str, args)]


class Work:
    """The inputs the rows share, made once in ``root``."""

    def __init__(self, root: Path, fresh: bool) -> None:
        self.root = root
        if fresh and root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)

    def _make(self, path: Path, cmd: list[str]) -> Path:
        if not path.exists():
            print(f"making {path.name} ...", file=sys.stderr)
            timed(cmd)
        return path

    def rules(self) -> Path:
        return self._make(self.root / "100k.sub", p4sub("gen", "rules", "--workload", "itch", "--filters", 100_000,
                                                        "-o", self.root / "100k.sub"))

    def feed(self) -> Path:
        return self._make(self.root / "feed10m.pcap", p4sub("gen", "itch", "--messages", 10_000_000,
                                                            "-o", self.root / "feed10m.pcap"))

    def compiled_session(self) -> Path:
        """The 100k compile with its incremental session kept (``--session``), for the update and stream rows."""
        return self._make(self.root / "out100k-session", p4sub("compile", "apps/itch/itch.p4", self.rules(), "--target",
                                                               "bmv2", "--session", "-o", self.root / "out100k-session"))

    def compiled(self) -> Path:
        return self._make(self.root / "out100k", p4sub("compile", "apps/itch/itch.p4", self.rules(), "--target",
                                                       "bmv2", "-o", self.root / "out100k"))


def row_replay(w: Work) -> dict[str, Any]:
    r = timed(p4sub("replay", w.compiled(), "--trace", w.feed(), "--report", w.root / "report"))
    r["messages_per_s"] = round(10_000_000 / r["wall_s"])
    return r


def row_gen(w: Work) -> dict[str, Any]:
    r = timed(p4sub("gen", "itch", "--messages", 10_000_000, "-o", w.root / "gen10m.pcap"))
    r["messages_per_s"] = round(10_000_000 / r["wall_s"])
    return r


def row_verify(w: Work) -> dict[str, Any]:
    return timed(p4sub("verify", w.compiled()))


def row_compile(w: Work) -> dict[str, Any]:
    return timed(p4sub("compile", "apps/itch/itch.p4", w.rules(), "--target", "bmv2", "-o", w.root / "compile100k"))


def changed_rules(w: Work) -> Path:
    """The 100k rules with one rule's threshold lowered below every other of its stock and port: the
    pipeline's entries really change (a rule whose port another rule of its stock already gets from a
    lower price changes nothing)."""
    lines = w.rules().read_text().splitlines(True)
    changed = w.root / "100k-changed.sub"
    i = next(i for i, line in enumerate(lines) if "add_order.price > " in line)
    head, tail = lines[i].split("add_order.price > ", 1)
    lines[i] = head + "add_order.price > 0.0001" + tail[tail.index(":"):]  # the rule's own threshold gone
    changed.write_text("".join(lines))
    return changed


def row_update(w: Work) -> dict[str, Any]:
    changed = changed_rules(w)
    shutil.rmtree(w.root / "updated", ignore_errors=True)
    r = timed(p4sub("compile", "--update", w.compiled_session(), "apps/itch/itch.p4", changed, "--target", "bmv2",
                    "-o", w.root / "updated"))
    delta = json.loads((w.root / "updated" / "delta.json").read_text())
    r["delta"] = {k: delta[k] for k in ("incremental", "entries_added", "entries_modified", "entries_deleted",
                                        "groups_added", "groups_modified", "groups_deleted")}
    r["stages_s"] = delta["timings"]
    return r


def row_stream(w: Work) -> dict[str, Any]:
    """100 changes through ``p4sub serve`` (change read -> delta written), then the same with each change
    pushed hitlessly into the installer's in-memory stand-in (benchmarks/bench_stream.py)."""
    out = w.compiled_session()
    lines = w.root / "stream-changes.txt"
    subprocess.run([sys.executable, "benchmarks/bench_stream.py", str(out), "--changes", "100", "--write-changes",
                    str(lines)], cwd=ROOT, check=True)
    shutil.rmtree(w.root / "stream-deltas", ignore_errors=True)
    r = timed(p4sub("serve", out, "--changes", lines, "--deltas", w.root / "stream-deltas"))
    summary = next(line for line in r.pop("_lines", []) if line.startswith("serve: "))
    r["serve"] = json.loads(summary.removeprefix("serve: "))
    pushed = subprocess.run([sys.executable, "benchmarks/bench_stream.py", str(out), "--changes", "30", "--push"],
                            cwd=ROOT, check=True, capture_output=True, text=True)
    r["push_to_stand_in"] = json.loads(pushed.stdout.strip().splitlines()[-1])
    return r


def row_routing(w: Work) -> dict[str, Any]:
    r = timed([sys.executable, "benchmarks/bench_routing.py", "--sizes", "none", "--k8-messages", "0",
               "--report", str(w.root / "routing")])
    r["report"] = str(w.root / "routing")
    return r


def row_readme(w: Work) -> dict[str, Any]:
    clone = Path(tempfile.mkdtemp(prefix="p4sub-clone-"))
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone / "p4sub")], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        return timed(["bash", "examples/run-itch.sh"], cwd=clone / "p4sub", env=env)
    finally:
        shutil.rmtree(clone, ignore_errors=True)


ROWS: dict[str, Callable[[Work], dict[str, Any]]] = {
    "replay": row_replay, "gen": row_gen, "verify": row_verify, "compile": row_compile, "update": row_update,
    "routing": row_routing, "readme": row_readme, "stream": row_stream,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default all): {', '.join(ROWS)}")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks/out/commands", help="inputs kept between runs")
    ap.add_argument("--fresh", action="store_true", help="make the inputs again")
    ap.add_argument("--json", type=Path, help="also write every row to this file")
    args = ap.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    work = Work(args.work, args.fresh)
    results = []
    for name in rows:
        result = {"row": name, "target": TARGETS[name], **ROWS[name](work)}
        result = {k: v for k, v in result.items() if not k.startswith("_")}
        results.append(result)
        print(json.dumps(result, ensure_ascii=False), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
