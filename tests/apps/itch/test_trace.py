"""ITCH traces: generated feeds read back, both readers against each other and against an oracle
built from scapy + itchfeed, and damaged traces read to the end."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.itch.columnar import ADD_ORDER_COLUMNS, concat_batches, read_itch_batches
from apps.itch.feed import FeedConfig, generate_messages, generate_packets, write_itch_feed
from apps.itch.messages import AddOrder, AddOrderMPID, encode_message, stock_int
from apps.itch.trace import ItchTraceReader, ItchTraceWriter, read_itch_packets
from apps.pcap import read_pcap, split_pcap, write_pcap

scapy = pytest.importorskip("scapy.all", reason="scapy is a test dependency")

SMALL = FeedConfig(messages=3000, symbols=20, seed=7)


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("itch") / "feed.pcap"
    write_itch_feed(path, SMALL)
    return path


def test_generated_feed_reads_back_as_generated(feed: Path) -> None:
    packets, damage = read_itch_packets(feed)
    assert damage.total == 0
    assert [m for p in packets for m in p.messages] == list(generate_messages(SMALL))
    expected = list(generate_packets(SMALL))
    assert [(p.timestamp_ns, list(p.messages)) for p in packets[:-1]] == expected
    seq = 1
    for p in packets[:-1]:
        assert p.sequence == seq and p.count == len(p.messages) and p.session == SMALL.session
        seq += p.count
    assert packets[-1].is_end_of_session and packets[-1].sequence == seq
    assert all(SMALL.batch[0] <= p.count <= SMALL.batch[1] for p in packets[:-1])


def _oracle_add_orders(path: Path) -> list[tuple]:
    """Add Orders decoded by scapy (frames) + hand-parsed MoldUDP64 + itchfeed (messages)."""
    os.environ["ITCH_NO_CPP"] = "1"
    itch_messages = pytest.importorskip("itch.messages", reason="itchfeed is a test-only oracle")
    rows = []
    for index, pkt in enumerate(scapy.rdpcap(str(path))):
        udp = pkt[scapy.UDP]
        payload = bytes(udp.payload)
        (count,) = struct.unpack_from("!H", payload, 18)
        pos = 20
        for i in range(count if count != 0xFFFF else 0):
            (n,) = struct.unpack_from("!H", payload, pos)
            raw = payload[pos + 2 : pos + 2 + n]
            pos += 2 + n
            if raw[:1] in (b"A", b"F"):
                msg = itch_messages.messages[raw[:1]](raw)
                rows.append((
                    int.from_bytes(msg.stock, "big"), msg.price, msg.shares, msg.buy_sell_indicator[0],
                    msg.order_reference_number, msg.stock_locate, msg.timestamp,
                    int.from_bytes(bytes(int(x) for x in pkt[scapy.IP].dst.split(".")), "big"), udp.dport,
                    index, i, n, len(pkt),
                ))
    return rows


COLUMN_ORDER = [
    "add_order.stock", "add_order.price", "add_order.shares", "add_order.buy_sell_indicator",
    "add_order.order_ref_number", "add_order.stock_locate", "add_order.timestamp", "ipv4.dst_addr",
    "udp.dst_port", "packet_index", "msg_index", "msg_len", "packet_len",
]


def _rows(cols: dict[str, np.ndarray]) -> list[tuple]:
    return list(zip(*(cols[k].tolist() for k in COLUMN_ORDER)))


def test_columnar_add_orders_equal_scapy_plus_itchfeed(feed: Path) -> None:
    reader = read_itch_batches(feed, batch_packets=97)
    cols = concat_batches(reader)
    assert reader.damage.total == 0
    assert set(cols) == set(ADD_ORDER_COLUMNS)
    assert all(cols[k].dtype == np.dtype(t) for k, t in ADD_ORDER_COLUMNS.items())
    assert _rows(cols) == _oracle_add_orders(feed)
    assert reader.messages_read == SMALL.messages


def test_columnar_equals_per_packet_reader(feed: Path) -> None:
    cols = concat_batches(read_itch_batches(feed))
    rows = []
    for p in ItchTraceReader(feed):
        for i, m in enumerate(p.messages):
            if isinstance(m, (AddOrder, AddOrderMPID)):
                rows.append((stock_int(m.stock), m.price, m.shares, ord(m.buy_sell_indicator), m.order_ref_number,
                             m.stock_locate, m.timestamp, p.dst_ip, p.dst_port, p.packet_index, i,
                             len(encode_message(m)), p.packet_len))
    assert _rows(cols) == rows


def test_byte_ranges_and_batch_sizes_do_not_change_the_result(feed: Path) -> None:
    whole = concat_batches(read_itch_batches(feed))
    for parts in (2, 5):
        pieces = [concat_batches(read_itch_batches(feed, byte_range=r)) for r in split_pcap(feed, parts)]
        joined = {k: np.concatenate([p[k] for p in pieces]) for k in whole}
        assert all(np.array_equal(joined[k], whole[k]) for k in whole)
    small = concat_batches(read_itch_batches(feed, batch_packets=1))
    assert all(np.array_equal(small[k], whole[k]) for k in whole)


def test_port_filter_skips_other_udp(tmp_path: Path) -> None:
    path = tmp_path / "p.pcap"
    msg = AddOrder(1, 0, 5, 9, "S", 10, "AAPL", 1)
    with ItchTraceWriter(path) as w:
        w.write_packet([msg], 1)
    assert len(concat_batches(read_itch_batches(path, ports=[1234]))["packet_index"]) == 1
    reader = read_itch_batches(path, ports=[9999])
    assert len(concat_batches(reader)["packet_index"]) == 0
    assert reader.damage.total == 0 and reader.skipped.counts == {"other_port": 1}


# --- damage ---------------------------------------------------------------------------------
def _frame(payload: bytes) -> bytes:
    return bytes(scapy.Ether() / scapy.IP(src="10.0.0.1", dst="233.54.12.111") / scapy.UDP(sport=1, dport=1234) / payload)


def _rewrite_payload(frame: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    payload = bytes(scapy.Ether(frame)[scapy.UDP].payload)
    return _frame(change(payload))


def test_wrong_counts_and_bad_lengths_with_valid_checksums(feed: Path, tmp_path: Path) -> None:
    recs, _ = read_pcap(feed)
    out, expected = [], {"mold_truncated": 0, "mold_trailing": 0, "msg_length": 0}
    dropped_adds = 0
    for i, r in enumerate(recs[:-1][:40]):
        frame = r.data
        payload = bytes(scapy.Ether(frame)[scapy.UDP].payload)
        count = struct.unpack_from("!H", payload, 18)[0]
        first_len = struct.unpack_from("!H", payload, 20)[0]
        if i % 4 == 1:  # claims two more messages than it holds
            frame = _frame(payload[:18] + struct.pack("!H", count + 2) + payload[20:])
            expected["mold_truncated"] += 1
        elif i % 4 == 2 and count > 1:  # claims one message less: the last block is left over
            frame = _frame(payload[:18] + struct.pack("!H", count - 1) + payload[20:])
            expected["mold_trailing"] += 1
            dropped_adds += payload[-struct.unpack_from("!H", payload, _last_block(payload))[0]:][:1] in (b"A", b"F")
        elif i % 4 == 3:  # first message one byte short of its type's size, framing intact
            body = payload[22 : 22 + first_len - 1]
            frame = _frame(payload[:20] + struct.pack("!H", first_len - 1) + body + payload[22 + first_len :])
            expected["msg_length"] += 1
            dropped_adds += payload[22:23] in (b"A", b"F")
        out.append((r.timestamp_ns, frame))
    path = tmp_path / "counts.pcap"
    write_pcap(path, out)
    reader = read_itch_batches(path)
    cols = concat_batches(reader)
    per_packet = ItchTraceReader(path)
    packets = list(per_packet)
    assert {k: v for k, v in expected.items() if v} == dict(reader.damage.counts)
    assert per_packet.damage.counts == reader.damage.counts
    n_add = sum(isinstance(m, (AddOrder, AddOrderMPID)) for p in packets for m in p.messages)
    assert len(cols["packet_index"]) == n_add
    n_add_first40 = int((concat_batches(read_itch_batches(feed))["packet_index"] < 40).sum())
    assert n_add == n_add_first40 - dropped_adds


def _last_block(payload: bytes) -> int:
    """Offset of the length field of the last block of a well-formed MoldUDP64 payload."""
    pos, last = 20, 20
    for _ in range(struct.unpack_from("!H", payload, 18)[0]):
        last = pos
        pos += 2 + struct.unpack_from("!H", payload, pos)[0]
    return last


@given(
    cuts=st.lists(st.tuples(st.integers(0, 39), st.sampled_from(["flip", "cut", "zero_udp_csum_flip"]), st.integers(0, 10_000), st.integers(0, 7)), max_size=15),
    truncate_file=st.integers(0, 2000),
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_corrupted_trace_is_read_to_the_end_and_both_readers_agree(feed: Path, tmp_path: Path, cuts: list, truncate_file: int) -> None:
    recs, _ = read_pcap(feed)
    frames = [bytearray(r.data) for r in recs[:40]]
    for index, how, where, bit in cuts:
        f = frames[index]
        if how == "cut":
            frames[index] = f[: where % (len(f) + 1)]
        elif len(f) > 42:  # frames cut to nothing above stay as they are
            if how == "zero_udp_csum_flip":  # no UDP checksum: damage must be caught by lengths
                f[40:42] = b"\x00\x00"
            f[where % len(f)] ^= 1 << bit
    path = tmp_path / "bad.pcap"
    write_pcap(path, [(i, bytes(f)) for i, f in enumerate(frames)])
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - truncate_file])
    reader = read_itch_batches(path, batch_packets=7)
    cols = concat_batches(reader)
    per_packet = ItchTraceReader(path)
    packets = list(per_packet)
    assert reader.damage.counts == per_packet.damage.counts
    rows = [
        (p.packet_index, m.order_ref_number, m.price)
        for p in packets
        for m in p.messages
        if isinstance(m, (AddOrder, AddOrderMPID))
    ]
    assert list(zip(cols["packet_index"].tolist(), cols["add_order.order_ref_number"].tolist(), cols["add_order.price"].tolist())) == rows
    if not cuts and truncate_file == 0:
        assert reader.damage.total == 0


def test_random_garbage_file_with_pcap_header_never_raises(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "garbage.pcap"
    write_pcap(path, [(0, bytes(rng.getrandbits(8) for _ in range(rng.randrange(200)))) for _ in range(50)])
    raw = bytearray(path.read_bytes())
    for _ in range(200):
        raw[rng.randrange(24, len(raw))] = rng.getrandbits(8)
    path.write_bytes(bytes(raw))
    reader = read_itch_batches(path)
    concat_batches(reader)
    list(ItchTraceReader(path))
    assert reader.damage.total > 0
