"""runtime.columnar: the vectorised parse graph gives, row for row, what ParseGraph.parse gives per packet.

The reference is :class:`runtime.parse_graph.ParseGraph` run on each packet alone; the packets are
built here with ``struct`` (the builders of test_parse_graph), then cut short, bit-flipped or
replaced by random bytes, so every status and every select case is reached. Specs: the shipped
ITCH and INT specs, the example of a user's own protocol (examples/dns-order.p4), and small specs
that loop, look ahead, reject, and compute with values wider than 64 bits.
"""

from __future__ import annotations

import random
import struct
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.spec.reader import parse_spec, read_spec
from runtime.columnar import SpecReader, read_bits
from runtime.parse_graph import STATUSES, ParseGraph
from tests.runtime.test_parse_graph import SMALL, add_order, int_frame, ipv4_udp_frame, mold, order_delete, system_event

ROOT = Path(__file__).resolve().parents[2]
SPECS = {"itch": ROOT / "apps/itch/itch.p4", "int": ROOT / "apps/int/int.p4", "dns": ROOT / "examples/dns-order.p4"}

WIDE = """
header w_t { bit<4> tag; bit<80> big; bit<12> len; }
header e_t { bit<72> x; bit<8> y; }
struct headers { w_t w; e_t[3] e; }
parser P(packet_in pkt, out headers hdr) {
    state start {
        pkt.extract(hdr.w);
        transition select(hdr.w.big, hdr.w.tag) {
            (0x80000000000000000000 &&& 0x80000000000000000000, _): skip;
            (_, 1): more;
            (_, 2): reject;
            default: accept;
        }
    }
    state skip { pkt.advance((bit<32>)(hdr.w.big >> 72) * 8); transition more; }
    state more {
        pkt.extract(hdr.e.next);
        transition select(hdr.e.last.x, hdr.e.last.y) {
            (0 &&& 0xFF0000000000000000, _): accept;
            (_, 0 &&& 1): more;
            default: again;
        }
    }
    state again { pkt.advance(((bit<32>)(hdr.e[0].y - 200)) * 8); transition more; }
}
"""


@lru_cache(maxsize=None)
def spec(name: str):
    if name in SPECS:
        return read_spec(SPECS[name])
    return parse_spec({"small": SMALL, "wide": WIDE}[name], f"{name}.p4")


def all_fields(name: str, row_stack: str | None) -> list[str]:
    """Every field of the scalar headers and of the row stack."""
    s = spec(name)
    out = []
    for h in s.headers:
        if h.stack_size is None or h.name == row_stack:
            out += [f"{h.name}.{f.name}" for f in s.header_types[h.type_name].fields]
    return out


ROW_STACKS = {"itch": "add_order", "int": "int_hop", "dns": None, "small": "n", "wide": "e"}


# ---------------------------------------------------------------------------------------------
# The reference: ParseGraph.parse, one packet at a time


def reference(name: str, packets: list[bytes], fields: list[str], row_stack: str | None):
    graph = ParseGraph(spec(name))
    cols: dict[str, list[int]] = {f: [] for f in fields}
    valid: dict[str, list[int]] = {h.name: [] for h in spec(name).headers if h.stack_size is None}
    packet, statuses, messages = [], {}, []
    group = [h.name for h in spec(name).headers if row_stack and h.stack_size == spec(name).header(row_stack).stack_size]
    for k, data in enumerate(packets):
        parsed = graph.parse(data)
        statuses[parsed.status] = statuses.get(parsed.status, 0) + 1
        messages.append(max(len(parsed.stacks.get(h, ())) for h in group) if group else 1)
        depth = len(parsed.stacks.get(row_stack, ())) if row_stack else 1
        for i in range(depth):
            packet.append(k)
            for f in fields:
                h, fname = f.split(".", 1)
                cols[f].append(parsed.stacks[h][i].fields[fname] if h == row_stack else parsed.row([f])[f])
            for h in valid:
                valid[h].append(int(parsed.valid(h)))
    return cols, valid, packet, statuses, messages


def check_equal(name: str, packets: list[bytes]) -> dict[str, int]:
    row_stack = ROW_STACKS[name]
    fields = all_fields(name, row_stack)
    got = SpecReader(spec(name), fields, row_stack).parse_packets(packets)
    cols, valid, packet, statuses, messages = reference(name, packets, fields, row_stack)
    assert got.packet.tolist() == packet
    assert got.statuses == statuses
    assert got.messages.tolist() == messages
    for f in fields:
        assert [int(v) for v in got.columns[f]] == cols[f], f
    for h, v in valid.items():
        assert got.columns[f"{h}.$valid"].tolist() == v, h
    return statuses


