"""Feed format v2 (the vectorised generator, apps/itch/fastfeed.py) against its documented properties.

Every feed is read back from the pcap by readers that share no code with the generator:
:class:`apps.itch.trace.ItchTraceReader` (per-frame ``struct`` decoding through apps/udp.py, which
checks the IPv4 and UDP checksums in plain Python, and apps/itch/messages.py) and a pcap walk of
this file's own for the record and IPv4 header fields. A book kept here in plain dicts then checks
the order flow: references live, shares never negative, the book bounded, and so on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.itch import messages as m
from apps.itch.binaryfile import read_binary_file
from apps.itch.feed import DEFAULT_MIX, FeedConfig, generate_messages, write_itch_binaryfile, write_itch_feed
from apps.itch.symbols import symbol_names
from apps.itch.trace import ItchTraceReader
from p4sub import main

FLOW = {m.AddOrder: "A", m.AddOrderMPID: "F", m.OrderExecuted: "E", m.OrderExecutedWithPrice: "C",
        m.OrderCancel: "X", m.OrderDelete: "D", m.OrderReplace: "U", m.Trade: "P"}
MAX_PRICE = 1000 * 10_000


def raw_records(path: Path) -> list[tuple[int, int, int, bytes]]:
    """(timestamp ns, captured length, original length, frame) of each record of a nanosecond pcap."""
    raw = path.read_bytes()
    assert struct.unpack_from("<I", raw)[0] == 0xA1B23C4D  # little-endian, nanosecond
    out, pos = [], 24
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        out.append((sec * 1_000_000_000 + frac, incl, orig, raw[pos + 16 : pos + 16 + incl]))
        pos += 16 + incl
    assert pos == len(raw)
    return out


def read_feed(path: Path, cfg: FeedConfig) -> list:
    """The feed's messages as an independent reader sees them, after checking the framing."""
    reader = ItchTraceReader(path)
    packets = list(reader)
    assert reader.damage.total == 0 and reader.skipped.total == 0  # checksums, lengths, MoldUDP64 all good
    records = raw_records(path)
    assert len(records) == len(packets)
    # IPv4 identification counts packets; DF set; pcap lengths equal.
    for i, (_, incl, orig, frame) in enumerate(records):
        assert incl == orig == len(frame)
        ident, flags = struct.unpack_from("!HH", frame, 14 + 4)
        assert ident == i & 0xFFFF and flags == 0x4000
    *data, eos = packets
    assert eos.is_end_of_session and eos.count == 0xFFFF and not eos.messages
    seq = 1
    lo, hi = cfg.batch
    for k, p in enumerate(data):
        assert p.session == cfg.session.ljust(10)
        assert p.sequence == seq and p.count == len(p.messages) >= 1  # contiguous sequence numbers
        assert p.count <= hi and (p.count >= lo or k == len(data) - 1)  # only the last may be short
        # the packet leaves when its last message is stamped (plus the wire latency)
        assert p.timestamp_ns == cfg.day_epoch_s * 1_000_000_000 + cfg.wire_latency_ns + p.messages[-1].timestamp
        seq += p.count
    assert eos.sequence == seq and eos.timestamp_ns == data[-1].timestamp_ns + 1_000
    stamps = [p.timestamp_ns for p in packets]
    assert stamps == sorted(stamps)
    return [x for p in data for x in p.messages]


