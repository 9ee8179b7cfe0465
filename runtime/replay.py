"""Trace replay on Spark: run real or generated traces through a compiled pipeline and judge it.

Users trust a compiled configuration with a switch after seeing what it does to their traffic.
:func:`replay` reads capture files, runs every message through the reference model of the
pipeline (:mod:`runtime.model`) and through the subscriptions themselves
(:mod:`runtime.groundtruth`), and counts per subscriber port what was delivered, what should have
been, the false positives and negatives and the bytes they cost, and how fast it all went.

The work is split the Spark way, with everything heavy in numpy inside the tasks:

1. the driver cuts each trace into byte ranges at packet boundaries (:mod:`runtime.replay_split`);
2. the model, the ground-truth index and the port numbering are built once on the driver and
   broadcast (:class:`~runtime.replay_partition.ReplayContext`); Python workers are reused, so
   each executor process unpickles them once;
3. one Spark task per range: the task reads it
   batch by batch through the spec's parse graph (:mod:`runtime.spec_trace`, the switch's own
   reading of the packets, for any protocol) and returns counters only
   (:func:`~runtime.replay_partition.replay_range`), so executor memory is one batch whatever
   the trace size;
4. the driver sums the counters (:class:`ReplayResult`); :mod:`runtime.replay_report` writes them.

:func:`replay_local` runs the same tasks in this process without Spark (tests, benchmarks).
Traces are local paths (every executor must see them at the same path: local mode, or a shared
filesystem) or URLs every machine can open (``hdfs://``, ``s3a://``, ``file://``: :mod:`apps.storage`).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from apps import storage
from apps.pcap import PcapRange
from compiler import ir
from compiler.base import P4subError
from compiler.base import spark_session as _spark
from compiler.rules import TypedRules
from compiler.spec import Spec
from runtime.replay_partition import PartitionStats, ReplayContext, merge, replay_range, spec_name
from runtime.replay_ports import PortSpace
from runtime.replay_split import DEFAULT_RANGE_BYTES, TraceSplit, split_trace

DEFAULT_BATCH_PACKETS = 1 << 15
JOB_GROUP = "p4sub-replay"
java_available = _spark.java_available  # kept here for callers that find it beside the replay


@dataclass
class ReplayResult:
    """Everything a replay counted, summed over partitions, and how long it took.

    ``timings`` (seconds): ``split`` (driver walk cutting traces), ``setup`` (model and ground
    truth built and broadcast), ``job`` (the Spark job, or the in-process loop), ``wall`` (all).
    """

    app: str  # the protocol's name: the trace spec's file name without .p4
    traces: list[str]
    space: PortSpace
    total: PartitionStats
    partitions: list[PartitionStats]
    ranges: list[PcapRange]
    timings: dict[str, float]
    master: str
    cores: int
    rules: int
    families: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """True when no port missed a message it wanted."""
        return not self.total.ports["false_negatives"].any()


# ------------------------------------------------------------------------------------------------
# Splitting and context
# ------------------------------------------------------------------------------------------------


def plan_partitions(sizes: Sequence[int], parallelism: int, requested: int | None = None) -> list[int]:
    """How many ranges each trace gets.

    Without a request: about one range per ``DEFAULT_RANGE_BYTES``, at least two per core (so a
    slow range does not leave a core idle) and a multiple of the core count; ranges are shared
    among traces by size, at least one each.
    """
    total = sum(sizes)
    if requested is None:
        waves = max(2, math.ceil(total / DEFAULT_RANGE_BYTES / max(1, parallelism)))
        requested = waves * max(1, parallelism)
    requested = max(requested, len(sizes))
    return [max(1, round(requested * s / total)) if total else 1 for s in sizes]


def split_traces(traces: Sequence[str | os.PathLike[str]], parallelism: int, partitions: int | None = None,
                 progress: bool = False, ordered: bool = False) -> list[TraceSplit]:
    """Each trace cut into ranges; ``ordered``: one range per trace (a stateful pipeline's counters
    depend on every message before, so a trace is replayed in order by one task: docs/replay.md)."""
    # Absolute, since executors do not share the driver's working directory; URLs as given.
    paths = [storage.absolute(t) for t in traces]
    if not paths:
        raise P4subError("no trace to replay (give --trace FILE at least once)")
    sizes = [storage.file_size(p) for p in paths]
    plan = [1] * len(paths) if ordered else plan_partitions(sizes, parallelism, partitions)
    show = progress and sys.stderr.isatty()
    out = []
    for p, n in zip(paths, plan):
        out.append(split_trace(p, n, _byte_progress(p) if show else None))
        if show:
            print(file=sys.stderr)
    return out


def _byte_progress(path: str):
    last = [-1]

    def report(done: int, total: int) -> None:
        pct = 100 * done // max(1, total)
        if pct != last[0]:
            last[0] = pct
            print(f"\rreplay: cutting {os.path.basename(path)} at packet boundaries {pct:3d}%", end="", file=sys.stderr)

    return report


APPS = ("itch", "int")


def app_spec_path(app_name: str) -> Path:
    """The spec file of a shipped app (``apps/APP/APP.p4``)."""
    return Path(__file__).resolve().parent.parent / "apps" / app_name / f"{app_name}.p4"


def trace_spec(pipeline: ir.Pipeline, spec: Spec | None = None, app_name: str | None = None) -> tuple[Spec, str]:
    """The spec whose parser reads the traces, and its name for reports.

    ``spec``, or ``app_name`` (``itch``/``int``) naming a shipped app's spec; by default the spec
    the pipeline was compiled against (``pipeline.json`` keeps it whole, parse graph included).
    """
    if spec is not None and app_name is not None:
        raise P4subError("give the trace format as a spec or as an app name, not both")
    if app_name is not None:
        if app_name not in APPS:
            raise P4subError(f"unknown app {app_name!r}; the shipped apps are {', '.join(APPS)} (or pass a spec)")
        from compiler.spec import read_spec

        spec = read_spec(app_spec_path(app_name))
    spec = spec or pipeline.spec
    return spec, spec_name(spec)


def _assemble(traces: list[TraceSplit], ctx: ReplayContext, stats: list[PartitionStats],
              timings: dict[str, float], master: str, cores: int) -> ReplayResult:
    stats = sorted(stats, key=lambda s: s.part)
    total = merge(stats, len(ctx.space.ports))
    for t in traces:
        for reason, n in t.file_damage:
            total.damage[reason] = total.damage.get(reason, 0) + n
    ranges = [r for t in traces for r in t.ranges]
    return ReplayResult(ctx.app, [t.path for t in traces], ctx.space, total, stats, ranges, timings, master, cores,
                        ctx.rules, ctx.truth.describe())


# ------------------------------------------------------------------------------------------------
# In-process replay (no Spark)
# ------------------------------------------------------------------------------------------------


def replay_local(pipeline: ir.Pipeline, typed: TypedRules, traces: Sequence[str | os.PathLike[str]], *,
                 spec: Spec | None = None, app_name: str | None = None, partitions: int | None = None,
                 batch_packets: int = DEFAULT_BATCH_PACKETS) -> ReplayResult:
    """The same ranges and tasks as :func:`replay`, run one after another in this process."""
    start = time.perf_counter()
    ctx = ReplayContext.build(pipeline, typed, trace_spec(pipeline, spec, app_name)[0], batch_packets)
    t_setup = time.perf_counter()
    splits = split_traces(traces, 1, partitions, ordered=ctx.ordered)
    t_split = time.perf_counter()
    ranges = [r for s in splits for r in s.ranges]
    stats = [replay_range(ctx, r, i) for i, r in enumerate(ranges)]
    end = time.perf_counter()
    timings = {"setup": t_setup - start, "split": t_split - t_setup, "job": end - t_split, "wall": end - start}
    return _assemble(splits, ctx, stats, timings, "in-process", 1)


# ------------------------------------------------------------------------------------------------
# Spark
# ------------------------------------------------------------------------------------------------


def spark_session(master: str = "local[*]", conf: Mapping[str, str] | None = None):
    """A Spark session for replay (:func:`compiler.base.spark_session.spark_session`): the workers run
    this interpreter and import the p4sub code shipped to them, on any master."""
    return _spark.spark_session(master, conf, "p4sub replay")


def replay_session(master: str = "local[*]", conf: Mapping[str, str] | None = None):
    """:func:`spark_session` for a ``with`` block, stopped afterwards only if the block started it."""
    return _spark.spark(master, conf, "p4sub replay")


def _run_range(broadcast, item: tuple[int, PcapRange]) -> PartitionStats:
    """The job's map function: one range in, its counters out (pickled back to the driver as they
    are: a few kilobytes a task, so no DataFrame, Arrow or pandas is needed on either side)."""
    part, rng = item
    return replay_range(broadcast.value, rng, part)


class _Progress(threading.Thread):
    """Prints finished/total partitions of the replay job on stderr while it runs."""

    def __init__(self, sc, total: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.sc, self.total, self.interval = sc, total, interval
        self.stop_event = threading.Event()
        self.start_time = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def run(self) -> None:
        last = -1
        while not self.stop_event.wait(self.interval):
            done = self._done()
            if done != last:
                last = done
                elapsed = time.perf_counter() - self.start_time
                line = f"replay: {done}/{self.total} partitions done, {elapsed:.0f} s"
                print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def _done(self) -> int:
        tracker = self.sc.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(JOB_GROUP):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
        return min(done, self.total)

    def finish(self) -> None:
        self.stop_event.set()
        self.join()
        if self.tty:
            print(file=sys.stderr)


def replay(pipeline: ir.Pipeline, typed: TypedRules, traces: Sequence[str | os.PathLike[str]], *,
           spec: Spec | None = None, app_name: str | None = None, spark=None, master: str = "local[*]", partitions: int | None = None,
           batch_packets: int = DEFAULT_BATCH_PACKETS, progress: bool = False) -> ReplayResult:
    """Replay ``traces`` through ``pipeline`` on Spark and count deliveries against ``typed`` rules.

    ``spec``/``app_name``: how to read the traces (see :func:`trace_spec`; default: the pipeline's spec).
    ``spark``: a session (or a SparkContext) to use (else one is made for ``master``, see :func:`replay_session`).
    ``partitions``: how many ranges to cut the traces into (default: see :func:`plan_partitions`).
    ``progress``: report the driver's walk and finished partitions on stderr.
    """
    start = time.perf_counter()
    ctx = ReplayContext.build(pipeline, typed, trace_spec(pipeline, spec, app_name)[0], batch_packets)
    built = time.perf_counter() - start
    result = replay_context(ctx, traces, spark=spark, master=master, partitions=partitions, progress=progress)
    result.timings["setup"] += built
    result.timings["wall"] += built
    return result


def replay_context(ctx: ReplayContext, traces: Sequence[str | os.PathLike[str]], *, spark=None, master: str = "local[*]",
                   partitions: int | None = None, progress: bool = False,
                   splits: Sequence[TraceSplit] | None = None) -> ReplayResult:
    """:func:`replay` for a :class:`ReplayContext` already built (``p4sub replay`` builds it while
    Spark starts, or loads it: :mod:`runtime.replay_cache`). ``splits``: the traces already cut
    (:func:`split_traces`), so ``timings["split"]`` is 0; the other arguments as :func:`replay`'s.
    """
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if spark is None:
            spark = stack.enter_context(replay_session(master))
        sc = getattr(spark, "sparkContext", spark)  # a session, or a context alone (p4sub replay's)
        cores = sc.defaultParallelism
        t_ctx = time.perf_counter()
        if splits is None:
            splits = split_traces(traces, cores, partitions, progress, ordered=ctx.ordered)
        splits = list(splits)
        t_split = time.perf_counter()
        ranges = [r for s in splits for r in s.ranges]
        broadcast = sc.broadcast(ctx)
        t_setup = time.perf_counter()
        try:
            stats = _run_job(sc, broadcast, ranges, progress) if ranges else []
        finally:
            broadcast.unpersist()
        end = time.perf_counter()
        timings = {"setup": (t_ctx - start) + (t_setup - t_split), "split": t_split - t_ctx, "job": end - t_setup,
                   "wall": end - start}
        return _assemble(splits, ctx, stats, timings, sc.master, cores)


def _run_job(sc, broadcast, ranges: list[PcapRange], progress: bool) -> list[PartitionStats]:
    from functools import partial

    items = list(enumerate(ranges))
    sc.setJobGroup(JOB_GROUP, f"p4sub replay of {len(ranges)} ranges")
    reporter = _Progress(sc, len(ranges)) if progress else None
    if reporter:
        reporter.start()
    try:
        with _spark.spark_errors("the replay job", sc):
            return sc.parallelize(items, len(items)).map(partial(_run_range, broadcast)).collect()
    finally:
        if reporter:
            reporter.finish()
        sc.setLocalProperty("spark.jobGroup.id", None)