# ---------------------------------------------------------------------------------------------
# Packets: well-formed per spec, then damaged


def add_order_mpid(locate: int, ref: int, side: bytes, shares: int, stock: bytes, price: int) -> bytes:
    return b"F" + add_order(locate, ref, side, shares, stock, price)[1:] + b"MPID"


@st.composite
def itch_packet(draw) -> bytes:
    kinds = st.sampled_from(["A", "F", "S", "D"])
    msgs = []
    for kind in draw(st.lists(kinds, max_size=14)):
        args = (draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 2**64 - 1)), draw(st.sampled_from([b"B", b"S"])),
                draw(st.integers(0, 2**32 - 1)), draw(st.binary(min_size=1, max_size=8)), draw(st.integers(0, 2**32 - 1)))
        msgs.append({"A": lambda: add_order(*args), "F": lambda: add_order_mpid(*args), "S": system_event,
                     "D": lambda: order_delete(args[1])}[kind]())
    count = draw(st.none() | st.sampled_from([0, 0xFFFF, 1, 3, 13, 200]))
    port = draw(st.sampled_from([1234, 1234, 1234, 1235]))
    return ipv4_udp_frame(mold(msgs, count=count), port, ihl=draw(st.sampled_from([5, 5, 5, 6])),
                          frag=draw(st.sampled_from([0, 0, 0, 1])))


@st.composite
def int_packet(draw) -> bytes:
    hops = draw(st.lists(st.tuples(*(st.integers(0, 2**b - 1) for b in (32, 16, 16, 32, 8, 24))), max_size=8))
    return int_frame(hops, bitmap=draw(st.sampled_from([0xF000, 0xF000, 0xF100])),
                     hop_ml=draw(st.sampled_from([4, 4, 4, 5])), shim_type=draw(st.sampled_from([1, 1, 1, 2])),
                     length=draw(st.none() | st.integers(0, 40)), port=draw(st.sampled_from([0x1234, 0x1234, 53])),
                     tail=draw(st.binary(max_size=4)))


def dns_payload(draw) -> bytes:
    flags = draw(st.integers(0, 0xFFFF))
    return struct.pack("!HHH8sH", draw(st.integers(0, 0xFFFF)), flags, 1,
                       draw(st.binary(min_size=8, max_size=8)), draw(st.integers(0, 0xFFFF)))


def order_payload(draw) -> bytes:
    return struct.pack("!BIc8sI", ord("O"), draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from([b"B", b"S"])),
                       draw(st.binary(min_size=8, max_size=8)), draw(st.integers(0, 2**32 - 1)))


@st.composite
def dns_packet(draw) -> bytes:
    port = draw(st.sampled_from([53, 4096, 5000, 8191, 8192, 80]))
    payload = dns_payload(draw) if draw(st.booleans()) else order_payload(draw)
    ihl = draw(st.sampled_from([5, 5, 6, 8, 4]))
    frame = ipv4_udp_frame(payload, port, ihl=max(ihl, 5), frag=draw(st.sampled_from([0, 0, 3])),
                           proto=draw(st.sampled_from([17, 17, 6])))
    frame = frame[:14] + bytes([0x40 | ihl]) + frame[15:]  # ihl 4: the options advance wraps
    if draw(st.booleans()):  # an 802.1Q tag
        frame = frame[:12] + struct.pack("!HH", 0x8100, draw(st.integers(0, 0xFFFF))) + frame[12:]
    return frame


@st.composite
def damaged(draw, packets) -> bytes:
    data = bytearray(draw(packets))
    how = draw(st.sampled_from(["none", "none", "cut", "flip"]))
    if how == "cut" and data:
        del data[draw(st.integers(0, len(data) - 1)):]
    elif how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


GENERATORS = {"itch": itch_packet(), "int": int_packet(), "dns": dns_packet(),
              "small": st.binary(min_size=3, max_size=12), "wide": st.binary(min_size=12, max_size=60)}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", ["itch", "int", "dns", "small", "wide"])
@SETTINGS
@given(data=st.data())
def test_rows_equal_the_parse_graph_per_packet(name, data):
    packets = data.draw(st.lists(st.one_of(damaged(GENERATORS[name]), st.binary(max_size=80)), max_size=20))
    check_equal(name, packets)


