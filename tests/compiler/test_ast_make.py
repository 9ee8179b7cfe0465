"""compiler/ast_make.py builds, through the slots' setters, the very nodes the classes' constructors
build: equal, same hash, repr, str, fields and locations, and they pickle and copy alike."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from compiler import ast_make
from compiler import rules as ast
from compiler.errors import SourceLocation

locations = st.builds(SourceLocation, st.text(max_size=5), st.integers(1, 10**6), st.integers(0, 10**4))
values = st.one_of(st.integers(-10**30, 10**30), st.decimals(allow_nan=False, allow_infinity=False, places=3))


def _same(fast, slow) -> None:
    assert type(fast) is type(slow)
    assert fast == slow and hash(fast) == hash(slow)
    assert repr(fast) == repr(slow) and str(fast) == str(slow)
    for f in dataclasses.fields(slow):  # equality skips the location: compare every field
        assert getattr(fast, f.name) == getattr(slow, f.name), f.name
    again = pickle.loads(pickle.dumps(fast))
    assert again == slow and getattr(again, "location", None) == getattr(slow, "location", None)
    assert copy.deepcopy(fast) == slow


@given(locations, locations, values, st.booleans(), st.text(max_size=8), st.sampled_from(ast.OPERATORS))
def test_fast_nodes_are_the_constructors_nodes(at, other, value, hex_, name, op) -> None:
    _same(ast_make.location(at.file, at.line, at.column), SourceLocation(at.file, at.line, at.column))
    _same(ast_make.number(value, hex_, at), ast.Number(value, hex_, at))
    _same(ast_make.string(name, at), ast.String(name, at))
    number = ast.Number(value, False, other)
    comparison = ast.Comparison(ast.Field(name, at), op, number, at)
    _same(ast_make.comparison(name, op, number, at), comparison)
    _same(ast_make.negation(comparison, other), ast.Not(comparison, other))
    _same(ast_make.const(hex_, at), ast.Const(hex_, at))
    _same(ast_make.forward((1, 2), at), ast.Forward((1, 2), at))
    for kind in (ast.And, ast.Or):
        _same(ast_make.junction(kind, (comparison, comparison), at), kind((comparison, comparison), at))


def test_nodes_are_frozen_and_slotted() -> None:
    node = ast_make.number(Decimal("1.5"), False, None)
    try:
        node.value = 2  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a node built by ast_make is not frozen")
    assert not hasattr(node, "__dict__")
