"""A synthetic but self-consistent TotalView-ITCH 5.0 trading day.

Public ITCH days are gigabytes and not reachable from CI, so replay and benchmarks use this
generator. It simulates an order book per symbol rather than drawing messages independently,
because subscriptions and the switch state they imply (``stock_locate``, order references) only
mean something on a consistent feed:

* the day opens with system events 'O' and 'S', one stock directory 'R' per symbol (which fixes
  ``stock_locate``), then 'Q' (market open); it closes with 'M', 'E' and 'C';
* in between: adds ('A', and 'F' with an MPID), executions ('E', 'C'), partial cancels ('X'),
  deletes ('D'), replaces ('U') and non-displayed trades ('P'). Only resting orders are executed,
  cancelled, replaced or deleted; shares never go negative; a replace retires the old reference
  and opens a new, never-used one; match numbers increase;
* symbol popularity follows a Zipf law (rank 1 most active); each symbol's price random-walks in
  cents inside (0, 1000) dollars and orders rest near it;
* timestamps increase strictly (exponential gaps spread over market hours); messages are packed
  into MoldUDP64 packets of a uniformly drawn size with increasing sequence numbers, and the
  session ends with an End-of-Session packet.

Memory stays bounded: the book is steered to about ``book_per_symbol`` resting orders per
symbol, whatever the feed length, and the file is written as it is generated.

Two format versions, both fixed byte for byte by the seed (``FeedConfig.generator``, ``p4sub gen
itch --generator``):

* ``v2`` (the default): the book in numpy blocks, encoded in bulk, over a million messages a
  second; its exact rules are in :mod:`apps.itch.fastfeed`.
* ``v1``: everything drawn from one ``random.Random(seed)``, one message at a time (about 70k
  messages a second); the feeds of p4sub before version 2 are this one's.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import math
import os
import random
from dataclasses import dataclass
from typing import Callable, Iterator

from apps.itch import fastfeed
from apps.itch.binaryfile import write_binary_file
from apps.itch.messages import (
    AddOrder,
    AddOrderMPID,
    Message,
    OrderCancel,
    OrderDelete,
    OrderExecuted,
    OrderExecutedWithPrice,
    OrderReplace,
    StockDirectory,
    SystemEvent,
    Trade,
    encode_message,
)
from apps.itch.symbols import symbol_names
from apps.itch.trace import DEFAULT_ENDPOINTS, DEFAULT_SESSION, ItchTraceWriter
from apps.pcap import TraceError
from apps.udp import UdpEndpoints
from compiler.base import P4subError

NS_PER_HOUR = 3_600_000_000_000
TICK = 100  # one cent in Price(4) units
MAX_PRICE = 999_99 * TICK  # $999.99
MPIDS = ("GSCO", "MSCO", "UBSS", "CDRG", "VIRT", "JPMS", "NITE", "SUSQ")

# Relative frequencies of order-flow events, roughly those of a real Nasdaq day.
DEFAULT_MIX = {"A": 430, "F": 20, "E": 25, "C": 2, "X": 15, "D": 420, "U": 80, "P": 8}

#: Feed format versions: v2 is the vectorised generator (apps.itch.fastfeed), v1 the original one.
GENERATORS = ("v2", "v1")

# 2019-01-30 00:00:00 UTC: pcap timestamps are this day plus the ITCH nanoseconds since midnight.
DEFAULT_DAY_EPOCH_S = 1_548_806_400


@dataclass(frozen=True)
class FeedConfig:
    """What to generate. ``messages`` counts every ITCH message, system events included."""

    messages: int = 100_000
    symbols: int = 100
    zipf: float = 1.1
    batch: tuple[int, int] = (1, 12)
    seed: int = 0
    mix: tuple[tuple[str, int], ...] = tuple(DEFAULT_MIX.items())
    book_per_symbol: int = 40
    session: str = DEFAULT_SESSION
    day_epoch_s: int = DEFAULT_DAY_EPOCH_S
    wire_latency_ns: int = 2_000
    generator: str = "v2"

    def validate(self) -> None:
        lo, hi = self.batch
        if self.generator not in GENERATORS:
            raise P4subError(f"generator {self.generator!r}: known format versions are {', '.join(GENERATORS)}")
        if self.symbols < 1:
            raise P4subError("--symbols must be at least 1")
        if not 1 <= lo <= hi <= 1000:
            raise P4subError(f"--batch range must satisfy 1 <= lo <= hi <= 1000, got {lo}-{hi}")
        if not 0 <= self.zipf < math.inf:  # NaN fails it too
            raise P4subError(f"--zipf {self.zipf}: the exponent must be a finite number >= 0 (0 = uniform)")
        minimum = self.symbols + 6
        if self.messages < minimum:
            raise P4subError(f"--messages must be at least {minimum} (6 system events + one directory message per symbol)")
        if not (self.session.isascii() and 1 <= len(self.session) <= 10):
            raise P4subError(f"MoldUDP64 session must be 1-10 ASCII characters, got {self.session!r}")
        if any(k not in DEFAULT_MIX or w < 0 for k, w in self.mix) or sum(w for _, w in self.mix) <= 0:
            raise P4subError("order-flow mix must give non-negative weights to A F E C X D U P")


class _Book:
    """Resting orders with O(1) add, remove and uniform random pick (swap-remove list)."""

    def __init__(self) -> None:
        self.refs: list[int] = []
        self.where: dict[int, int] = {}
        self.orders: dict[int, list[int]] = {}  # ref -> [symbol, side (0 buy / 1 sell), shares, price]

    def __len__(self) -> int:
        return len(self.refs)

    def add(self, ref: int, symbol: int, side: int, shares: int, price: int) -> None:
        self.where[ref] = len(self.refs)
        self.refs.append(ref)
        self.orders[ref] = [symbol, side, shares, price]

    def remove(self, ref: int) -> None:
        i = self.where.pop(ref)
        last = self.refs.pop()
        if last != ref:
            self.refs[i] = last
            self.where[last] = i
        del self.orders[ref]

    def pick(self, rng: random.Random) -> int:
        return self.refs[int(rng.random() * len(self.refs))]


def zipf_cdf(n: int, exponent: float) -> list[float]:
    """Cumulative probabilities of ranks 1..n under P(k) ∝ k^-exponent."""
    weights = [k ** -exponent for k in range(1, n + 1)]
    total = sum(weights)
    return list(itertools.accumulate(w / total for w in weights))


def generate_messages(cfg: FeedConfig) -> Iterator[Message]:
    """The feed's messages in order (see the module docstring for what they obey)."""
    cfg.validate()
    if cfg.generator == "v2":
        return fastfeed.generate_messages(cfg)
    return _generate_messages_v1(cfg)


