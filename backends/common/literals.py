"""Numbers as P4 literals and as the byte strings control-plane APIs carry.

P4 literals carry their width (``32w0x7a120``) so that no expression depends on type inference.
P4Runtime 1.3+ wants byte strings in *canonical* form: the shortest big-endian encoding (leading
zero bytes removed, zero itself is one zero byte); BF Runtime wants the full field width. Both
live here so that a value is encoded once, the same way, for every target.
"""

from __future__ import annotations


def all_ones(width: int) -> int:
    return (1 << width) - 1


def literal(value: int, width: int) -> str:
    """A sized P4 literal: ``literal(17, 8)`` -> ``8w17``; values above 255 in hex (``32w0x7a120``)."""
    if not 0 <= value <= all_ones(width):
        raise ValueError(f"{value} does not fit in {width} bits")
    return f"{width}w{value}" if value < 256 else f"{width}w0x{value:x}"


def canonical_bytes(value: int) -> bytes:
    """P4Runtime's canonical byte string: big-endian, no leading zero bytes, ``b"\\x00"`` for 0."""
    if value < 0:
        raise ValueError(f"negative value {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def width_bytes(value: int, width: int) -> bytes:
    """Big-endian bytes of a ``width``-bit field (``ceil(width / 8)`` bytes, as BF Runtime wants them)."""
    if not 0 <= value <= all_ones(width):
        raise ValueError(f"{value} does not fit in {width} bits")
    return value.to_bytes((width + 7) // 8, "big")


def from_bytes(data: bytes) -> int:
    return int.from_bytes(data, "big")


def prefix_mask(prefix_len: int, width: int) -> int:
    """The mask of the first ``prefix_len`` bits of a ``width``-bit field."""
    return all_ones(width) ^ all_ones(width - prefix_len)
