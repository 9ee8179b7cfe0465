"""pcap/pcapng reading and writing, against scapy and hand-built files, including damaged ones."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from apps.pcap import (
    PcapReader,
    PcapWriter,
    TraceError,
    pcap_record_offsets,
    read_pcap,
    split_pcap,
    write_pcap,
)

scapy_all = pytest.importorskip("scapy.all", reason="scapy is a test dependency")

BASE_NS = 1_548_806_400 * 10**9


def frames(n: int, seed: int = 0) -> list[tuple[int, bytes]]:
    """n distinct frames of varied sizes with increasing nanosecond timestamps."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(14, 300))
        payload = bytes([0x61 + i % 26]) * size
        out.append((BASE_NS + i * 1_000_003, i.to_bytes(4, "big") + payload))
    return out


# --- hand-built files (the oracle for layouts scapy does not write) --------------------------
def classic_pcap(records: list[tuple[int, bytes]], order: str = "<", nano: bool = True, linktype: int = 1) -> bytes:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)]
    for ts, data in records:
        sec, ns = divmod(ts, 10**9)
        out.append(struct.pack(order + "IIII", sec, ns if nano else ns // 1000, len(data), len(data)) + data)
    return b"".join(out)


def block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def shb(order: str) -> bytes:
    return block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(order: str, linktype: int = 1, tsresol: int | None = None, snaplen: int = 0) -> bytes:
    body = struct.pack(order + "HHI", linktype, 0, snaplen)
    if tsresol is not None:
        body += struct.pack(order + "HH", 9, 1) + bytes([tsresol, 0, 0, 0]) + struct.pack(order + "HH", 0, 0)
    return block(order, 1, body)


def epb(order: str, data: bytes, ticks: int, iface: int = 0) -> bytes:
    return block(order, 6, struct.pack(order + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)) + data)


def spb(order: str, data: bytes) -> bytes:
    return block(order, 3, struct.pack(order + "I", len(data)) + data)


def pb(order: str, data: bytes, ticks: int) -> bytes:
    return block(order, 2, struct.pack(order + "HHIIII", 0, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)) + data)


