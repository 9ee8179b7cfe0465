"""A range key too wide for Tofino's ``range`` match, matched as two slices: high bits, low bits.

Tofino matches a ``range`` key natively only when it fits five PHV nibbles (20 bits,
:attr:`Target.widest_range_key`); a 32-bit price cannot. Its prefix cover (:func:`ranges.prefix_cover`)
costs up to ``2w - 2`` TCAM rows per range. Cut the value ``v`` into a high slice ``H = v >> l``
(matched ``ternary``) and a low slice ``L = v & (2^l - 1)`` of ``l <= 20`` bits (matched as a native
``range``), and a range costs far fewer rows:

* :func:`pieces`: any range ``[a, b]`` is at most three (high, low) pieces with one priority: ``H ==
  a_H, L >= a_L``; ``a_H < H < b_H`` with ``L`` free (the high slice's prefix cover, one row each);
  ``H == b_H, L <= b_L``. A low-slice range costs its nibble rows (:func:`ranges.nibble_rows`);
* :func:`steps`: a table whose entries are disjoint intervals of one key (a compressed code's table,
  Camus §5.2: the value -> the index of its elementary interval) needs even less. Entries of later
  intervals win by priority, so interval ``i`` only has to *start* right: it is ``H == a_H, L in [a_L, x]``
  for whatever ``x`` past its end inside the block costs fewest nibble rows, and one entry per block
  that holds a start, ``H`` in a prefix-cheap superset of the blocks up to the next start with ``L``
  free, carries the block's last interval over the following blocks.

Which ``l`` and which of these (or the plain prefix cover) a table gets is the layout's choice
(:mod:`backends.tofino.layout`), by the TCAM blocks each would take.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.tofino.ranges import nibble_rows, prefix_cover
from compiler.base import limits


@dataclass(frozen=True)
class Piece:
    """One (high, low) row group: ``H & high_mask == high_value`` and ``low_lo <= L <= low_hi``."""

    high_value: int
    high_mask: int
    low_lo: int
    low_hi: int


def pieces(lo: int, hi: int, width: int, low_bits: int) -> list[Piece]:
    """The (high, low) pieces whose union is exactly ``[lo, hi]`` of a ``width``-bit key (disjoint)."""
    if not 0 < low_bits < width or not 0 <= lo <= hi < (1 << width):
        raise ValueError(f"range [{lo}, {hi}] of {width} bits cannot be cut at bit {low_bits}")
    low_top = (1 << low_bits) - 1
    full = (1 << (width - low_bits)) - 1
    a_high, a_low, b_high, b_low = lo >> low_bits, lo & low_top, hi >> low_bits, hi & low_top
    if a_high == b_high:
        return [Piece(a_high, full, a_low, b_low)]
    out: list[Piece] = []
    first, last = a_high, b_high
    if a_low:
        out.append(Piece(a_high, full, a_low, low_top))
        first += 1
    tail = None
    if b_low != low_top:
        tail = Piece(b_high, full, 0, b_low)
        last -= 1
    if first <= last:
        out.extend(Piece(v, m, 0, low_top) for v, m in prefix_cover(first, last, width - low_bits))
    if tail is not None:
        out.append(tail)
    return out


def steps(intervals: list[tuple[int, int]], width: int, low_bits: int, nibble_bits: int = 4) -> list[tuple[Piece, int]]:
    """Pieces for disjoint intervals that together cover ``[intervals[0][0], 2^width - 1]``, sorted.

    Returns (piece, index of the interval it stands for); the caller gives piece ``(p, i)`` priority
    ``i + 1`` (a later interval wins). A value below the first interval matches no piece. The caller
    fills gaps between its intervals (and after the last one) with intervals of its own.
    """
    low_top = (1 << low_bits) - 1
    high_top = (1 << (width - low_bits)) - 1
    full = high_top
    out: list[tuple[Piece, int]] = []
    last_of_block: dict[int, int] = {}
    for i, (lo, hi) in enumerate(intervals):
        if not i % 1024:
            limits.checkpoint()  # the compile's time and memory budget (compiler.base.limits)
        block = lo >> low_bits
        end = hi & low_top if hi >> low_bits == block else low_top
        out.append((Piece(block, full, lo & low_top, _cheapest_end(lo & low_top, end, low_bits, nibble_bits)), i))
        last_of_block[block] = i
    blocks = sorted(last_of_block)
    for n, block in enumerate(blocks):
        if block == high_top:
            continue
        need = blocks[n + 1] if n + 1 < len(blocks) else high_top
        cover = min((prefix_cover(block + 1, min(high_top, need | ((1 << k) - 1)), width - low_bits)
                     for k in range(width - low_bits + 1)), key=len)
        out.extend((Piece(v, m, 0, low_top), last_of_block[block]) for v, m in cover)
    return out


def _cheapest_end(lo: int, end: int, bits: int, nibble_bits: int) -> int:
    """The ``x`` in ``[end, 2^bits - 1]`` whose range ``[lo, x]`` takes fewest nibble rows (rounding
    ``end`` up to whole low nibbles of ones leaves those nibbles free)."""
    top = (1 << bits) - 1
    ends = {min(top, end | ((1 << (nibble_bits * k)) - 1)) for k in range(-(-bits // nibble_bits) + 1)}
    return min(sorted(ends), key=lambda x: nibble_rows(lo, x, bits, nibble_bits))
