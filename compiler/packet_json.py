"""Packet JSON: the one reader of field values given as JSON (``simulate --packets``, ``explain
--packet``, netsim's and ``compile --trace``'s JSON lines); the format is docs/packets.md.

Why one reader: three copies had drifted (a float scaled, an integer did not; ``null`` crashed
explain; ``NaN`` and 5000-digit numbers crashed all three). Here JSON is parsed strictly - numbers
with a fraction or exponent become exact ``Decimal``, never floats; ``NaN``, ``Infinity`` and
numbers of more than :data:`~compiler.rules.values.MAX_NUMBER_DIGITS` digits are refused with the field
they were given for; duplicate keys are refused - and each value goes through
:func:`compiler.rules.values.packet_value` with the field's declared kind.

Header validity: a packet carries a header when it gives at least one of its fields (any key
``h.…``) or says ``"h.$valid": 1``; the row then holds ``h.$valid`` = 1, else 0 (``"h.$valid": 0``
says so outright), and the fields of an absent header read as 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Iterator, Mapping

from compiler import ir
from compiler.base import P4subError, SourceLocation
from compiler.rules import MAX_NUMBER_DIGITS, BadNumber, field_kind, packet_value, validity
from compiler.spec import QueryField

#: Arrays or objects nested deeper than this in one packet are refused (they are never field values).
MAX_DEPTH = 32


@dataclass(frozen=True)
class PacketField:
    """What the reader needs of one field: its width and how its JSON value is read (``kind``)."""

    name: str
    width: int
    kind: str = "integer"
    scale: int = 0

    def value(self, raw: object) -> int:
        return packet_value(raw, self.width, kind=self.kind, scale=self.scale, name=self.name)


def fields_from_query(fields: Mapping[str, QueryField]) -> dict[str, PacketField]:
    """Packet fields for query fields (and attributes)."""
    return {name: PacketField(name, q.width, field_kind(q.scale, q.is_string), q.scale)
            for name, q in fields.items()}


def fields_of_pipeline(pipeline: ir.Pipeline, names: Iterable[str], widths: Mapping[str, int]) -> dict[str, PacketField]:
    """Packet fields for the inputs ``names`` of a compiled pipeline, kinds from what it records of
    each attribute (``attributes``: scale, is_string) and from its spec's query fields."""
    out = {}
    for name in names:
        attr = pipeline.attributes.get(name, {})
        declared = pipeline.spec.query_fields.get(name)
        scale = attr.get("scale", declared.scale if declared else 0) or 0
        is_string = attr.get("is_string", declared.is_string if declared else False)
        width = widths[name]
        out[name] = PacketField(name, width, field_kind(scale, bool(is_string)), scale)
    return out


# -- strict JSON ---------------------------------------------------------------------------------


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _parse_int(text: str) -> int | BadNumber:
    digits = len(text.lstrip("-"))
    if digits > MAX_NUMBER_DIGITS:
        return BadNumber(f"a number of {digits} digits (at most {MAX_NUMBER_DIGITS})")
    return int(text)


def _parse_float(text: str) -> Decimal | BadNumber:
    if len(text) > MAX_NUMBER_DIGITS + 10:
        return BadNumber(f"a number of {len(text)} characters (at most {MAX_NUMBER_DIGITS} digits)")
    return Decimal(text)


def _parse_constant(text: str) -> BadNumber:
    return BadNumber(f"{text} is not a number a field can hold")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def loads(text: str, path: str, line: int = 1) -> Any:
    """``text`` parsed as strict JSON (see the module docstring); errors at ``path:line:column``."""
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise P4subError(f"JSON nested more than {MAX_DEPTH} levels deep", SourceLocation(path, line, 1))
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant,
                          object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise P4subError(f"not JSON: {exc.msg}", SourceLocation(path, line + exc.lineno - 1, exc.colno)) from None
    except _Duplicate as exc:
        raise P4subError(f"key {exc.key!r} is given twice", SourceLocation(path, line, _column(text, exc.key))) from None
    except (ValueError, RecursionError) as exc:
        raise P4subError(f"not JSON: {exc}", SourceLocation(path, line, 1)) from None


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (a cheap bound before json's recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _column(line: str, key: str) -> int:
    """The column of ``"key"`` in ``line`` (1 when it cannot be found)."""
    at = line.find(json.dumps(key))
    return at + 1 if at >= 0 else 1


# -- packets -------------------------------------------------------------------------------------


def packet_row(obj: Any, fields: Mapping[str, PacketField], path: str, line: int, *, text: str = "",
               headers: Iterable[str] = (), why: str = "", unit: str = "packet") -> dict[str, int]:
    """One packet's integer values (and ``h.$valid`` for ``headers``) from its parsed JSON object."""
    if not isinstance(obj, dict):
        got = "null" if obj is None else f"{'an array' if isinstance(obj, list) else type(obj).__name__}"
        raise P4subError(f"expected a JSON object of field values, got {got}", SourceLocation(path, line, 1))
    row: dict[str, int] = {}
    absent = set()
    for h in headers:
        flag = validity.field_name(h)
        if flag in obj:  # said outright (as `verify` prints counterexamples)
            if type(obj[flag]) is not int or obj[flag] not in (0, 1):
                raise P4subError(f"{flag}: expected 0 or 1 (whether the packet carries {h})",
                                 SourceLocation(path, line, _column(text, flag) if text else 1))
            present = bool(obj[flag])
        else:
            present = any(k.startswith(h + ".") for k in obj)
        row[flag] = int(present)
        if not present:
            absent.add(h)
    # A header the packet gives no field of is not carried: its fields read as 0 (whether or not the
    # pipeline tests its validity itself: another header's validity may imply it).
    given = {k.split(".", 1)[0] for k in obj if isinstance(k, str)}
    absent |= {name.split(".", 1)[0] for name in fields if "." in name} - given
    for name, field in fields.items():
        if name.split(".", 1)[0] in absent:
            row[name] = 0
            continue
        if name not in obj:
            raise P4subError(f"{unit} lacks field {name!r}" + (f", {why}" if why else ""), SourceLocation(path, line, 1))
        try:
            row[name] = field.value(obj[name])
        except P4subError as exc:
            raise P4subError(exc.message, SourceLocation(path, line, _column(text, name) if text else 1)) from None
    return row


def read_packet(text: str, fields: Mapping[str, PacketField], source: str, *, headers: Iterable[str] = (),
                why: str = "") -> dict[str, int]:
    """One packet given as JSON text (``explain --packet``); ``source`` names it in errors."""
    return packet_row(loads(text, source), fields, source, 1, text=text, headers=headers, why=why)


def read_lines(lines: Iterable[str], path: str, fields: Mapping[str, PacketField], *, headers: Iterable[str] = (),
               why: str = "", unit: str = "packet") -> Iterator[tuple[int, dict[str, Any], dict[str, int]]]:
    """``(line number, JSON object, row)`` for every non-blank line of a JSON-lines file."""
    headers = tuple(headers)
    for lineno, line in enumerate(lines, 1):
        if lineno == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if not line.strip():
            continue
        obj = loads(line, path, lineno)
        yield lineno, obj, packet_row(obj, fields, path, lineno, text=line, headers=headers, why=why, unit=unit)


def rows(lines: Iterable[str], path: str, fields: Mapping[str, PacketField], *, headers: Iterable[str] = (),
         why: str = "") -> Iterator[dict[str, int]]:
    """The rows of :func:`read_lines` alone."""
    for _, _, row in read_lines(lines, path, fields, headers=headers, why=why):
        yield row
