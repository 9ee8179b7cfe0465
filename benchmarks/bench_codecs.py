"""Encode and decode throughput of the ITCH and INT trace codecs.

    nice .venv/bin/python benchmarks/bench_codecs.py                 # 10M ITCH messages, 200k INT packets
    nice .venv/bin/python benchmarks/bench_codecs.py --messages 1000000 --int-packets 100000

Prints one line per measurement (wall-clock, single process). The machine is shared, so read
the figures as orders of magnitude; rerun to see the spread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apps.int.columnar import read_int_batches  # noqa: E402
from apps.int.generator import IntTraceConfig, generate_int_packets, write_int_trace  # noqa: E402
from apps.int.headers import encode_int_md  # noqa: E402
from apps.int.trace import IntTraceReader  # noqa: E402
from apps.itch.binaryfile import BinaryFileReader, write_binary_file  # noqa: E402
from apps.itch.columnar import read_itch_batches  # noqa: E402
from apps.itch.feed import FeedConfig, generate_messages, write_itch_feed  # noqa: E402
from apps.itch.messages import decode_message, encode_message  # noqa: E402
from apps.itch.trace import ItchTraceReader  # noqa: E402
from apps.pcap import pcap_record_offsets, split_pcap  # noqa: E402


def report(what: str, count: int, unit: str, seconds: float, extra: str = "") -> None:
    print(f"{what:<58} {count:>12,} {unit:<9} {seconds:8.2f} s {count / seconds:>14,.0f} {unit}/s {extra}", flush=True)


def bench_itch(workdir: Path, messages: int, seed: int) -> None:
    cfg = FeedConfig(messages=messages, symbols=100, zipf=1.1, batch=(1, 12), seed=seed)
    feed = workdir / "feed.pcap"

    t = time.perf_counter()
    summary = write_itch_feed(feed, cfg)
    report("ITCH generate + encode + write pcap (end to end)", summary.messages, "msg", time.perf_counter() - t,
           f"({summary.packets:,} packets, {summary.bytes / 1e6:,.0f} MB)")

    sample = []
    for m in generate_messages(FeedConfig(messages=min(messages, 1_000_000), seed=seed)):
        sample.append(m)
    t = time.perf_counter()
    raws = [encode_message(m) for m in sample]
    report("ITCH encode_message (objects -> bytes)", len(sample), "msg", time.perf_counter() - t)
    t = time.perf_counter()
    for r in raws:
        decode_message(r)
    report("ITCH decode_message (bytes -> objects)", len(raws), "msg", time.perf_counter() - t)

    t = time.perf_counter()
    reader = read_itch_batches(feed)
    adds = sum(len(b["packet_index"]) for b in reader)
    dt = time.perf_counter() - t
    report("ITCH columnar decode, all messages walked", reader.messages_read, "msg", dt,
           f"({adds:,} Add Orders -> {adds / dt:,.0f} rows/s, {summary.bytes / dt / 1e6:,.0f} MB/s, damage {reader.damage.total})")

    t = time.perf_counter()
    reader = read_itch_batches(feed, verify_udp=False)
    for _ in reader:
        pass
    report("ITCH columnar decode, UDP checksums not verified", reader.messages_read, "msg", time.perf_counter() - t)

    ranges = split_pcap(feed, max(1, summary.packets // 200_000))
    first = ranges[0]
    t = time.perf_counter()
    per_packet = ItchTraceReader(feed, byte_range=first)
    n = sum(len(p.messages) for p in per_packet)
    report("ITCH per-packet decode (ItchPacket objects, first range)", n, "msg", time.perf_counter() - t)

    t = time.perf_counter()
    offsets = pcap_record_offsets(feed)
    report("pcap_record_offsets (index of every record)", len(offsets), "packet", time.perf_counter() - t)

    binfile = workdir / "day.NASDAQ_ITCH50"
    write_binary_file(binfile, sample)
    t = time.perf_counter()
    got = sum(1 for _ in BinaryFileReader(binfile))
    report("BinaryFILE read (all types decoded)", got, "msg", time.perf_counter() - t)
    t = time.perf_counter()
    got = sum(1 for _ in BinaryFileReader(binfile, types="AF"))
    report("BinaryFILE read (only A/F decoded)", len(sample), "msg", time.perf_counter() - t, f"({got:,} decoded)")


def bench_int(workdir: Path, packets: int, seed: int) -> None:
    trace = workdir / "int.pcap"
    cfg = IntTraceConfig(packets=packets, switches=100, hops=(1, 5), anomalies=0.01, seed=seed)
    t = time.perf_counter()
    s = write_int_trace(trace, cfg)
    report("INT generate + encode + write pcap (end to end)", s.packets, "packet", time.perf_counter() - t,
           f"({s.hops:,} hops, {s.bytes / 1e6:,.0f} MB)")

    mds = [g.md for g, _ in zip(generate_int_packets(cfg), range(min(packets, 200_000)))]
    t = time.perf_counter()
    for md in mds:
        encode_int_md(md)
    report("INT encode_int_md (shim + MD + stack)", len(mds), "packet", time.perf_counter() - t)

    t = time.perf_counter()
    reader = read_int_batches(trace)
    hops = sum(len(b["packet_index"]) for b in reader)
    dt = time.perf_counter() - t
    report("INT columnar decode (hop rows)", reader.packets_read, "packet", dt, f"({hops / dt:,.0f} hops/s)")

    t = time.perf_counter()
    n = sum(1 for _ in IntTraceReader(trace, byte_range=split_pcap(trace, max(1, packets // 100_000))[0]))
    report("INT per-packet decode (IntRecord objects, first range)", n, "packet", time.perf_counter() - t)

    reports = workdir / "reports.pcap"
    write_int_trace(reports, IntTraceConfig(packets=min(packets, 200_000), seed=seed, reports=True))
    t = time.perf_counter()
    reader = read_int_batches(reports)
    hops = sum(len(b["packet_index"]) for b in reader)
    dt = time.perf_counter() - t
    report("INT columnar decode of Telemetry Reports", reader.packets_read, "packet", dt, f"({hops / dt:,.0f} hops/s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=10_000_000, help="ITCH feed size (10M)")
    ap.add_argument("--int-packets", type=int, default=200_000, help="INT trace size (200k)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="where to write the traces (a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the traces")
    args = ap.parse_args()
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="p4sub-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"# bench_codecs: {args.messages:,} ITCH messages, {args.int_packets:,} INT packets, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, workdir {workdir}")
    try:
        bench_itch(workdir, args.messages, args.seed)
        bench_int(workdir, args.int_packets, args.seed)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
