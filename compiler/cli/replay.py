"""``p4sub replay OUT --trace FILE``: replay traces through a compiled pipeline on Spark and judge it.

The ground truth is the rule file itself, so replay needs it next to ``OUT/pipeline.json``:
``--rules RULES``, or ``OUT/sources.json`` (``{"rules": ...}``, a path absolute or relative to
OUT) when the compile step recorded it. The spec defaults to the one embedded in
``pipeline.json`` (the spec the pipeline was compiled against); ``--spec`` overrides it.
Exit status: 0, or 1 when some port missed a message it subscribed to (a false negative).
"""

from __future__ import annotations

import argparse
import json
import sys
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
                   help="pcap or pcapng capture to replay; repeatable")
    p.add_argument("--rules", help="the rule file the pipeline was compiled from (default: OUT/sources.json)")
    p.add_argument("--spec", help="spec to check the rules against (default: the one in pipeline.json)")
    p.add_argument("--app", choices=("itch", "int"), help="trace format (default: guessed from the pipeline's fields)")
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


def typed_rules(args: argparse.Namespace, pipeline: ir.Pipeline) -> TypedRules:
    out = Path(args.out)
    recorded = sources(out) if out.is_dir() else {}
    rules_path = args.rules or recorded.get("rules")
    if not rules_path:
        raise P4subError("replay needs the rules the pipeline was compiled from, as ground truth: pass --rules RULES"
                         f" (or record them in {out / 'sources.json'})")
    spec: Spec = pipeline.spec
    if args.spec:
        from compiler.spec_reader import read_spec

        spec = read_spec(args.spec)
    return check_rules(read_rules(rules_path), spec)


def _conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise P4subError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
        conf[key] = value
    return conf


def run(args: argparse.Namespace) -> int:
    from runtime.replay import replay, replay_session
    from runtime.replay_report import summary, text_table, write_report

    if args.partitions is not None and args.partitions < 1:
        raise P4subError("--partitions must be at least 1")
    if args.batch_packets < 1:
        raise P4subError("--batch-packets must be at least 1")
    for trace in args.trace:  # a missing trace or a FIFO is said now, not after Spark has started
        check_regular(trace, "trace")
    pipeline = ir.load(args.out)
    typed = typed_rules(args, pipeline)
    with replay_session(args.master, _conf(args.conf)) as spark:
        result = replay(pipeline, typed, args.trace, app_name=args.app, spark=spark, partitions=args.partitions,
                        batch_packets=args.batch_packets, progress=not args.quiet)
    data = write_report(result, args.report) if args.report else summary(result)
    print(text_table(data))
    if args.report:
        print(f"wrote {Path(args.report) / 'summary.json'} and plots", file=sys.stderr)
    return 0 if result.exact else 1
