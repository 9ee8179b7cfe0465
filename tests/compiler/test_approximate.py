"""The α filter approximation: the paper's examples, and superset semantics under negation."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.approximate import Alpha, approximate, check_alpha, parse_alpha, push_negations
from compiler.base.errors import P4subError
from compiler.oracle import filter_holds
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from tests.compiler.specs import make_spec

SPEC = make_spec({
    "m.a": (8, {"match_kind": "range"}),
    "m.b": (10, {"match_kind": "range", "scale": 1}),
    "m.k": (8, {"match_kind": "exact"}),
    "m.s": (32, {"match_kind": "exact", "is_string": True}),
})
FIELDS = check_rules(parse_rules("m.a == 1 and m.b == 1 and m.k == 1 and m.s == AB: fwd(1);"), SPEC).fields


def one(text: str) -> ast.Filter:
    return parse_rules(f"{text}: fwd(1);").rules[0].filter


def approx(text: str, alpha: str = "10", **per_field: str) -> str:
    a = Alpha(Decimal(alpha) if alpha else None, {k.replace("__", "."): Decimal(v) for k, v in per_field.items()})
    return str(approximate(one(text), a, FIELDS))


def test_paper_examples_round_thresholds_outwards():
    assert approx("m.a > 53") == "m.a > 50"
    assert approx("m.a > 57") == "m.a > 50"
    assert approx("m.a < 53") == "m.a < 60"
    assert approx("m.a < 57") == "m.a < 60"
    assert approx("m.a >= 50") == "m.a >= 50"
    assert approx("m.a <= 51") == "m.a <= 60"


def test_equality_becomes_its_bucket_and_inequality_true():
    assert approx("m.a == 53") == "m.a >= 50 and m.a < 60"
    assert approx("m.a == 5") == "m.a < 10"
    assert approx("m.a == 251") == "m.a >= 250"  # 260 passes the 8-bit field: no upper bound
    assert approx("m.a != 53") == "true"
    assert approx("m.a < 251") == "true"


def test_negations_are_pushed_before_weakening():
    # not (a > 53) is a <= 53: weakened upwards to a <= 60, never to not (a > 50)
    assert approx("not m.a > 53") == "m.a <= 60"
    assert approx("not (m.a > 53 or m.a == 7)") == "m.a <= 60"
    assert approx("not (m.a > 53 and m.a < 57)") == "m.a <= 60 or m.a >= 50"


def test_exact_fields_strings_and_identity_alpha_are_left_alone():
    assert approx("m.k == 53") == "m.k == 53"
    assert approx('m.s == "AB" and m.a > 53') == 'm.s == "AB" and m.a > 50'
    assert approx("m.a > 53", alpha="") == "m.a > 53"


def test_per_field_alpha_overrides_the_default():
    assert approx("m.a > 53 and m.b > 5.5", alpha="10", m__b="2") == "m.a > 50 and m.b > 4"
    assert approx("m.a > 53 and m.b > 5.5", alpha="", m__b="0.5") == "m.a > 53 and m.b > 5.5"
    assert approx("m.b > 5.4", alpha="", m__b="0.5") == "m.b > 5"


def test_alpha_finer_than_a_field_is_refused():
    with pytest.raises(P4subError, match="finer than m.a"):
        check_alpha(Alpha(Decimal("0.5")), {"m.a": FIELDS["m.a"]})
    check_alpha(Alpha(Decimal("0.5")), {"m.b": FIELDS["m.b"]})
    with pytest.raises(P4subError, match="no rule tests"):
        check_alpha(Alpha(None, {"m.zz": Decimal(1)}), FIELDS)
    with pytest.raises(P4subError, match="positive"):
        parse_alpha("-3")
    with pytest.raises(P4subError, match="positive"):
        parse_alpha("ten")


# ------------------------------------------------------------------------------------------------
# Properties: the oracle evaluates filters directly (compiler.oracle), sharing nothing with the rewrite
# ------------------------------------------------------------------------------------------------

OPS = ("==", "!=", "<", "<=", ">", ">=")


@st.composite
def atoms(draw) -> ast.Filter:
    name = draw(st.sampled_from(["m.a", "m.b", "m.k"]))
    if name == "m.a":
        return ast.Comparison(ast.Field(name), draw(st.sampled_from(OPS)), ast.Number(draw(st.integers(0, 255))))
    if name == "m.b":
        tenths = draw(st.integers(0, 1023))
        value = Decimal(tenths) / 10 if tenths % 10 else tenths // 10
        return ast.Comparison(ast.Field(name), draw(st.sampled_from(OPS)), ast.Number(value))
    return ast.Comparison(ast.Field(name), draw(st.sampled_from(("==", "!="))), ast.Number(draw(st.integers(0, 255))))


def typed_filters(max_leaves: int = 6):
    def extend(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.And(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: ast.Or(tuple(xs))),
            children.map(ast.Not),
        )

    return st.recursive(st.one_of(atoms(), st.booleans().map(ast.Const)), extend, max_leaves=max_leaves)


VALUES = st.fixed_dictionaries({"m.a": st.integers(0, 255), "m.b": st.integers(0, 1023), "m.k": st.integers(0, 255)})
ALPHAS = st.sampled_from([Alpha(Decimal(1)), Alpha(Decimal(10)), Alpha(Decimal(100)), Alpha(Decimal(7)),
                          Alpha(None, {"m.b": Decimal("0.5")}), Alpha(Decimal(3), {"m.b": Decimal("2.5")})])


@settings(max_examples=300, deadline=None)
@given(typed_filters(), VALUES)
def test_push_negations_is_equivalent(f, values):
    assert filter_holds(push_negations(f), FIELDS, values) == filter_holds(f, FIELDS, values)


@settings(max_examples=400, deadline=None)
@given(typed_filters(), ALPHAS, st.lists(VALUES, min_size=1, max_size=8))
def test_approximation_matches_a_superset_under_any_negation(f, alpha, packets):
    weak = approximate(f, alpha, FIELDS)
    for values in packets:
        if filter_holds(f, FIELDS, values):
            assert filter_holds(weak, FIELDS, values), (str(f), str(weak), values)


@settings(max_examples=200, deadline=None)
@given(typed_filters(), ALPHAS)
def test_approximated_constants_are_multiples_of_alpha_and_type_check(f, alpha):
    weak = approximate(f, alpha, FIELDS)
    rule = ast.Rule(weak, (ast.Forward((1,)),))
    check_rules(ast.RuleSet((rule,)), SPEC)  # still fits the fields (no constant past the width)
    for cmp in ast.comparisons(weak):
        a = alpha.of(cmp.attribute.name)
        if a is not None and cmp.attribute.name != "m.k":
            assert Decimal(cmp.value.value) % a == 0, (str(f), str(weak))
