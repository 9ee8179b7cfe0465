"""One replay task: a byte range of a trace through the model and the ground truth, counted per port.

This is the part of replay that runs on executors. It is plain Python over numpy (no Spark here),
so tests and benchmarks can run it directly and Spark only has to ship it ranges. A task keeps
one batch of packets in memory at a time (``batch_packets``), so its memory does not depend on
the size of the trace, and it returns counters only: per port, what was delivered, what was
wanted, and what that cost, at two granularities:

* messages (rows): a port *receives* a message when the pipeline sends that message's row there,
  as a switch that prunes each copy to the port's own messages would deliver it;
* packets: a port receives a packet when any of its rows goes there, as a switch that forwards
  whole packets does. A packet is a false positive for a port when none of its messages is
  wanted there; its length is the extra bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from apps.pcap import PcapRange
from compiler import ir
from compiler.rules import TypedRules
from compiler.spec import Spec
from runtime.columnar import SpecReader
from runtime.groundtruth import GroundTruth, rule_ports
from runtime.model import Model, Result
from runtime.replay_ports import BLOCK_ROWS, PortSpace, count_bits, or_segments
from runtime.spec_trace import SpecTraceReader

# Per-port counters, in the order they are stored.
PORT_METRICS = (
    "delivered", "wanted", "false_positives", "false_negatives", "fp_bytes", "fn_bytes",
    "delivered_packets", "wanted_packets", "fp_packets", "fn_packets", "fp_packet_bytes", "delivered_packet_bytes",
)

SCALARS = ("packets", "messages", "rows", "rows_with_delivery", "decode_ns", "model_ns", "truth_ns", "count_ns", "wall_ns",
           "cpu_ns")


def pipeline_ports(pipeline: ir.Pipeline) -> set[int]:
    """Every port the pipeline can send to: arguments of set_egress_port actions and multicast members."""
    ports: set[int] = {p for g in pipeline.multicast_groups for p in g.ports}
    params: dict[str, int] = {}
    for action in pipeline.actions:
        for prim in action.body:
            if prim.op == "set_egress_port":
                params[action.name] = next(i for i, p in enumerate(action.params) if p.name == prim.args[0])
    for e in pipeline.entries:
        if e.action in params:
            ports.add(e.args[params[e.action]])
    for t in pipeline.tables:
        if t.default_action in params and t.default_args:
            ports.add(t.default_args[params[t.default_action]])
    return ports


def spec_name(spec: Spec) -> str:
    """A spec's name in reports: its file's name without ``.p4``."""
    return Path(spec.path).stem or "spec"


@dataclass
class ReplayContext:
    """Everything a task needs, built once on the driver and shipped to executors."""

    model: Model
    truth: GroundTruth
    space: PortSpace
    reader: SpecReader
    batch_packets: int
    port_masks: np.ndarray  # (max port + 1, words)
    group_masks: np.ndarray  # (max group id + 1, words)
    app: str = "spec"  # the trace spec's name, for reports
    rules: int = 0  # how many rules the ground truth holds
    ordered: bool = False  # a stateful pipeline: each trace is replayed in order by one task

    @classmethod
    def build(cls, pipeline: ir.Pipeline, typed: TypedRules, spec: Spec | None = None,
              batch_packets: int = 1 << 15) -> "ReplayContext":
        """``spec``: whose parser reads the traces (default: the one the pipeline was compiled against)."""
        spec = spec or pipeline.spec
        space = PortSpace.of(pipeline_ports(pipeline) | rule_ports(typed))
        truth = GroundTruth.build(typed, space)
        model = Model(pipeline).for_batches()  # shipped to every executor and cached: no IR entries
        reader = SpecReader(spec, list(model.inputs) + list(truth.fields))
        top_port = max(space.ports, default=0)
        port_masks = np.zeros((top_port + 1, space.words), dtype=np.uint64)
        port_masks[list(space.ports)] = space.masks([(p,) for p in space.ports])
        groups = pipeline.multicast_groups
        top_group = max((g.id for g in groups), default=0)
        group_masks = np.zeros((top_group + 1, space.words), dtype=np.uint64)
        group_masks[[g.id for g in groups]] = space.masks([g.ports for g in groups])
        return cls(model, truth, space, reader, batch_packets, port_masks, group_masks, spec_name(spec),
                   len(typed.rules), bool(pipeline.updates))

    def delivered(self, result: Result) -> np.ndarray:
        """The model's verdicts as masks, with :meth:`Result.ports_of`'s reading: a multicast group
        wins, else the egress port unless the packet was dropped."""
        out = self.space.empty(len(result.port))
        grouped = result.group > 0
        ids = result.group[grouped]
        if len(ids) and int(ids.max()) >= len(self.group_masks):
            # Port-bitmap delivery: the model reports each distinct surviving port set as a group of
            # its own (Result.group_ports), past the pipeline's real groups.
            uniq, inverse = np.unique(ids, return_inverse=True)
            masks = np.stack([self.group_masks[g] if g < len(self.group_masks) else self.space.mask(result.group_ports[g])
                              for g in uniq.tolist()])
            out[grouped] = masks[inverse.reshape(-1)]
        else:
            out[grouped] = self.group_masks[ids]
        single = ~grouped & (result.port >= 0) & ~result.dropped
        out[single] = self.port_masks[result.port[single]]
        return out


@dataclass
class PartitionStats:
    """What one task counted. ``ports`` maps each metric of :data:`PORT_METRICS` to an int64 array
    aligned with the context's port space."""

    part: int
    scalars: dict[str, int] = field(default_factory=dict)
    ports: dict[str, np.ndarray] = field(default_factory=dict)
    damage: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)  # packets per parse status

    @classmethod
    def empty(cls, part: int, n_ports: int) -> "PartitionStats":
        return cls(part, {k: 0 for k in SCALARS}, {m: np.zeros(n_ports, dtype=np.int64) for m in PORT_METRICS})


