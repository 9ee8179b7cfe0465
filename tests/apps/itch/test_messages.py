"""ITCH 5.0 message codec: test vectors, round trips, and two independent parsers as oracles."""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.itch import messages as m
from tests.apps.itch.strategies import MESSAGE_CLASSES, message_of, messages

# Sizes from the Nasdaq TotalView-ITCH 5.0 spec (type byte included).
SPEC_SIZES = {b"S": 12, b"R": 39, b"A": 36, b"F": 40, b"E": 31, b"C": 36, b"X": 23, b"D": 19, b"U": 35, b"P": 44}

# The digest's hand-made Add Order (checked there with itchfeed, itchcpp and meatpy).
ADD_ORDER_HEX = "41" "0007" "0000" "1f1aced9f07b" "00000000deadbeef" "42" "00000064" "474f4f474c202020" "0012d644"


def test_add_order_test_vector_encodes_byte_exactly() -> None:
    msg = m.AddOrder(7, 0, 34_200_000_000_123, 0xDEADBEEF, "B", 100, "GOOGL", 1_234_500)
    assert m.encode_message(msg).hex() == ADD_ORDER_HEX
    assert m.decode_message(bytes.fromhex(ADD_ORDER_HEX)) == msg
    assert m.raw_to_price(msg.price) == 123.45


def test_real_file_system_event_decodes() -> None:
    # First message of Nasdaq's 01302019.NASDAQ_ITCH50 (without its 2-byte length prefix).
    raw = bytes.fromhex("53" "0000" "0000" "0a0a60aadb93" "4f")
    assert m.decode_message(raw) == m.SystemEvent(0, 0, 11_039_687_760_787, "O")


@given(messages)
@settings(max_examples=300)
def test_decode_of_encode_is_identity_and_size_matches_spec(msg: m.Message) -> None:
    raw = m.encode_message(msg)
    assert len(raw) == SPEC_SIZES[raw[:1]]
    assert raw[:1] == msg.TYPE  # type: ignore[union-attr]
    assert m.decode_message(raw) == msg


@given(st.sampled_from(MESSAGE_CLASSES).flatmap(message_of), st.integers(-3, 3).filter(lambda d: d != 0))
@settings(max_examples=100)
def test_wrong_length_decodes_to_none(msg: m.Message, delta: int) -> None:
    raw = m.encode_message(msg)
    cut = raw[: len(raw) + delta] if delta < 0 else raw + b"\x00" * delta
    assert m.decode_message(cut) is None


def test_unmodelled_types_round_trip_as_unknown() -> None:
    raw = b"H" + bytes(24)  # Stock Trading Action, 25 bytes
    msg = m.decode_message(raw)
    assert isinstance(msg, m.UnknownMessage) and msg.type == b"H"
    assert m.encode_message(msg) == raw
    assert m.decode_message(raw[:-1]) is None  # known type, wrong size
    assert isinstance(m.decode_message(b"z" + bytes(5)), m.UnknownMessage)  # not an ITCH 5.0 type
    assert m.decode_message(b"") is None


def test_encode_refuses_values_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        m.encode_message(m.AddOrder(1, 0, 0, 1, "B", 1, "TOOLONGNAME", 1))
    with pytest.raises(ValueError):
        m.encode_message(m.AddOrder(1, 0, 1 << 48, 1, "B", 1, "A", 1))
    with pytest.raises(ValueError):
        m.encode_message(m.AddOrder(1, 0, 0, 1, "BS", 1, "A", 1))


def test_stock_int_is_big_endian_padded_bytes() -> None:
    assert m.stock_int("GOOGL") == int.from_bytes(b"GOOGL   ", "big")
    assert m.price_to_raw("50.25") == 502_500


