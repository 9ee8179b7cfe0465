"""``p4sub gen --spec``: packets of any spec's protocol, which its parser accepts, with the queried headers.

Each packet is checked with the reference parser (:class:`runtime.parse_graph.ParseGraph`), so these
tests ask what that check cannot: that the walks reach every queried header and every select case
that leads somewhere, that string attributes are strings, that ``--rules`` values meet the rules,
and that bad input exits 2.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from compiler.spec.reader import parse_spec, read_spec
from p4sub import main
from runtime.parse_graph import ParseGraph
from runtime.spec_gen import SpecPacketGenerator
from tests.fuzz.mutations import LOOP_HEAD
from tests.runtime.test_parse_graph import SMALL

ROOT = Path(__file__).resolve().parents[2]
SPECS = ["apps/itch/itch.p4", "apps/int/int.p4", "apps/siena/siena.p4", "examples/dns-order.p4"]


@pytest.mark.parametrize("path", SPECS)
def test_every_packet_is_accepted_and_the_queried_headers_are_common(path):
    spec = read_spec(ROOT / path)
    graph = ParseGraph(spec)
    parsed = [graph.parse(p) for p in SpecPacketGenerator(spec, seed=2).packets(400)]
    assert all(p.ok for p in parsed)
    queried = {q.header for q in spec.query_fields.values()}
    carried = Counter(h for p in parsed for h in queried if p.valid(h))
    assert all(carried[h] > 80 for h in queried), carried
    visited = Counter(s for p in parsed for s in set(p.states))
    useful = {s for s in spec.parser_states if s != "start"}
    assert sum(1 for s in useful if visited[s]) >= 0.8 * len(useful), visited


def test_itch_walks_take_add_orders_and_skipped_messages_along_the_unrolled_chain():
    spec = read_spec(ROOT / "apps/itch/itch.p4")
    parsed = [ParseGraph(spec).parse(p) for p in SpecPacketGenerator(spec, seed=5).packets(300)]
    types = Counter(m["msg_type"] for p in parsed for m in p.stacks.get("mold_msg", ()))
    assert types[0x41] > 200 and sum(types.values()) - types[0x41] > 200
    counts = Counter(p.headers["moldudp"]["msg_cnt"] for p in parsed if "moldudp" in p.headers)
    assert len(counts) > 10


def test_siena_strings_are_space_padded_words():
    spec = read_spec(ROOT / "apps/siena/siena.p4")
    for p in SpecPacketGenerator(spec, seed=1).packets(100):
        parsed = ParseGraph(spec).parse(p)
        if parsed.valid("siena"):
            text = parsed.headers["siena"]["s7"].to_bytes(8, "big").decode("ascii")
            assert text.rstrip(" ").isalpha() and text == text.rstrip(" ").ljust(8)


def test_lookahead_selects_and_stacks_of_a_small_spec():
    spec = parse_spec(SMALL, "small.p4")
    parsed = [ParseGraph(spec).parse(p) for p in SpecPacketGenerator(spec, seed=3).packets(200)]
    assert all(p.ok for p in parsed)
    assert {"two_high", "one", "skip"} <= {s for p in parsed for s in p.states}


def test_rules_constants_are_hit(tmp_path):
    rules = tmp_path / "r.sub"
    rules.write_text('dns.qname == "ZZTOP" : fwd(1);\norder.shares > 77777 : fwd(2);\n')
    out = tmp_path / "t.pcap"
    assert main(["gen", "--spec", str(ROOT / "examples/dns-order.p4"), "--rules", str(rules), "--packets", "500",
                 "--seed", "1", "-q", "-o", str(out)]) == 0
    from runtime.spec_trace import read_trace

    cols = read_trace(out, read_spec(ROOT / "examples/dns-order.p4"), ["dns.qname", "order.shares"])
    dns = cols["dns.$valid"].astype(bool)
    assert (cols["dns.qname"][dns] == int.from_bytes(b"ZZTOP   ", "big")).sum() > 0.2 * dns.sum()
    orders = cols["order.$valid"].astype(bool)
    assert ((cols["order.shares"][orders] >= 77776) & (cols["order.shares"][orders] <= 77778)).sum() > 0.2 * orders.sum()


def test_same_seed_same_trace(tmp_path):
    args = ["gen", "--spec", str(ROOT / "apps/int/int.p4"), "--packets", "50", "--seed", "9", "-q", "-o"]
    assert main(args + [str(tmp_path / "a.pcap")]) == 0 and main(args + [str(tmp_path / "b.pcap")]) == 0
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()


@pytest.mark.parametrize("extra, message", [
    ([], "needs -o"),
    (["--packets", "-1", "-o", "x.pcap"], "--packets"),
    (["-o", "x.pcap", "itch", "-o", "y.pcap"], "does not go with gen itch"),
])
def test_bad_input_exits_2(tmp_path, capsys, extra, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["gen", "--spec", str(ROOT / "apps/int/int.p4"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_spec_whose_walks_never_accept_exits_2(tmp_path, capsys):
    spec = tmp_path / "dead.p4"
    spec.write_text("""
