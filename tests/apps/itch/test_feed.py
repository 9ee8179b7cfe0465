"""The ITCH feed generator: a consistent order book, checked by an independent book keeper."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from apps.itch import messages as m
from apps.itch.feed import FeedConfig, generate_messages, write_itch_feed
from apps.itch.symbols import symbol_names
from compiler.base.errors import P4subError


def check_feed(msgs: list, cfg: FeedConfig) -> dict:
    """Replay the feed on a plain dict book and assert every consistency rule; return stats."""
    assert len(msgs) == cfg.messages
    names = symbol_names(cfg.symbols)
    assert [type(x) for x in msgs[:1]] == [m.SystemEvent] and msgs[0].event_code == "O"
    directory = msgs[1 : 1 + cfg.symbols]
    assert [(d.stock_locate, d.stock) for d in directory] == [(i + 1, n) for i, n in enumerate(names)]
    assert [x.event_code for x in msgs[1 + cfg.symbols : 3 + cfg.symbols]] == ["S", "Q"]
    assert [x.event_code for x in msgs[-3:]] == ["M", "E", "C"]
    stock_of = {d.stock_locate: d.stock for d in directory}
    stamps = [x.timestamp for x in msgs]
    assert all(a < b for a, b in zip(stamps, stamps[1:]))
    book: dict[int, list] = {}
    used: set[int] = set()
    matches = []
    max_live = 0
    for x in msgs[3 + cfg.symbols : -3]:
        if isinstance(x, (m.AddOrder, m.AddOrderMPID)):
            assert x.order_ref_number not in used
            assert stock_of[x.stock_locate] == x.stock
            assert 0 < x.price < 1000 * 10_000 and x.shares > 0 and x.buy_sell_indicator in "BS"
            used.add(x.order_ref_number)
            book[x.order_ref_number] = [x.stock_locate, x.shares]
        elif isinstance(x, m.Trade):
            assert stock_of[x.stock_locate] == x.stock and 0 < x.price < 1000 * 10_000
            matches.append(x.match_number)
        elif isinstance(x, m.OrderReplace):
            old = book.pop(x.original_order_ref_number)
            assert old[0] == x.stock_locate
            assert x.new_order_ref_number not in used and x.shares > 0 and 0 < x.price < 1000 * 10_000
            used.add(x.new_order_ref_number)
            book[x.new_order_ref_number] = [x.stock_locate, x.shares]
        else:
            order = book[x.order_ref_number]  # KeyError: an event on an order not resting
            assert order[0] == x.stock_locate
            if isinstance(x, m.OrderDelete):
                del book[x.order_ref_number]
            elif isinstance(x, m.OrderCancel):
                assert 0 < x.cancelled_shares < order[1]
                order[1] -= x.cancelled_shares
            else:
                assert isinstance(x, (m.OrderExecuted, m.OrderExecutedWithPrice))
                assert 0 < x.executed_shares <= order[1]
                matches.append(x.match_number)
                order[1] -= x.executed_shares
                if order[1] == 0:
                    del book[x.order_ref_number]
        max_live = max(max_live, len(book))
    assert all(a < b for a, b in zip(matches, matches[1:]))
    return {"max_live": max_live, "types": Counter(type(x).__name__ for x in msgs)}


def test_feed_is_consistent_and_has_every_kind_of_event() -> None:
    cfg = FeedConfig(messages=30_000, symbols=30, seed=3, book_per_symbol=5)
    stats = check_feed(list(generate_messages(cfg)), cfg)
    kinds = stats["types"]
    for name in ("AddOrder", "AddOrderMPID", "OrderExecuted", "OrderExecutedWithPrice", "OrderCancel", "OrderDelete", "OrderReplace", "Trade"):
        assert kinds[name] > 0, name
    assert stats["max_live"] <= 2 * 5 * 30 + 1  # the book stays bounded


def test_symbol_popularity_follows_zipf() -> None:
    cfg = FeedConfig(messages=40_000, symbols=50, zipf=1.1, seed=5)
    adds = Counter(x.stock_locate for x in generate_messages(cfg) if isinstance(x, (m.AddOrder, m.AddOrderMPID)))
    # P(rank 1) / P(rank 10) = 10**1.1 ≈ 12.6 under the law; allow sampling noise
    assert 8 < adds[1] / adds[10] < 20
    flat = Counter(x.stock_locate for x in generate_messages(FeedConfig(messages=40_000, symbols=50, zipf=0.0, seed=5))
                   if isinstance(x, (m.AddOrder, m.AddOrderMPID)))
    assert 0.7 < flat[1] / flat[10] < 1.4


def test_seed_fixes_the_bytes(tmp_path: Path) -> None:
    cfg = FeedConfig(messages=2000, symbols=10, seed=9)
    write_itch_feed(tmp_path / "a.pcap", cfg)
    write_itch_feed(tmp_path / "b.pcap", cfg)
    write_itch_feed(tmp_path / "c.pcap", FeedConfig(messages=2000, symbols=10, seed=10))
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()
    assert (tmp_path / "a.pcap").read_bytes() != (tmp_path / "c.pcap").read_bytes()


def test_batch_range_does_not_change_the_messages() -> None:
    a = list(generate_messages(FeedConfig(messages=1000, seed=2, batch=(1, 1))))
    b = list(generate_messages(FeedConfig(messages=1000, seed=2, batch=(5, 40))))
    assert a == b


def test_progress_is_reported(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    write_itch_feed(tmp_path / "p.pcap", FeedConfig(messages=5000, symbols=10), progress=lambda done, total: seen.append((done, total)))
    assert seen and all(total == 5000 for _, total in seen) and seen[-1][0] >= 4900


@pytest.mark.parametrize(
    "kwargs",
    [{"messages": 50, "symbols": 100}, {"batch": (3, 2)}, {"batch": (0, 4)}, {"symbols": 0}, {"zipf": -1.0}],
)
def test_bad_configs_are_user_errors(kwargs: dict) -> None:
    with pytest.raises(P4subError):
        list(generate_messages(FeedConfig(**kwargs)))


def test_symbol_names_are_unique_and_fit_eight_bytes() -> None:
    names = symbol_names(20_000)
    assert len(set(names)) == 20_000 and all(1 <= len(n) <= 8 for n in names)
    assert names[:3] == ["AAPL", "MSFT", "AMZN"]
