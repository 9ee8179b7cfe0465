"""compiler/rules/linediff.py: a line diff of two rule files says the same rules changed as parsing both whole.

The oracle parses both files completely and takes the multiset difference of their rules (what
``Incremental.diff`` does); the line diff must agree whenever it answers, and answer None (parse
everything) where the files are not line-structured or a changed line cannot be vouched for.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.rules import linediff, parse_rules

LINES = [
    'add_order.stock == "GOOGL" and add_order.price > 50 : fwd(3);',
    'add_order.stock == "GOOGL" and add_order.price > 50: fwd(3);',  # the same rule, spelled otherwise
    'add_order.stock == "AAPL" : fwd(1, 2);',
    'add_order.price < 10 or add_order.shares > 100 : fwd(4);',
    '  add_order.stock == "MSFT" : fwd(5);   # a comment after the rule',
    '# only a comment',
    '',
    '   ',
    'add_order.stock == "TEAM" : fwd(6); add_order.stock == "KHC" : fwd(7);',  # two rules on one line
    'add_order.stock == "X#Y" : fwd(8);',
    'add_order.stock == "ORCL" :',  # a rule that goes on on the next line
    '    fwd(9);',
    'add_order.stock == "IBM" : fwd(10)',  # no ';': legal only last
    'add_order.stock == "IBM" and : fwd(11);',  # a syntax error
]


def whole(text: str) -> Counter | None:
    try:
        return Counter(parse_rules(text, "f").rules)
    except Exception:  # noqa: BLE001 - the oracle: a file that does not parse has no rules to diff
        return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=8), st.lists(st.sampled_from(LINES), max_size=8))
def test_a_line_diff_finds_the_rules_a_whole_parse_finds(old_lines, new_lines) -> None:
    old, new = "\n".join(old_lines) + "\n", "\n".join(new_lines) + "\n"
    old_rules = whole(old)
    if old_rules is None or not linediff.line_structured(old.split("\n"), parse_rules(old, "f")):
        return  # only a line-structured old file is diffed by lines (the compile says which are)
    last = next((line for line in reversed(old.split("\n")) if linediff.content(line)), "")
    diff = linediff.diff_lines(old, new, "new", old_last_terminated=linediff.terminated(last) if last else True)
    new_rules = whole(new)
    if new_rules is None:
        assert diff is None  # the whole parse reports the error where it is
        return
    if diff is None:
        return  # allowed: the caller parses both files
    assert Counter(diff.added) == new_rules - old_rules
    assert Counter(diff.removed) == old_rules - new_rules


def test_a_rule_over_two_lines_is_not_line_structured() -> None:
    text = 'add_order.stock == "ORCL" :\n    fwd(9);\n'
    assert not linediff.line_structured(text.split("\n"), parse_rules(text, "f"))
    assert linediff.diff_lines('a.b == 1 : fwd(1);\n', text, "new", old_last_terminated=True) is None


def test_the_old_last_rule_without_its_semicolon_may_not_move() -> None:
    old = 'add_order.stock == "A" : fwd(1);\nadd_order.stock == "B" : fwd(2)\n'
    new = 'add_order.stock == "B" : fwd(2)\nadd_order.stock == "C" : fwd(3);\n'
    assert linediff.diff_lines(old, new, "new", old_last_terminated=False) is None
