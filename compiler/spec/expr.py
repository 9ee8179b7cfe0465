"""Integer expressions of a spec's parser, with P4_16 width semantics.

A spec's parser computes a few values at run time: ``packet.advance(((bit<32>)(msg_len - 1)) * 8)``.
:class:`~compiler.spec.Advance` keeps such an expression as text (so that the Spec stays plain,
JSON-serialisable data); this module holds the tree that text stands for, and the three things
everyone needs from it: :func:`render` (P4 text, with or without the ``hdr.`` prefix a backend
adds), :func:`evaluate` (the reference parser runs it on packet values) and :func:`refs`.
:func:`compiler.spec.reader.parse_expression` turns the text back into a tree.

Widths follow P4_16: ``bit<W>`` arithmetic wraps modulo 2**W, an integer literal without a width
takes the width of the other operand, a cast truncates or zero-extends, a shift keeps the width of
its left operand. Two operands of different widths are a type error (p4c rejects them too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

from compiler.base import SourceLocation, SpecError

#: Widths and shift amounts beyond this are refused, so that a hostile spec cannot make
#: p4sub build gigabyte integers (P4 programs never come near it).
MAX_WIDTH = 1 << 16

BINARY_OPS = ("*", "/", "%", "+", "-", "<<", ">>", "&", "^", "|")
UNARY_OPS = ("-", "~")
_PRECEDENCE = {"*": 6, "/": 6, "%": 6, "+": 5, "-": 5, "<<": 4, ">>": 4, "&": 3, "^": 2, "|": 1}


@dataclass(frozen=True)
class Num:
    """A literal; ``width`` is None for an arbitrary-precision P4 ``int`` literal."""

    value: int
    width: int | None = None
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Ref:
    """A header field as the Spec names it: ``ipv4.ihl``, ``mold_msg.last.msg_len``, ``s[0].f``."""

    name: str
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Lookahead:
    """``packet.lookahead<bit<N>>()``: the next N bits, not consumed."""

    width: int
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cast:
    width: int
    operand: "Expr"
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Unary:
    op: str
    operand: "Expr"
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Binary:
    op: str
    left: "Expr"
    right: "Expr"
    location: SourceLocation | None = field(default=None, compare=False)


Expr = Union[Num, Ref, Lookahead, Cast, Unary, Binary]

#: ``lookup(ref_name) -> (value, width)`` supplies field values to :func:`evaluate`.
Lookup = Callable[[str], tuple[int, int]]
#: ``peek(width) -> value`` supplies lookahead bits to :func:`evaluate`.
Peek = Callable[[int], int]


def refs(expr: Expr) -> list[Ref]:
    """Every field reference in ``expr``, left to right."""
    if isinstance(expr, Ref):
        return [expr]
    if isinstance(expr, (Cast, Unary)):
        return refs(expr.operand)
    if isinstance(expr, Binary):
        return refs(expr.left) + refs(expr.right)
    return []


def is_constant(expr: Expr) -> bool:
    if isinstance(expr, Num):
        return True
    if isinstance(expr, (Cast, Unary)):
        return is_constant(expr.operand)
    if isinstance(expr, Binary):
        return is_constant(expr.left) and is_constant(expr.right)
    return False


def width_of(expr: Expr, field_width: Callable[[str], int]) -> int | None:
    """The P4 width of ``expr`` (None for an ``int``); raises SpecError on mismatched widths."""
    if isinstance(expr, Num):
        return expr.width
    if isinstance(expr, Ref):
        return field_width(expr.name)
    if isinstance(expr, (Lookahead, Cast)):
        return expr.width
    if isinstance(expr, Unary):
        return width_of(expr.operand, field_width)
    left = width_of(expr.left, field_width)
    if expr.op in ("<<", ">>"):
        width_of(expr.right, field_width)
        return left
    right = width_of(expr.right, field_width)
    if left is not None and right is not None and left != right:
        raise SpecError(
            f"operands of '{expr.op}' have different widths (bit<{left}> and bit<{right}>); cast one side, "
            f"e.g. (bit<{max(left, right)}>)", expr.location)
    return left if left is not None else right


def evaluate(expr: Expr, lookup: Lookup | None = None, peek: Peek | None = None) -> int:
    """The value of ``expr`` under P4 semantics; a ``bit<W>`` result is in ``[0, 2**W)``.

    Raises SpecError for a division by zero, a negative ``int`` where P4 forbids one, or a
    reference that ``lookup`` cannot resolve (so a caller can turn it into a status).
    """
    return _eval(expr, lookup, peek)[0]


def _eval(expr: Expr, lookup: Lookup | None, peek: Peek | None) -> tuple[int, int | None]:
    if isinstance(expr, Num):
        return expr.value, expr.width
    if isinstance(expr, Ref):
        if lookup is None:
            raise SpecError(f"{expr.name} is not a constant", expr.location)
        return lookup(expr.name)
    if isinstance(expr, Lookahead):
        if peek is None:
            raise SpecError("packet.lookahead is not a constant", expr.location)
        return peek(expr.width), expr.width
    if isinstance(expr, Cast):
        value, _ = _eval(expr.operand, lookup, peek)
        return value & ((1 << expr.width) - 1), expr.width
    if isinstance(expr, Unary):
        value, width = _eval(expr.operand, lookup, peek)
        if expr.op == "-":
            return _wrap(-value, width, expr), width
        if width is None:
            raise SpecError("'~' needs a value of known width; write e.g. ~8w5 or ~(bit<8>)x", expr.location)
        return value ^ ((1 << width) - 1), width
    left, lw = _eval(expr.left, lookup, peek)
    right, rw = _eval(expr.right, lookup, peek)
    if expr.op in ("<<", ">>"):
        if right < 0:
            raise SpecError("negative shift amount", expr.location)
        if expr.op == ">>":
            return left >> right, lw
        if lw is not None:
            return (left << right) & ((1 << lw) - 1) if right < lw else 0, lw
        if right > MAX_WIDTH:
            raise SpecError(f"shift by {right} is too large", expr.location)
        return left << right, None
    width = lw if lw is not None else rw
    if expr.op in ("/", "%"):
        if right == 0:
            raise SpecError("division by zero", expr.location)
        if left < 0 or right < 0:
            raise SpecError(f"'{expr.op}' is only defined on non-negative values in P4", expr.location)
        value = left // right if expr.op == "/" else left % right
    elif expr.op == "*":
        value = left * right
    elif expr.op == "+":
        value = left + right
    elif expr.op == "-":
        value = left - right
    elif expr.op == "&":
        value = left & right
    elif expr.op == "^":
        value = left ^ right
    else:
        value = left | right
    return _wrap(value, width, expr), width


def _wrap(value: int, width: int | None, expr: Expr) -> int:
    if width is None:
        if abs(value).bit_length() > MAX_WIDTH:
            raise SpecError("constant expression is too large", expr.location)
        return value
    return value & ((1 << width) - 1)


def render(expr: Expr, ref_prefix: str = "") -> str:
    """P4 text of ``expr``; ``ref_prefix="hdr."`` turns Spec field names into P4 l-values.

    The text without a prefix is what :class:`~compiler.spec.Advance` stores;
    :func:`compiler.spec.reader.parse_expression` reads it back to an equal tree.
    """
    return _render(expr, ref_prefix, 0)


def _render(expr: Expr, prefix: str, context: int) -> str:
    if isinstance(expr, Num):
        return f"{expr.width}w{expr.value}" if expr.width is not None else str(expr.value)
    if isinstance(expr, Ref):
        return prefix + expr.name
    if isinstance(expr, Lookahead):
        return f"packet.lookahead<bit<{expr.width}>>()"
    if isinstance(expr, Cast):
        return f"(bit<{expr.width}>){_render(expr.operand, prefix, 7)}"
    if isinstance(expr, Unary):
        return f"{expr.op}{_render(expr.operand, prefix, 7)}"
    level = _PRECEDENCE[expr.op]
    # Left-associative: the right operand needs parentheses at equal precedence.
    text = f"{_render(expr.left, prefix, level)} {expr.op} {_render(expr.right, prefix, level + 1)}"
    return f"({text})" if level < context else text