def check_book(msgs: list, cfg: FeedConfig) -> Counter:
    """The consistency rules of the feed's docstring, on a book kept in dicts; returns the kinds counted."""
    assert len(msgs) == cfg.messages  # exact count, system events included
    names = symbol_names(cfg.symbols)
    assert isinstance(msgs[0], m.SystemEvent) and msgs[0].event_code == "O"
    directory = msgs[1 : 1 + cfg.symbols]
    assert [(d.stock_locate, d.stock, d.round_lot_size) for d in directory] == [(i + 1, n, 100) for i, n in enumerate(names)]
    assert [x.event_code for x in msgs[1 + cfg.symbols : 3 + cfg.symbols]] == ["S", "Q"]
    assert [x.event_code for x in msgs[-3:]] == ["M", "E", "C"]
    stamps = [x.timestamp for x in msgs]
    assert all(a < b for a, b in zip(stamps, stamps[1:]))  # strictly increasing
    assert stamps[-1] < 1 << 48
    stock_of = {i + 1: n for i, n in enumerate(names)}
    book: dict[int, list[int]] = {}  # ref -> [locate, shares, side]
    used: set[int] = set()
    matches: list[int] = []
    bound = 2 * max(1, cfg.book_per_symbol * cfg.symbols) + 1
    kinds: Counter = Counter()
    last_ref = 0
    for x in msgs[3 + cfg.symbols : -3]:
        kinds[FLOW[type(x)]] += 1
        assert x.tracking_number == 0 and x.stock_locate in stock_of
        if isinstance(x, (m.AddOrder, m.AddOrderMPID)):
            assert x.order_ref_number not in used and x.order_ref_number > last_ref  # new references only grow
            last_ref = x.order_ref_number
            assert x.stock == stock_of[x.stock_locate] and x.buy_sell_indicator in ("B", "S")
            assert 0 < x.price < MAX_PRICE and x.price % 100 == 0 and x.shares > 0
            if isinstance(x, m.AddOrderMPID):
                assert x.attribution in ("GSCO", "MSCO", "UBSS", "CDRG", "VIRT", "JPMS", "NITE", "SUSQ")
            used.add(x.order_ref_number)
            book[x.order_ref_number] = [x.stock_locate, x.shares, x.buy_sell_indicator]
        elif isinstance(x, m.Trade):
            assert x.order_ref_number == 0 and x.buy_sell_indicator == "B" and x.stock == stock_of[x.stock_locate]
            assert 0 < x.price < MAX_PRICE and x.shares > 0
            matches.append(x.match_number)
        elif isinstance(x, m.OrderReplace):
            old = book.pop(x.original_order_ref_number)  # KeyError: not a resting order
            assert old[0] == x.stock_locate
            assert x.new_order_ref_number not in used and x.new_order_ref_number > last_ref
            last_ref = x.new_order_ref_number
            assert x.shares > 0 and 0 < x.price < MAX_PRICE
            used.add(x.new_order_ref_number)
            book[x.new_order_ref_number] = [x.stock_locate, x.shares, old[2]]
        else:
            order = book[x.order_ref_number]  # KeyError: an event on an order not resting
            assert order[0] == x.stock_locate
            if isinstance(x, m.OrderDelete):
                del book[x.order_ref_number]
            elif isinstance(x, m.OrderCancel):
                assert 0 < x.cancelled_shares < order[1]  # a cancel leaves shares
                order[1] -= x.cancelled_shares
                assert order[1] > 0
            else:
                assert 0 < x.executed_shares <= order[1]
                matches.append(x.match_number)
                if isinstance(x, m.OrderExecutedWithPrice):
                    assert x.printable in ("Y", "N") and 0 < x.execution_price < MAX_PRICE
                order[1] -= x.executed_shares
                assert order[1] >= 0  # shares never go negative
                if order[1] == 0:
                    del book[x.order_ref_number]
        assert len(book) <= bound  # the book stays bounded
    assert matches == list(range(1, len(matches) + 1))  # match numbers 1, 2, 3, ...
    return kinds


configs = st.builds(
    lambda symbols, extra, zipf, lo, width, seed, per_symbol: FeedConfig(
        messages=symbols + 6 + extra, symbols=symbols, zipf=zipf, batch=(lo, lo + width), seed=seed,
        book_per_symbol=per_symbol),
    symbols=st.integers(1, 40),
    extra=st.integers(0, 6000),
    zipf=st.sampled_from([0.0, 0.5, 1.1, 2.0]),
    lo=st.integers(1, 12),
    width=st.integers(0, 20),
    seed=st.integers(-(2**40), 2**40),
    per_symbol=st.integers(1, 60),
)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(configs)
def test_feed_read_back_independently_keeps_every_invariant(cfg: FeedConfig) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "feed.pcap"
        summary = write_itch_feed(path, cfg)
        msgs = read_feed(path, cfg)
        assert (summary.messages, summary.last_sequence, summary.bytes) == (cfg.messages, cfg.messages, path.stat().st_size)
    check_book(msgs, cfg)
    assert msgs == list(generate_messages(cfg))  # the object API gives what the pcap holds


