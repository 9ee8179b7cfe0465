"""How constants and packet values become the unsigned integers that switches match on.

One place for the encodings every part shares: strings are ASCII stored left-aligned and
space-padded to the field width (as ITCH stores stock symbols); fixed-point fields scale decimal
constants by 10**scale; addresses are their integer value. The compiler, the reference model and
the trace readers all go through these functions, so a value means the same thing everywhere.
"""

from __future__ import annotations

import ipaddress
from decimal import Decimal

from compiler.errors import P4subError

PAD = 0x20  # ASCII space


def encode_string(text: str, width: int) -> int:
    """A string left-aligned in ``width`` bits, padded with spaces; raises ValueError when it does not fit.

    This is Camus's encoding (``space_pad_str`` then ``binary_of_str`` in its P4_Runtime.ml): the first
    character in the most significant byte, ASCII spaces after the last. Camus lets a string longer
    than the field overflow it and pads a field of 12 bits to one byte; both are errors here.
    """
    raw = _ascii(text)
    nbytes = width // 8
    if width % 8:
        raise ValueError(f"a {width}-bit field cannot hold a string (not a whole number of bytes)")
    if len(raw) > nbytes:
        raise ValueError(f"string {text!r} has {len(raw)} bytes; the field holds {nbytes}")
    return int.from_bytes(raw + bytes([PAD]) * (nbytes - len(raw)), "big")


def string_prefix_range(text: str, width: int) -> tuple[int, int]:
    """The values whose first bytes are ``text``: an aligned block, so also a ternary prefix."""
    raw = _ascii(text)
    nbytes = width // 8
    if width % 8:
        raise ValueError(f"a {width}-bit field cannot hold a string (not a whole number of bytes)")
    if len(raw) > nbytes:
        raise ValueError(f"prefix {text!r} has {len(raw)} bytes; the field holds {nbytes}")
    free = (nbytes - len(raw)) * 8
    lo = int.from_bytes(raw, "big") << free if raw else 0
    return lo, lo | ((1 << free) - 1)


def _ascii(text: str) -> bytes:
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError(f"string {text!r} is not ASCII (a switch field holds one byte per character)") from None


def decode_string(value: int, width: int) -> str:
    """Inverse of :func:`encode_string` (trailing spaces removed); non-ASCII bytes shown as escapes."""
    raw = value.to_bytes(width // 8, "big").rstrip(b" ")
    return raw.decode("ascii", errors="backslashreplace")


def scale_decimal(value: int | Decimal, scale: int) -> int:
    """``50.25`` on a field with 4 implied decimals is 502500; raises ValueError if digits would be lost."""
    scaled = Decimal(value) * (Decimal(10) ** scale)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} has more decimals than the field's {scale}")
    return int(scaled)


def packet_value(raw: object, width: int, *, scale: int = 0, name: str = "field") -> int:
    """A field value given in JSON (int, string, dotted IPv4, IPv6, MAC) as the integer the switch sees.

    Integers are taken as the raw field value (an ITCH price of 123.45 is 1234500). A string is read
    as an address when the field has an address's width and the text looks like one, else as an
    ASCII string padded to the field.
    """
    if isinstance(raw, bool):
        raise P4subError(f"{name}: expected a number or a string, got {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, float):
        if not scale:
            raise P4subError(f"{name}: {raw} is not an integer and the field has no decimal scale")
        value = scale_decimal(Decimal(repr(raw)), scale)
    elif isinstance(raw, str):
        value = _string_value(raw, width, name)
    else:
        raise P4subError(f"{name}: expected a number or a string, got {type(raw).__name__}")
    if not 0 <= value < (1 << width):
        raise P4subError(f"{name}: value {raw!r} does not fit in {width} bits")
    return value


def _string_value(text: str, width: int, name: str) -> int:
    try:
        if width == 32 and text.count(".") == 3:
            return int(ipaddress.IPv4Address(text))
        if width == 128 and ":" in text:
            return int(ipaddress.IPv6Address(text))
        if width == 48 and text.count(":") == 5:
            return int(text.replace(":", ""), 16)
        return encode_string(text, width)
    except ValueError as exc:
        raise P4subError(f"{name}: {exc}") from None