def random_packet(name: str, rng: random.Random) -> bytes:
    """A packet of ``name``'s protocol with random values (a seeded twin of the strategies above)."""
    if name == "itch":
        msgs = []
        for _ in range(rng.randint(0, 14)):
            kind = rng.choice("AAFSD")
            args = (rng.getrandbits(16), rng.getrandbits(64), rng.choice([b"B", b"S"]), rng.getrandbits(32),
                    rng.randbytes(rng.randint(1, 8)), rng.getrandbits(32))
            msgs.append(add_order(*args) if kind == "A" else add_order_mpid(*args) if kind == "F"
                        else system_event() if kind == "S" else order_delete(args[1]))
        return ipv4_udp_frame(mold(msgs, count=rng.choice([None, None, 0, 0xFFFF, 3, 200])), rng.choice([1234, 1234, 99]))
    if name == "int":
        hops = [tuple(rng.getrandbits(b) for b in (32, 16, 16, 32, 8, 24)) for _ in range(rng.randint(0, 8))]
        return int_frame(hops, bitmap=rng.choice([0xF000, 0xF000, 0xF100]), hop_ml=rng.choice([4, 4, 5]),
                         length=rng.choice([None, None, rng.randint(0, 40)]), shim_type=rng.choice([1, 1, 2]))
    if name == "dns":
        payload = (struct.pack("!HHH8sH", rng.getrandbits(16), rng.getrandbits(16), 1, rng.randbytes(8), 1)
                   if rng.random() < 0.5 else struct.pack("!BIc8sI", 79, rng.getrandbits(32), b"B", rng.randbytes(8), 7))
        ihl = rng.choice([5, 5, 6, 4])
        frame = ipv4_udp_frame(payload, rng.choice([53, 4096, 6000, 80]), ihl=max(ihl, 5), frag=rng.choice([0, 0, 1]))
        frame = frame[:14] + bytes([0x40 | ihl]) + frame[15:]
        return frame[:12] + struct.pack("!HH", 0x8100, 7) + frame[12:] if rng.random() < 0.3 else frame
    return rng.randbytes(rng.randint(3, 12) if name == "small" else rng.randint(12, 60))


@pytest.mark.parametrize("name", ["itch", "int", "dns", "small", "wide"])
def test_a_large_fuzzed_batch_reaches_every_status_the_spec_can_give(name):
    """2,000 packets per spec, a quarter cut short and a quarter bit-flipped, in one batch: equal rows,
    and the statuses seen (so the property above is not vacuous)."""
    rng = random.Random(7)
    packets = []
    for _ in range(2000):
        data = bytearray(random_packet(name, rng))
        how = rng.random()
        if how < 0.25 and data:
            del data[rng.randrange(len(data)):]
        elif how < 0.5 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        packets.append(bytes(data))
    seen = check_equal(name, packets)
    expected = {"itch": {"accept", "packet_too_short"}, "int": {"accept", "packet_too_short"},
                "dns": {"accept", "packet_too_short"},
                "small": {"accept", "packet_too_short", "no_match", "stack_out_of_bounds", "parser_loop", "reject"},
                "wide": {"accept", "packet_too_short", "reject"}}[name]
    assert expected <= set(seen), seen


def test_itch_f_messages_are_skipped_as_the_switch_parser_skips_them():
    orders = [add_order(1, 1, b"B", 10, b"AAPL", 100), add_order_mpid(2, 2, b"S", 20, b"MSFT", 200),
              add_order(3, 3, b"B", 30, b"IBM", 300)]
    reader = SpecReader(spec("itch"), ["add_order.stock_locate", "ipv4.dst_addr"])
    got = reader.parse_packets([ipv4_udp_frame(mold(orders), 1234)])
    assert got.columns["add_order.stock_locate"].tolist() == [1, 3]  # the 'F' message is an advance
    assert got.messages.tolist() == [3] and reader.message_bytes == 38


def test_read_bits_at_every_offset_and_width():
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
    buf = np.frombuffer(raw + bytes(16), dtype=np.uint8)
    big = int.from_bytes(raw, "big")
    for width in (1, 3, 8, 13, 16, 32, 57, 58, 63, 64, 72, 80):
        pos = np.arange(0, 64 * 8 - width, dtype=np.int64)
        got = read_bits(buf, pos, width)
        want = [(big >> (64 * 8 - p - width)) & ((1 << width) - 1) for p in pos.tolist()]
        assert [int(v) for v in got] == want, width


def test_two_stacks_cannot_both_be_rows():
    with pytest.raises(P4subError, match="at most one"):
        SpecReader(spec("itch"), ["add_order.price", "mold_msg.msg_type"])
    with pytest.raises(P4subError, match="not a field"):
        SpecReader(spec("itch"), ["add_order.nosuch"])


def test_statuses_are_statuses_of_the_reference():
    assert set(STATUSES) >= {"accept", "reject"}
