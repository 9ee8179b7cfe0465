"""Synthetic INT-MD traffic with a tunable share of anomalous hop latencies.

Each packet crosses 1-8 distinct switches; every switch pushes the p4sub instruction set (node
id, L1 ports, hop latency, queue id + occupancy). Latencies are in **nanoseconds** (as Tofino's
timestamps count; BMv2 would report microseconds) and occupancy in packets. Normal hops follow
a simple queueing picture: each switch has a fixed pipeline latency (250-1200 ns) and a load
that sets the mean of an exponentially distributed queue (0.5-20 packets); each queued packet
adds a 120 ns service time (1500 B at 100 Gb/s), plus a little jitter. An anomalous hop is
either a microburst (2,000-20,000 packets queued, so 0.24-2.4 ms) or, one time in three, a
latency spike without a queue (a pause frame: 50-500 us). The ground truth per hop is kept in
:class:`GeneratedPacket` for evaluating detectors.

Output is either the INT packets as a switch sees them, or (``reports``) Telemetry Report v2.0
packets from each packet's sink (its last switch) to a collector, wrapping the whole INT packet.
Seeded: the same configuration gives the same bytes.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Callable, Iterator

from apps.int.headers import DEFAULT_INT_PORT, IntMd, new_header
from apps.int.metadata import P4SUB_INSTRUCTIONS, HopMetadata
from apps.int.report import DEFAULT_REPORT_PORT, IndividualReport, ReportGroupHeader, TelemetryReport
from apps.int.trace import IntTraceWriter, build_int_frame
from apps.udp import UdpEndpoints
from compiler.base import P4subError

SERVICE_NS = 120
MAX_HOPS = 8
APP_PORTS = (80, 443, 5201, 6379, 8080, 9092, 11211, 27017)
DEFAULT_START_NS = 1_548_806_400 * 10**9


@dataclass(frozen=True)
class IntTraceConfig:
    packets: int = 10_000
    switches: int = 100
    hops: tuple[int, int] = (1, 5)
    anomalies: float = 0.01
    seed: int = 0
    int_port: int = DEFAULT_INT_PORT
    reports: bool = False
    report_port: int = DEFAULT_REPORT_PORT
    hosts: int = 200
    mean_gap_ns: float = 10_000.0
    start_ns: int = DEFAULT_START_NS

    def validate(self) -> None:
        lo, hi = self.hops
        if self.packets < 0:
            raise P4subError("--packets must be >= 0")
        if self.switches < 1:
            raise P4subError("--switches must be at least 1")
        if not 1 <= lo <= hi <= MAX_HOPS:
            raise P4subError(f"--hops range must satisfy 1 <= lo <= hi <= {MAX_HOPS}, got {lo}-{hi}")
        if hi > self.switches:
            raise P4subError(f"a path of {hi} hops needs at least {hi} switches")
        if not 0.0 <= self.anomalies <= 1.0:
            raise P4subError("--anomalies must be a fraction between 0 and 1")
        if not 1 <= self.hosts <= 65_000:
            raise P4subError("--hosts must be between 1 and 65000")


@dataclass(frozen=True)
class GeneratedPacket:
    """An INT packet and its ground truth; ``anomalous[i]`` belongs to ``md.hops[i]``."""

    timestamp_ns: int
    endpoints: UdpEndpoints
    md: IntMd
    payload: bytes
    anomalous: tuple[bool, ...]
    path: tuple[int, ...]


def _host_ip(i: int) -> bytes:
    return bytes((10, 0, i // 250, 1 + i % 250))


def generate_int_packets(cfg: IntTraceConfig) -> Iterator[GeneratedPacket]:
    cfg.validate()
    rng = random.Random(cfg.seed)
    base_ns = [rng.uniform(250, 1200) for _ in range(cfg.switches + 1)]
    mean_queue = [rng.uniform(0.5, 20.0) for _ in range(cfg.switches + 1)]
    ts = cfg.start_ns
    lo, hi = cfg.hops
    rand = rng.random
    for _ in range(cfg.packets):
        ts += 1 + int(rng.expovariate(1.0 / cfg.mean_gap_ns))
        h = lo + int(rand() * (hi - lo + 1))
        path = tuple(rng.sample(range(1, cfg.switches + 1), h))
        hops: list[HopMetadata] = []
        flags: list[bool] = []
        for switch in path:
            anomalous = rand() < cfg.anomalies
            if anomalous and rand() < 2 / 3:
                occupancy = 2000 + int(rand() * 18001)
                latency = base_ns[switch] + occupancy * SERVICE_NS
            else:
                occupancy = int(rng.expovariate(1.0 / mean_queue[switch]))
                latency = base_ns[switch] + occupancy * SERVICE_NS + rng.gauss(0, 20)
                if anomalous:
                    latency += 50_000 + rand() * 450_000
            hops.append(HopMetadata(
                switch, 1 + int(rand() * 48), 1 + int(rand() * 48), max(1, int(latency)), int(rand() * 8),
                min(occupancy, 0xFFFFFF),
            ))
            flags.append(anomalous)
        src, dst = rng.sample(range(cfg.hosts), 2) if cfg.hosts > 1 else (0, 0)
        app_port = APP_PORTS[int(rand() * len(APP_PORTS))]
        md = IntMd(new_header(P4SUB_INSTRUCTIONS, h, MAX_HOPS), tuple(reversed(hops)), shim_value=app_port)
        ep = UdpEndpoints(
            src_mac=bytes((2, 0, 0, 0, src >> 8, src & 0xFF)), dst_mac=bytes((2, 0, 0, 0, dst >> 8, dst & 0xFF)),
            src_ip=_host_ip(src), dst_ip=_host_ip(dst), src_port=32768 + int(rand() * 28232), dst_port=cfg.int_port,
        )
        payload = bytes(int(rand() * 257))
        yield GeneratedPacket(ts, ep, md, payload, tuple(reversed(flags)), path)


@dataclass(frozen=True)
class IntTraceSummary:
    path: str
    packets: int
    hops: int
    anomalous_hops: int
    bytes: int


def write_int_trace(
    path: str | os.PathLike[str],
    cfg: IntTraceConfig,
    progress: Callable[[int, int], None] | None = None,
) -> IntTraceSummary:
    """Write the trace: INT packets, or with ``cfg.reports`` telemetry reports wrapping them."""
    cfg.validate()
    hops = anomalous = 0
    sequence: dict[int, int] = {}
    step = max(1, cfg.packets // 100)
    with IntTraceWriter(path) as w:
        for i, pkt in enumerate(generate_int_packets(cfg)):
            hops += len(pkt.md.hops)
            anomalous += sum(pkt.anomalous)
            if not cfg.reports:
                w.write_int(pkt.md, pkt.payload, pkt.endpoints, pkt.timestamp_ns)
            else:
                sink = pkt.path[-1]
                frame = build_int_frame(pkt.md, pkt.payload, pkt.endpoints, i & 0xFFFF)
                seq = sequence.get(sink, 0)
                sequence[sink] = (seq + 1) & 0x3FFFFF
                report = TelemetryReport(
                    ReportGroupHeader(node_id=sink, sequence=seq),
                    (IndividualReport(frame, tracked_flow=True, congested_queue=any(pkt.anomalous)),),
                )
                ep = UdpEndpoints(
                    src_ip=bytes((172, 16, sink >> 8 & 0xFF, sink & 0xFF)), dst_ip=bytes((192, 168, 100, 1)),
                    src_port=32768 + sink % 1000, dst_port=cfg.report_port,
                )
                w.write_report(report, ep, pkt.timestamp_ns + 1_000)
            if progress is not None and (i + 1) % step == 0:
                progress(i + 1, cfg.packets)
        packets = w.packets_written
    return IntTraceSummary(os.fspath(path), packets, hops, anomalous, os.path.getsize(path))