# --- oracles ----------------------------------------------------------------------------------
# Field names of the two oracles, in our dataclass field order after the common prefix.
ITCHFEED_FIELDS = {
    b"S": ["event_code"],
    b"R": ["stock", "market_category", "financial_status_indicator", "round_lot_size", "round_lots_only",
           "issue_classification", "issue_sub_type", "authenticity", "short_sale_threshold_indicator",
           "ipo_flag", "luld_ref", "etp_flag", "etp_leverage_factor", "inverse_indicator"],
    b"A": ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price"],
    b"F": ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price", "attribution"],
    b"E": ["order_reference_number", "executed_shares", "match_number"],
    b"C": ["order_reference_number", "executed_shares", "match_number", "printable", "execution_price"],
    b"X": ["order_reference_number", "cancelled_shares"],
    b"D": ["order_reference_number"],
    b"U": ["order_reference_number", "new_order_reference_number", "shares", "price"],
    b"P": ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price", "match_number"],
}
MEATPY_FIELDS = {
    b"S": ["code"],
    b"R": ["stock", "category", "status", "lotsize", "lotsonly", "issue_class", "issue_sub", "authenticity",
           "shortsale_thresh", "ipo_flag", "luld_ref", "etp_flag", "etp_leverage", "inverse_ind"],
    b"A": ["order_ref", "bsindicator", "shares", "stock", "price"],
    b"F": ["order_ref", "bsindicator", "shares", "stock", "price", "attribution"],
    b"E": ["order_ref", "shares", "match"],
    b"C": ["order_ref", "shares", "match", "printable", "execution_price"],
    b"X": ["order_ref", "canceled_shares"],
    b"D": ["order_ref"],
    b"U": ["original_ref", "new_ref", "shares", "price"],
    b"P": ["order_ref", "bsindicator", "shares", "stock", "price", "match"],
}


def _same(ours: object, theirs: object) -> bool:
    if isinstance(theirs, bytes):
        text = theirs.decode("latin-1")
        return ours == text or (len(text) > 2 and ours == text.rstrip(" "))
    return ours == theirs


def _check_against(msg: m.Message, oracle: object, names: list[str]) -> None:
    ours = dataclasses.astuple(msg)  # type: ignore[arg-type]
    assert oracle.stock_locate == ours[0] and oracle.tracking_number == ours[1]  # type: ignore[attr-defined]
    assert oracle.timestamp == ours[2]  # type: ignore[attr-defined]
    for value, name in zip(ours[3:], names, strict=True):
        assert _same(value, getattr(oracle, name)), (name, value, getattr(oracle, name))


@pytest.fixture(scope="module")
def itchfeed():  # type: ignore[no-untyped-def]
    os.environ["ITCH_NO_CPP"] = "1"  # the pure-Python parser, independent of the C++ one
    return pytest.importorskip("itch.messages", reason="itchfeed (import name itch) is a test-only oracle; pip install itchfeed")


@pytest.fixture(scope="module")
def meatpy():  # type: ignore[no-untyped-def]
    return pytest.importorskip("meatpy.itch50.itch50_market_message", reason="meatpy is a test-only oracle; pip install meatpy")


@given(msg=messages)
@settings(max_examples=200)
def test_itchfeed_reads_our_bytes_and_writes_them_back(itchfeed, msg: m.Message) -> None:  # type: ignore[no-untyped-def]
    raw = m.encode_message(msg)
    parsed = itchfeed.messages[raw[:1]](raw)
    _check_against(msg, parsed, ITCHFEED_FIELDS[raw[:1]])
    assert parsed.to_bytes() == raw


@given(msg=messages)
@settings(max_examples=200)
def test_meatpy_reads_our_bytes_and_writes_them_back(meatpy, msg: m.Message) -> None:  # type: ignore[no-untyped-def]
    raw = m.encode_message(msg)
    parsed = meatpy.ITCH50MarketMessage.from_bytes(raw)
    _check_against(msg, parsed, MEATPY_FIELDS[raw[:1]])
    assert parsed.to_bytes() == raw


def test_we_read_what_itchfeed_builds(itchfeed) -> None:  # type: ignore[no-untyped-def]
    built = itchfeed.create_message(
        b"A", stock_locate=7, tracking_number=0, timestamp=34_200_000_000_123,
        order_reference_number=0xDEADBEEF, buy_sell_indicator=b"B", shares=100, stock=b"GOOGL   ", price=1_234_500,
    ).to_bytes()
    assert m.decode_message(built) == m.AddOrder(7, 0, 34_200_000_000_123, 0xDEADBEEF, "B", 100, "GOOGL", 1_234_500)
