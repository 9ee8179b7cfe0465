"""Range encodings: prefix covers are exact and minimal; nibble rows match an independent count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.tofino.ranges import nibble_rows, prefix_cover


@st.composite
def ranges(draw, max_width: int = 12):
    width = draw(st.integers(1, max_width))
    lo = draw(st.integers(0, (1 << width) - 1))
    hi = draw(st.integers(lo, (1 << width) - 1))
    return lo, hi, width


def _trie_cover_count(lo: int, hi: int, start: int, size: int) -> int:
    """Prefixes needed by splitting the binary trie: a block inside the range is one prefix."""
    end = start + size - 1
    if end < lo or start > hi:
        return 0
    if lo <= start and end <= hi:
        return 1
    half = size // 2
    return _trie_cover_count(lo, hi, start, half) + _trie_cover_count(lo, hi, start + half, half)


@settings(max_examples=150, deadline=None)
@given(ranges())
def test_prefix_cover_matches_exactly_the_range_with_fewest_prefixes(r):
    lo, hi, width = r
    cover = prefix_cover(lo, hi, width)
    matched = sorted(v for v in range(1 << width) if any(v & m == p for p, m in cover))
    assert matched == list(range(lo, hi + 1))
    assert sum(1 for v in range(1 << width) for p, m in cover if v & m == p) == hi - lo + 1  # disjoint
    assert len(cover) == _trie_cover_count(lo, hi, 0, 1 << width)
    assert len(cover) <= max(1, 2 * width - 2)


def _nibble_rows_oracle(lo: int, hi: int, width: int) -> int:
    """Rows by explicit enumeration: split [lo, hi] into aligned 16^k blocks greedily from lo, then
    merge runs of same-size blocks that share all nibbles above their varying one (one TCAM row)."""
    digits = -(-width // 4)
    blocks = []
    v = lo
    while v <= hi:
        k = 0
        while k < digits and v % (16 ** (k + 1)) == 0 and v + 16 ** (k + 1) - 1 <= hi:
            k += 1
        blocks.append((v, k))
        v += 16 ** k
    rows = 0
    prev = None
    for start, k in blocks:
        key = (k, start // 16 ** (k + 1))
        if key != prev:
            rows += 1
        prev = key
    return rows


@settings(max_examples=150, deadline=None)
@given(ranges(max_width=12))
def test_nibble_rows_equal_an_independent_enumeration(r):
    lo, hi, width = r
    rows = nibble_rows(lo, hi, width)
    assert rows == _nibble_rows_oracle(lo, hi, width)
    assert 1 <= rows <= 2 * (-(-width // 4)) - 1


def test_nibble_rows_of_the_p4c_example():
    # bf-p4c's RangeEntries comment: 2 <= x <= 600 on 12 bits takes 5 rows.
    assert nibble_rows(2, 600, 12) == 5
    assert nibble_rows(0, 4095, 12) == 1
    assert nibble_rows(16, 31, 12) == 1


def test_out_of_range_values_are_refused():
    with pytest.raises(ValueError):
        prefix_cover(3, 2, 8)
    with pytest.raises(ValueError):
        nibble_rows(0, 256, 8)
