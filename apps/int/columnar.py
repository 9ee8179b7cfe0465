"""Columnar, vectorised decoding of INT traces for replay: one row per hop of every INT-MD stack.

Frames to the INT port are parsed in place; telemetry reports (frames to the report port) are
opened in Python, one report at a time (their layout is variable), and their inner packets are
then parsed by the same vectorised code as if they were frames of the trace. Hop fields are
located per packet from its instruction bitmap, so stacks with other instruction sets still
decode; a field the bitmap does not select reads as all ones (INT's "not available").

Rules and damage reasons are those of :mod:`apps.int.trace`; the tests hold the two readers to
the same output.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

import numpy as np

from apps.int.headers import DEFAULT_INT_PORT, INT_TYPE_DESTINATION, INT_TYPE_MD, INT_TYPE_MX
from apps.int.report import DEFAULT_REPORT_PORT, IN_TYPE_ETHERNET, walk_reports
from apps.pcap import LINKTYPE_ETHERNET, DamageCounter, PcapRange, PcapReader, RecordChunk
from apps.udp_batch import VecDamage, be_uint, decode_udp_frames, u16

INT_HOP_COLUMNS = {
    "int_hop.switch_id": np.uint32,
    "int_hop.ingress_port_id": np.uint16,
    "int_hop.egress_port_id": np.uint16,
    "int_hop.hop_latency": np.uint32,
    "int_hop.queue_id": np.uint8,
    "int_hop.queue_occupancy": np.uint32,
    "ipv4.dst_addr": np.uint32,
    "packet_index": np.int64,
    "report_index": np.int32,
    "hop_index": np.int32,
    "hop_count": np.int32,
    "packet_len": np.uint32,
    "timestamp_ns": np.int64,
}

_ITEM_SIZE = np.array([4, 4, 4, 4, 8, 8, 8] + [4] * 9, dtype=np.int64)  # bytes per bitmap bit 0..15


def _bit(bitmap: np.ndarray, b: int) -> np.ndarray:
    return (bitmap >> (15 - b)) & 1


def parse_int_instances(
    arr: np.ndarray, start: np.ndarray, end: np.ndarray, damage: DamageCounter, skipped: DamageCounter | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Vectorised shim + MD + stack parse of INT-MD instances at ``arr[start:end]``.

    Returns the instance index of every hop row and the hop columns.
    """
    dmg = VecDamage(damage)
    idx = np.arange(len(start), dtype=np.int64)
    short = end - start < 16
    dmg.add("int_short", short)
    idx, start, end = idx[~short], start[~short], end[~short]
    int_type = arr[start] >> 4
    bad = int_type != INT_TYPE_MD
    other = bad & ((int_type == INT_TYPE_DESTINATION) | (int_type == INT_TYPE_MX))
    VecDamage(skipped if skipped is not None else DamageCounter()).add("int_not_md", other)
    dmg.add("int_type", bad & ~other)
    idx, start, end = idx[~bad], start[~bad], end[~bad]
    length = arr[start + 1].astype(np.int64)
    stack_end = start + 4 + 4 * length
    bad = (length * 4 < 12) | (stack_end > end)
    dmg.add("int_length", bad)
    idx, start, stack_end = idx[~bad], start[~bad], stack_end[~bad]
    md = start + 4
    bad = (arr[md] >> 4) != 2
    dmg.add("int_version", bad)
    idx, md, stack_end = idx[~bad], md[~bad], stack_end[~bad]
    record = (arr[md + 2] & 0x1F).astype(np.int64) * 4
    bitmap = u16(arr, md + 4)
    baseline = sum(_bit(bitmap, b) * _ITEM_SIZE[b] for b in range(16))
    stack = md + 12
    stack_len = stack_end - stack
    bad = (record < baseline) | ((record == 0) & (stack_len > 0))
    dmg.add("int_hop_ml", bad)
    idx, bitmap, record, stack, stack_len = idx[~bad], bitmap[~bad], record[~bad], stack[~bad], stack_len[~bad]
    hops = np.where(record > 0, stack_len // np.maximum(record, 1), 0)
    rows = np.repeat(np.arange(len(idx)), hops)
    first_row = np.cumsum(hops) - hops
    hop_index = np.arange(len(rows), dtype=np.int64) - first_row[rows]
    base = stack[rows] + hop_index * record[rows]
    bm = bitmap[rows]
    has = [_bit(bm, b).astype(bool) for b in range(4)]
    off_ports = 4 * has[0]
    off_latency = off_ports + 4 * has[1]
    off_queue = off_latency + 4 * has[2]

    def field(present: np.ndarray, at: np.ndarray, width: int, dtype: type, missing: int) -> np.ndarray:
        values = be_uint(arr, np.where(present, at, base), width, np.int64)
        return np.where(present, values, missing).astype(dtype)

    queue_word = field(has[3], base + off_queue, 4, np.int64, 0xFFFFFFFF)
    ports_word = field(has[1], base + off_ports, 4, np.int64, 0xFFFFFFFF)
    columns = {
        "int_hop.switch_id": field(has[0], base, 4, np.uint32, 0xFFFFFFFF),
        "int_hop.ingress_port_id": (ports_word >> 16).astype(np.uint16),
        "int_hop.egress_port_id": (ports_word & 0xFFFF).astype(np.uint16),
        "int_hop.hop_latency": field(has[2], base + off_latency, 4, np.uint32, 0xFFFFFFFF),
        "int_hop.queue_id": (queue_word >> 24).astype(np.uint8),
        "int_hop.queue_occupancy": (queue_word & 0xFFFFFF).astype(np.uint32),
        "hop_index": hop_index.astype(np.int32),
        "hop_count": hops[rows].astype(np.int32),
    }
    return idx[rows], columns


def decode_int_hops(
    chunk: RecordChunk,
    damage: DamageCounter,
    skipped: DamageCounter | None = None,
    int_ports: frozenset[int] = frozenset({DEFAULT_INT_PORT}),
    report_ports: frozenset[int] = frozenset({DEFAULT_REPORT_PORT}),
    verify_udp: bool = True,
) -> tuple[dict[str, np.ndarray], int]:
    """Hop rows of one record chunk (see :data:`INT_HOP_COLUMNS`) and the number of INT-MD stacks."""
    skip = skipped if skipped is not None else DamageCounter()
    arr = np.frombuffer(chunk.buffer, dtype=np.uint8)
    frames = decode_udp_frames(chunk, damage, skip, None, verify_udp)
    port = frames["dst_port"].astype(np.int64)
    is_int = np.isin(port, np.fromiter(int_ports, dtype=np.int64))
    is_report = np.isin(port, np.fromiter(report_ports, dtype=np.int64)) & ~is_int
    skip.add("other_port", int(np.count_nonzero(~is_int & ~is_report)))

    # Instances: (record in chunk, report index, start, end, dst address)
    rec = [frames["record"][is_int]]
    rep = [np.zeros(int(is_int.sum()), dtype=np.int64)]
    start = [frames["payload"][is_int]]
    end = [frames["payload"][is_int] + frames["payload_len"][is_int]]
    dst = [frames["dst_addr"][is_int].astype(np.int64)]

    inner_rec, inner_rep, inner_off, inner_len = [], [], [], []
    buf = memoryview(chunk.buffer)
    for r, p, n in zip(frames["record"][is_report].tolist(), frames["payload"][is_report].tolist(), frames["payload_len"][is_report].tolist()):
        walked = walk_reports(buf[p : p + n], damage)
        if walked is None:
            continue
        for k, (_, _, in_type, at, stop) in enumerate(walked[2]):
            if in_type != IN_TYPE_ETHERNET:
                skip.add("report_inner_type")
                continue
            inner_rec.append(r)
            inner_rep.append(k)
            inner_off.append(p + at)
            inner_len.append(stop - at)
    if inner_off:
        sub = RecordChunk(
            chunk.buffer, chunk.base, 0,
            np.zeros(len(inner_off), dtype=np.int64), np.asarray(inner_off, dtype=np.int64),
            np.asarray(inner_len, dtype=np.int64), np.asarray(inner_len, dtype=np.int64),
            np.zeros(len(inner_off), dtype=np.int64), np.full(len(inner_off), LINKTYPE_ETHERNET, dtype=np.int64),
        )
        inner = decode_udp_frames(sub, damage, skip, None, verify_udp, truncated=True)
        carries = np.isin(inner["dst_port"].astype(np.int64), np.fromiter(int_ports, dtype=np.int64))
        skip.add("report_without_int", int(np.count_nonzero(~carries)))
        which = inner["record"][carries]
        rec.append(np.asarray(inner_rec, dtype=np.int64)[which])
        rep.append(np.asarray(inner_rep, dtype=np.int64)[which])
        start.append(inner["payload"][carries])
        end.append(inner["payload"][carries] + inner["payload_len"][carries])
        dst.append(inner["dst_addr"][carries].astype(np.int64))
    rec_a, rep_a, start_a, end_a, dst_a = (np.concatenate(x) for x in (rec, rep, start, end, dst))
    order = np.lexsort((rep_a, rec_a))  # file order: packet, then report within the packet
    rec_a, rep_a, start_a, end_a, dst_a = rec_a[order], rep_a[order], start_a[order], end_a[order], dst_a[order]
    inst, cols = parse_int_instances(arr, start_a, end_a, damage, skip)
    r = rec_a[inst]
    cols["ipv4.dst_addr"] = dst_a[inst].astype(np.uint32)
    cols["packet_index"] = r + chunk.first_index
    cols["report_index"] = rep_a[inst].astype(np.int32)
    cols["packet_len"] = chunk.orig_lens[r].astype(np.uint32)
    cols["timestamp_ns"] = chunk.timestamps_ns[r].astype(np.int64)
    return cols, len(start_a)


class IntBatchReader:
    """Iterate hop-row batches of an INT trace; ``damage``/``skipped`` count what was left out."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_packets: int = 65536,
        int_ports: Iterable[int] = (DEFAULT_INT_PORT,),
        report_ports: Iterable[int] = (DEFAULT_REPORT_PORT,),
        verify_udp: bool = True,
        byte_range: PcapRange | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.batch_packets = batch_packets
        self.int_ports = frozenset(int_ports)
        self.report_ports = frozenset(report_ports)
        self.verify_udp = verify_udp
        self.byte_range = byte_range
        self.damage = DamageCounter()
        self.skipped = DamageCounter()
        self.packets_read = 0
        self.stacks_read = 0

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        with PcapReader(self.path, byte_range=self.byte_range, damage=self.damage) as reader:
            for chunk in reader.chunks(self.batch_packets):
                self.packets_read += len(chunk)
                batch, stacks = decode_int_hops(chunk, self.damage, self.skipped, self.int_ports, self.report_ports, self.verify_udp)
                self.stacks_read += stacks
                if len(batch["packet_index"]):
                    yield batch


def read_int_batches(
    path: str | os.PathLike[str],
    batch_packets: int = 65536,
    int_ports: Iterable[int] = (DEFAULT_INT_PORT,),
    report_ports: Iterable[int] = (DEFAULT_REPORT_PORT,),
    verify_udp: bool = True,
    byte_range: PcapRange | None = None,
) -> IntBatchReader:
    """Hop rows of an INT trace, batch by batch; the reader also holds ``damage``."""
    return IntBatchReader(path, batch_packets, int_ports, report_ports, verify_udp, byte_range)


def concat_int_batches(batches: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {k: [] for k in INT_HOP_COLUMNS}
    for b in batches:
        for k in INT_HOP_COLUMNS:
            parts[k].append(b[k])
    return {k: (np.concatenate(v).astype(INT_HOP_COLUMNS[k]) if v else np.empty(0, dtype=INT_HOP_COLUMNS[k])) for k, v in parts.items()}
