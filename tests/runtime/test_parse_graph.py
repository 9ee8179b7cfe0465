"""runtime.parse_graph: the shipped specs' parse graphs on hand-built ITCH and INT packets.

Packets are built here with ``struct`` (and scapy for one cross-check), never with p4sub code, so
the expected field values are an independent oracle for the bit slicing under test.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.base.errors import SpecError
from compiler.spec.model import Advance, Extract, ParserState, SelectCase
from compiler.spec.reader import parse_spec, read_spec
from runtime.parse_graph import (
    ACCEPT,
    NO_MATCH,
    PACKET_TOO_SHORT,
    PARSER_LOOP,
    REJECT,
    STACK_OUT_OF_BOUNDS,
    STATUSES,
    ParseGraph,
    deparse,
    parse_packet,
)

ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=None)
def graph(name: str) -> ParseGraph:
    return ParseGraph(read_spec(ROOT / "apps" / name / f"{name}.p4"))


# ---------------------------------------------------------------------------------------------
# packet builders (the oracle)

MAC_DST, MAC_SRC = bytes.fromhex("01005e360c6f"), bytes.fromhex("020000000001")


def ipv4_udp_frame(payload: bytes, dport: int, *, ihl: int = 5, frag: int = 0, proto: int = 17,
                   ether_type: int = 0x0800) -> bytes:
    udp = struct.pack("!HHHH", 50000, dport, 8 + len(payload), 0xBEEF) + payload
    options = bytes(4 * (ihl - 5))
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0x2E, 20 + len(options) + len(udp), 0x1234, frag, 64, proto,
                     0xABCD, bytes([10, 0, 0, 1]), bytes([233, 54, 12, 111])) + options
    return MAC_DST + MAC_SRC + struct.pack("!H", ether_type) + ip + udp


def add_order(locate: int, ref: int, side: bytes, shares: int, stock: bytes, price: int, ts: int = 5,
              tracking: int = 0) -> bytes:
    return b"A" + struct.pack("!HH", locate, tracking) + ts.to_bytes(6, "big") + \
        struct.pack("!QcI8sI", ref, side, shares, stock.ljust(8), price)


def system_event(code: bytes = b"O") -> bytes:
    return b"S" + struct.pack("!HH", 0, 0) + (11).to_bytes(6, "big") + code


def order_delete(ref: int) -> bytes:
    return b"D" + struct.pack("!HH", 1, 2) + (12).to_bytes(6, "big") + struct.pack("!Q", ref)


def order_cancel(ref: int, shares: int) -> bytes:
    return b"X" + struct.pack("!HH", 1, 2) + (13).to_bytes(6, "big") + struct.pack("!QI", ref, shares)


def mold(messages: list[bytes], seq: int = 42, session: bytes = b"0000000001", count: int | None = None) -> bytes:
    blocks = b"".join(struct.pack("!H", len(m)) + m for m in messages)
    return session + struct.pack("!QH", seq, len(messages) if count is None else count) + blocks


# ---------------------------------------------------------------------------------------------
# ITCH


# ecosystem.md §1.4: an Add Order in MoldUDP64 (session 0000000001, seq 42, count 1), the UDP payload
VECTOR = bytes.fromhex("30303030303030303031000000000000002a0001002441000700001f1aced9f07b00000000deadbeef42"
                       "00000064474f4f474c2020200012d644")


def test_itch_test_vector_parses_to_the_published_values():
    frame = ipv4_udp_frame(VECTOR, 1234)
    parsed = graph("itch").parse(frame)
    assert parsed.status == ACCEPT and parsed.message == ""
    assert parsed.states == ("start", "parse_ipv4", "parse_udp", "parse_moldudp", "msgs_1", "add_order_1")
    assert parsed.headers["moldudp"].fields == {"session": int.from_bytes(b"0000000001", "big"), "seq": 42,
                                                "msg_cnt": 1}
    (block,) = parsed.stacks["mold_msg"]
    assert block.fields == {"msg_len": 36, "msg_type": ord("A")}
    (order,) = parsed.stacks["add_order"]
    assert order.fields == {
        "stock_locate": 7, "tracking_number": 0, "timestamp": 34_200_000_000_123, "order_ref_number": 0xDEADBEEF,
        "buy_sell_indicator": ord("B"), "shares": 100, "stock": int.from_bytes(b"GOOGL   ", "big"),
        "price": 1_234_500,
    }
    assert parsed.payload_offset == len(frame) and parsed.payload == b""
    assert parsed.value("add_order[0].price") == 1_234_500 == parsed.value("add_order.last.price")
    assert parsed.value("ipv4.dst_addr") == 0xE9360C6F and parsed.value("add_order[1].price") is None


def test_itch_link_and_network_headers_agree_with_scapy():
    scapy = pytest.importorskip("scapy.all")
    pkt = scapy.Ether(dst="01:00:5e:36:0c:6f", src="02:00:00:00:00:01") / \
        scapy.IP(src="10.0.0.1", dst="233.54.12.111", tos=0x2E, id=7, ttl=17) / \
        scapy.UDP(sport=40000, dport=1234) / scapy.Raw(VECTOR)
    frame = bytes(pkt)
    again = scapy.Ether(frame)
    parsed = graph("itch").parse(frame)
    assert parsed.ok
    eth, ip, udp = (parsed.headers[n].fields for n in ("ethernet", "ipv4", "udp"))
    assert eth == {"dst_addr": 0x01005E360C6F, "src_addr": 0x020000000001, "ether_type": 0x0800}
    assert ip == {"version": 4, "ihl": 5, "diffserv": 0x2E, "total_len": again[scapy.IP].len, "identification": 7,
                  "flags": int(again[scapy.IP].flags), "frag_offset": 0, "ttl": 17, "protocol": 17,
                  "hdr_checksum": again[scapy.IP].chksum, "src_addr": 0x0A000001, "dst_addr": 0xE9360C6F}
    assert udp == {"src_port": 40000, "dst_port": 1234, "length": 8 + len(VECTOR), "checksum": again[scapy.UDP].chksum}
    assert deparse(read_spec(ROOT / "apps/itch/itch.p4"), parsed) == frame


def test_itch_mixed_message_types_fill_both_stacks_and_skip_the_rest():
    orders = [add_order(1, 0x1111, b"B", 100, b"AAPL", 1_500_000),
              add_order(2, 0x2222, b"S", 20_000, b"MSFT", 3_000_100),
              add_order(3, 0x3333, b"B", 7, b"GOOGL", 1)]
    messages = [orders[0], system_event(), orders[1], order_delete(0x1111), order_cancel(0x2222, 5), orders[2]]
    frame = ipv4_udp_frame(mold(messages), 1234)
    parsed = graph("itch").parse(frame)
    assert parsed.ok
    assert [(m["msg_len"], m["msg_type"]) for m in parsed.stacks["mold_msg"]] == [
        (len(m), m[0]) for m in messages]
    got = [(o["stock_locate"], o["order_ref_number"], o["buy_sell_indicator"], o["shares"], o["stock"], o["price"])
           for o in parsed.stacks["add_order"]]
    assert got == [(1, 0x1111, ord("B"), 100, int.from_bytes(b"AAPL    ", "big"), 1_500_000),
                   (2, 0x2222, ord("S"), 20_000, int.from_bytes(b"MSFT    ", "big"), 3_000_100),
                   (3, 0x3333, ord("B"), 7, int.from_bytes(b"GOOGL   ", "big"), 1)]
    assert parsed.skipped_bits == 8 * ((12 - 1) + (19 - 1) + (23 - 1))
    assert parsed.payload_offset == len(frame)
    assert parsed.states[4:] == ("msgs_6", "add_order_6", "msgs_5", "skip_5", "msgs_4", "add_order_4", "msgs_3",
                                 "skip_3", "msgs_2", "skip_2", "msgs_1", "add_order_1")
    # extraction order (block, order, block, ...) is not struct order, and skipped bodies are gone
    assert not graph("itch").round_trips(parsed)
    assert len(graph("itch").deparse(parsed)) == len(frame) - parsed.skipped_bits // 8


@pytest.mark.parametrize("count", [0, 0xFFFF])
def test_itch_heartbeat_and_end_of_session_have_no_blocks(count):
    frame = ipv4_udp_frame(mold([], count=count) + b"tail", 1234)
    parsed = graph("itch").parse(frame)
    assert parsed.ok and parsed.states[-1] == "parse_moldudp"
    assert "mold_msg" not in parsed.stacks and parsed.payload == b"tail"


def test_itch_more_blocks_than_the_stack_parses_the_first_twelve():
    messages = [add_order(i, i, b"B", i, b"X", i) for i in range(14)]
    frame = ipv4_udp_frame(mold(messages), 1234)
    parsed = graph("itch").parse(frame)
    assert parsed.ok
    assert [o["stock_locate"] for o in parsed.stacks["add_order"]] == list(range(12))
    twelve_blocks = 14 + 20 + 8 + 20 + 12 * 38
    assert parsed.payload_offset == twelve_blocks
    assert parsed.payload == b"".join(struct.pack("!H", 36) + m for m in messages[12:])


@pytest.mark.parametrize("frame, last_header", [
    (ipv4_udp_frame(VECTOR, 1235), "udp"),
    (ipv4_udp_frame(VECTOR, 1234, ihl=6), "ipv4"),
    (ipv4_udp_frame(VECTOR, 1234, frag=0x2001), "ipv4"),
    (ipv4_udp_frame(VECTOR, 1234, proto=6), "ipv4"),
    (ipv4_udp_frame(VECTOR, 1234, ether_type=0x86DD), "ethernet"),
])
def test_itch_other_traffic_is_accepted_early(frame, last_header):
    parsed = graph("itch").parse(frame)
    assert parsed.ok and parsed.extracted[-1].name == last_header
    assert graph("itch").round_trips(parsed) and graph("itch").deparse(parsed) == frame


def test_every_truncation_of_an_itch_packet_is_a_status_keeping_the_headers_before_it():
    frame = ipv4_udp_frame(mold([add_order(1, 2, b"B", 3, b"IBM", 4), system_event(), order_delete(9)]), 1234)
    full = graph("itch").parse(frame)
    assert full.ok
    for size in range(len(frame)):
        cut = graph("itch").parse(frame[:size])
        assert cut.status == PACKET_TOO_SHORT, size
        assert "past the end" in cut.message or "needs" in cut.message
        assert [h.fields for h in cut.extracted] == [h.fields for h in full.extracted[: len(cut.extracted)]]
        assert cut.payload_bit_offset <= size * 8


# ---------------------------------------------------------------------------------------------
# INT

INT_BITMAP = 0xF000


def int_frame(hops: list[tuple[int, int, int, int, int, int]], *, bitmap: int = INT_BITMAP, hop_ml: int = 4,
              length: int | None = None, shim_type: int = 1, port: int = 0x1234, tail: bytes = b"") -> bytes:
    words = 3 + hop_ml * len(hops) if length is None else length
    shim = struct.pack("!BBH", shim_type << 4, words, 0x04D2)
    md = struct.pack("!IHHHH", (2 << 28) | (0 << 25) | (hop_ml << 8) | (8 - len(hops)), bitmap, 0, 0, 0)
    stack = b"".join(struct.pack("!IHHIB", sw, ing, eg, lat, qid) + occ.to_bytes(3, "big")
                     for sw, ing, eg, lat, qid, occ in hops)
    return ipv4_udp_frame(shim + md + stack + tail, port)


HOPS = [(3, 1, 2, 250, 0, 17), (2, 5, 6, 40, 7, 0xABCDEF), (1, 9, 10, 1_000_000, 255, 0)]


@pytest.mark.parametrize("n", range(9))
def test_int_hops_parse_to_their_values(n):
    hops = [(sw, sw + 1, sw + 2, sw * 1000, sw % 256, sw * 3) for sw in range(100, 100 + n)]
    frame = int_frame(hops, tail=b"inner")
    parsed = graph("int").parse(frame)
    assert parsed.ok
    shim, md = parsed.headers["int_shim"].fields, parsed.headers["int_md"].fields
    assert shim == {"int_type": 1, "npt": 0, "res": 0, "len": 3 + 4 * n, "udp_ip_dscp": 0x04D2}
    assert md == {"ver": 2, "d": 0, "e": 0, "m": 0, "reserved": 0, "hop_ml": 4, "remaining_hop_cnt": 8 - n,
                  "instruction_bitmap": INT_BITMAP, "domain_id": 0, "ds_instruction": 0, "ds_flags": 0}
    got = [tuple(h.fields.values()) for h in parsed.stacks.get("int_hop", ())]
    assert got == hops
    assert parsed.payload == b"inner"
    assert graph("int").round_trips(parsed) and graph("int").deparse(parsed) == frame


def test_int_fields_of_the_stack_in_order():
    parsed = graph("int").parse(int_frame(HOPS))
    assert [h["switch_id"] for h in parsed.stacks["int_hop"]] == [3, 2, 1]
    assert parsed.value("int_hop[1].queue_occupancy") == 0xABCDEF
    assert parsed.value("int_hop.last.hop_latency") == 1_000_000


@pytest.mark.parametrize("kwargs", [
    {"bitmap": 0xF100}, {"hop_ml": 5}, {"length": 5}, {"length": 3 + 4 * 9},
])
def test_int_with_another_instruction_set_or_length_keeps_the_stack_empty(kwargs):
    parsed = graph("int").parse(int_frame(HOPS, **kwargs))
    assert parsed.ok and "int_md" in parsed.headers and "int_hop" not in parsed.stacks


def test_int_other_shim_type_and_port():
    assert graph("int").parse(int_frame(HOPS, shim_type=3)).extracted[-1].name == "int_shim"
    assert graph("int").parse(int_frame(HOPS, port=1234)).extracted[-1].name == "udp"


def test_truncated_int_stack_is_a_status():
    frame = int_frame(HOPS)
    parsed = graph("int").parse(frame[:-5])
    assert parsed.status == PACKET_TOO_SHORT
    assert [h["switch_id"] for h in parsed.stacks["int_hop"]] == [3, 2]


# ---------------------------------------------------------------------------------------------
# semantics on small specs

SMALL = """
header a_t { bit<4> x; bit<12> y; bit<8> z; }
header n_t { bit<3> p; bit<7> q; bit<6> r; }
struct headers { a_t a; n_t[2] n; }
parser P(packet_in pkt, out headers hdr) {
    state start {
        pkt.extract(hdr.a);
        transition select(hdr.a.x, pkt.lookahead<bit<4>>()) {
            (1, _): one;
            (2, 0x8 &&& 0x8): two_high;
            (2, _): two_low;
            (3, _): next_again;
            (4, _): peek_empty;
            (5, _): spin;
            (6, _): reject;
            (7, _): skip;
        }
    }
    state one { pkt.extract(hdr.n.next); transition accept; }
    state two_high { pkt.extract(hdr.n.next); pkt.extract(hdr.n.next); transition accept; }
    state two_low { transition accept; }
    state next_again { pkt.extract(hdr.n.next); transition next_again; }
    state peek_empty { transition select(hdr.n.last.p) { default: accept; } }
    state spin { transition spin2; }
    state spin2 { transition spin; }
    state skip { pkt.advance((bit<32>)hdr.a.z * 4); pkt.extract(hdr.n.next); transition accept; }
}
"""


@lru_cache(maxsize=1)
def small_spec():
    return parse_spec(SMALL, "small.p4")


@pytest.fixture(scope="module")
def small():
    return ParseGraph(small_spec())


def a_bytes(x: int, y: int, z: int) -> bytes:
    return ((x << 20) | (y << 8) | z).to_bytes(3, "big")


def n_bytes(p: int, q: int, r: int) -> bytes:
    return ((p << 13) | (q << 6) | r).to_bytes(2, "big")


def test_fields_that_cross_byte_boundaries_are_exact(small):
    parsed = small.parse(a_bytes(1, 0xABC, 0xDE) + n_bytes(5, 0x55, 0x2A) + b"\x99")
    assert parsed.ok and parsed.headers["a"].fields == {"x": 1, "y": 0xABC, "z": 0xDE}
    assert parsed.stacks["n"][0].fields == {"p": 5, "q": 0x55, "r": 0x2A}
    assert parsed.payload == b"\x99"


def test_lookahead_with_mask_selects_without_consuming(small):
    high = small.parse(a_bytes(2, 0, 0) + n_bytes(4, 1, 2) + n_bytes(7, 3, 4))
    assert high.states == ("start", "two_high") and len(high.stacks["n"]) == 2
    low = small.parse(a_bytes(2, 0, 0) + n_bytes(3, 1, 2))
    assert low.states == ("start", "two_low") and low.payload == n_bytes(3, 1, 2)


def test_statuses_for_no_match_stack_overflow_empty_last_loop_and_reject(small):
    assert small.parse(a_bytes(9, 0, 0)).status == PACKET_TOO_SHORT  # the lookahead key runs past the end
    assert small.parse(a_bytes(9, 0, 0) + b"\x00").status == NO_MATCH
    overflow = small.parse(a_bytes(3, 0, 0) + n_bytes(1, 1, 1) * 3)
    assert overflow.status == STACK_OUT_OF_BOUNDS and len(overflow.stacks["n"]) == 2
    assert small.parse(a_bytes(4, 0, 0) + b"\x00").status == STACK_OUT_OF_BOUNDS
    loop = small.parse(a_bytes(5, 0, 0) + b"\x00")
    assert loop.status == PARSER_LOOP and loop.states == ("start", "spin", "spin2")
    rejected = small.parse(a_bytes(6, 0, 0) + b"rest")
    assert rejected.status == REJECT and rejected.payload == b"rest"
    assert small.parse(b"\x10").status == PACKET_TOO_SHORT


def test_advance_by_an_expression_skips_bits(small):
    parsed = small.parse(a_bytes(7, 0, 4) + b"\xff\xff" + n_bytes(1, 2, 3))
    assert parsed.ok and parsed.skipped_bits == 16 and parsed.stacks["n"][0].fields == {"p": 1, "q": 2, "r": 3}
    assert small.parse(a_bytes(7, 0, 200) + b"\x00" * 10).status == PACKET_TOO_SHORT


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 15), st.integers(0, 4095), st.integers(0, 255),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 127), st.integers(0, 63)), min_size=1, max_size=2),
       st.binary(max_size=8))
def test_deparse_of_parse_is_the_packet_for_struct_order_parses(x, y, z, ns, tail):
    spec = small_spec()
    frame = a_bytes(1 if len(ns) == 1 else 2, y, z) + b"".join(n_bytes(*n) for n in ns) + tail
    if len(ns) == 2:  # two_high needs the lookahead's top bit set
        frame = a_bytes(2, y, z) + n_bytes(ns[0][0] | 4, *ns[0][1:]) + n_bytes(*ns[1]) + tail
    parsed = parse_packet(spec, frame)
    assert parsed.ok and ParseGraph(spec).round_trips(parsed)
    assert deparse(spec, parsed) == frame


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.sampled_from(["itch", "int"]))
def test_random_bytes_end_in_a_status_and_round_trip_when_they_should(data, name):
    g = graph(name)
    parsed = g.parse(data)
    assert parsed.status in STATUSES
    assert parsed.payload_bit_offset <= len(data) * 8
    if g.round_trips(parsed):
        assert g.deparse(parsed) == data


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 0xFFFF), st.integers(0, 2**64 - 1), st.sampled_from([b"B", b"S"]), st.integers(0, 2**32 - 1),
       st.binary(min_size=8, max_size=8), st.integers(0, 2**32 - 1), st.integers(0, 2**48 - 1))
def test_any_single_add_order_round_trips_and_reads_back(locate, ref, side, shares, stock, price, ts):
    frame = ipv4_udp_frame(mold([add_order(locate, ref, side, shares, stock, price, ts)]), 1234)
    parsed = graph("itch").parse(frame)
    assert parsed.ok and graph("itch").deparse(parsed) == frame
    order = parsed.stacks["add_order"][0]
    assert (order["stock_locate"], order["order_ref_number"], order["buy_sell_indicator"], order["shares"],
            order["stock"], order["price"], order["timestamp"]) == (
        locate, ref, side[0], shares, int.from_bytes(stock, "big"), price, ts)


# ---------------------------------------------------------------------------------------------
# hand-built specs are checked when the graph is built


def test_graph_refuses_a_spec_with_a_dangling_transition():
    spec = parse_spec(SMALL, "small.p4")
    broken = dict(spec.parser_states)
    broken["one"] = ParserState("one", (Extract("n", True),), (), (SelectCase((), "nowhere", True),))
    with pytest.raises(SpecError, match="undefined state 'nowhere'"):
        ParseGraph(type(spec)(**{**spec.__dict__, "parser_states": broken}))


def test_graph_refuses_extract_without_next_on_a_stack():
    spec = parse_spec(SMALL, "small.p4")
    broken = dict(spec.parser_states)
    broken["one"] = ParserState("one", (Extract("n", False), Advance(8)), (), (SelectCase((), "accept", True),))
    with pytest.raises(SpecError, match="does not fit its declaration"):
        ParseGraph(type(spec)(**{**spec.__dict__, "parser_states": broken}))


def test_int_packets_from_the_int_writer_parse_with_the_int_spec():
    """apps/int's encoder and apps/int/int.p4 describe the same bytes (a contract between the two)."""
    from apps.int.headers import DEFAULT_INT_PORT, IntMd, encode_int_md, new_header
    from apps.int.metadata import P4SUB_INSTRUCTIONS, HopMetadata

    hops = tuple(HopMetadata(switch_id=sw, ingress_port_id=ing, egress_port_id=eg, hop_latency=lat, queue_id=qid,
                             queue_occupancy=occ) for sw, ing, eg, lat, qid, occ in HOPS)
    md = IntMd(new_header(P4SUB_INSTRUCTIONS, len(hops)), hops)
    parsed = graph("int").parse(ipv4_udp_frame(encode_int_md(md), DEFAULT_INT_PORT))
    assert parsed.ok
    assert [tuple(h.fields.values()) for h in parsed.stacks["int_hop"]] == HOPS
    assert parsed.headers["int_md"]["remaining_hop_cnt"] == 8 - len(HOPS)


def test_itch_frames_from_the_trace_writer_parse_with_the_itch_spec():
    """apps/itch's encoders and apps/itch/itch.p4 describe the same bytes (a contract between the two)."""
    from apps.itch.messages import AddOrder, encode_message
    from apps.itch.moldudp import encode_mold
    from apps.itch.trace import DEFAULT_ENDPOINTS
    from apps.udp import build_udp_frame

    order = AddOrder(7, 0, 34_200_000_000_123, 0xDEADBEEF, "B", 100, "GOOGL", 1_234_500)
    blocks = [encode_message(order), system_event(), encode_message(order)]
    frame = build_udp_frame(encode_mold("0000000001", 42, blocks), DEFAULT_ENDPOINTS)
    parsed = graph("itch").parse(frame)
    assert parsed.ok and parsed.headers["ipv4"]["flags"] == 0b010
    assert [o["price"] for o in parsed.stacks["add_order"]] == [1_234_500, 1_234_500]
    assert parsed.stacks["add_order"][0]["stock"] == int.from_bytes(b"GOOGL   ", "big")
    assert [m["msg_type"] for m in parsed.stacks["mold_msg"]] == [ord("A"), ord("S"), ord("A")]
