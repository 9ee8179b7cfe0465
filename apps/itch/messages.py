"""Nasdaq TotalView-ITCH 5.0 messages: frozen dataclasses and their exact wire layouts.

All integers are unsigned big-endian; every message starts with ``type(1) stock_locate(2)
tracking_number(2) timestamp(6)`` where the timestamp is nanoseconds since midnight. Prices are
``Price(4)``: an integer with 4 implied decimals (``1234500`` is $123.45). Alpha fields are
left-justified and space-padded; this module keeps the 8-byte ``stock`` and 4-byte ``attribution``
as ``str`` without their padding (re-encoding restores it byte-exactly) and 1- and 2-byte codes
as ``str`` of exactly that length.

Only the types replay and the generator need are modelled (S R A F E C X D U P); any other
type decodes to :class:`UnknownMessage` holding its bytes, so nothing is lost on a round trip.
Layouts: ecosystem digest §1.2, cross-checked against itchfeed and meatpy in the tests.
"""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass, fields
from typing import ClassVar, Union

PRICE_SCALE = 10_000
MAX_TIMESTAMP = (1 << 48) - 1


def price_to_raw(dollars: float | str) -> int:
    """Dollars to the 4-decimal fixed point ITCH uses (rounded to the nearest 1/10000)."""
    return round(float(dollars) * PRICE_SCALE)


def raw_to_price(raw: int) -> float:
    return raw / PRICE_SCALE


def stock_bytes(stock: str) -> bytes:
    """An 8-byte space-padded stock field (longer names are an error, not silently cut)."""
    b = stock.encode("latin-1")
    if len(b) > 8:
        raise ValueError(f"stock symbol longer than 8 bytes: {stock!r}")
    return b.ljust(8, b" ")


def stock_int(stock: str) -> int:
    """The 8 stock bytes read as one big-endian integer, as the switch sees ``add_order.stock``."""
    return int.from_bytes(stock_bytes(stock), "big")


@dataclass(frozen=True, slots=True)
class SystemEvent:
    """'S': start/end of messages, system hours and market hours (event codes O S Q M E C)."""

    TYPE: ClassVar[bytes] = b"S"
    stock_locate: int
    tracking_number: int
    timestamp: int
    event_code: str


@dataclass(frozen=True, slots=True)
class StockDirectory:
    """'R': one per symbol at the start of the day; assigns ``stock_locate`` for the day."""

    TYPE: ClassVar[bytes] = b"R"
    stock_locate: int
    tracking_number: int
    timestamp: int
    stock: str
    market_category: str = "Q"
    financial_status: str = "N"
    round_lot_size: int = 100
    round_lots_only: str = "N"
    issue_classification: str = "C"
    issue_sub_type: str = "Z "
    authenticity: str = "P"
    short_sale_threshold: str = "N"
    ipo_flag: str = "N"
    luld_ref_price_tier: str = "1"
    etp_flag: str = "N"
    etp_leverage_factor: int = 0
    inverse_indicator: str = "N"


@dataclass(frozen=True, slots=True)
class AddOrder:
    """'A': a new displayed order without market participant attribution."""

    TYPE: ClassVar[bytes] = b"A"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    buy_sell_indicator: str
    shares: int
    stock: str
    price: int


@dataclass(frozen=True, slots=True)
class AddOrderMPID:
    """'F': as 'A' plus the 4-character market participant (``attribution``)."""

    TYPE: ClassVar[bytes] = b"F"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    buy_sell_indicator: str
    shares: int
    stock: str
    price: int
    attribution: str


@dataclass(frozen=True, slots=True)
class OrderExecuted:
    """'E': part or all of a resting order executed at its own price."""

    TYPE: ClassVar[bytes] = b"E"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    executed_shares: int
    match_number: int


@dataclass(frozen=True, slots=True)
class OrderExecutedWithPrice:
    """'C': an execution at a price other than the order's (``printable`` is 'Y' or 'N')."""

    TYPE: ClassVar[bytes] = b"C"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    executed_shares: int
    match_number: int
    printable: str
    execution_price: int


@dataclass(frozen=True, slots=True)
class OrderCancel:
    """'X': part of a resting order cancelled (the rest stays on the book)."""

    TYPE: ClassVar[bytes] = b"X"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    cancelled_shares: int


@dataclass(frozen=True, slots=True)
class OrderDelete:
    """'D': a resting order removed from the book."""

    TYPE: ClassVar[bytes] = b"D"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int


@dataclass(frozen=True, slots=True)
class OrderReplace:
    """'U': an order cancelled and replaced by a new one (new reference, shares and price)."""

    TYPE: ClassVar[bytes] = b"U"
    stock_locate: int
    tracking_number: int
    timestamp: int
    original_order_ref_number: int
    new_order_ref_number: int
    shares: int
    price: int


@dataclass(frozen=True, slots=True)
class Trade:
    """'P': an execution against a non-displayed order (no book change)."""

    TYPE: ClassVar[bytes] = b"P"
    stock_locate: int
    tracking_number: int
    timestamp: int
    order_ref_number: int
    buy_sell_indicator: str
    shares: int
    stock: str
    price: int
    match_number: int


@dataclass(frozen=True, slots=True)
class UnknownMessage:
    """A message of a type this module does not model, kept as its raw bytes (type byte included)."""

    raw: bytes

    @property
    def type(self) -> bytes:
        return self.raw[:1]


