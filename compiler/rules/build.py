"""What the rule language's pieces mean, shared by the grammar's transformer (compiler/rules/parser.py) and
the hand-written parser (compiler/rules/fastparse.py), so that the two read one language.

Each function takes what a parser has already split out (the text of an address, the two sides of
a comparison, the actions of a rule) and returns the AST node, or a message string when the text
is wrong: the grammar's transformer raises it at the construct's location, the fast parser leaves
the rule to the grammar so that the error comes out of one place.
"""

from __future__ import annotations

import ipaddress

from compiler.base import SourceLocation
from compiler.rules import nodes as ast

_ATTRIBUTES = (ast.Field, ast.Aggregate, ast.StateVar)


def orient(left, op: str, right) -> tuple | str:
    """(attribute, op, constant) of ``left op right``, or what is wrong with it. A bare name is a string
    constant unless it must be the attribute (``h.f == GOOGL``); ``constant op attribute`` is flipped."""
    if isinstance(left, _ATTRIBUTES) and isinstance(right, ast.StateVar):
        right = ast.String(right.name, right.location)  # h.f == GOOGL, v == GOOGL
    elif isinstance(left, ast.StateVar) and isinstance(right, _ATTRIBUTES):
        left = ast.String(left.name, left.location)  # GOOGL == h.f
    if isinstance(left, _ATTRIBUTES) and isinstance(right, _ATTRIBUTES):
        return "both sides of the comparison are attributes; one must be a constant"
    if isinstance(left, _ATTRIBUTES):
        return left, op, right
    if isinstance(right, _ATTRIBUTES):
        if op == "prefix":
            return "'prefix' takes the attribute on the left: h.f prefix \"ABC\""
        return right, ast.FLIPPED[op], left
    return "both sides of the comparison are constants; one must be an attribute (header.field)"


def unescape(raw: str) -> str:
    """The value of a string literal without its quotes: a backslash keeps the character after it."""
    if "\\" not in raw:
        return raw
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def ipv4(text: str, location: SourceLocation | None) -> ast.IPAddress | str:
    """``a.b.c.d`` or ``a.b.c.d/len`` (spaces around the slash already removed)."""
    return _network(text, location, ipaddress.IPv4Network, ipaddress.IPv4Address, "IPv4 address", "IPv4")


def colon_address(text: str, location: SourceLocation | None) -> ast.IPAddress | ast.MACAddress | str:
    """A MAC address (six 2-digit groups) or an IPv6 address or prefix."""
    parts = text.split(":")
    if "/" not in text and len(parts) == 6 and all(len(p) == 2 for p in parts):
        return ast.MACAddress(int("".join(parts), 16), location)
    return _network(text, location, ipaddress.IPv6Network, ipaddress.IPv6Address, "IPv6 or MAC address", "IPv6")


def _network(text: str, location: SourceLocation | None, network, address, what: str, family: str):
    try:
        net = network(text, strict=False)
    except ValueError as exc:
        return f"bad {what} {text!r}: {exc}"
    if "/" in text and int(address(text.split("/")[0])) != int(net.network_address):
        return f"{family} prefix {text!r} has host bits set; did you mean {net}?"
    return ast.IPAddress(net.version, int(net.network_address), net.prefixlen, location)


def merge_actions(items: list) -> tuple:
    """A rule's actions: the ports of every ``fwd`` merged and sorted into one Forward (at the first
    ``fwd``), then the other actions in source order, each once."""
    ports: list[int] = []
    fwd_loc = None
    others: list[ast.Action] = []
    for item in items:
        if type(item) is ast.Forward:
            ports.extend(item.ports)
            fwd_loc = fwd_loc or item.location
        elif item not in others:
            others.append(item)
    if not ports:
        return tuple(others)
    return (ast.Forward(tuple(sorted(set(ports))), fwd_loc), *others)