# --- reading well-formed files ----------------------------------------------------------------
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [True, False])
def test_classic_pcap_both_byte_orders_and_resolutions(tmp_path: Path, order: str, nano: bool) -> None:
    recs = frames(50)
    path = tmp_path / "a.pcap"
    path.write_bytes(classic_pcap(recs, order, nano))
    got, damage = read_pcap(path)
    assert damage.total == 0
    assert [r.data for r in got] == [d for _, d in recs]
    expect_ts = [ts if nano else ts // 1000 * 1000 for ts, _ in recs]
    assert [r.timestamp_ns for r in got] == expect_ts
    assert all(r.linktype == 1 and r.orig_len == len(r.data) for r in got)


def test_reads_what_scapy_writes(tmp_path: Path) -> None:
    pkts = [scapy_all.Ether() / scapy_all.IP(dst=f"10.0.0.{i}") / scapy_all.UDP() / (b"p" * i) for i in range(1, 40)]
    for i, p in enumerate(pkts):
        p.time = 1000 + i / 1000
    scapy_all.wrpcap(str(tmp_path / "s.pcap"), pkts)
    writer = scapy_all.PcapNgWriter(str(tmp_path / "s.pcapng"))
    for p in pkts:
        writer.write(p)
    writer.close()
    for name in ("s.pcap", "s.pcapng"):
        got, damage = read_pcap(tmp_path / name)
        assert damage.total == 0
        assert [r.data for r in got] == [bytes(p) for p in pkts]
        assert [round(r.timestamp_ns / 1e6) for r in got] == [1_000_000 + i for i in range(len(pkts))]


def test_scapy_reads_what_we_write(tmp_path: Path) -> None:
    recs = frames(30)
    write_pcap(tmp_path / "w.pcap", recs)
    back = scapy_all.rdpcap(str(tmp_path / "w.pcap"))
    assert [bytes(p) for p in back] == [d for _, d in recs]
    assert [int(p.time * 10**9) // 1000 for p in back] == [ts // 1000 for ts, _ in recs]
    with PcapWriter(tmp_path / "u.pcap", nanosecond=False) as w:
        for ts, d in recs:
            w.write(d, ts)
    got, _ = read_pcap(tmp_path / "u.pcap")
    assert [r.timestamp_ns for r in got] == [ts // 1000 * 1000 for ts, _ in recs]


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_blocks_resolutions_and_interfaces(tmp_path: Path, order: str) -> None:
    data = [d for _, d in frames(6)]
    content = (
        shb(order)
        + idb(order, 1, tsresol=9)  # nanoseconds
        + idb(order, 101, tsresol=0x80 | 10)  # 2^-10 s, raw IP link type
        + block(order, 0x0BAD, b"custom")  # unknown blocks are skipped, not damage
        + epb(order, data[0], 5_000_000_123)
        + epb(order, data[1], 1024 * 7, iface=1)
        + spb(order, data[2])
        + pb(order, data[3], 42)
        + shb(">" if order == "<" else "<")  # a second section in the other byte order
        + idb(">" if order == "<" else "<", 1)  # default resolution: microseconds
        + epb(">" if order == "<" else "<", data[4], 3)
    )
    path = tmp_path / "x.pcapng"
    path.write_bytes(content)
    got, damage = read_pcap(path)
    assert damage.total == 0
    assert [r.data for r in got] == data[:5]
    assert [r.timestamp_ns for r in got] == [5_000_000_123, 7 * 10**9, 0, 42, 3000]
    assert [r.linktype for r in got] == [1, 101, 1, 1, 1]


@given(
    sizes=st.lists(st.integers(0, 3000), min_size=0, max_size=40),
    chunk=st.sampled_from([4096, 5000, 1 << 16]),
    nano=st.booleans(),
)
@example(sizes=[0, 0, 0, 0, 0, 0, 0, 1856, 3000, 0], chunk=5000, nano=False)  # a record ending a chunk exactly
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_read_of_write_is_identity_for_any_chunk_size(tmp_path: Path, sizes: list[int], chunk: int, nano: bool) -> None:
    recs = [(BASE_NS + 1000 * i, bytes([i % 256]) * s) for i, s in enumerate(sizes)]
    path = tmp_path / "h.pcap"
    write_pcap(path, recs, nanosecond=nano)
    with PcapReader(path, chunk_bytes=chunk) as reader:
        got = list(reader)
        assert reader.damage.total == 0
    assert [(r.timestamp_ns, r.data) for r in got] == recs


# --- damaged files ------------------------------------------------------------------------------
def test_truncated_file_reads_every_complete_record(tmp_path: Path) -> None:
    recs = frames(20)
    whole = classic_pcap(recs)
    last_start = len(whole) - 16 - len(recs[-1][1])
    for cut in (last_start + 3, last_start + 16, len(whole) - 1):
        path = tmp_path / f"t{cut}.pcap"
        path.write_bytes(whole[:cut])
        got, damage = read_pcap(path)
        assert [r.data for r in got] == [d for _, d in recs[:-1]]
        assert damage.counts == {"truncated_record": 1}


def test_truncated_file_header_is_damage_not_error(tmp_path: Path) -> None:
    path = tmp_path / "h.pcap"
    path.write_bytes(classic_pcap([])[:10])
    got, damage = read_pcap(path)
    assert got == [] and damage.total == 1


@pytest.mark.parametrize("bad_field", ["caplen", "orig_len", "fraction"])
def test_bad_record_header_is_skipped_and_reading_resumes(tmp_path: Path, bad_field: str) -> None:
    recs = frames(60)
    raw = bytearray(classic_pcap(recs))
    pos = 24 + sum(16 + len(d) for _, d in recs[:30])  # header of record 30
    if bad_field == "caplen":
        struct.pack_into("<I", raw, pos + 8, 0xFFFFFFF0)
    elif bad_field == "orig_len":
        struct.pack_into("<I", raw, pos + 12, 1)
    else:
        struct.pack_into("<I", raw, pos + 4, 2_000_000_000)
    path = tmp_path / "b.pcap"
    path.write_bytes(bytes(raw))
    got, damage = read_pcap(path)
    assert [r.data for r in got] == [d for i, (_, d) in enumerate(recs) if i != 30]
    assert damage.counts == {"bad_record_header": 1}


def test_garbage_between_records_is_one_damaged_spot(tmp_path: Path) -> None:
    recs = frames(40)
    raw = classic_pcap(recs[:20]) + b"\xff\x00\x13" * 37 + classic_pcap(recs[20:])[24:]
    path = tmp_path / "g.pcap"
    path.write_bytes(raw)
    with PcapReader(path, chunk_bytes=4096) as reader:
        got = list(reader)
        assert reader.damage.counts == {"bad_record_header": 1}
    assert [r.data for r in got] == [d for _, d in recs]


def test_pcapng_bad_block_and_truncation_are_counted(tmp_path: Path) -> None:
    data = [d for _, d in frames(8)]
    good = [epb("<", d, i) for i, d in enumerate(data)]
    broken = bytearray(good[3])
    struct.pack_into("<I", broken, len(broken) - 4, 12345)  # trailing length disagrees
    content = shb("<") + idb("<") + b"".join(good[:3]) + bytes(broken) + b"".join(good[4:]) + good[0][:10]
    path = tmp_path / "d.pcapng"
    path.write_bytes(content)
    got, damage = read_pcap(path)
    assert [r.data for r in got] == data[:3] + data[4:]
    assert damage.counts == {"bad_block": 1, "truncated_record": 1}


def test_pcapng_packet_with_caplen_past_its_block_is_skipped(tmp_path: Path) -> None:
    data = [d for _, d in frames(3)]
    bad = bytearray(epb("<", data[1], 0))
    struct.pack_into("<I", bad, 8 + 12, 5000)  # captured length larger than the block
    path = tmp_path / "c.pcapng"
    path.write_bytes(shb("<") + idb("<") + epb("<", data[0], 0) + bytes(bad) + epb("<", data[2], 0))
    got, damage = read_pcap(path)
    assert [r.data for r in got] == [data[0], data[2]]
    assert damage.counts == {"bad_packet_block": 1}


def test_missing_and_foreign_files_are_trace_errors_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="nope.pcap"):
        PcapReader(tmp_path / "nope.pcap")
    (tmp_path / "text.pcap").write_text("hello, this is not a capture file\n")
    with pytest.raises(TraceError, match="text.pcap.*not a pcap"):
        PcapReader(tmp_path / "text.pcap")
    (tmp_path / "empty.pcap").write_bytes(b"")
    with pytest.raises(TraceError, match="empty"):
        PcapReader(tmp_path / "empty.pcap")


# --- offsets and ranges -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_split_ranges_read_back_the_whole_file(tmp_path: Path, kind: str) -> None:
    recs = frames(101)
    path = tmp_path / f"r.{kind}"
    if kind == "pcap":
        write_pcap(path, recs)
    else:
        blocks = [epb("<", d, ts) for ts, d in recs]
        # an interface declared mid-file must be known to the ranges after it
        path.write_bytes(shb("<") + idb("<", tsresol=9) + b"".join(blocks[:50]) + idb("<", 101) + b"".join(blocks[50:]))
    whole, _ = read_pcap(path)
    offsets = pcap_record_offsets(path)
    assert len(offsets) == 101
    raw = path.read_bytes()
    assert all(raw[o : o + c] == r.data for o, c, r in zip(offsets["data_offset"], offsets["caplen"], whole))
    for parts in (1, 3, 7, 200):
        ranges = split_pcap(path, parts)
        assert len(ranges) == min(parts, 101)
        assert ranges[0].first_index == 0
        pieces = []
        for r in ranges:
            with PcapReader(path, byte_range=r) as reader:
                pieces.append(list(reader))
        assert [len(p) for p in pieces] == [b.first_index - a.first_index for a, b in zip(ranges, ranges[1:])] + [101 - ranges[-1].first_index]
        assert [rec for p in pieces for rec in p] == whole


def test_chunks_expose_buffer_offsets(tmp_path: Path) -> None:
    recs = frames(10)
    write_pcap(tmp_path / "c.pcap", recs)
    with PcapReader(tmp_path / "c.pcap") as reader:
        chunks = list(reader.chunks(max_records=4))
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert [c.first_index for c in chunks] == [0, 4, 8]
    flat = [c.buffer[o : o + n] for c in chunks for o, n in zip(c.data_offsets, c.caplens)]
    assert flat == [d for _, d in recs]
