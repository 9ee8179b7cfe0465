"""The Camus filter approximation scheme (CoNEXT'20 §4): numeric constants rounded to multiples of α.

Rewriting ``price > 53`` and ``price > 57`` both to ``price > 50`` makes many filters identical, so
a switch that stores the filters of a whole subtree stores far fewer distinct ones, at the price
of extra traffic. Every rewrite here matches a *superset* of what the original matched, so a
subscriber never loses a packet (no false negatives); hosts filter exactly on their last hop,
because :mod:`compiler.network.routing` approximates only ports that lead to other switches.

How each comparison on a numeric field with constant ``c`` is weakened (``⌊c⌋``/``⌈c⌉`` are the
multiples of α just below/above ``c``):

* ``f > c`` / ``f >= c``  ->  ``f > ⌊c⌋`` / ``f >= ⌊c⌋``
* ``f < c`` / ``f <= c``  ->  ``f < ⌈c⌉`` / ``f <= ⌈c⌉``  (``true`` when ``⌈c⌉`` passes the field's maximum)
* ``f == c``  ->  ``f >= ⌊c⌋ and f < ⌊c⌋ + α``  (the bucket of ``c``; a bound outside the field is dropped)
* ``f != c``  ->  ``true``

Superset under negation needs care (weakening ``f > c`` inside a ``not`` strengthens the filter), so
negations are pushed to the atoms first (:func:`push_negations`); numeric atoms flip their operator,
and an atom that stays negated (``not f prefix "AB"``) is left exact. Strings, addresses, MACs and
fields declared ``@query_field_exact`` or ``lpm`` are never rewritten (an equality there cannot
become a range). α is in the units the rules are written in (dollars for a price with 4 implied
decimals), per field or for every numeric field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Mapping

from compiler import rules as ast
from compiler.base import P4subError
from compiler.spec import QueryField

_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
APPROXIMABLE_KINDS = (None, "range", "ternary")


@dataclass(frozen=True)
class Alpha:
    """The discretisation unit: ``default`` for every numeric field, ``per_field`` overrides (None: exact)."""

    default: Decimal | None = None
    per_field: Mapping[str, Decimal] = field(default_factory=dict)

    def of(self, name: str) -> Decimal | None:
        return self.per_field.get(name, self.default)

    @property
    def is_identity(self) -> bool:
        return self.default is None and not self.per_field

    def __hash__(self) -> int:
        return hash((self.default, tuple(sorted(self.per_field.items()))))


def parse_alpha(text: str, what: str = "--alpha") -> Decimal:
    """A positive α from the command line (``10``, ``0.5``)."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise P4subError(f"{what} {text!r}: expected a positive number") from None
    if not value.is_finite() or value <= 0:
        raise P4subError(f"{what} {text!r}: expected a positive number")
    return value


def check_alpha(alpha: Alpha, fields: Mapping[str, QueryField]) -> None:
    """Refuse an α that names an unknown field or is finer than a field's resolution (``10**-scale``)."""
    for name in alpha.per_field:
        if name not in fields:
            raise P4subError(f"--alpha-field {name}: no rule tests that field")
    for name, info in fields.items():
        a = alpha.of(name)
        if a is None or not _approximable(info):
            continue
        if (a * (Decimal(10) ** info.scale)) != (a * (Decimal(10) ** info.scale)).to_integral_value():
            raise P4subError(f"alpha {a} is finer than {name}'s resolution ({Decimal(1).scaleb(-info.scale)})")


def push_negations(f: ast.Filter) -> ast.Filter:
    """An equivalent filter whose ``not`` apply only to atoms that have no negated operator (``prefix``)."""
    return _nnf(f, False)


def _nnf(f: ast.Filter, neg: bool) -> ast.Filter:
    if isinstance(f, ast.Not):
        return _nnf(f.item, not neg)
    if isinstance(f, ast.Const):
        return ast.Const(f.value != neg, f.location)
    if isinstance(f, (ast.And, ast.Or)):
        items = tuple(_nnf(i, neg) for i in f.items)
        kind = type(f) if not neg else (ast.Or if isinstance(f, ast.And) else ast.And)
        return kind(items, f.location)
    if not neg:
        return f
    if f.op in _NEGATED:
        return ast.Comparison(f.attribute, _NEGATED[f.op], f.value, f.location)
    return ast.Not(f, f.location)