Message = Union[
    SystemEvent, StockDirectory, AddOrder, AddOrderMPID, OrderExecuted, OrderExecutedWithPrice,
    OrderCancel, OrderDelete, OrderReplace, Trade, UnknownMessage,
]

# struct format after the type byte, with the 6-byte timestamp written as H (high) + I (low).
_FORMATS: dict[type, str] = {
    SystemEvent: "HHHIc",
    StockDirectory: "HHHI8sccIcc2scccccIc",
    AddOrder: "HHHIQcI8sI",
    AddOrderMPID: "HHHIQcI8sI4s",
    OrderExecuted: "HHHIQIQ",
    OrderExecutedWithPrice: "HHHIQIQcI",
    OrderCancel: "HHHIQI",
    OrderDelete: "HHHIQ",
    OrderReplace: "HHHIQQII",
    Trade: "HHHIQcI8sIQ",
}


class _Layout:
    """Encoder/decoder for one message class, derived from its struct format and fields."""

    def __init__(self, cls: type, fmt: str) -> None:
        self.cls = cls
        self.struct = struct.Struct("!c" + fmt)
        self.size = self.struct.size
        self.names = [f.name for f in fields(cls)]
        codes = [c for c in fmt if c.isalpha()]
        # Expand "8s" style codes into one code per field (the timestamp uses two: H + I).
        kinds: list[str] = []
        i = 0
        while i < len(fmt):
            j = i
            while fmt[j].isdigit():
                j += 1
            kinds.append(fmt[i : j + 1])
            i = j + 1
        assert len(codes) == len(kinds)
        self.kinds = kinds[:2] + kinds[4:]  # drop the two timestamp halves
        self.text_fields = [k.endswith(("s", "c")) for k in self.kinds]
        self.widths = [int(k[:-1]) if k.endswith("s") else 1 for k in self.kinds]
        self.getter = operator.attrgetter(*self.names)
        self.pack = self.struct.pack
        self.type = cls.TYPE
        # (index into the field values, byte width) of every text field
        self.text_slots = [(i + 1, w) for i, (t, w) in enumerate(zip(self.text_fields[2:], self.widths[2:]), start=2) if t]

    def encode(self, msg: object) -> bytes:
        v = list(self.getter(msg))
        ts = v[2]
        if not 0 <= ts <= MAX_TIMESTAMP:
            raise ValueError(f"timestamp out of 48-bit range: {ts}")
        for i, width in self.text_slots:
            b = v[i].encode("latin-1")
            if len(b) != width:
                if len(b) > width or width <= 2:
                    raise ValueError(f"{self.cls.__name__}: {v[i]!r} does not fit {width} byte(s)")
                b = b.ljust(width, b" ")
            v[i] = b
        return self.pack(self.type, v[0], v[1], ts >> 32, ts & 0xFFFFFFFF, *v[3:])

    def decode(self, data: bytes | memoryview, offset: int = 0) -> object:
        raw = self.struct.unpack_from(data, offset)
        values: list[object] = [raw[1], raw[2], (raw[3] << 32) | raw[4]]
        for v, text, width in zip(raw[5:], self.text_fields[2:], self.widths[2:]):
            if text:
                s = v.decode("latin-1")
                values.append(s.rstrip(" ") if width > 2 else s)
            else:
                values.append(v)
        return self.cls(*values)


LAYOUTS: dict[bytes, _Layout] = {cls.TYPE: _Layout(cls, fmt) for cls, fmt in _FORMATS.items()}
_BY_CLASS: dict[type, _Layout] = {layout.cls: layout for layout in LAYOUTS.values()}

# Message sizes of all 23 ITCH 5.0 types (type byte included), to tell a damaged length from a
# message we only do not model. 'O' follows itchfeed (48); meatpy says 52.
MESSAGE_SIZES: dict[bytes, int] = {
    b"S": 12, b"R": 39, b"H": 25, b"Y": 20, b"L": 26, b"V": 35, b"W": 12, b"K": 28, b"J": 35,
    b"h": 21, b"A": 36, b"F": 40, b"E": 31, b"C": 36, b"X": 23, b"D": 19, b"U": 35, b"P": 44,
    b"Q": 40, b"B": 19, b"I": 50, b"N": 20, b"O": 48,
}


def encode_message(msg: Message) -> bytes:
    """The wire bytes of one message (without the 2-byte length prefix of MoldUDP64 blocks)."""
    if isinstance(msg, UnknownMessage):
        return msg.raw
    return _BY_CLASS[type(msg)].encode(msg)


def decode_message(data: bytes | memoryview, offset: int = 0, length: int | None = None) -> Message | None:
    """Decode one message of ``length`` bytes at ``offset``; None if its length is wrong for its type.

    A modelled type must have exactly its specified size; an unmodelled type of a known size must
    have that size too; anything else is returned as :class:`UnknownMessage`.
    """
    if length is None:
        length = len(data) - offset
    if length <= 0:
        return None
    t = bytes(data[offset : offset + 1])
    layout = LAYOUTS.get(t)
    if layout is not None:
        if length != layout.size:
            return None
        return layout.decode(data, offset)  # type: ignore[return-value]
    expected = MESSAGE_SIZES.get(t)
    if expected is not None and expected != length:
        return None
    return UnknownMessage(bytes(data[offset : offset + length]))


def message_type(msg: Message) -> bytes:
    return msg.type if isinstance(msg, UnknownMessage) else msg.TYPE
