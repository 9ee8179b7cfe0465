"""INT traces: generated traffic read back (direct and as telemetry reports), the columnar reader
against the per-packet one and against scapy, and damaged traces read to the end."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.int.columnar import INT_HOP_COLUMNS, concat_int_batches, read_int_batches
from apps.int.generator import IntTraceConfig, generate_int_packets, write_int_trace
from apps.int.headers import IntMd, new_header
from apps.int.metadata import HopMetadata
from apps.int.report import IndividualReport, ReportGroupHeader, TelemetryReport
from apps.int.trace import IntTraceReader, IntTraceWriter, build_int_frame, read_int_records
from apps.pcap import read_pcap, split_pcap, write_pcap
from apps.udp import UdpEndpoints
from tests.apps.int.scapy_layers import IntMdHeader as ScapyMd
from tests.apps.int.scapy_layers import IntShimUdp, P4subHop

scapy = pytest.importorskip("scapy.all", reason="scapy is a test dependency")

DIRECT = IntTraceConfig(packets=400, switches=30, hops=(1, 8), anomalies=0.05, seed=4)
REPORTS = IntTraceConfig(packets=300, switches=30, hops=(2, 5), seed=5, reports=True)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("int")
    write_int_trace(d / "direct.pcap", DIRECT)
    write_int_trace(d / "reports.pcap", REPORTS)
    return {"direct": d / "direct.pcap", "reports": d / "reports.pcap"}


@pytest.mark.parametrize("kind", ["direct", "reports"])
def test_generated_trace_reads_back_as_generated(traces: dict[str, Path], kind: str) -> None:
    cfg = DIRECT if kind == "direct" else REPORTS
    records, damage = read_int_records(traces[kind])
    generated = list(generate_int_packets(cfg))
    assert damage.total == 0
    assert [r.md for r in records] == [g.md for g in generated]
    assert [r.payload for r in records] == [g.payload for g in generated]
    assert [(r.src_ip, r.dst_ip, r.src_port, r.dst_port) for r in records] == [
        (int.from_bytes(g.endpoints.src_ip, "big"), int.from_bytes(g.endpoints.dst_ip, "big"), g.endpoints.src_port, 0x1234)
        for g in generated
    ]
    if kind == "reports":
        assert [r.group.node_id for r in records] == [g.path[-1] for g in generated]  # type: ignore[union-attr]
        assert [r.report.congested_queue for r in records] == [any(g.anomalous) for g in generated]  # type: ignore[union-attr]
        seqs: dict[int, list[int]] = {}
        for r in records:
            seqs.setdefault(r.group.node_id, []).append(r.group.sequence)  # type: ignore[union-attr]
        assert all(s == list(range(len(s))) for s in seqs.values())


COLS = ["packet_index", "report_index", "hop_index", "hop_count", "int_hop.switch_id", "int_hop.ingress_port_id",
        "int_hop.egress_port_id", "int_hop.hop_latency", "int_hop.queue_id", "int_hop.queue_occupancy", "ipv4.dst_addr",
        "packet_len", "timestamp_ns"]


def _rows(cols: dict[str, np.ndarray]) -> list[tuple]:
    return list(zip(*(cols[k].tolist() for k in COLS)))


def _per_packet_rows(reader: IntTraceReader) -> list[tuple]:
    rows = []
    for r in reader:
        for i, h in enumerate(r.md.hops):
            rows.append((r.packet_index, r.report_index, i, len(r.md.hops), h.switch_id, h.ingress_port_id,
                         h.egress_port_id, h.hop_latency, h.queue_id, h.queue_occupancy, r.dst_ip, r.packet_len, r.timestamp_ns))
    return rows


@pytest.mark.parametrize("kind", ["direct", "reports"])
def test_columnar_equals_per_packet_reader(traces: dict[str, Path], kind: str) -> None:
    reader = read_int_batches(traces[kind], batch_packets=33)
    cols = concat_int_batches(reader)
    assert set(cols) == set(INT_HOP_COLUMNS) and reader.damage.total == 0
    assert _rows(cols) == _per_packet_rows(IntTraceReader(traces[kind]))
    assert len(cols["packet_index"]) == sum(len(g.md.hops) for g in generate_int_packets(DIRECT if kind == "direct" else REPORTS))


def test_columnar_equals_scapy_oracle(traces: dict[str, Path]) -> None:
    rows = []
    for index, pkt in enumerate(scapy.rdpcap(str(traces["direct"]))):
        payload = bytes(pkt[scapy.UDP].payload)
        shim, md = IntShimUdp(payload[:4]), ScapyMd(payload[4:16])
        hops = (shim.length * 4 - 12) // (md.hop_ml * 4)
        for i in range(hops):
            h = P4subHop(payload[16 + 16 * i : 32 + 16 * i])
            rows.append((index, i, h.switch_id, h.ingress_port_id, h.egress_port_id, h.hop_latency, h.queue_id, h.queue_occupancy))
    cols = concat_int_batches(read_int_batches(traces["direct"]))
    keys = ["packet_index", "hop_index", "int_hop.switch_id", "int_hop.ingress_port_id", "int_hop.egress_port_id",
            "int_hop.hop_latency", "int_hop.queue_id", "int_hop.queue_occupancy"]
    assert list(zip(*(cols[k].tolist() for k in keys))) == rows


def test_fields_outside_the_bitmap_read_as_all_ones(tmp_path: Path) -> None:
    md = IntMd(new_header(0x8000 | 0x2000, 1), (HopMetadata(switch_id=7, hop_latency=1234),))  # node id + latency only
    path = tmp_path / "partial.pcap"
    with IntTraceWriter(path) as w:
        w.write_int(md, b"", UdpEndpoints(dst_port=0x1234), 0)
    cols = concat_int_batches(read_int_batches(path))
    assert cols["int_hop.switch_id"].tolist() == [7] and cols["int_hop.hop_latency"].tolist() == [1234]
    assert cols["int_hop.ingress_port_id"].tolist() == [0xFFFF] and cols["int_hop.queue_occupancy"].tolist() == [0xFFFFFF]


def test_reports_with_several_truncated_inner_packets(tmp_path: Path) -> None:
    gen = list(generate_int_packets(IntTraceConfig(packets=6, switches=10, hops=(3, 3), seed=1)))
    frames = [build_int_frame(g.md, g.payload + bytes(300), g.endpoints) for g in gen]
    # the sink cuts each inner packet right after the INT stack (as reports usually do)
    cut = [f[: 14 + 20 + 8 + 4 + 12 + 3 * 16 + 2] for f in frames]
    report = TelemetryReport(ReportGroupHeader(9, 1), tuple(IndividualReport(c) for c in cut[:3]) + (IndividualReport(cut[3], report_length_to_end=True),))
    other = TelemetryReport(ReportGroupHeader(9, 2), (IndividualReport(b"", rep_type=0, in_type=0), IndividualReport(cut[4])))
    path = tmp_path / "multi.pcap"
    with IntTraceWriter(path) as w:
        w.write_report(report, UdpEndpoints(dst_port=32766), 10)
        w.write_report(other, UdpEndpoints(dst_port=32766), 20)
    reader = IntTraceReader(path)
    records = list(reader)
    assert [(r.packet_index, r.report_index) for r in records] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 1)]
    assert [r.md for r in records] == [g.md for g in gen[:5]]
    assert reader.damage.total == 0 and reader.skipped.counts == {"report_inner_type": 1}
    batch_reader = read_int_batches(path)
    assert _rows(concat_int_batches(batch_reader)) == _per_packet_rows(IntTraceReader(path))
    assert batch_reader.skipped.counts == reader.skipped.counts


def test_byte_ranges_do_not_change_the_result(traces: dict[str, Path]) -> None:
    whole = concat_int_batches(read_int_batches(traces["direct"]))
    pieces = [concat_int_batches(read_int_batches(traces["direct"], byte_range=r)) for r in split_pcap(traces["direct"], 4)]
    assert all(np.array_equal(np.concatenate([p[k] for p in pieces]), whole[k]) for k in whole)


@given(
    edits=st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["flip", "cut", "shim_len", "hop_ml"]),
                             st.integers(0, 10_000), st.integers(0, 7)), max_size=12),
    kind=st.sampled_from(["direct", "reports"]),
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_corrupted_trace_is_read_to_the_end_and_both_readers_agree(traces: dict[str, Path], tmp_path: Path, edits: list, kind: str) -> None:
    recs, _ = read_pcap(traces[kind])
    frames = [bytearray(r.data) for r in recs[:60]]
    for index, how, where, bit in edits:
        f = frames[index]
        if how == "cut":
            frames[index] = f[: where % (len(f) + 1)]
        elif how == "flip":
            if f:
                f[where % len(f)] ^= 1 << bit
        else:  # rewrite INT fields of a direct packet and its checksums stay valid via scapy
            if kind != "direct" or len(f) < 14 + 20 + 8 + 16:
                continue
            pkt = scapy.Ether(bytes(f))
            if scapy.UDP not in pkt or len(bytes(pkt[scapy.UDP].payload)) < 16:
                continue
            payload = bytearray(bytes(pkt[scapy.UDP].payload))
            if how == "shim_len":
                payload[1] = where % 256
            else:
                payload[6] = (payload[6] & 0xE0) | (where % 32)
            pkt[scapy.UDP].remove_payload()
            del pkt[scapy.UDP].chksum
            frames[index] = bytearray(bytes(pkt / bytes(payload)))
    path = tmp_path / "bad.pcap"
    write_pcap(path, [(i, bytes(f)) for i, f in enumerate(frames)])
    batch_reader = read_int_batches(path, batch_packets=9)
    cols = concat_int_batches(batch_reader)
    reader = IntTraceReader(path)
    assert _rows(cols) == _per_packet_rows(reader)
    assert batch_reader.damage.counts == reader.damage.counts
    assert batch_reader.skipped.counts == reader.skipped.counts
    if not edits:
        assert reader.damage.total == 0


def test_wrong_shim_length_is_damage_in_both_readers(traces: dict[str, Path], tmp_path: Path) -> None:
    recs, _ = read_pcap(traces["direct"])
    pkt = scapy.Ether(recs[0].data)
    payload = bytearray(bytes(pkt[scapy.UDP].payload))
    payload[1] = 250  # stack far longer than the packet
    pkt[scapy.UDP].remove_payload()
    del pkt[scapy.UDP].chksum
    path = tmp_path / "len.pcap"
    write_pcap(path, [(0, bytes(pkt / bytes(payload))), (1, recs[1].data)])
    reader = read_int_batches(path)
    cols = concat_int_batches(reader)
    assert reader.damage.counts == {"int_length": 1}
    assert set(cols["packet_index"].tolist()) == {1}
    assert struct.unpack_from("!H", recs[1].data, 36)[0] == 0x1234
