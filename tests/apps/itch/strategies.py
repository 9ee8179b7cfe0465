"""Hypothesis strategies for ITCH messages, with field ranges written out from the Nasdaq spec
(not derived from :mod:`apps.itch.messages`, whose layouts are what the tests check)."""

from __future__ import annotations

from hypothesis import strategies as st

from apps.itch import messages as m

U16 = st.integers(0, 0xFFFF)
U32 = st.integers(0, 0xFFFFFFFF)
U64 = st.integers(0, (1 << 64) - 1)
TS = st.integers(0, (1 << 48) - 1)
PRINTABLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)


def text(n: int, exact: bool = False) -> st.SearchStrategy[str]:
    """ASCII text of up to n characters (exactly n if ``exact``), no trailing spaces."""
    inner = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=n if exact else 0, max_size=n)
    if exact:
        return inner
    return inner.map(lambda s: s.rstrip(" "))


CHAR = text(1, exact=True)

# field name -> strategy; the same name means the same width in every message type.
FIELD_STRATEGIES = {
    "stock_locate": U16,
    "tracking_number": U16,
    "timestamp": TS,
    "event_code": CHAR,
    "stock": text(8),
    "market_category": CHAR,
    "financial_status": CHAR,
    "round_lot_size": U32,
    "round_lots_only": CHAR,
    "issue_classification": CHAR,
    "issue_sub_type": text(2, exact=True),
    "authenticity": CHAR,
    "short_sale_threshold": CHAR,
    "ipo_flag": CHAR,
    "luld_ref_price_tier": CHAR,
    "etp_flag": CHAR,
    "etp_leverage_factor": U32,
    "inverse_indicator": CHAR,
    "order_ref_number": U64,
    "buy_sell_indicator": st.sampled_from("BS"),
    "shares": U32,
    "price": U32,
    "attribution": text(4),
    "executed_shares": U32,
    "match_number": U64,
    "printable": st.sampled_from("YN"),
    "execution_price": U32,
    "cancelled_shares": U32,
    "original_order_ref_number": U64,
    "new_order_ref_number": U64,
}

MESSAGE_CLASSES = (
    m.SystemEvent, m.StockDirectory, m.AddOrder, m.AddOrderMPID, m.OrderExecuted,
    m.OrderExecutedWithPrice, m.OrderCancel, m.OrderDelete, m.OrderReplace, m.Trade,
)


def message_of(cls: type) -> st.SearchStrategy:
    import dataclasses

    return st.builds(cls, **{f.name: FIELD_STRATEGIES[f.name] for f in dataclasses.fields(cls)})


messages = st.one_of(*(message_of(c) for c in MESSAGE_CLASSES))