def _packet_starts(packet_index: np.ndarray) -> np.ndarray:
    if len(packet_index) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(packet_index[1:] != packet_index[:-1]) + 1
    return np.concatenate([[0], change]).astype(np.int64)


MESSAGE_COUNTS = {"delivered": "d", "wanted": "w", "false_positives": "fp", "false_negatives": "fn"}
MESSAGE_WEIGHTS = {"fp_bytes": "fp", "fn_bytes": "fn"}
PACKET_COUNTS = {"delivered_packets": "d", "wanted_packets": "w", "fp_packets": "fp", "fn_packets": "fn"}
PACKET_WEIGHTS = {"fp_packet_bytes": "fp", "delivered_packet_bytes": "d"}


def _count(space: PortSpace, delivered: np.ndarray, wanted: np.ndarray, size: np.ndarray | None,
           counts: dict[str, str], weights: dict[str, str], ports: dict[str, np.ndarray]) -> None:
    """Add per-port counts of delivered (d), wanted (w), false positive (fp) and false negative (fn)
    rows under the metric names of ``counts``, and sums of ``size`` under those of ``weights``.

    Only the delivered sets are unpacked whole. False positives and negatives are found on the
    packed masks and unpacked for the rows that have some (usually few), and per port
    ``w = d - fp + fn``, since d and w share their ``d and w`` part."""
    for a in range(0, len(delivered), BLOCK_ROWS):
        dm, wm = delivered[a : a + BLOCK_ROWS], wanted[a : a + BLOCK_ROWS]
        sz = size[a : a + BLOCK_ROWS] if size is not None else None
        d = space.bits(dm)
        plain = {"d": count_bits(d)}
        weighted: dict[str, np.ndarray] = {}
        for which, mask in (("fp", dm & ~wm), ("fn", wm & ~dm)):
            rows = np.flatnonzero(mask.any(axis=1))
            bits = space.bits(mask[rows])
            plain[which] = count_bits(bits)
            if sz is not None:
                weighted[which] = count_bits(bits, sz[rows])
        plain["w"] = plain["d"] - plain["fp"] + plain["fn"]
        for name, which in counts.items():
            ports[name] += plain[which]
        if sz is None:
            continue
        if any(which in ("d", "w") for which in weights.values()):
            weighted["d"] = count_bits(d, sz)
            weighted["w"] = weighted["d"] - weighted["fp"] + weighted["fn"]
        for name, which in weights.items():
            ports[name] += weighted[which]