def _generate_messages_v1(cfg: FeedConfig) -> Iterator[Message]:
    rng = random.Random(cfg.seed)
    names = symbol_names(cfg.symbols)
    n_flow = cfg.messages - cfg.symbols - 6
    cdf = zipf_cdf(cfg.symbols, cfg.zipf)
    kinds = [k for k, _ in cfg.mix]
    mix_cdf = list(itertools.accumulate(w for _, w in cfg.mix))
    mix_total = mix_cdf[-1]

    # Prices: log-uniform start between $5 and $500, in cents.
    mid = [int(round(math.exp(rng.uniform(math.log(5), math.log(500))) * 100)) * TICK for _ in range(cfg.symbols)]
    book = _Book()
    target = max(1, cfg.book_per_symbol * cfg.symbols)
    next_ref = 1
    next_match = 1

    ts = 3 * NS_PER_HOUR + rng.randrange(NS_PER_HOUR // 10)
    yield SystemEvent(0, 0, ts, "O")
    for i, name in enumerate(names):
        ts += 1 + rng.randrange(20_000)
        yield StockDirectory(i + 1, 0, ts, name, round_lot_size=100)
    ts = max(ts + 1, 4 * NS_PER_HOUR)
    yield SystemEvent(0, 0, ts, "S")
    open_ts = 9 * NS_PER_HOUR + NS_PER_HOUR // 2
    ts = max(ts + 1, open_ts)
    yield SystemEvent(0, 0, ts, "Q")
    mean_gap = max(1.0, (16 * NS_PER_HOUR - open_ts) / max(1, n_flow))

    def draw_symbol() -> int:
        return bisect.bisect_left(cdf, rng.random() * cdf[-1])

    def walk(s: int) -> int:
        r = rng.random()
        if r < 0.2:
            mid[s] = max(TICK, mid[s] - TICK)
        elif r < 0.4:
            mid[s] = min(MAX_PRICE, mid[s] + TICK)
        return mid[s]

    def order_price(s: int, side: int) -> int:
        m = walk(s)
        offset = int(rng.expovariate(0.5)) * TICK
        p = m - offset if side == 0 else m + offset
        return min(MAX_PRICE, max(TICK, p))

    def draw_shares() -> int:
        r = rng.random()
        if r < 0.1:
            return 1 + rng.randrange(99)  # odd lot
        return 100 * (1 + min(99, int(rng.expovariate(0.4))))

    for _ in range(n_flow):
        ts += 1 + int(rng.expovariate(1.0 / mean_gap))
        live = len(book)
        r = rng.random() * mix_total
        kind = kinds[bisect.bisect_right(mix_cdf, r)]
        # Steer the book towards [target/2, target] resting orders so memory stays bounded.
        if kind in ("A", "F"):
            if live > 2 * target:
                kind = "D"
        elif kind != "P":
            if live == 0 or (live < target // 2 and rng.random() < 0.5):
                kind = "A"
            elif live > target and rng.random() < 0.5:
                kind = "D"
        if kind in ("A", "F"):
            s = draw_symbol()
            side = rng.getrandbits(1)
            shares = draw_shares()
            price = order_price(s, side)
            ref = next_ref
            next_ref += 1
            book.add(ref, s, side, shares, price)
            bs = "S" if side else "B"
            if kind == "A":
                yield AddOrder(s + 1, 0, ts, ref, bs, shares, names[s], price)
            else:
                yield AddOrderMPID(s + 1, 0, ts, ref, bs, shares, names[s], price, MPIDS[rng.randrange(len(MPIDS))])
        elif kind == "P":
            s = draw_symbol()
            price = walk(s)
            yield Trade(s + 1, 0, ts, 0, "B", draw_shares(), names[s], price, next_match)
            next_match += 1
        else:
            ref = book.pick(rng)
            order = book.orders[ref]
            s, side, shares, price = order
            if kind in ("E", "C"):
                executed = shares if rng.random() < 0.6 else 1 + rng.randrange(shares)
                if kind == "E":
                    yield OrderExecuted(s + 1, 0, ts, ref, executed, next_match)
                else:
                    exec_price = min(MAX_PRICE, max(TICK, price + (TICK if side else -TICK)))
                    yield OrderExecutedWithPrice(s + 1, 0, ts, ref, executed, next_match, "Y" if rng.random() < 0.9 else "N", exec_price)
                next_match += 1
                order[2] -= executed
                if order[2] == 0:
                    book.remove(ref)
            elif kind == "X" and shares > 1:
                cancelled = 1 + rng.randrange(shares - 1)
                order[2] -= cancelled
                yield OrderCancel(s + 1, 0, ts, ref, cancelled)
            elif kind == "U":
                new_ref = next_ref
                next_ref += 1
                new_shares = draw_shares()
                new_price = order_price(s, side)
                book.remove(ref)
                book.add(new_ref, s, side, new_shares, new_price)
                yield OrderReplace(s + 1, 0, ts, ref, new_ref, new_shares, new_price)
            else:  # "D", or an "X" on a one-share order, which can only be deleted
                book.remove(ref)
                yield OrderDelete(s + 1, 0, ts, ref)
    close_ts = 16 * NS_PER_HOUR
    ts = max(ts + 1, close_ts)
    yield SystemEvent(0, 0, ts, "M")
    ts = max(ts + 1, 20 * NS_PER_HOUR)
    yield SystemEvent(0, 0, ts, "E")
    ts += 1 + rng.randrange(NS_PER_HOUR // 10)
    yield SystemEvent(0, 0, ts, "C")


def generate_packets(cfg: FeedConfig) -> Iterator[tuple[int, list[Message]]]:
    """The feed as MoldUDP64 packets: ``(pcap timestamp ns, messages)``.

    Batch sizes come from a second generator seeded from ``seed`` so that they do not shift
    the message stream: the same seed gives the same messages for any ``batch`` range.
    """
    cfg.validate()
    if cfg.generator == "v2":
        return fastfeed.generate_packets(cfg)
    return _generate_packets_v1(cfg)


def _generate_packets_v1(cfg: FeedConfig) -> Iterator[tuple[int, list[Message]]]:
    lo, hi = cfg.batch
    sizes = random.Random(f"batch:{cfg.seed}")
    day = cfg.day_epoch_s * 1_000_000_000 + cfg.wire_latency_ns
    batch: list[Message] = []
    want = sizes.randint(lo, hi)
    for msg in generate_messages(cfg):
        batch.append(msg)
        if len(batch) == want:
            yield day + msg.timestamp, batch  # type: ignore[union-attr]
            batch = []
            want = sizes.randint(lo, hi)
    if batch:
        yield day + batch[-1].timestamp, batch  # type: ignore[union-attr]


@dataclass(frozen=True)
class FeedSummary:
    path: str
    messages: int
    packets: int
    bytes: int
    last_sequence: int


def write_itch_feed(
    path: str | os.PathLike[str],
    cfg: FeedConfig,
    endpoints: UdpEndpoints = DEFAULT_ENDPOINTS,
    progress: Callable[[int, int], None] | None = None,
    udp_checksum: bool = True,
) -> FeedSummary:
    """Write the feed as a pcap (MoldUDP64/UDP/IPv4/Ethernet) ending in an End-of-Session packet."""
    cfg.validate()
    if cfg.generator == "v2":
        r = fastfeed.write_pcap_feed(path, cfg, endpoints, progress, udp_checksum)
        return FeedSummary(os.fspath(path), r.messages, r.packets, os.path.getsize(path), r.last_sequence)
    last_ts = cfg.day_epoch_s * 1_000_000_000
    step = max(1, cfg.messages // 100)
    next_report = step
    with ItchTraceWriter(path, endpoints, cfg.session, 1, udp_checksum) as w:
        for ts, msgs in generate_packets(cfg):
            w.write_blocks([encode_message(m) for m in msgs], ts)
            last_ts = ts
            if progress is not None and w.messages_written >= next_report:
                progress(w.messages_written, cfg.messages)
                next_report += step
        w.write_end_of_session(last_ts + 1_000)
        summary = FeedSummary(os.fspath(path), w.messages_written, w.packets_written, 0, w.next_sequence - 1)
    return FeedSummary(summary.path, summary.messages, summary.packets, os.path.getsize(path), summary.last_sequence)


def write_itch_binaryfile(
    path: str | os.PathLike[str],
    cfg: FeedConfig,
    compress: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write the feed's messages in Nasdaq BinaryFILE framing (gzip-compressed if asked); return the count."""
    cfg.validate()
    if cfg.generator == "v1":
        def counted() -> Iterator[Message]:
            for i, msg in enumerate(generate_messages(cfg), 1):
                if progress is not None and i % 100_000 == 0:
                    progress(i, cfg.messages)
                yield msg
        return write_binary_file(path, counted(), compress)
    try:
        f = gzip.open(path, "wb") if compress else open(path, "wb", buffering=1 << 20)
    except OSError as exc:
        raise TraceError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None
    with f:
        return fastfeed.write_binary_feed(f, cfg, progress)  # type: ignore[arg-type]
