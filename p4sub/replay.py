"""``p4sub replay OUT --trace FILE``: replay traces through a compiled pipeline on Spark and judge it.

The ground truth is the rule file itself, so replay needs it next to ``OUT/pipeline.json``:
``--rules RULES``, or ``OUT/sources.json`` (``{"rules": ...}``, a path absolute or relative to
OUT) when the compile step recorded it. Packets are read by the spec's parse graph, the way the
switch's parser reads them; the spec defaults to the one embedded in ``pipeline.json`` (the spec
the pipeline was compiled against); ``--spec`` overrides it for the rules and the traces alike,
``--app itch|int`` names a shipped app's spec.
Exit status: 0, or 1 when some port missed a message it subscribed to (a false negative).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from compiler import ir
from compiler.base import P4subError, check_regular, read_text, report_dir, staged_report
from compiler.rules import TypedRules, check_rules, read_rules
from compiler.spec import Spec
from p4sub import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "replay", "replay traces through a compiled pipeline on Spark: deliveries, false positives, speed",
                    "p4sub replay out --trace feed.pcap --rules apps/itch/rules.sub --report report/")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--trace", action="append", required=True, metavar="FILE",
                   help="pcap or pcapng capture to replay: a path, or a URL every executor can read "
                        "(hdfs://, s3a://, file://); repeatable")
    p.add_argument("--rules", help="the rule file the pipeline was compiled from (default: OUT/sources.json)")
    p.add_argument("--spec", help="spec whose parser reads the traces and whose fields the rules test "
                                  "(default: the one in pipeline.json)")
    p.add_argument("--app", choices=("itch", "int"), help="read the traces with a shipped app's spec "
                                                          "(apps/APP/APP.p4) instead of the pipeline's")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default: local[*])")
    p.add_argument("--partitions", type=int, help="ranges to cut the traces into (default: 2+ per core, ~64 MiB each)")
    p.add_argument("--batch-packets", type=int, default=1 << 15, help="packets a task decodes at once (memory per task)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting; repeatable")
    p.add_argument("--report", metavar="DIR", help="write summary.json and PNG plots into DIR")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--no-cache", action="store_true",
                   help="build the model and ground-truth index from the files even when a cached one matches "
                        "(runtime/replay_cache.py; ~/.cache/p4sub/replay)")
    p.set_defaults(func=run)


def sources(out: Path) -> dict[str, str]:
    """``OUT/sources.json`` with paths resolved against OUT; empty when there is none."""
    path = out / "sources.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(read_text(path, "sources file"))
    except (ValueError, RecursionError) as exc:
        raise P4subError(f"{path}: not a JSON object of source paths: {exc}") from None
    if not isinstance(data, dict):
        raise P4subError(f"{path}: expected a JSON object such as {{\"rules\": \"rules.sub\"}}")
    return {k: str(out / v) for k, v in data.items() if isinstance(v, str)}


def trace_spec(args: argparse.Namespace, pipeline: ir.Pipeline) -> Spec:
    """The spec ``--spec`` or ``--app`` names, else the pipeline's."""
    from runtime.replay import trace_spec as resolve

    if args.spec:
        from compiler.spec import read_spec

        return read_spec(args.spec)
    return resolve(pipeline, None, args.app)[0]


def rules_path(args: argparse.Namespace) -> str:
    """``--rules``, else the rules ``OUT/sources.json`` records; a P4subError when there are none."""
    out = Path(args.out)
    recorded = sources(out) if out.is_dir() else {}
    path = args.rules or recorded.get("rules")
    if not path:
        command = getattr(args, "command", None) or "replay"  # verify and explain read them here too
        raise P4subError(f"{command} needs the rules the pipeline was compiled from: pass --rules RULES (or "
                         f"compile again, so that {out / 'sources.json'} records them)")
    return path


