"""compiler.spec.expr: P4 width semantics, and render/parse_expression agreeing on every tree."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.base.errors import ParseError, SpecError
from compiler.spec import expr as ex
from compiler.spec.reader import parse_expression


def value(text: str) -> int:
    return ex.evaluate(parse_expression(text))


@pytest.mark.parametrize("text, expected", [
    ("8w250 + 10", 4),
    ("8w3 - 5", 254),
    ("-8w1", 255),
    ("~8w0", 255),
    ("(bit<4>)0xFF", 15),
    ("(bit<16>)8w200 + 16w100", 300),
    ("16w1 << 20", 0),
    ("16w0x8000 >> 15", 1),
    ("1 << 40", 1 << 40),
    ("7 / 2 * 2 + 7 % 2", 7),
    ("(2 + 3) * 4 - 1", 19),
    ("2 + 3 * 4 - 1", 13),
    ("0xF0 & 0x3C | 0x01 ^ 0x03", 0x32),
    ("32w0xFFFFFFFF * 2", 0xFFFFFFFE),
])
def test_p4_width_semantics(text, expected):
    assert value(text) == expected


@pytest.mark.parametrize("text, needle", [
    ("1 / 0", "division by zero"),
    ("~5", "known width"),
    ("1 << 100000", "too large"),
    ("a.b + 1", "not a constant"),
])
def test_evaluation_errors_are_spec_errors(text, needle):
    with pytest.raises(SpecError, match=needle):
        value(text)


def test_mixed_widths_are_a_type_error():
    with pytest.raises(SpecError, match=r"bit<8> and bit<16>"):
        ex.width_of(parse_expression("8w1 + 16w1"), lambda name: 0)
    assert ex.width_of(parse_expression("(bit<32>)h.f << 3"), lambda name: 16) == 32
    assert ex.width_of(parse_expression("h.f - 1"), lambda name: 16) == 16


def test_references_are_looked_up_with_their_width():
    expr = parse_expression("((bit<32>)(mold_msg.last.msg_len - 1)) * 8")
    assert [r.name for r in ex.refs(expr)] == ["mold_msg.last.msg_len"]
    assert ex.evaluate(expr, lambda name: (36, 16)) == 280
    assert ex.evaluate(expr, lambda name: (0, 16)) == 0xFFFF * 8  # bit<16> wraps before the cast
    assert ex.evaluate(parse_expression("packet.lookahead<bit<4>>() + 1"), peek=lambda w: 9) == 10


def test_expression_syntax_errors_are_parse_errors():
    with pytest.raises(ParseError):
        parse_expression("1 +")


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_, "|": operator.or_,
        "^": operator.xor}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([1, 4, 8, 16, 32, 48, 64]), st.sampled_from(sorted(_OPS)), st.data())
def test_bit_arithmetic_wraps_modulo_two_to_the_width(width, op, data):
    a = data.draw(st.integers(0, (1 << width) - 1))
    b = data.draw(st.integers(0, (1 << width) - 1))
    got = ex.evaluate(ex.Binary(op, ex.Num(a, width), ex.Num(b, width)))
    assert got == _OPS[op](a, b) % (1 << width)


_names = st.sampled_from(["h.f", "ipv4.ttl", "s.last.len", "s[2].x"])
_leaves = st.one_of(
    st.builds(ex.Num, st.integers(0, 10**6)),
    st.integers(1, 64).flatmap(lambda w: st.builds(ex.Num, st.integers(0, (1 << w) - 1), st.just(w))),
    st.builds(ex.Ref, _names),
    st.builds(ex.Lookahead, st.integers(1, 64)),
)
_trees = st.recursive(_leaves, lambda kids: st.one_of(
    st.builds(ex.Binary, st.sampled_from(ex.BINARY_OPS), kids, kids),
    st.builds(ex.Unary, st.sampled_from(ex.UNARY_OPS), kids),
    st.builds(ex.Cast, st.integers(1, 64), kids),
), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_trees)
def test_parse_of_render_is_the_same_tree(tree):
    assert parse_expression(ex.render(tree)) == tree


def test_render_with_a_prefix_makes_p4_lvalues():
    expr = parse_expression("(bit<32>)(s.last.len - 1) * 8")
    assert ex.render(expr, "hdr.") == "(bit<32>)(hdr.s.last.len - 1) * 8"
