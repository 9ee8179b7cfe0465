"""Stock symbols shared by the feed generator and the rule generator.

Rules only match a feed if both draw from the same names, so the list is a pure function of
its length: well-known Nasdaq tickers first (rank 1 is the most popular under a Zipf law), then
synthetic four-letter names that cannot collide with them.
"""

from __future__ import annotations

from functools import lru_cache

_KNOWN = (
    "AAPL MSFT AMZN NVDA GOOGL META TSLA AVGO COST GOOG NFLX AMD PEP ADBE CSCO TMUS INTC QCOM "
    "INTU TXN AMGN CMCSA AMAT HON ISRG BKNG SBUX VRTX GILD ADP MDLZ REGN ADI LRCX PANW MU KLAC "
    "SNPS CDNS MELI PYPL ASML CSX MAR ORLY ABNB CTAS MNST NXPI CRWD FTNT PCAR WDAY MRVL ROP "
    "CHTR KDP DXCM AEP ADSK PAYX CPRT ROST KHC IDXX ODFL FAST EXC BKR MCHP CTSH GEHC VRSK EA "
    "XEL LULU CSGP DDOG TTD ON FANG ANSS BIIB ZS CDW TEAM DLTR WBD MRNA ILMN SIRI JD LCID "
    "PDD ZM DOCU OKTA SPLK ALGN EBAY VRSN SWKS"
).split()
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@lru_cache(maxsize=8)
def _names(n: int) -> tuple[str, ...]:
    names = list(_KNOWN[:n])
    seen = set(_KNOWN)
    i = 0
    while len(names) < n:
        # Base-26 counter over "Q" + three letters: Nasdaq has few Q-prefixed listings and none of
        # the known list starts with QQ/QX; collisions are skipped anyway.
        a, b, c = i // 676 % 26, i // 26 % 26, i % 26
        extra = i // 17576
        name = "Q" + _LETTERS[a] + _LETTERS[b] + _LETTERS[c] + (str(extra) if extra else "")
        i += 1
        if name not in seen:
            seen.add(name)
            names.append(name)
    return tuple(names)


def symbol_names(n: int) -> list[str]:
    """The first ``n`` symbols (at most 8 characters each)."""
    if n < 1:
        raise ValueError("need at least one symbol")
    return list(_names(n))
