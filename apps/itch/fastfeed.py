"""Format version 2 of the ITCH feed (``--generator v2``, the default): the book in numpy blocks.

Version 1 (:func:`apps.itch.feed.generate_messages` with ``generator="v1"``) draws every number
from one ``random.Random`` in a sequence that depends on the book (how many draws a message takes
depends on its kind, on the order it hits, on that order's shares), so it can only run one message
at a time in Python: about 60-70k messages a second. Version 2 keeps the feed's documented
properties (module docstring of :mod:`apps.itch.feed`) but is defined block by block so that each
block is a handful of numpy operations, and the bytes are written in bulk. Its rules, exactly:

* Random numbers come from numpy's ``PCG64`` seeded with ``SeedSequence([|seed|, seed < 0, 2, s])``:
  stream ``s = 0`` for the messages, ``s = 1`` for the batch sizes (so the messages do not depend
  on ``--batch``). Batch sizes are drawn 65,536 at a time with ``integers(lo, hi + 1)``.
* The day opens as in version 1 (start prices log-uniform in $5-$500, 'O', one 'R' per symbol
  1-20,000 ns apart, 'S' at 04:00, 'Q' at 09:30) and closes with 'M' (16:00), 'E' (20:00), 'C'.
* Order flow comes in blocks of ``B = clamp(book target, 64, 8192)`` messages, where the book
  target is ``book_per_symbol * symbols``. Per block, with ``L`` resting orders at its start:

  - kinds are drawn from the mix; then, as version 1 steers per message, the block is steered by
    ``L``: above twice the target adds become deletes; below half the target each event on a
    resting order becomes an add with probability 1/2; above the target it becomes a delete with
    probability 1/2; events on resting orders past the ``L``-th of the block become adds;
  - the events on resting orders (E C X D U) hit *distinct* orders resting at the block's start,
    drawn without replacement; orders added in a block are first hit in a later one;
  - an add that would make the book exceed ``2 * target + 1`` orders becomes a trade ('P'), so the
    book stays below that bound after every message, as in version 1;
  - an 'X' on a one-share order is a 'D'; an 'E'/'C' executes all shares with probability 0.6 (and
    always on one share), else 1..shares-1; 'X' cancels 1..shares-1;
  - each symbol's price (cents) moves -1/0/+1 cent with probabilities 0.2/0.6/0.2 at each add,
    replace or trade of that symbol, clamped to $0.01-$999.99; orders rest ``floor(Exp(mean 2))``
    cents away from it (below for buys, above for sells); shares are an odd lot 1-99 with
    probability 0.1, else ``100 * (1 + min(99, floor(Exp(mean 2.5))))``;
  - timestamps advance by ``1 + floor(Exp(mean gap))`` ns, the gap spreading the flow over 09:30-16:00.

Encoding writes each message type as a structured numpy array (big-endian fields) into one buffer
per chunk of about 33k messages, with the packet headers (pcap record, Ethernet, IPv4 with its
checksum, UDP with its checksum, MoldUDP64) computed for all packets of the chunk at once.
Memory stays bounded by the chunk and the book, whatever the feed's length.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Protocol

import numpy as np

from apps.itch import messages as m
from apps.itch.moldudp import END_OF_SESSION, session_bytes
from apps.itch.symbols import symbol_names
from apps.pcap import LINKTYPE_ETHERNET, PcapWriter
from apps.udp import ETHERTYPE_IPV4, IPPROTO_UDP, UdpEndpoints, build_udp_frame

FORMAT_VERSION = 2
NS_PER_HOUR = 3_600_000_000_000
TICK = 100
MAX_CENTS = 999_99
MPIDS = ("GSCO", "MSCO", "UBSS", "CDRG", "VIRT", "JPMS", "NITE", "SUSQ")
CHUNK_MESSAGES = 1 << 15
SIZE_DRAWS = 1 << 16

# Kind codes of the columns; the flow kinds first, in the mix's order.
A, F, E, C, X, D, U, P, S, R = range(10)
KIND_LETTERS = "AFECXDUPSR"
_FLOW = {k: i for i, k in enumerate("AFECXDUP")}

# pcap record (little-endian) + Ethernet + IPv4 + UDP + MoldUDP64 header, the bytes before a packet's blocks.
PACKET_HEADER = 16 + 14 + 20 + 8 + 20
_UDP_AT = 16 + 14 + 20  # where UDP starts in a record


class FeedConfig(Protocol):
    """What this module reads of :class:`apps.itch.feed.FeedConfig` (which imports this module)."""

    messages: int
    symbols: int
    zipf: float
    batch: tuple[int, int]
    seed: int
    mix: tuple[tuple[str, int], ...]
    book_per_symbol: int
    session: str
    day_epoch_s: int
    wire_latency_ns: int


def seed_sequence(seed: int, stream: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([abs(seed), int(seed < 0), FORMAT_VERSION, stream])


def block_size(cfg: FeedConfig) -> int:
    return min(8192, max(64, cfg.book_per_symbol * cfg.symbols))


@dataclass
class Columns:
    """A run of messages in order, one array per field (unused fields are 0 for a kind).

    ``ref``: A/F new reference, E/C/X/D the order hit, U the original; ``ref2``: U's new reference;
    ``shares``: A/F/P/U shares, E/C executed, X cancelled; ``price``: A/F/P/U price, C execution
    price (Price(4) units); ``extra``: F its MPID index, C 1 if printable, S the event code.
    """

    kind: np.ndarray  # uint8
    locate: np.ndarray  # int64 (0 for system events)
    ts: np.ndarray  # int64 ns since midnight
    ref: np.ndarray
    ref2: np.ndarray
    side: np.ndarray  # 0 buy, 1 sell
    shares: np.ndarray
    price: np.ndarray
    match: np.ndarray
    extra: np.ndarray

    FIELDS = ("kind", "locate", "ts", "ref", "ref2", "side", "shares", "price", "match", "extra")

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def empty(cls, n: int) -> "Columns":
        z = [np.zeros(n, dtype=np.int64) for _ in cls.FIELDS]
        z[0] = np.zeros(n, dtype=np.uint8)
        return cls(*z)

    @classmethod
    def concat(cls, parts: list["Columns"]) -> "Columns":
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls.FIELDS))

    def slice(self, lo: int, hi: int | None = None) -> "Columns":
        return Columns(*(getattr(self, f)[lo:hi] for f in self.FIELDS))


# Rows of the book array: resting orders are its columns, in the order they joined the book.
_REF, _SYM, _SIDE_ROW, _SHARES, _PRICE = range(5)


class InverseCdf:
    """``searchsorted(cdf, u, "right")`` for uniforms ``u`` in [0, 1), exactly, through a table of
    ``2**bits`` buckets: a bucket that no step of the CDF crosses gives its answer at once, the
    others (at most one per step) are searched. About ten times faster than searching them all."""

    def __init__(self, cdf: np.ndarray, bits: int = 12) -> None:
        self.cdf = cdf
        self.scale = float(1 << bits)
        edges = np.arange((1 << bits) + 1, dtype=np.float64) / self.scale
        self.lo = np.searchsorted(cdf, edges[:-1], side="right")
        hi = np.searchsorted(cdf, np.nextafter(edges[1:], 0.0), side="right")
        self.crossed = self.lo != hi

    def __call__(self, u: np.ndarray) -> np.ndarray:
        bucket = (u * self.scale).astype(np.int64)  # exact: the scale is a power of two
        out = self.lo[bucket]
        search = np.flatnonzero(self.crossed[bucket])
        if len(search):
            out[search] = np.searchsorted(self.cdf, u[search], side="right")
        return out


def _take(pool: np.ndarray, at: int, n: int) -> tuple[np.ndarray, int]:
    return pool[at : at + n], at + n


def generate_columns(cfg: FeedConfig) -> Iterator[Columns]:
    """The feed's messages as :class:`Columns`: the opening, the flow block by block, the close."""
    rng = np.random.Generator(np.random.PCG64(seed_sequence(cfg.seed, 0)))
    n_sym = cfg.symbols
    n_flow = cfg.messages - n_sym - 6
    weights = np.array([w for _, w in cfg.mix], dtype=np.float64)
    mix_cdf = np.cumsum(weights) / weights.sum()
    mix_cdf[-1] = 1.0
    mix_codes = np.array([_FLOW[k] for k, _ in cfg.mix], dtype=np.uint8)
    draw_kind = InverseCdf(mix_cdf)
    zipf = np.cumsum(np.arange(1, n_sym + 1, dtype=np.float64) ** -cfg.zipf)
    zipf /= zipf[-1]
    zipf[-1] = 1.0
    draw_symbol = InverseCdf(zipf, 16)
    sym_type = np.uint16 if n_sym <= 1 << 16 else np.int64  # 16-bit keys sort by radix
    target = max(1, cfg.book_per_symbol * n_sym)
    cap = 2 * target + 1
    bsize = block_size(cfg)

    mid = np.rint(np.exp(rng.uniform(math.log(5), math.log(500), n_sym)) * 100).astype(np.int64)
    np.clip(mid, 1, MAX_CENTS, out=mid)

    # The opening: 'O', the directory, 'S', 'Q'.
    head = Columns.empty(n_sym + 3)
    ts0 = 3 * NS_PER_HOUR + int(rng.integers(0, NS_PER_HOUR // 10))
    dir_ts = ts0 + np.cumsum(1 + rng.integers(0, 20_000, n_sym))
    ts_s = max(int(dir_ts[-1]) + 1, 4 * NS_PER_HOUR)
    open_ts = 9 * NS_PER_HOUR + NS_PER_HOUR // 2
    ts_q = max(ts_s + 1, open_ts)
    head.kind[:] = R
    head.kind[[0, -2, -1]] = S
    head.extra[[0, -2, -1]] = [ord("O"), ord("S"), ord("Q")]
    head.locate[1:-2] = np.arange(1, n_sym + 1)
    head.ts[0] = ts0
    head.ts[1:-2] = dir_ts
    head.ts[-2:] = [ts_s, ts_q]
    yield head

    mean_gap = max(1.0, (16 * NS_PER_HOUR - open_ts) / max(1, n_flow))
    ts = ts_q
    next_ref = 1
    next_match = 1
    book = np.zeros((5, 0), dtype=np.int64)  # rows _REF.._PRICE, one column per resting order
    done = 0
    while done < n_flow:
        n = min(bsize, n_flow - done)
        done += n
        L = book.shape[1]

        # Kinds, steered by the book's size at the block's start.
        u = rng.random(2 * n)
        kind = mix_codes[draw_kind(u[:n])]
        coin = u[n:] < 0.5
        if L > 2 * target:
            kind[kind <= F] = D
        hits = (kind >= E) & (kind <= U)
        if L < target // 2:
            kind[hits & coin] = A
        elif L > target:
            kind[hits & coin] = D
        hits = (kind >= E) & (kind <= U)
        at = np.flatnonzero(hits)
        if len(at) > L:
            kind[at[L:]] = A
            hits[at[L:]] = False
            at = at[:L]
        nh = len(at)
        pick = rng.choice(L, nh, replace=False) if nh else np.zeros(0, dtype=np.int64)
        hit = book[:, pick]

        # Events on resting orders: how many shares, and whether the order leaves the book.
        t_shares = hit[_SHARES]
        hk = kind[at]
        hk[(hk == X) & (t_shares <= 1)] = D
        kind[at] = hk
        u = rng.random(2 * nh)
        full = ((hk == E) | (hk == C)) & ((u[:nh] < 0.6) | (t_shares <= 1))
        amount = np.where(full, t_shares, 1 + (u[nh:] * np.maximum(t_shares - 1, 1)).astype(np.int64))
        gone = full | (hk == D) | (hk == U)

        # The book's size after each message; adds past the cap become trades.
        is_add = kind <= F
        if L + int(np.count_nonzero(is_add)) > cap:
            delta = is_add.astype(np.int64)
            delta[at[full | (hk == D)]] = -1
            excess = np.maximum.accumulate(np.maximum(L + np.cumsum(delta) - cap, 0))
            blocked = is_add & (np.diff(excess, prepend=0) > 0)
            kind[blocked] = P
            is_add &= ~blocked

        # Symbols and sides of the new orders and trades; the replaces keep their order's.
        sym = np.empty(n, dtype=sym_type)
        side = np.zeros(n, dtype=np.int64)
        free = np.flatnonzero(~hits)
        add_at = np.flatnonzero(is_add)
        walks = ~hits
        walks[at[hk == U]] = True
        w_at = np.flatnonzero(walks)
        nw = len(w_at)
        fc_at = np.flatnonzero((kind == F) | (kind == C))
        u = rng.random(len(free) + len(add_at) + 3 * nw + len(fc_at))
        u_sym, k = _take(u, 0, len(free))
        u_side, k = _take(u, k, len(add_at))
        u_walk, k = _take(u, k, nw)
        u_odd, k = _take(u, k, nw)
        u_small, k = _take(u, k, nw)
        u_misc = u[k:]
        sym[free] = draw_symbol(u_sym)
        sym[at] = hit[_SYM]
        side[add_at] = u_side < 0.5
        side[at] = hit[_SIDE_ROW]
        expo = rng.standard_exponential(n + 2 * nw)

        # Prices: a per-symbol walk over the adds, replaces and trades, in order.
        step = (u_walk < 0.4).astype(np.int64) - 2 * (u_walk < 0.2)  # -1, +1, 0 with 0.2, 0.2, 0.6
        w_sym = sym[w_at]
        order = np.argsort(w_sym, kind="stable")
        s_sym = w_sym[order]
        s_step = step[order]
        csum = np.cumsum(s_step)
        first = np.ones(nw, dtype=bool)
        first[1:] = s_sym[1:] != s_sym[:-1]
        starts = np.flatnonzero(first)
        before = np.repeat(csum[starts] - s_step[starts], np.diff(np.append(starts, nw)))
        s_mid = np.minimum(np.maximum(mid[s_sym] + csum - before, 1), MAX_CENTS)
        if nw:
            ends = np.append(starts[1:], nw) - 1
            mid[s_sym[ends]] = s_mid[ends]
        walked = np.empty(nw, dtype=np.int64)
        walked[order] = s_mid

        offset = (expo[n : n + nw] * 2.0).astype(np.int64)
        lots = 100 * (1 + np.minimum(99, (expo[n + nw :] * 2.5).astype(np.int64)))
        new_shares = np.where(u_odd < 0.1, 1 + (u_small * 99).astype(np.int64), lots)
        w_kind = kind[w_at]
        resting = np.minimum(np.maximum(walked + np.where(side[w_at] == 0, -offset, offset), 1), MAX_CENTS)
        price = np.zeros(n, dtype=np.int64)
        price[w_at] = np.where(w_kind == P, walked, resting) * TICK
        shares = np.zeros(n, dtype=np.int64)
        shares[w_at] = new_shares
        ecx = (hk != D) & (hk != U)  # executed or cancelled shares; a replace's new shares are set above
        shares[at[ecx]] = amount[ecx]
        is_c = hk == C
        c_at = at[is_c]
        c_price = hit[_PRICE, is_c] + np.where(side[c_at] == 1, TICK, -TICK)
        price[c_at] = np.minimum(np.maximum(c_price, TICK), MAX_CENTS * TICK)
        side[w_at[w_kind == P]] = 0

        # References, match numbers, attributions, timestamps.
        ref = np.zeros(n, dtype=np.int64)
        ref[at] = hit[_REF]
        ref2 = np.zeros(n, dtype=np.int64)
        opens = is_add.copy()
        u_at = at[hk == U]
        opens[u_at] = True
        new_refs = next_ref + np.cumsum(opens) - 1
        next_ref += int(np.count_nonzero(opens))
        ref[add_at] = new_refs[add_at]
        ref2[u_at] = new_refs[u_at]
        matched = (kind == E) | (kind == C) | (kind == P)
        match = np.where(matched, next_match + np.cumsum(matched) - 1, 0)
        next_match += int(np.count_nonzero(matched))
        extra = np.zeros(n, dtype=np.int64)
        is_f = kind[fc_at] == F
        extra[fc_at] = np.where(is_f, (u_misc * len(MPIDS)).astype(np.int64), u_misc < 0.9)
        stamps = ts + np.cumsum(1 + (expo[:n] * mean_gap).astype(np.int64))
        ts = int(stamps[-1])

        # The book after the block: partial events shrink orders, the gone leave, opens join in order.
        keep = np.ones(L, dtype=bool)
        keep[pick[gone]] = False
        still = ~gone
        book[_SHARES, pick[still]] = t_shares[still] - amount[still]
        new_at = np.flatnonzero(opens)
        joining = np.stack([new_refs[new_at], sym[new_at], side[new_at], shares[new_at], price[new_at]])
        book = np.concatenate([book[:, keep], joining], axis=1)

        yield Columns(kind, sym.astype(np.int64) + 1, stamps, ref, ref2, side, shares, price, match, extra)

    tail = Columns.empty(3)
    tail.kind[:] = S
    tail.extra[:] = [ord("M"), ord("E"), ord("C")]
    t_m = max(ts + 1, 16 * NS_PER_HOUR)
    t_e = max(t_m + 1, 20 * NS_PER_HOUR)
    tail.ts[:] = [t_m, t_e, t_e + 1 + int(rng.integers(0, NS_PER_HOUR // 10))]
    yield tail


# ------------------------------------------------------------------------------------------------
# Messages as objects (tests, small feeds) and batch sizes
# ------------------------------------------------------------------------------------------------


def to_messages(cols: Columns, names: list[str]) -> Iterator[m.Message]:
    """The :mod:`apps.itch.messages` objects of ``cols`` (one at a time: for tests and small feeds)."""
    for k, loc, ts, ref, ref2, side, shares, price, match, extra in zip(*(getattr(cols, f).tolist() for f in Columns.FIELDS)):
        if k == S:
            yield m.SystemEvent(0, 0, ts, chr(extra))
        elif k == R:
            yield m.StockDirectory(loc, 0, ts, names[loc - 1], round_lot_size=100)
        elif k == A:
            yield m.AddOrder(loc, 0, ts, ref, "BS"[side], shares, names[loc - 1], price)
        elif k == F:
            yield m.AddOrderMPID(loc, 0, ts, ref, "BS"[side], shares, names[loc - 1], price, MPIDS[extra])
        elif k == E:
            yield m.OrderExecuted(loc, 0, ts, ref, shares, match)
        elif k == C:
            yield m.OrderExecutedWithPrice(loc, 0, ts, ref, shares, match, "Y" if extra else "N", price)
        elif k == X:
            yield m.OrderCancel(loc, 0, ts, ref, shares)
        elif k == D:
            yield m.OrderDelete(loc, 0, ts, ref)
        elif k == U:
            yield m.OrderReplace(loc, 0, ts, ref, ref2, shares, price)
        else:
            yield m.Trade(loc, 0, ts, 0, "B", shares, names[loc - 1], price, match)


class BatchSizes:
    """Messages per MoldUDP64 packet: a stream of uniform draws in ``batch``, cut as messages come."""

    def __init__(self, cfg: FeedConfig) -> None:
        self.lo, self.hi = cfg.batch
        self.rng = np.random.Generator(np.random.PCG64(seed_sequence(cfg.seed, 1)))
        self.sizes = np.zeros(0, dtype=np.int64)
        self.pos = 0

    def cut(self, n: int, final: bool) -> np.ndarray:
        """Counts of the whole packets among the next ``n`` messages (and of the last, partial one if ``final``)."""
        while int(self.sizes[self.pos :].sum()) < n:
            more = self.rng.integers(self.lo, self.hi + 1, SIZE_DRAWS).astype(np.int64)
            self.sizes = np.concatenate([self.sizes[self.pos :], more])
            self.pos = 0
        ahead = np.cumsum(self.sizes[self.pos :])
        k = int(np.searchsorted(ahead, n, side="right"))
        counts = self.sizes[self.pos : self.pos + k]
        self.pos += k
        rest = n - (int(ahead[k - 1]) if k else 0)
        if final and rest:
            counts = np.append(counts, rest)
        return counts


def chunks(cfg: FeedConfig, size: int = CHUNK_MESSAGES) -> Iterator[Columns]:
    """:func:`generate_columns` regrouped into runs of at least ``size`` messages (the last shorter)."""
    parts: list[Columns] = []
    held = 0
    for block in generate_columns(cfg):
        parts.append(block)
        held += len(block)
        if held >= size:
            yield Columns.concat(parts)
            parts, held = [], 0
    if parts:
        yield Columns.concat(parts)


def generate_messages(cfg: FeedConfig) -> Iterator[m.Message]:
    names = symbol_names(cfg.symbols)
    for cols in generate_columns(cfg):
        yield from to_messages(cols, names)


def generate_packets(cfg: FeedConfig) -> Iterator[tuple[int, list[m.Message]]]:
    names = symbol_names(cfg.symbols)
    sizes = BatchSizes(cfg)
    day = cfg.day_epoch_s * 1_000_000_000 + cfg.wire_latency_ns
    carry: list[Columns] = []
    gen = chunks(cfg)
    cols = next(gen, None)
    while cols is not None:
        following = next(gen, None)
        cols = Columns.concat([*carry, cols])
        counts = sizes.cut(len(cols), following is None)
        msgs = list(to_messages(cols, names))
        pos = 0
        for c in counts.tolist():
            yield day + msgs[pos + c - 1].timestamp, msgs[pos : pos + c]  # type: ignore[union-attr]
            pos += c
        carry = [cols.slice(pos)]
        cols = following


# ------------------------------------------------------------------------------------------------
# Encoding in bulk
# ------------------------------------------------------------------------------------------------

_HEAD = [("len", ">u2"), ("type", "u1"), ("locate", ">u2"), ("track", ">u2"), ("ts_hi", ">u2"), ("ts_lo", ">u4")]
DTYPES: dict[int, np.dtype] = {
    S: np.dtype(_HEAD + [("code", "u1")]),
    R: np.dtype(_HEAD + [("stock", "S8"), ("tail", "u1", (20,))]),
    A: np.dtype(_HEAD + [("ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"), ("price", ">u4")]),
    F: np.dtype(_HEAD + [("ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"), ("price", ">u4"),
                         ("mpid", "S4")]),
    E: np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4"), ("match", ">u8")]),
    C: np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4"), ("match", ">u8"), ("printable", "u1"), ("price", ">u4")]),
    X: np.dtype(_HEAD + [("ref", ">u8"), ("shares", ">u4")]),
    D: np.dtype(_HEAD + [("ref", ">u8")]),
    U: np.dtype(_HEAD + [("ref", ">u8"), ("ref2", ">u8"), ("shares", ">u4"), ("price", ">u4")]),
    P: np.dtype(_HEAD + [("ref", ">u8"), ("side", "u1"), ("shares", ">u4"), ("stock", "S8"), ("price", ">u4"),
                         ("match", ">u8")]),
}
#: Bytes of each kind's MoldUDP64 block / BinaryFILE record: the 2-byte length then the message.
ITEM_SIZE = np.zeros(len(KIND_LETTERS), dtype=np.int64)
for _k, _dt in DTYPES.items():
    assert _dt.itemsize - 2 == m.MESSAGE_SIZES[KIND_LETTERS[_k].encode()], KIND_LETTERS[_k]
    ITEM_SIZE[_k] = _dt.itemsize
_DIRECTORY_TAIL = np.frombuffer(m.encode_message(m.StockDirectory(1, 0, 0, "X", round_lot_size=100))[19:], dtype=np.uint8)
_SIDE = np.array([ord("B"), ord("S")], dtype=np.uint8)
_MPID = np.array([s.encode() for s in MPIDS], dtype="S4")


def _window(buf: np.ndarray, width: int) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(buf, width, writeable=True)


class Encoder:
    """Writes :class:`Columns` as length-prefixed messages at given offsets of a byte buffer."""

    def __init__(self, names: list[str]) -> None:
        self.stocks = np.array([n.encode("latin-1").ljust(8) for n in names], dtype="S8")

    def put(self, cols: Columns, offsets: np.ndarray, buf: np.ndarray) -> None:
        kind = cols.kind
        for k, dt in DTYPES.items():
            sel = np.flatnonzero(kind == k)
            if not len(sel):
                continue
            rec = np.zeros(len(sel), dtype=dt)
            rec["len"] = dt.itemsize - 2
            rec["type"] = ord(KIND_LETTERS[k])
            ts = cols.ts[sel]
            rec["ts_hi"] = ts >> 32
            rec["ts_lo"] = ts & 0xFFFFFFFF
            if k == S:
                rec["code"] = cols.extra[sel]
            else:
                loc = cols.locate[sel]
                rec["locate"] = loc
                if k == R:
                    rec["stock"] = self.stocks[loc - 1]
                    rec["tail"] = _DIRECTORY_TAIL
                else:
                    rec["ref"] = cols.ref[sel]
                    if k != D:
                        rec["shares"] = cols.shares[sel]
                    if k in (A, F, P):
                        rec["side"] = _SIDE[cols.side[sel]]
                        rec["stock"] = self.stocks[loc - 1]
                    if k in (A, F, P, U, C):
                        rec["price"] = cols.price[sel]
                    if k in (E, C, P):
                        rec["match"] = cols.match[sel]
                    if k == F:
                        rec["mpid"] = _MPID[cols.extra[sel]]
                    elif k == C:
                        rec["printable"] = np.where(cols.extra[sel] == 1, ord("Y"), ord("N"))
                    elif k == U:
                        rec["ref2"] = cols.ref2[sel]
            _window(buf, dt.itemsize)[offsets[sel]] = rec.view(np.uint8).reshape(len(sel), dt.itemsize)


def _segment_sums(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Sums of the big-endian 16-bit words of ``buf[start:end]`` (odd ends padded with 0), modulo
    0xFFFF, for sorted, disjoint segments of at least 8 bytes, in one pass over the buffer.

    Modulo 0xFFFF, 256**2 == 1: a byte at position j weighs 256**(j mod 2) in the buffer's
    little-endian 32-bit words, and a segment's big-endian sum is that weighted sum times 256 if
    it starts at an even position (times 1 if odd). The aligned middle of each segment is one
    ``reduceat`` over the words; the at most 3 + 3 bytes at its ends are added apart.
    """
    words = buf[: len(buf) // 4 * 4].view("<u4")
    a = (start + 3) // 4
    b = end // 4
    bounds = np.empty(2 * len(a), dtype=np.int64)
    bounds[0::2], bounds[1::2] = a, b
    if bounds[-1] >= len(words):
        bounds = bounds[:-1]
    sums = (np.add.reduceat(words, bounds, dtype=np.uint64)[0::2] % 0xFFFF).astype(np.int64)
    last = len(buf) - 1
    for k in range(3):
        head = start + k
        sums += np.where(head < 4 * a, buf[np.minimum(head, last)].astype(np.int64) << (8 * (head & 1)), 0)
        tail = 4 * b + k
        sums += np.where(tail < end, buf[np.minimum(tail, last)].astype(np.int64) << (8 * (tail & 1)), 0)
    return (sums % 0xFFFF) * np.where(start & 1, 1, 256) % 0xFFFF


def _fold(s: np.ndarray) -> np.ndarray:
    for _ in range(4):
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _words(b: bytes) -> int:
    return sum(int.from_bytes(b[i : i + 2], "big") for i in range(0, len(b), 2))


_PACKET = np.dtype([
    ("sec", "<u4"), ("frac", "<u4"), ("incl", "<u4"), ("orig", "<u4"),
    ("dst_mac", "u1", (6,)), ("src_mac", "u1", (6,)), ("ethertype", ">u2"),
    ("vihl", "u1"), ("tos", "u1"), ("total", ">u2"), ("ident", ">u2"), ("frag", ">u2"), ("ttl", "u1"),
    ("proto", "u1"), ("ip_csum", ">u2"), ("src_ip", "u1", (4,)), ("dst_ip", "u1", (4,)),
    ("sport", ">u2"), ("dport", ">u2"), ("ulen", ">u2"), ("udp_csum", ">u2"),
    ("session", "S10"), ("seq", ">u8"), ("count", ">u2"),
])
assert _PACKET.itemsize == PACKET_HEADER


@dataclass(frozen=True)
class WriteResult:
    messages: int
    packets: int
    last_sequence: int


def write_pcap_feed(
    path: str | os.PathLike[str],
    cfg: FeedConfig,
    endpoints: UdpEndpoints,
    progress: Callable[[int, int], None] | None = None,
    udp_checksum: bool = True,
) -> WriteResult:
    """Write the version-2 feed as a pcap, chunk by chunk, ending in an End-of-Session packet."""
    names = symbol_names(cfg.symbols)
    enc = Encoder(names)
    sizes = BatchSizes(cfg)
    day = cfg.day_epoch_s * 1_000_000_000 + cfg.wire_latency_ns
    ep = endpoints
    session = session_bytes(cfg.session)
    ip_const = 0x4500 + 0x4000 + ((ep.ttl << 8) | IPPROTO_UDP) + _words(ep.src_ip) + _words(ep.dst_ip)
    pseudo = _words(ep.src_ip) + _words(ep.dst_ip) + IPPROTO_UDP + ep.src_port + ep.dst_port
    seq = 1
    packets = 0
    written = 0
    last_ts = cfg.day_epoch_s * 1_000_000_000
    carry: list[Columns] = []
    with PcapWriter(path, LINKTYPE_ETHERNET) as pcap:
        gen = chunks(cfg)
        cols = next(gen, None)
        while cols is not None:
            following = next(gen, None)
            cols = Columns.concat([*carry, cols])
            counts = sizes.cut(len(cols), following is None)
            n_msgs = int(counts.sum())
            body = cols.slice(0, n_msgs) if n_msgs < len(cols) else cols
            carry = [cols.slice(n_msgs)]
            cols = following
            if not len(counts):
                continue
            n_pk = len(counts)
            items = ITEM_SIZE[body.kind]
            before = np.cumsum(items) - items  # bytes of the messages before each
            pkt_of = np.repeat(np.arange(n_pk), counts)
            offsets = before + PACKET_HEADER * (pkt_of + 1)
            first = np.cumsum(counts) - counts
            last = first + counts - 1
            rec_at = before[first] + PACKET_HEADER * np.arange(n_pk)
            payload = 20 + np.add.reduceat(items, first)
            total_bytes = int(rec_at[-1] + PACKET_HEADER + payload[-1] - 20)
            buf = np.zeros(total_bytes, dtype=np.uint8)
            enc.put(body, offsets, buf)

            hdr = np.zeros(n_pk, dtype=_PACKET)
            stamp = day + body.ts[last]
            hdr["sec"] = stamp // 1_000_000_000
            hdr["frac"] = stamp % 1_000_000_000
            frame = 42 + payload
            hdr["incl"] = frame
            hdr["orig"] = frame
            hdr["dst_mac"] = np.frombuffer(ep.resolved_dst_mac, dtype=np.uint8)
            hdr["src_mac"] = np.frombuffer(ep.src_mac, dtype=np.uint8)
            hdr["ethertype"] = ETHERTYPE_IPV4
            hdr["vihl"] = 0x45
            total = 28 + payload
            hdr["total"] = total
            ident = (packets + np.arange(n_pk)) & 0xFFFF
            hdr["ident"] = ident
            hdr["frag"] = 0x4000
            hdr["ttl"] = ep.ttl
            hdr["proto"] = IPPROTO_UDP
            hdr["ip_csum"] = ~_fold(ip_const + total + ident) & 0xFFFF
            hdr["src_ip"] = np.frombuffer(ep.src_ip, dtype=np.uint8)
            hdr["dst_ip"] = np.frombuffer(ep.dst_ip, dtype=np.uint8)
            hdr["sport"] = ep.src_port
            hdr["dport"] = ep.dst_port
            hdr["ulen"] = 8 + payload
            hdr["session"] = session
            hdr["seq"] = seq + first
            hdr["count"] = counts
            _window(buf, PACKET_HEADER)[rec_at] = hdr.view(np.uint8).reshape(n_pk, PACKET_HEADER)
            if udp_checksum:
                # The UDP header is in the buffer with checksum 0: sum the segment, add the pseudo-header.
                seg = rec_at + _UDP_AT
                rest = (_segment_sums(buf, seg + 8, seg + 8 + payload) + pseudo + 2 * (8 + payload)) % 0xFFFF
                csum = np.where(rest == 0, 0xFFFF, 0xFFFF - rest)  # never 0 (RFC 768)
                buf[seg + 6] = csum >> 8
                buf[seg + 7] = csum & 0xFF
            pcap.write_records(memoryview(buf), n_pk)
            seq += n_msgs
            packets += n_pk
            written += n_msgs
            last_ts = int(stamp[-1])
            if progress is not None:
                progress(written, cfg.messages)
        eos = build_udp_frame(struct.pack("!10sQH", session, seq, END_OF_SESSION), ep, packets & 0xFFFF, udp_checksum)
        pcap.write(eos, last_ts + 1_000)
    return WriteResult(written, packets + 1, seq - 1)


def write_binary_feed(
    out: BinaryIO, cfg: FeedConfig, progress: Callable[[int, int], None] | None = None
) -> int:
    """Write the version-2 messages in BinaryFILE framing (2-byte length, message) to ``out``."""
    enc = Encoder(symbol_names(cfg.symbols))
    written = 0
    for cols in chunks(cfg):
        items = ITEM_SIZE[cols.kind]
        offsets = np.cumsum(items) - items
        buf = np.zeros(int(items.sum()), dtype=np.uint8)
        enc.put(cols, offsets, buf)
        out.write(memoryview(buf))
        written += len(cols)
        if progress is not None:
            progress(written, cfg.messages)
    return written
