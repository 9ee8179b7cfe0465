"""Two ways a TCAM can hold an integer range, and what each costs in TCAM rows.

A Tofino ``range`` key is matched nibble by nibble (p4c ``mau/resource_estimate.cpp``, the
``RangeEntries`` comment, after the uArch's "DirtCAM" section): each TCAM row fixes the nibbles above
one position, lets the nibble at that position take any contiguous set of its 16 values, and leaves
the nibbles below it free. :func:`nibble_rows` counts those rows exactly; p4c's estimate is the
bound ``min(2 * nibbles - 1, 8)``. A key wider than the device's range limit cannot use this, and
is matched as ``ternary`` with the range's prefix cover (:func:`prefix_cover`, at most ``2w - 2``
prefixes): the classic range-to-prefix expansion of packet classifiers.
"""

from __future__ import annotations


def prefix_cover(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """The fewest ``(value, mask)`` prefixes whose union is exactly ``[lo, hi]`` (ascending order).

    Greedy from ``lo``: take the largest aligned block that starts at ``lo`` and stays within
    ``hi``. That block is the largest prefix containing ``lo`` inside the range, so the cover is
    minimal. Cost: O(width) prefixes.
    """
    if not 0 <= lo <= hi < (1 << width):
        raise ValueError(f"range [{lo}, {hi}] is not within {width} bits")
    full = (1 << width) - 1
    out: list[tuple[int, int]] = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while lo + size - 1 > hi:
            size >>= 1
        out.append((lo, full ^ (size - 1)))
        lo += size
    return out


def nibble_rows(lo: int, hi: int, width: int, nibble_bits: int = 4) -> int:
    """TCAM rows a nibble-encoded range match needs for ``[lo, hi]`` on a ``width``-bit key.

    Recursive on the highest nibble where ``lo`` and ``hi`` differ: the part of ``lo``'s block
    above ``lo`` and the part of ``hi``'s block below ``hi`` recurse one nibble down, and the whole
    blocks strictly between them are one row (their top nibble takes a contiguous set of values).
    """
    if not 0 <= lo <= hi < (1 << width):
        raise ValueError(f"range [{lo}, {hi}] is not within {width} bits")
    digits = max(1, -(-width // nibble_bits))
    return _rows(lo, hi, digits - 1, nibble_bits)


def _rows(lo: int, hi: int, pos: int, bits: int) -> int:
    shift = pos * bits
    block = 1 << shift
    a, b = lo >> shift, hi >> shift
    if a == b:
        return _rows(lo, hi, pos - 1, bits) if pos else 1
    rows = 0
    if lo & (block - 1):
        rows += _rows(lo, lo | (block - 1), pos - 1, bits)
        a += 1
    if (hi & (block - 1)) != block - 1:
        rows += _rows(hi & ~(block - 1), hi, pos - 1, bits)
        b -= 1
    if a <= b:
        rows += 1
    return rows


def nibbles(width: int, nibble_bits: int = 4) -> int:
    """PHV nibbles a key of ``width`` bits occupies when it starts on a nibble boundary."""
    return -(-width // nibble_bits)


def tcam_blocks_wide(match_bytes: int, range_keys: int = 0) -> int:
    """TCAM blocks side by side for a key of ``match_bytes`` ternary-crossbar bytes (a range nibble
    counts a byte: bf-p4c matches it in a 4b "dirtcam" encoding, a byte per nibble).

    What bf-p4c's table format does (``mau/table_format.cpp``, ``allocate_all_ternary_match``), not
    its first-pass estimate (2 blocks per 11 bytes, 1 up to 6): a TCAM is 44 bits, 5 bytes of a
    ternary group and one nibble of a mid byte two TCAMs share, and every table that takes runtime
    updates keeps its version bits in a mid-byte nibble. So a block holds 11 nibbles and one of the
    table's nibbles is the version: 6 bytes need 2 blocks, 11 bytes 3 (bf-p4c placed ITCH's
    48-bit-ternary + 16-bit-range + 8-bit-state stock table 3 wide, where its estimate says 2). A
    TCAM holds at most one range key (the multirange distributor works key by key).
    """
    nibbles_needed = 2 * match_bytes + VERSION_NIBBLES
    return max(1, -(-nibbles_needed // TCAM_NIBBLES), range_keys)


def ternary_groups(match_bytes: int, range_keys: int = 0) -> int:
    """Ternary-crossbar groups (5 bytes each; 12 per stage) a TCAM key takes: its bytes less what the
    mid-byte nibbles of its blocks hold beside the version."""
    wide = tcam_blocks_wide(match_bytes, range_keys)
    in_groups = max(0, 2 * match_bytes - (wide - VERSION_NIBBLES))
    return max(1, -(-in_groups // (2 * GROUP_BYTES)))


#: Nibbles of key a 44-bit TCAM block matches; bytes of one ternary-crossbar group; the version nibble.
TCAM_NIBBLES = 11
GROUP_BYTES = 5
VERSION_NIBBLES = 1
