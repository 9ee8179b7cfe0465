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
import json
import os
import sys
import time
from pathlib import Path

from compiler import ir
from compiler.cli import add_command
from compiler.errors import P4subError
from compiler.inputs import check_regular, read_text
from compiler.lang import read_rules
from compiler.spec import Spec
from compiler.typecheck import TypedRules, check_rules


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

    if args.spec and args.app:
        raise P4subError("--spec and --app both name the trace format; give one")
    if args.spec:
        from compiler.spec_reader import read_spec

        return read_spec(args.spec)
    return resolve(pipeline, None, args.app)[0]


def typed_rules(args: argparse.Namespace, pipeline: ir.Pipeline, spec: Spec | None = None) -> TypedRules:
    out = Path(args.out)
    recorded = sources(out) if out.is_dir() else {}
    rules_path = args.rules or recorded.get("rules")
    if not rules_path:
        raise P4subError("replay needs the rules the pipeline was compiled from, as ground truth: pass --rules RULES"
                         f" (or record them in {out / 'sources.json'})")
    if spec is None:
        spec = pipeline.spec
        if getattr(args, "spec", None):
            from compiler.spec_reader import read_spec

            spec = read_spec(args.spec)
    return check_rules(read_rules(rules_path), spec)


def run(args: argparse.Namespace) -> int:
    from apps import storage
    from apps.pcap import require_packets
    from compiler.spark_session import parse_conf
    from runtime.replay import replay, replay_session
    from runtime.replay_report import summary, text_table, write_report

    if args.partitions is not None and args.partitions < 1:
        raise P4subError("--partitions must be at least 1")
    if args.batch_packets < 1:
        raise P4subError("--batch-packets must be at least 1")
    for trace in args.trace:  # a missing trace or a FIFO is said now, not after Spark has started
        if not storage.is_url(trace):  # a URL's store is asked below (storage.file_size)
            check_regular(trace, "trace")
    stages: dict[str, float] = {"start": process_age()}  # the interpreter and imports, before run()
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        stages[name] = stages.get(name, 0.0) + now - clock
        clock = now

    pipeline = ir.load(args.out)
    spec = trace_spec(args, pipeline)
    typed = typed_rules(args, pipeline, spec)
    for trace in args.trace:  # a missing file, an unreachable store or no packets is reported before Spark starts
        storage.file_size(trace)
        require_packets(trace)
    lap("rules")
    with replay_session(args.master, parse_conf(args.conf)) as spark:
        lap("session")
        result = replay(pipeline, typed, args.trace, spec=spec, spark=spark, partitions=args.partitions,
                        batch_packets=args.batch_packets, progress=not args.quiet)
        lap("replay")
    lap("session")  # stopping Spark
    replayed = stages.pop("replay")
    stages.update(index=result.timings["setup"], split=result.timings["split"], job=result.timings["job"])
    stages["driver"] = max(0.0, replayed - result.timings["wall"])
    data = write_report(result, args.report) if args.report else summary(result)
    lap("report")
    total = sum(stages.values())
    data["command"] = {"seconds": round(total, 3), "messages_per_s": round(data["messages"] / total) if total else 0,
                       "stages_s": {k: round(v, 3) for k, v in stages.items()}}
    if args.report:
        (Path(args.report) / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(text_table(data))
    print(f"whole command {data['messages']:,} messages in {total:.1f} s = {data['command']['messages_per_s']:,} "
          "messages/s (" + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()) + ")")
    if args.report:
        print(f"wrote {Path(args.report) / 'summary.json'} and plots", file=sys.stderr)
    return 0 if result.exact else 1


def process_age() -> float:
    """Seconds since this process started (Linux: /proc; elsewhere 0, the stages then start at run())."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
