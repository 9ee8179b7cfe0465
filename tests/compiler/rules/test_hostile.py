"""The rule language against hostile text: ASCII digits only (in the grammar and the fast path alike),
a byte-order mark skipped, huge numbers and deep nesting refused with a location before anything
recurses or converts, type errors at the comparison, more than 50 errors counted. Issue 19."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.base.errors import ErrorList, ParseError, TypeCheckError
from compiler.rules import fastparse
from compiler.rules.parser import MAX_NESTING, parse_rules, read_rules
from compiler.rules.typecheck import check_rules
from compiler.spec.reader import read_spec

REPO = Path(__file__).resolve().parents[3]
SPEC = read_spec(REPO / "apps/itch/itch.p4")


@pytest.mark.parametrize("digit", ["\uff11", "\u0663", "\u06f3", "\u0967", "\U0001d7d9"])
@pytest.mark.parametrize("template", [
    "add_order.shares == {d} : fwd(1);",
    "add_order.shares == 1{d} : fwd(1);",
    "add_order.shares == 1 : fwd({d});",
    "add_order.price > 1.{d} : fwd(1);",
    "ipv4.dst_addr == 10.0.0.{d} : fwd(1);",
    "not add_order.shares == {d} : fwd(1);",  # the grammar's path
])
def test_non_ascii_digits_are_refused_by_both_parsers_with_a_location(template, digit):
    text = template.format(d=digit)
    assert fastparse.parse(text, "r.sub").stopped  # the fast parser leaves it to the grammar, which says why
    with pytest.raises(ParseError, match="non-ASCII digit") as info:
        parse_rules(text, "r.sub")
    assert info.value.location.line == 1 and info.value.location.column == text.index(digit) + 1


def test_a_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "r.sub"
    path.write_bytes("\ufeffadd_order.shares == 12 : fwd(1);\n".encode())
    assert read_rules(path).rules[0].location.column == 1
    assert parse_rules("\ufeffnot add_order.shares == 12 : fwd(1);", "r").rules[0].location.column == 1


@pytest.mark.parametrize("text, column", [
    ("add_order.shares == {n} : fwd(1);", 21),
    ("add_order.shares == 0x{n} : fwd(1);", 21),
    ("add_order.price > 1.{n} : fwd(1);", 19),
    ("add_order.shares == 1 : fwd({n});", 29),
    ("ipv4.dst_addr == 10.0.0.0/{n} : fwd(1);", 27),
    ("not add_order.shares == {n} : fwd(1);", 25),
])
def test_huge_numbers_are_refused_before_conversion(text, column):
    text = text.format(n="7" * 1_000_000)
    with pytest.raises(ParseError, match="a number of 1,000,00[0-9] digits; p4sub reads numbers of up to 200") as info:
        parse_rules(text, "r.sub")
    assert (info.value.location.line, info.value.location.column) == (1, column)


@pytest.mark.parametrize("text", [
    "not " * 10_000 + "add_order.shares == 1 : fwd(1);",
    "! " * 10_000 + "add_order.shares == 1 : fwd(1);",
    "(" * 10_000 + "add_order.shares == 1" + ")" * 10_000 + " : fwd(1);",  # parentheses alone add no level
    "".join("(add_order.shares == 1 " + ("or " if i % 2 else "and ") for i in range(5_000))
    + "add_order.shares == 2" + ")" * 5_000 + " : fwd(1);",
])
def test_deep_nesting_is_a_located_error_not_a_recursion_error(text):
    try:
        rules = parse_rules(text, "r.sub")
    except ParseError as exc:
        assert f"nested more than {MAX_NESTING} levels" in exc.message and exc.location.line == 1
    else:  # what parses is shallow enough for every later pass
        check_rules(rules, SPEC)


def test_nesting_up_to_the_limit_still_compiles():
    from compiler.compile import compile_rules

    text = "not " * 40 + "add_order.shares == 1 : fwd(1);"
    compile_rules(SPEC, parse_rules(text, "r.sub"))


def test_type_errors_point_at_the_comparison_not_the_rule():
    text = ("add_order.shares == 1 and\n   add_order.price > \"x\" : fwd(1);\n"
            "add_order.shares == 1 or add_order.stock > \"A\" : fwd(1);\n"
            "  not (add_order.shares == 1.5) : fwd(1);\n")
    with pytest.raises(ErrorList) as info:
        check_rules(parse_rules(text, "r.sub"), SPEC)
    assert [(e.location.line, e.location.column) for e in info.value.errors] == [(2, 4), (3, 26), (4, 8)]


def test_more_than_fifty_errors_end_with_how_many_more():
    text = "".join(f"add_order.prise == {i} : fwd(1);\n" for i in range(60))
    with pytest.raises(ErrorList) as info:
        check_rules(parse_rules(text, "r.sub"), SPEC)
    lines = str(info.value).splitlines()
    assert len(lines) == 51 and lines[-1] == "... and 10 more errors"
    assert all(isinstance(e, TypeCheckError) for e in info.value.errors)
    text = "".join(f"add_order.prise == {i} : fwd(1);\n" for i in range(51))
    with pytest.raises(ErrorList, match=r"\.\.\. and 1 more error$"):
        check_rules(parse_rules(text, "r.sub"), SPEC)
