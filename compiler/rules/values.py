"""How constants and packet values become the unsigned integers that switches match on.

One place for the encodings every part shares: strings are ASCII stored left-aligned and
space-padded to the field width (as ITCH stores stock symbols); fixed-point fields scale decimal
constants by 10**scale; addresses are their integer value. The compiler, the reference model and
the trace readers all go through these functions, so a value means the same thing everywhere.
"""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal

from compiler.base import P4subError

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
    """``50.25`` on a field with 4 implied decimals is 502500; raises ValueError if digits would be lost.

    Exact at any size (no rounding to the decimal context's 28 digits: a 128-bit field has 39).
    """
    sign, digits, exponent = Decimal(value).as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a number")
    mantissa = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if mantissa and shift > 4 * MAX_NUMBER_DIGITS:
        raise ValueError(f"{value} is too large")
    if shift >= 0:
        scaled = mantissa * 10 ** shift
    else:
        scaled, rest = divmod(mantissa, 10 ** -shift) if -shift <= len(digits) else (0, mantissa)
        if rest:
            raise ValueError(f"{value} has more decimals than the field's {scale}")
    return -scaled if sign else scaled


#: How a packet field's JSON value is read (docs/packets.md). One rule: a packet value may be written as a
#: rule's constant for that field may be written, and means what the constant means
#: (:func:`compiler.rules.typecheck` decides what a constant may be). ``integer`` (no scale, not declared
#: ``string``): a JSON integer, an address of the field's width, or, on a field of whole bytes, an ASCII
#: string (Camus's users compare undeclared ``bit<64>`` fields with ``"GOOGL"``); ``decimal`` (``scale=N``): a
#: JSON number or a decimal string, in whole units; ``string`` (declared ``string``): an ASCII string (an
#: address only when its text cannot fit) or a JSON integer, the raw value, as a rule may compare with one.
FIELD_KINDS = ("integer", "decimal", "string")
#: A JSON number of more digits than this is refused before it is converted (a 5000-digit number
#: would otherwise take Python's int() to its limit); 200 digits hold any 640-bit value.
MAX_NUMBER_DIGITS = 200
_DECIMAL_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_MAC_TEXT = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}", re.ASCII)
_IPV4_TEXT = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}", re.ASCII)


def field_kind(scale: int = 0, is_string: bool = False) -> str:
    """The :data:`FIELD_KINDS` entry of a field, from what the spec declares about it."""
    if scale:
        return "decimal"
    return "string" if is_string else "integer"