@SETTINGS
@given(configs, st.integers(1, 2**20))
def test_same_seed_same_bytes_other_seed_other_bytes(cfg: FeedConfig, delta: int) -> None:
    other = dataclasses.replace(cfg, seed=cfg.seed + delta)
    with tempfile.TemporaryDirectory() as d:
        a, b, c = (Path(d) / n for n in ("a.pcap", "b.pcap", "c.pcap"))
        write_itch_feed(a, cfg)
        write_itch_feed(b, cfg)
        write_itch_feed(c, other)
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()


@SETTINGS
@given(configs)
def test_binaryfile_holds_the_same_messages(cfg: FeedConfig) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "day.NASDAQ_ITCH50"
        assert write_itch_binaryfile(path, cfg) == cfg.messages
        got, damage = read_binary_file(path)
    assert damage.total == 0 and got == list(generate_messages(cfg))


def test_mix_within_tolerance_once_the_book_is_full() -> None:
    """Over a steady book (the second half of 400k messages) each kind's share of the order flow is
    within 20 % (plus 0.2 points) of the nominal mix: steering the book to its target turns some
    events on resting orders into deletes (v1 does the same, per message: U 7.1 %, E 2.3 % there)."""
    cfg = FeedConfig(messages=400_000, seed=11)
    flow = [FLOW[type(x)] for x in generate_messages(cfg) if type(x) in FLOW]
    seen = Counter(flow[len(flow) // 2 :])
    total = sum(DEFAULT_MIX.values())
    for kind, weight in DEFAULT_MIX.items():
        share, nominal = seen[kind] / sum(seen.values()), weight / total
        assert abs(share - nominal) <= 0.2 * nominal + 0.002, (kind, share, nominal)


def test_many_symbols_and_a_large_book() -> None:
    """Past 65,536 symbols the symbol keys are no longer 16-bit; blocks are then the largest (8,192)."""
    cfg = FeedConfig(messages=70_000 + 6 + 30_000, symbols=70_000, seed=4)
    check_book(list(generate_messages(cfg)), cfg)


def test_a_book_smaller_than_a_block_stays_bounded(tmp_path: Path) -> None:
    cfg = FeedConfig(messages=20_000, symbols=1, book_per_symbol=1, seed=2)
    write_itch_feed(tmp_path / "f.pcap", cfg)
    check_book(read_feed(tmp_path / "f.pcap", cfg), cfg)


# v1 stays reachable and unchanged: these are the bytes p4sub wrote before v2 (commit c3dcab9).
V1_PINS = {
    (3000, 20, 7): "73d72a3c505aed12",
    (20000, 40, 3): "292644c9302eb392",  # the replay tests' feed before v2
    (5000, 100, 0): "902399efa511d061",
}


@pytest.mark.parametrize("messages,symbols,seed", list(V1_PINS))
def test_v1_is_the_generator_before_v2(tmp_path: Path, messages: int, symbols: int, seed: int) -> None:
    cfg = FeedConfig(messages=messages, symbols=symbols, seed=seed, generator="v1")
    write_itch_feed(tmp_path / "v1.pcap", cfg)
    assert hashlib.sha256((tmp_path / "v1.pcap").read_bytes()).hexdigest()[:16] == V1_PINS[(messages, symbols, seed)]
    assert main(["gen", "itch", "--messages", str(messages), "--symbols", str(symbols), "--seed", str(seed),
                 "--generator", "v1", "-q", "-o", str(tmp_path / "cli.pcap")]) == 0
    assert (tmp_path / "cli.pcap").read_bytes() == (tmp_path / "v1.pcap").read_bytes()
    check_book(read_feed(tmp_path / "v1.pcap", cfg), cfg)


def test_unknown_generator_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    from compiler.base.errors import P4subError

    with pytest.raises(P4subError, match="v3"):
        FeedConfig(generator="v3").validate()
    with pytest.raises(SystemExit):
        main(["gen", "itch", "--generator", "v3", "-o", "x.pcap"])
    assert "invalid choice" in capsys.readouterr().err
