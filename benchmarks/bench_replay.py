"""Trace replay at scale (issue 7, item 3): a 10M-message ITCH feed on a 100k-filter pipeline, on Spark.

Steps, each cached under ``--work`` so a rerun only replays:

1. compile the Camus ITCH workload (``stock == S and price > P: fwd(H)``; 100 symbols, whole-dollar
   thresholds in 1..999, 200 hosts: the shape ``bench_compile.py`` times) with ``p4sub compile``.
   The symbols are those of the feed generator (:func:`apps.workloads.itch_rules`), not
   bench_compile's ``S000``.. placeholders, so that rules match the feed;
2. generate the feed with ``p4sub gen itch`` (MoldUDP64 batches of 1-12 messages, Zipf 1.1 over
   100 symbols, as the Camus synthetic feed);
3. replay it with ``p4sub replay`` twice per Spark master (``local[1]``, ``local[2]``), each in its own
   process: *cold* (the context cache ``WORK/cache`` emptied, so the model and the ground-truth
   index are built from the files) and *warm* (loaded from it, runtime/replay_cache.py). The
   figures are the ones the replay's ``summary.json`` reports, plus the command's wall time, CPU
   seconds and peak memory. Memory is read from ``/proc``: every process of the command's tree is
   polled (``--sample`` seconds) for ``VmHWM``, the kernel's own peak resident set of a process, so
   a per-process peak is exact even between polls; the sum over processes of one role (the Python
   workers) is the largest sum seen at one poll. Roles: the driver's Python process, the JVM it
   starts, and the Python workers (``pyspark.daemon`` and the workers it forks). Resident sets
   count shared pages (forked workers share the daemon's) once per process;
4. the reference model alone (:class:`runtime.model.Model`) on the feed's Add Order columns as
   the spec's parser reads them (:mod:`runtime.spec_trace`), in this process on one core, batch by batch.

    .venv/bin/python benchmarks/bench_replay.py --masters 'local[2]' --skip-model   # the issue's figure
    nice .venv/bin/python benchmarks/bench_replay.py                  # 10M messages, 100k filters
    nice .venv/bin/python benchmarks/bench_replay.py --quick          # 200k messages, 10k filters

The machine is shared: the load average is recorded at the start and the end of each step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.workloads import itch_rules  # noqa: E402

SPEC = ROOT / "apps" / "itch" / "itch.p4"
P4SUB = [sys.executable, "-m", "p4sub"]
SYMBOLS, HOSTS, ZIPF, BATCH, SEED = 100, 200, 1.1, "1-12", 1


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Steps 1 and 2: the pipeline and the feed, made once
# ------------------------------------------------------------------------------------------------


def compile_pipeline(work: Path, filters: int) -> dict[str, Any]:
    """Rules and pipeline for ``filters`` filters under ``work``, reused when already there."""
    rules = work / f"itch-rules-{filters}-seed{SEED}.sub"
    out = work / f"pipeline-{filters}-seed{SEED}"
    row: dict[str, Any] = {"rules": str(rules), "pipeline": str(out), "load_start": loadavg(),
                           "workload": {"symbols": SYMBOLS, "hosts": HOSTS, "constraints": 2, "integer_prices": True,
                                        "seed": SEED}}
    if not rules.is_file():
        partial = rules.with_suffix(".partial")
        with partial.open("w", encoding="utf-8") as f:
            for line in itch_rules(filters, SYMBOLS, HOSTS, 2, integer_prices=True, seed=SEED):
                # The generator's "# workload" line would send the file to lark instead of the
                # parser's fast path for flat rule files: 100 s and 1.2 GB more for 100k rules.
                if not line.startswith("#"):
                    f.write(line + "\n")
        partial.rename(rules)
    if (out / "pipeline.json").is_file():
        say(f"compile: reusing {out}")
        row["reused"] = True
    else:
        say(f"compile: {filters:,} filters -> {out}")
        t = time.perf_counter()
        subprocess.run(P4SUB + ["compile", str(SPEC), str(rules), "-o", str(out)], check=True, cwd=ROOT,
                       stdout=sys.stderr)
        row["reused"] = False
        row["wall_s"] = round(time.perf_counter() - t, 1)
    stats = json.loads((out / "stats.json").read_text())
    row.update({"compile_seconds": stats.get("compile_seconds"), "entries": stats["total_entries"],
                "states": stats["states"], "multicast_groups": stats["multicast_groups"],
                "load_end": loadavg()})
    return row


def make_feed(work: Path, messages: int) -> dict[str, Any]:
    """The ITCH feed of ``messages`` messages under ``work``: generated to a ``.partial`` file and
    renamed when complete, so an existing feed is always a whole one and is reused."""
    feed = work / f"itch-{messages}-sym{SYMBOLS}-zipf{ZIPF}-batch{BATCH}-seed{SEED}.pcap"
    row: dict[str, Any] = {"feed": str(feed), "load_start": loadavg()}
    if feed.is_file():
        say(f"feed: reusing {feed}")
        row["reused"] = True
    else:
        say(f"feed: generating {messages:,} messages -> {feed}")
        partial = feed.with_name(feed.name + ".partial")
        t = time.perf_counter()
        subprocess.run(P4SUB + ["gen", "itch", "--messages", str(messages), "--symbols", str(SYMBOLS), "--zipf", str(ZIPF),
                                "--batch", BATCH, "--seed", str(SEED), "--progress", "-o", str(partial)],
                       check=True, cwd=ROOT)
        partial.rename(feed)
        row["reused"] = False
        row["wall_s"] = round(time.perf_counter() - t, 1)
    row["bytes"] = feed.stat().st_size
    row["load_end"] = loadavg()
    return row


# ------------------------------------------------------------------------------------------------
# Step 3: replay, with the memory of the process tree
# ------------------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _status_kb(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "driver_python"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python_workers"
    if "java" in cmd.split(" ", 1)[0]:
        return "jvm"
    return "other"


@dataclass
class TreeMemory:
    """Peak memory of a process tree, polled from ``/proc`` on a thread."""

    root: int
    interval: float
    peak_kb: dict[int, int] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)
    peak_sum_kb: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[int, float] = field(default_factory=dict)  # last CPU seconds seen per process
    polls: int = 0

    def __post_init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(self.interval)

    def poll(self) -> None:
        kids = _children()
        todo, tree = [self.root], []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(kids.get(pid, ()))
        sums: dict[str, int] = {}
        for pid in tree:
            status = _status_kb(pid)
            if not status:
                continue
            # Read every poll: spark-submit's shell script execs the JVM in the same process.
            role = self.roles[pid] = _role(pid, self.root)
            self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), status.get("VmHWM", 0))
            self.cpu_s[pid] = max(self.cpu_s.get(pid, 0.0), _cpu_s(pid))
            sums[role] = sums.get(role, 0) + status.get("VmRSS", 0)
        for role, kb in sums.items():
            self.peak_sum_kb[role] = max(self.peak_sum_kb.get(role, 0), kb)
        self.polls += 1

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        self.thread.join()
        out: dict[str, Any] = {"polls": self.polls, "interval_s": self.interval}
        for role in ("driver_python", "jvm", "python_workers"):
            pids = [p for p, r in self.roles.items() if r == role]
            out[role] = {"processes": len(pids), "cpu_s": round(sum(self.cpu_s.get(p, 0.0) for p in pids), 2),
                         "peak_mb_one_process": round(max((self.peak_kb[p] for p in pids), default=0) / 1024, 1),
                         "peak_mb_sum_at_one_poll": round(self.peak_sum_kb.get(role, 0) / 1024, 1)}
        return out


def run_replay(pipeline: Path, rules: Path, feed: Path, master: str, report: Path, partitions: int | None,
               sample: float, cache: Path, run: str) -> dict[str, Any]:
    """``p4sub replay`` in a child process; its summary, wall time, CPU and memory. ``run``: "cold"
    empties the context cache (``cache``, runtime/replay_cache.py) first, "warm" uses what is there."""
    cmd = P4SUB + ["replay", str(pipeline), "--trace", str(feed), "--rules", str(rules), "--master", master,
                   "--report", str(report), "--conf", "spark.ui.enabled=false"]
    if partitions:
        cmd += ["--partitions", str(partitions)]
    if run == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    row: dict[str, Any] = {"master": master, "run": run, "command": " ".join(["p4sub"] + cmd[len(P4SUB):]),
                           "load_start": loadavg()}
    say(f"replay on {master} ({run}): {row['command']}")
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "P4SUB_CACHE_DIR": str(cache)})
    memory = TreeMemory(proc.pid, sample)
    stdout, _ = proc.communicate()
    row["wall_s"] = round(time.perf_counter() - t, 1)
    row["memory"] = memory.finish()
    row["load_end"] = loadavg()
    row["exit_status"] = proc.returncode
    print(stdout, file=sys.stderr)
    summary_path = report / "summary.json"
    if proc.returncode not in (0, 1) or not summary_path.is_file():
        row["error"] = f"p4sub replay exited with status {proc.returncode}"
        return row
    data = json.loads(summary_path.read_text())
    th, t_s = data["throughput"], data["timings_s"]
    row.update({
        "partitions": data["partitions"], "cores": data["cores"], "packets": data["packets"],
        "messages": data["messages"], "rows": data["rows"], "damaged": data["damaged"], "exact": data["exact"],
        "totals": {k: data["totals"][k] for k in ("delivered", "wanted", "false_positives", "false_negatives",
                                                  "delivered_packets", "fp_packets")},
        "end_to_end_messages_per_s": round(th["end_to_end_messages_per_s"]),
        "job_messages_per_s": round(th["job_messages_per_s"]),
        "command_stages_s": data["command"]["stages_s"], "spark_start_s": data["command"]["spark_start_s"],
        "driver_cpu_stages_s": data["command"]["driver_cpu_stages_s"],
        "pipeline_rows_per_s_per_core": round(th["pipeline_rows_per_s_per_core"]),
        "pipeline_messages_per_s_per_core": round(th["pipeline_messages_per_s_per_core"]),
        "pipeline_rows_per_s_all_cores": round(th["pipeline_rows_per_s_all_cores"]),
        "timings_s": {k: round(v, 2) for k, v in t_s.items()},
    })
    return row


# ------------------------------------------------------------------------------------------------
# Step 4: the model alone
# ------------------------------------------------------------------------------------------------


def model_alone(pipeline_dir: Path, feed: Path, batch_packets: int) -> dict[str, Any]:
    """Decode the feed's model inputs once, then time :meth:`Model.run` batch by batch (one core)."""
    import numpy as np

    from compiler import ir
    from runtime.model import Model
    from runtime.spec_trace import SpecTraceReader

    row: dict[str, Any] = {"load_start": loadavg(), "batch_packets": batch_packets}
    say("model alone: loading the pipeline")
    t = time.perf_counter()
    pipeline = ir.load(pipeline_dir / "pipeline.json")
    model = Model(pipeline)
    row["model_build_s"] = round(time.perf_counter() - t, 2)
    say(f"model alone: decoding {', '.join(model.inputs)} from {feed.name}")
    t = time.perf_counter()
    reader = SpecTraceReader(feed, pipeline.spec, model.inputs, batch_packets=batch_packets)  # as replay reads it
    batches = [{f: b[f] for f in model.inputs} for b in reader]
    row["decode_s"] = round(time.perf_counter() - t, 1)
    rows = sum(len(b[model.inputs[0]]) for b in batches)
    row.update({"messages": reader.messages_read, "rows": rows, "batches": len(batches)})
    model.run(batches[0])  # first-call costs (imports, caches) out of the timing
    say(f"model alone: {rows:,} rows in {len(batches)} batches")
    delivered = 0
    t = time.perf_counter()
    for i, b in enumerate(batches):
        res = model.run(b)
        delivered += int(np.count_nonzero((res.group > 0) | ((res.port >= 0) & ~res.dropped)))
        if (i + 1) % 50 == 0:
            say(f"model alone: {i + 1}/{len(batches)} batches")
    seconds = time.perf_counter() - t
    row.update({"model_s": round(seconds, 2), "rows_per_s": round(rows / seconds),
                "messages_per_s": round(reader.messages_read / seconds), "rows_delivered": delivered,
                "bench_process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "load_end": loadavg()})
    return row


# ------------------------------------------------------------------------------------------------


def _m(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k"


def table(result: dict[str, Any]) -> str:
    lines = [f"ITCH replay: {result['messages']:,} messages, {result['filters']:,} filters "
             f"({result['compile']['entries']:,} entries); load average {result['load_start']} -> {result['load_end']}",
             "",
             f"{'run':<14} {'wall s':>7} {'e2e msg/s':>10} {'pipe msg/s/core':>15} {'pipe rows/s/core':>16} "
             f"{'delivered':>11} {'FP':>9} {'FN':>5} {'driver MB':>9} {'JVM MB':>7} {'worker MB':>9} {'workers MB':>10} "
             f"{'CPU s (driver/JVM/workers/tasks)':>32}"]
    for r in result["replays"]:
        if "error" in r:
            lines.append(f"{r['master']:<14} {r['wall_s']:>7} {r['error']}")
            continue
        m = r["memory"]
        cpu = "/".join(str(m[k]["cpu_s"]) for k in ("driver_python", "jvm", "python_workers")) + f"/{r['timings_s']['tasks_cpu']}"
        lines.append(
            f"{r['master'] + ' ' + r['run']:<14} {r['wall_s']:>7} {_m(r['end_to_end_messages_per_s']):>10} "
            f"{_m(r['pipeline_messages_per_s_per_core']):>15} {_m(r['pipeline_rows_per_s_per_core']):>16} "
            f"{r['totals']['delivered']:>11,} {r['totals']['false_positives']:>9,} {r['totals']['false_negatives']:>5,} "
            f"{m['driver_python']['peak_mb_one_process']:>9} {m['jvm']['peak_mb_one_process']:>7} "
            f"{m['python_workers']['peak_mb_one_process']:>9} {m['python_workers']['peak_mb_sum_at_one_poll']:>10} {cpu:>32}")
        lines.append(f"{'':<14} stages s: " + ", ".join(f"{k} {v:.1f}" for k, v in r["command_stages_s"].items())
                     + f"; Spark's start {r['spark_start_s']:.1f} s; load {r['load_start']} -> {r['load_end']}")
    mo = result.get("model")
    if mo:
        lines.append(f"{'model alone':<14} {mo['model_s']:>7} {'':>10} {_m(mo['messages_per_s']):>15} {_m(mo['rows_per_s']):>16}")
    lines += ["", "e2e: messages / the whole command's wall time (cold: model and ground-truth index built; warm: loaded "
              "from the context cache); pipe: messages or Add Order rows / time inside Model.run, per core.",
              "CPU s: user + system seconds of the driver's Python, the JVM, the Python workers (polled), and inside the tasks.",
              "MB: peak resident set (VmHWM) of the driver's Python, the JVM, the largest Python worker; "
              "workers MB: largest sum over workers at one poll."]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, help="ITCH messages in the feed (10000000; --quick 200000)")
    ap.add_argument("--filters", type=int, help="filters in the workload (100000; --quick 10000)")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "out" / "replay", help="cache and report directory")
    ap.add_argument("--quick", action="store_true", help="smaller defaults")
    ap.add_argument("--masters", default="local[1],local[2]", help="Spark masters, comma separated")
    ap.add_argument("--partitions", type=int, help="ranges per replay (default: the replay's own plan)")
    ap.add_argument("--batch-packets", type=int, default=1 << 15, help="packets per model batch in step 4 (as replay)")
    ap.add_argument("--sample", type=float, default=0.2, help="seconds between memory polls")
    ap.add_argument("--skip-model", action="store_true", help="leave out step 4")
    ap.add_argument("--out", type=Path, help="JSON results (default: WORK/bench_replay-M-F.json)")
    args = ap.parse_args()
    messages = args.messages or (200_000 if args.quick else 10_000_000)
    filters = args.filters or (10_000 if args.quick else 100_000)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "messages": messages, "filters": filters, "load_start": loadavg(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "command": " ".join([os.path.relpath(sys.executable, ROOT), "benchmarks/bench_replay.py"] + sys.argv[1:]),
    }
    t0 = time.perf_counter()
    result["compile"] = compile_pipeline(work, filters)
    result["feed"] = make_feed(work, messages)
    pipeline, rules, feed = Path(result["compile"]["pipeline"]), Path(result["compile"]["rules"]), Path(result["feed"]["feed"])
    result["replays"] = []
    for master in [m.strip() for m in args.masters.split(",") if m.strip()]:
        tag = master.replace("[", "").replace("]", "").replace("*", "all").replace("/", "_").replace(":", "_")
        report = work / f"report-{tag}-{messages}-{filters}" if not args.partitions else work / f"report-{tag}-{messages}-{filters}-p{args.partitions}"
        for run in ("cold", "warm"):
            result["replays"].append(run_replay(pipeline, rules, feed, master, report, args.partitions, args.sample,
                                                work / "cache", run))
            say(json.dumps(result["replays"][-1]))
    if not args.skip_model:
        result["model"] = model_alone(pipeline, feed, args.batch_packets)
        say(json.dumps(result["model"]))
    result["load_end"] = loadavg()
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    out = args.out or work / f"bench_replay-{messages}-{filters}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(f"\nwrote {out}")
    return 0 if all("error" not in r and r["exact"] for r in result["replays"]) else 1


if __name__ == "__main__":
    sys.exit(main())