def typed_rules(args: argparse.Namespace, pipeline: ir.Pipeline, spec: Spec | None = None) -> TypedRules:
    path = rules_path(args)
    if spec is None:
        spec = pipeline.spec
        if getattr(args, "spec", None):
            from compiler.spec import read_spec

            spec = read_spec(args.spec)
    return check_rules(read_rules(path), spec)


def context_key(args: argparse.Namespace) -> str:
    """The :mod:`runtime.replay_cache` key of the context these arguments build."""
    from runtime.replay import app_spec_path
    from runtime.replay_cache import key

    out = Path(args.out)
    pipeline_json = out / "pipeline.json" if out.is_dir() else out
    if args.spec:
        spec_files, label = [args.spec], f"--spec {Path(args.spec).resolve()}"
    elif args.app:
        spec_files, label = [app_spec_path(args.app)], f"--app {args.app}"
    else:
        spec_files, label = [], ""
    return key(pipeline_json, rules_path(args), spec_files, label, args.batch_packets)


#: What the replay's tasks import: loaded by the executors' Python workers while the driver
#: still reads the rules (:class:`compiler.base.spark_session.SessionStart`).
WORKER_MODULES = ("runtime.replay", "runtime.replay_partition")


def run(args: argparse.Namespace) -> int:
    from apps import storage
    from apps.pcap import require_packets
    from compiler.base import SessionStart, local_parallelism, parse_conf
    from p4sub.compile_update import bulk_objects
    from runtime import replay_cache
    from runtime.replay import replay_context, split_traces
    from runtime.replay_partition import ReplayContext
    from runtime.replay_report import Plotting, summary, text_table, write_report

    if args.partitions is not None and args.partitions < 1:
        raise P4subError("--partitions must be at least 1")
    if args.batch_packets < 1:
        raise P4subError("--batch-packets must be at least 1")
    if args.spec and args.app:
        raise P4subError("--spec and --app both name the trace format; give one")
    conf = parse_conf(args.conf)
    # Whatever can be found wrong quickly is said now, not after Spark has started: a missing
    # trace or a FIFO, an unreachable store, no rules, a damaged pipeline.json.
    for trace in args.trace:
        if not storage.is_url(trace):
            check_regular(trace, "trace")
        storage.file_size(trace)
    check_regular(rules_path(args), "rule file")
    if args.report:
        report_dir(args.report)
    stages: dict[str, float] = {"start": process_age()}  # the interpreter and imports, before run()
    clock, cpu_clock = time.perf_counter(), time.process_time()
    cpu: dict[str, float] = {"start": cpu_clock}  # the driver's CPU seconds (all its threads) per stage

    def lap(name: str) -> None:
        nonlocal clock, cpu_clock
        now, cpu_now = time.perf_counter(), time.process_time()
        stages[name] = stages.get(name, 0.0) + now - clock
        cpu[name] = cpu.get(name, 0.0) + cpu_now - cpu_clock
        clock, cpu_clock = now, cpu_now

    # A context built before from the same pipeline, rules, spec and p4sub is loaded instead of
    # built again (runtime.replay_cache); the key hashes the files, so this costs milliseconds.
    cache_key = None if args.no_cache else context_key(args)
    cached = bool(cache_key) and replay_cache.has(cache_key)
    lap("rules")
    with bulk_objects():  # no garbage collection while 100k-rule structures are built
        # Without a cached context, pipeline.json is read before Spark starts (a damaged one is said
        # at once, as the other inputs above).
        pipeline = None if cached else ir.load(args.out)
        for trace in args.trace:  # an empty trace is refused, not replayed as "0 messages"
            require_packets(trace)
        lap("rules")
        # Spark (the JVM, then a Python worker per core) comes up on a thread while this one reads
        # the rules and builds the model and the ground-truth index: seconds each, in other processes.
        starting = SessionStart(args.master, conf, "p4sub replay", warm=WORKER_MODULES, sql=False)
        try:
            context = replay_cache.load(cache_key) if cached else None
            lap("index")
            if context is None:
                pipeline = pipeline or ir.load(args.out)
                spec = trace_spec(args, pipeline)
                typed = typed_rules(args, pipeline, spec)
                lap("rules")
                context = ReplayContext.build(pipeline, typed, spec, args.batch_packets)
                if cache_key:
                    replay_cache.store(cache_key, context)
            lap("index")
            cores = local_parallelism(args.master, conf)  # known before Spark is up: cut the traces now
            splits = split_traces(args.trace, cores, args.partitions, not args.quiet,
                                  ordered=context.ordered) if cores else None
            lap("split")
            plotting = Plotting() if args.report else None  # imports matplotlib while Spark starts or the job runs
            spark = starting.result()
            lap("session")  # what was left of Spark's start once the driver was ready
            result = replay_context(context, args.trace, spark=spark, partitions=args.partitions,
                                    progress=not args.quiet, splits=splits)
            lap("replay")
        except BaseException:
            starting.stop()
            raise
    stopping = threading.Thread(target=starting.stop, name="p4sub-spark-stop")  # while the report is written
    stopping.start()
    replayed = stages.pop("replay")
    stages["split"] += result.timings["split"]
    stages["job"] = result.timings["job"]
    stages["driver"] = max(0.0, replayed - result.timings["split"] - result.timings["job"])
    report = staged_report(args.report) if args.report else contextlib.nullcontext(None)
    with report as stage:  # the report's files appear together, when summary.json is written too
        data = write_report(result, stage, plotting) if stage else summary(result)
        lap("report")
        stopping.join()
        lap("stop")
        if not data["messages"]:  # e.g. a capture whose only records the reader recovered from damage
            raise P4subError(f"{', '.join(map(str, args.trace))}: no message the spec reads in it, so nothing was "
                             "replayed (a trace in which nothing mattered is not a result); check that it is the "
                             "feed the rules subscribe to")
        order = ("start", "rules", "index", "session", "split", "job", "driver", "report", "stop")
        stages = {k: stages[k] for k in order}
        total = sum(stages.values())
        data["command"] = {"seconds": round(total, 3),
                           "messages_per_s": round(data["messages"] / total) if total else 0,
                           "stages_s": {k: round(v, 3) for k, v in stages.items()},
                           "spark_start_s": round(starting.seconds or 0.0, 3),
                           "driver_cpu_s": round(time.process_time(), 3),
                           "driver_cpu_stages_s": {k: round(v, 3) for k, v in cpu.items()},
                           "load_average": list(os.getloadavg())}
        data["throughput"]["end_to_end_messages_per_s"] = data["messages"] / total if total else 0.0
        granularity = switch_granularity(Path(args.out))
        if granularity:
            data["switch_delivers"] = granularity
        if stage:
            (stage / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(text_table(data))
    if data.get("switch_delivers"):
        print(f"the compiled switch delivers {data['switch_delivers']}")
    if args.report:
        print(f"wrote {Path(args.report) / 'summary.json'} and plots", file=sys.stderr)
    return 0 if result.exact else 1


#: What a Tofino program's batch mode delivers, in the report's terms (resources.json ``notes.batch_mode``).
GRANULARITY = {
    "split": "messages, one per packet (Tofino batch mode split): the message columns are its deliveries, and each "
             "delivered message is a packet of its own; the packet columns do not apply",
    "union": "whole packets (Tofino batch mode union): the packet columns are its deliveries and extra bytes",
}


def switch_granularity(out: Path) -> str | None:
    """Which of the report's two granularities the program in OUT delivers at, when OUT says (a Tofino
    output's resources.json); None otherwise."""
    try:
        mode = json.loads((out / "resources.json").read_text(encoding="utf-8"))["notes"]["batch_mode"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return GRANULARITY.get(mode)


def process_age() -> float:
    """Seconds since this process started (Linux: /proc; elsewhere 0, the stages then start at run())."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