def approximate(f: ast.Filter, alpha: Alpha, fields: Mapping[str, QueryField]) -> ast.Filter:
    """A filter matching a superset of ``f``'s packets, with numeric constants on multiples of α.

    ``fields`` are the attribute infos of type checking (:class:`compiler.rules.typecheck.TypedRules`).
    With an identity α the filter is returned unchanged.
    """
    if alpha.is_identity:
        return f
    return _simplify(_weaken(push_negations(f), alpha, fields))


def _weaken(f: ast.Filter, alpha: Alpha, fields: Mapping[str, QueryField]) -> ast.Filter:
    if isinstance(f, (ast.And, ast.Or)):
        return type(f)(tuple(_weaken(i, alpha, fields) for i in f.items), f.location)
    if isinstance(f, ast.Comparison):
        return _weaken_atom(f, alpha, fields)
    return f  # constants, and atoms left negated by push_negations (kept exact: sound)


def _approximable(info: QueryField) -> bool:
    return not info.is_string and info.match_kind in APPROXIMABLE_KINDS


def _weaken_atom(cmp: ast.Comparison, alpha: Alpha, fields: Mapping[str, QueryField]) -> ast.Filter:
    name = cmp.attribute.name
    info = fields.get(name)
    a = alpha.of(name)
    if a is None or info is None or not isinstance(cmp.value, ast.Number) or not _approximable(info):
        return cmp
    c = Decimal(cmp.value.value)
    top = Decimal((1 << info.width) - 1) / (Decimal(10) ** info.scale)
    lo = _floor(c, a)
    hi = _ceil(c, a)
    loc = cmp.location
    if cmp.op in (">", ">="):
        return _cmp(cmp, cmp.op, lo)
    if cmp.op in ("<", "<="):
        return ast.Const(True, loc) if hi > top else _cmp(cmp, cmp.op, hi)
    if cmp.op == "!=":
        return ast.Const(True, loc)
    # ==: the bucket [lo, lo + α) holding c
    parts: list[ast.Filter] = []
    if lo > 0:
        parts.append(_cmp(cmp, ">=", lo))
    if lo + a <= top:
        parts.append(_cmp(cmp, "<", lo + a))
    if not parts:
        return ast.Const(True, loc)
    return parts[0] if len(parts) == 1 else ast.And(tuple(parts), loc)


def _floor(c: Decimal, a: Decimal) -> Decimal:
    return Decimal(math.floor(c / a)) * a


def _ceil(c: Decimal, a: Decimal) -> Decimal:
    return Decimal(math.ceil(c / a)) * a


def _cmp(cmp: ast.Comparison, op: str, value: Decimal) -> ast.Comparison:
    number = int(value) if value == value.to_integral_value() else value.normalize()
    return ast.Comparison(cmp.attribute, op, ast.Number(number, False, cmp.value.location), cmp.location)


def _simplify(f: ast.Filter) -> ast.Filter:
    """Fold ``true``/``false`` and drop repeated items (rounding makes siblings equal)."""
    if isinstance(f, ast.Not):
        inner = _simplify(f.item)
        return ast.Const(not inner.value, f.location) if isinstance(inner, ast.Const) else ast.Not(inner, f.location)
    if not isinstance(f, (ast.And, ast.Or)):
        return f
    absorbing = isinstance(f, ast.Or)  # true absorbs an or, false absorbs an and
    items: list[ast.Filter] = []
    for item in (_simplify(i) for i in f.items):
        if isinstance(item, ast.Const):
            if item.value == absorbing:
                return ast.Const(absorbing, f.location)
            continue
        for sub in (item.items if type(item) is type(f) else (item,)):
            if sub not in items:
                items.append(sub)
    if not items:
        return ast.Const(not absorbing, f.location)
    return items[0] if len(items) == 1 else type(f)(tuple(items), f.location)