def count_batch(ctx: ReplayContext, batch: dict[str, np.ndarray], stats: PartitionStats) -> None:
    """Run one batch through the model and the ground truth and add its counts to ``stats``."""
    t0 = time.perf_counter_ns()
    result = ctx.model.run(batch)
    t1 = time.perf_counter_ns()
    wanted = ctx.truth.wanted(batch)
    t2 = time.perf_counter_ns()
    delivered = ctx.delivered(result)
    size = batch["message_bytes"].astype(np.int64)
    _count(ctx.space, delivered, wanted, size, MESSAGE_COUNTS, MESSAGE_WEIGHTS, stats.ports)
    starts = _packet_starts(batch["packet_index"])
    pkt_len = batch["packet_len"][starts].astype(np.int64)
    pkt_delivered, pkt_wanted = or_segments(delivered, starts), or_segments(wanted, starts)
    _count(ctx.space, pkt_delivered, pkt_wanted, pkt_len, PACKET_COUNTS, PACKET_WEIGHTS, stats.ports)
    stats.scalars["rows"] += len(result.port)
    stats.scalars["rows_with_delivery"] += int(np.count_nonzero(delivered.any(axis=1)))
    t3 = time.perf_counter_ns()
    stats.scalars["model_ns"] += t1 - t0
    stats.scalars["truth_ns"] += t2 - t1
    stats.scalars["count_ns"] += t3 - t2


def replay_range(ctx: ReplayContext, rng: PcapRange, part: int) -> PartitionStats:
    """Read, run and count one range of a trace."""
    start, cpu = time.perf_counter_ns(), time.thread_time_ns()  # CPU: how much of the wall time a core gave
    stats = PartitionStats.empty(part, len(ctx.space.ports))
    # A stateful pipeline's range is a whole trace (runtime.replay: ordered), read from its start
    # by a switch that just started.
    ctx.model.reset_state()
    ctx.truth.reset_state()
    source = SpecTraceReader(rng.path, ctx.reader, batch_packets=ctx.batch_packets, byte_range=rng)
    batches = iter(source)
    decode_ns = 0
    while True:
        t = time.perf_counter_ns()
        batch = next(batches, None)
        decode_ns += time.perf_counter_ns() - t
        if batch is None:
            break
        count_batch(ctx, batch, stats)
    stats.scalars["packets"] = source.packets_read
    stats.scalars["messages"] = source.messages_read
    stats.scalars["decode_ns"] = decode_ns
    stats.scalars["wall_ns"] = time.perf_counter_ns() - start
    stats.scalars["cpu_ns"] = time.thread_time_ns() - cpu
    stats.damage = dict(source.damage.counts)
    stats.skipped = dict(source.skipped.counts)
    stats.statuses = dict(source.statuses)
    return stats


def merge(stats: Iterable[PartitionStats], n_ports: int) -> PartitionStats:
    """The sum of several tasks' counts (part -1)."""
    total = PartitionStats.empty(-1, n_ports)
    for s in stats:
        for k, v in s.scalars.items():
            total.scalars[k] = total.scalars.get(k, 0) + v
        for m, arr in s.ports.items():
            total.ports[m] = total.ports[m] + arr
        for k, v in s.damage.items():
            total.damage[k] = total.damage.get(k, 0) + v
        for k, v in s.skipped.items():
            total.skipped[k] = total.skipped.get(k, 0) + v
        for k, v in s.statuses.items():
            total.statuses[k] = total.statuses.get(k, 0) + v
    return total