def _shown(raw: object) -> str:
    text = repr(raw) if not isinstance(raw, Decimal) else str(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(raw: object) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return f"the boolean {str(raw).lower()}"
    if isinstance(raw, dict):
        return "an object"
    if isinstance(raw, list):
        return "an array"
    return type(raw).__name__


def packet_value(raw: object, width: int, *, kind: str = "integer", scale: int = 0, name: str = "field") -> int:
    """A packet field's JSON value as the integer the switch sees; the encoding per ``kind`` is
    :data:`FIELD_KINDS`'s (docs/packets.md). Raises P4subError naming the field for anything else.

    ``raw`` comes from :func:`compiler.packet_json.loads`: JSON numbers with a fraction or an exponent
    are ``Decimal`` (exact, never a float), numbers too long or not finite are a :class:`BadNumber`.
    Nothing is guessed: a scaled field's ``12`` and ``12.0`` are both twelve whole units (as in the
    rules, where ``price > 12`` means 12.0000), ``"123"`` on a ``bit<32>`` field is the ASCII text it is in a
    rule (``f == "123"``), never the number, and an IPv4 field refuses ``"::1"`` as a rule does.
    """
    if kind not in FIELD_KINDS:
        raise ValueError(f"unknown field kind {kind!r}")
    if isinstance(raw, BadNumber):
        raise P4subError(f"{name}: {raw.why}")
    if raw is None or isinstance(raw, (bool, dict, list)):
        raise P4subError(f"{name}: expected {_expected(kind, width, scale)}, got {_json_type(raw)}")
    if kind == "decimal":
        value = _decimal_value(raw, width, scale, name)
    elif isinstance(raw, str):
        value = _string_value(raw, width, kind, name)
    elif isinstance(raw, Decimal):
        raise P4subError(f"{name}: {_shown(raw)} is not a JSON integer (it has a fraction or an exponent) and the "
                         "field has no decimal scale")
    elif isinstance(raw, int):
        value = raw
    else:
        raise P4subError(f"{name}: expected {_expected(kind, width, scale)}, got {_json_type(raw)}")
    if not 0 <= value < (1 << width):
        raise P4subError(f"{name}: value {_shown(raw)} does not fit in {width} bits")
    return value


def _expected(kind: str, width: int, scale: int) -> str:
    if kind == "decimal":
        return f"a decimal number (whole units, up to {scale} decimals) or a string of one"
    if kind == "string":
        return "a JSON string (the field is declared `string`) or a JSON integer"
    addr = {32: ", a dotted IPv4 address", 128: ", an IPv6 address", 48: ", a MAC address"}.get(width, "")
    return f"a JSON integer{addr}" + (" or an ASCII string" if width % 8 == 0 else "")


def _decimal_value(raw: object, width: int, scale: int, name: str) -> int:
    if isinstance(raw, str):
        if not _DECIMAL_TEXT.fullmatch(raw):
            raise P4subError(f"{name}: expected a decimal number such as \"123.45\" (the field has scale={scale}), "
                             f"got the string {_shown(raw)}")
        number = Decimal(raw)
    elif isinstance(raw, (int, Decimal)):
        number = Decimal(raw)
    else:
        raise P4subError(f"{name}: expected {_expected('decimal', width, scale)}, got {_json_type(raw)}")
    if number.is_signed() and number != 0:
        raise P4subError(f"{name}: value {_shown(raw)} does not fit in {width} bits (it is negative)")
    # Refuse magnitudes past the field before scaling: 1e400 must not become a 400-digit integer.
    if number != 0 and number.adjusted() + scale > width * 0.302 + 2:
        raise P4subError(f"{name}: value {_shown(raw)} does not fit in {width} bits")
    try:
        return scale_decimal(number, scale)
    except ValueError as exc:
        raise P4subError(f"{name}: {exc}") from None


def _string_value(text: str, width: int, kind: str, name: str) -> int:
    """A JSON string as a rule reads the same text: an address where the rule would write one
    unquoted (of the field's width: ``"::1"`` on a 32-bit field is an error, as in a rule), else ASCII
    left-aligned and space-padded. A field declared ``string`` reads its text first."""
    if kind == "string" and len(text) <= width // 8:
        return _text(text, width, name)
    try:
        address = _address(text)
    except ValueError as exc:
        if kind == "string":  # dotted digits that are no address: the text's own error says more
            return _text(text, width, name)
        raise P4subError(f"{name}: {exc}") from None
    if address is not None:
        family, bits, value = address
        if bits != width:
            raise P4subError(f"{name}: {_shown(text)} is {family}; a {width}-bit field does not hold one")
        return value
    return _text(text, width, name)


def _text(text: str, width: int, name: str) -> int:
    if width % 8:
        raise P4subError(f"{name}: a string needs a field of whole bytes; the field has {width} bits "
                         f"(got the string {_shown(text)})")
    try:
        return encode_string(text, width)
    except ValueError as exc:
        raise P4subError(f"{name}: {exc}") from None


def _address(text: str) -> tuple[str, int, int] | None:
    """(what, width, value) when ``text`` is written as an IPv4, IPv6 or MAC address, else None;
    ValueError for dotted digits that are no IPv4 address (``"999.1.1.1"``)."""
    if _IPV4_TEXT.fullmatch(text):
        try:
            return "an IPv4 address", 32, int(ipaddress.IPv4Address(text))
        except ValueError:
            raise ValueError(f"{_shown(text)} is not an IPv4 address") from None
    if _MAC_TEXT.fullmatch(text):
        return "a MAC address", 48, int(text.replace(":", ""), 16)
    if ":" in text and text.isascii():
        try:
            return "an IPv6 address", 128, int(ipaddress.IPv6Address(text))
        except ValueError:
            return None
    return None


def json_value(value: int, width: int, *, kind: str = "integer", scale: int = 0) -> int | str:
    """The JSON a packet reader reads back as ``value`` (for printing packets, as ``verify`` does):
    a string field's text, a scaled field's exact decimal as a string (``"50.0001"``), else the integer.
    A string field's value that is no padded ASCII text (``0``, a NUL byte, a space inside) is printed
    as its integer, which reads back the same."""
    if kind == "string":
        text = decode_string(value, width)
        try:
            if encode_string(text, width) == value:
                return text
        except ValueError:
            pass
        return value
    if kind == "decimal":
        whole, frac = divmod(value, 10 ** scale)
        return f"{whole}.{frac:0{scale}d}".rstrip("0").rstrip(".") if frac else str(whole)
    return value


class BadNumber:
    """A JSON number p4sub refuses to convert (NaN, Infinity, thousands of digits): kept as a marker
    so that the error names the field it was given for."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"BadNumber({self.why!r})"