header a_t { bit<8> x; }
@query_field(a.x)
struct headers { a_t a; }
parser P(packet_in pkt, out headers hdr) {
    state start { pkt.extract(hdr.a); transition reject; }
}
""")
    assert main(["gen", "--spec", str(spec), "--packets", "3", "-o", str(tmp_path / "x.pcap")]) == 2
    err = capsys.readouterr().err
    assert "dead.p4:6:11: gen --spec: no path of the parser from state 'start' reaches accept" in err
    assert not (tmp_path / "x.pcap").exists()


# -- parse graphs that loop (issue 27) ----------------------------------------------------------------



@pytest.mark.parametrize("states, line", [
    ("    state start { packet.extract(hdr.a); transition start; }\n", 7),
    ("    state start { transition s1; }\n    state s1 { packet.extract(hdr.a); transition s2; }\n"
     "    state s2 { packet.extract(hdr.b); transition s1; }\n", 7),
    ("    state start { transition start; }\n", 7),
    ("    state start { packet.extract(hdr.s.next); transition select(hdr.s.last.x) { 1: start; default: reject; } }\n",
     7),
])
def test_a_parser_that_only_loops_is_refused_at_its_start_state_at_once(tmp_path, capsys, states, line):
    import time
    spec = tmp_path / "loop.p4"
    spec.write_text(LOOP_HEAD + states + "}\n")
    out = tmp_path / "x.pcap"
    out.write_bytes(b"old")
    started = time.monotonic()
    assert main(["gen", "--spec", str(spec), "--packets", "10000", "-o", str(out)]) == 2
    assert time.monotonic() - started < 5
    assert f"loop.p4:{line}:" in capsys.readouterr().err and out.read_bytes() == b"old"


def test_every_walk_of_a_looping_parse_graph_ends_with_accepted_packets_or_an_error():
    """Random parse graphs with self-loops and cycles: 300 packets, or an error, in seconds; every
    packet the reference parser accepts, and none longer than a jumbo frame."""
    import time

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from compiler.base import P4subError
    from runtime.spec_gen import MAX_PACKET_BYTES
    from tests.fuzz.mutations import looping_parser

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(st.data())
    def check(data):
        try:
            spec = parse_spec(data.draw(looping_parser()), "g.p4")
        except P4subError:
            return
        started = time.monotonic()
        try:
            packets = list(SpecPacketGenerator(spec, seed=1).packets(300))
        except P4subError as exc:
            assert str(exc).strip()
            packets = []
        assert time.monotonic() - started < 5
        graph = ParseGraph(spec)
        assert all(graph.parse(p).ok and len(p) <= MAX_PACKET_BYTES + 1 for p in packets)

    check()
