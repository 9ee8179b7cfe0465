"""Hypothesis strategies shared by the compiler tests: specs' attribute infos, rule ASTs, packets."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import strategies as st

from compiler import rules as ast
from compiler.spec.model import QueryField

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"and", "or", "not", "prefix", "true", "false", "fwd", "drop"})
STRINGS = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.", min_size=0, max_size=8)


@st.composite
def constants(draw) -> ast.Constant:
    kind = draw(st.sampled_from(["int", "hex", "dec", "str", "ip4", "ip6", "mac"]))
    if kind == "int":
        return ast.Number(draw(st.integers(0, 2**64)))
    if kind == "hex":
        return ast.Number(draw(st.integers(0, 2**64)), hex=True)
    if kind == "dec":
        return ast.Number(Decimal(draw(st.integers(0, 10**6))) / Decimal(10 ** draw(st.integers(1, 4))))
    if kind == "str":
        return ast.String(draw(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=10)))
    if kind == "ip4":
        plen = draw(st.integers(0, 32))
        value = draw(st.integers(0, 2**32 - 1)) >> (32 - plen) << (32 - plen) if plen else 0
        return ast.IPAddress(4, value, plen)
    if kind == "ip6":
        plen = draw(st.integers(0, 128))
        value = draw(st.integers(0, 2**128 - 1)) >> (128 - plen) << (128 - plen) if plen else 0
        return ast.IPAddress(6, value, plen)
    return ast.MACAddress(draw(st.integers(0, 2**48 - 1)))


@st.composite
def attributes(draw) -> ast.Attribute:
    kind = draw(st.sampled_from(["field", "field", "state", "agg"]))
    if kind == "field":
        return ast.Field(f"{draw(NAMES)}.{draw(NAMES)}")
    if kind == "state":
        return ast.StateVar(draw(NAMES))
    arg = draw(st.one_of(NAMES.map(ast.StateVar), st.tuples(NAMES, NAMES).map(lambda t: ast.Field(f"{t[0]}.{t[1]}"))))
    return ast.Aggregate(draw(st.sampled_from(ast.AGGREGATES)), arg)


@st.composite
def comparisons_(draw) -> ast.Comparison:
    value = draw(constants())
    op = draw(st.sampled_from(ast.OPERATORS if isinstance(value, ast.String) else ast.OPERATORS[:-1]))
    return ast.Comparison(draw(attributes()), op, value)


def filters(max_leaves: int = 6):
    """Flat and/or (no And directly inside And) so that print -> parse gives the same tree."""
    base = st.one_of(comparisons_(), st.booleans().map(ast.Const))

    def extend(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.And(tuple(_flat(xs, ast.And)))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Or(tuple(_flat(xs, ast.Or)))),
            children.map(ast.Not),
        )

    return st.recursive(base, extend, max_leaves=max_leaves)


def _flat(items, kind):
    out = []
    for x in items:
        out.extend(x.items if isinstance(x, kind) else [x])
    return out


@st.composite
def actions(draw) -> tuple:
    ports = draw(st.lists(st.integers(0, 511), max_size=4, unique=True))
    out = [ast.Forward(tuple(sorted(ports)))] if ports else []
    if draw(st.booleans()) or not out:
        out.append(draw(st.one_of(st.just(ast.Drop()), st.builds(lambda n, a: ast.Call(n, tuple(ast.Number(x) for x in a)),
                                                                      NAMES, st.lists(st.integers(0, 1000), max_size=3)))))
    uniq = []
    for a in out:
        if a not in uniq:
            uniq.append(a)
    return tuple(uniq)


rule_sets = st.lists(st.builds(ast.Rule, filters(), actions()), max_size=5).map(lambda rs: ast.RuleSet(tuple(rs)))
