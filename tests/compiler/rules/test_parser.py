"""The subscription language: round trips, Camus's own examples, errors with positions, fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.base.errors import ErrorList, P4subError, ParseError
from compiler.rules.parser import parse_rules, read_rules
from tests.compiler.strategies import rule_sets


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets)
def test_print_then_parse_gives_the_same_ast(rules: ast.RuleSet) -> None:
    assert parse_rules(str(rules)) == rules


CAMUS_EXAMPLES = [
    # written in the spelling of the original Camus compiler's examples (=, quoted strings, a prefix)
    'add_order.shares = 7: fwd(3);\nadd_order.shares > 250 and add_order.stock = "QRS": fwd(5);\n'
    "ipv4.dstAddr = 172.16.0.0/12: fwd(6);",
    # the Camus paper (CoNEXT'20): §2, §4, §7
    "stock == GOOGL : fwd(1)",
    "stock == GOOGL : fwd(1,2,3)",
    "stock == GOOGL ∧ price > 50 : fwd(1)",
    "stock == GOOGL ^ avg(price) > 60 : fwd(1)",
    "ip.dst == 192.168.0.1 : fwd(1)",
    "int.switch_id = 2 and int.hop_latency > 100 : fwd(1)",
    "add_order.shares > 100: fwd(1); add_order.shares = 50: fwd(2);",
    "f<10: fwd(1); f<20 and f>5: fwd(2)",
    "count(my_ctr) > 5 : fwd(1), fwd(2)",
    "!add_order.shares > 100: fwd(1);",
]


@pytest.mark.parametrize("text", CAMUS_EXAMPLES)
def test_camus_rule_files_parse(text: str) -> None:
    rules = parse_rules(text)
    assert len(rules) >= 1
    assert parse_rules(str(rules)) == rules


def test_operators_and_spellings_mean_the_same() -> None:
    a = parse_rules("not (h.a == 1 or h.b == 2) and h.c = 3: fwd(1), fwd(2)")
    b = parse_rules("!(h.a == 1 || h.b == 2) && h.c == 3: fwd(2, 1)")
    c = parse_rules("¬(h.a == 1 ∨ h.b == 2) ∧ h.c == 3: fwd(1, 2);")
    assert a == b == c
    assert a.rules[0].ports == (1, 2)


def test_constant_on_the_left_is_flipped() -> None:
    assert parse_rules("50 < h.p: drop") == parse_rules("h.p > 50: drop")
    assert parse_rules("GOOGL == h.s: drop") == parse_rules('h.s == "GOOGL": drop')


def test_precedence_is_not_then_and_then_or() -> None:
    rule = parse_rules("not h.a == 1 and h.b == 2 or h.c == 3: drop").rules[0]
    assert isinstance(rule.filter, ast.Or)
    first = rule.filter.items[0]
    assert isinstance(first, ast.And) and isinstance(first.items[0], ast.Not)


def test_constants_of_every_kind() -> None:
    text = ('h.a == 0x1F and h.b == 50.25 and h.c == "A B" and h.d == 10.0.0.0/8 and h.e == 2001:db8::/32 '
            "and h.f == 00:11:22:aa:bb:cc and h.g == ::1: drop")
    cmps = list(ast.comparisons(parse_rules(text).rules[0].filter))
    assert cmps[0].value == ast.Number(31, hex=True)
    assert str(cmps[1].value) == "50.25"
    assert cmps[2].value == ast.String("A B")
    assert cmps[3].value == ast.IPAddress(4, 0x0A000000, 8)
    assert cmps[4].value == ast.IPAddress(6, 0x20010DB8 << 96, 32)
    assert cmps[5].value == ast.MACAddress(0x001122AABBCC)
    assert cmps[6].value == ast.IPAddress(6, 1, 128)


def test_a_mac_may_be_followed_directly_by_the_actions_colon() -> None:
    mac = ast.MACAddress(0x001122AABBCC)
    for actions, expected in [("fwd(1)", (ast.Forward((1,)),)), ("drop", (ast.Drop(),)),
                              ("add(1)", (ast.Call("add", (ast.Number(1),)),)),  # hex letters after the ':'
                              ("fwd(1), beef(2)", (ast.Forward((1,)), ast.Call("beef", (ast.Number(2),))))]:
        for text in [f"e.d = 00:11:22:aa:bb:cc: {actions};", f"e.d = 00:11:22:aa:bb:cc:{actions};",
                     f"e.d = 00:11:22:AA:BB:CC :{actions}"]:
            rule = parse_rules(text).rules[0]
            assert rule.filter == ast.Comparison(ast.Field("e.d"), "==", mac), text
            assert rule.actions == expected, text


def test_ipv6_may_be_followed_directly_by_the_actions_colon() -> None:
    assert parse_rules("h.v6 = ff02:::fwd(1)") == parse_rules("h.v6 == ff02:: : fwd(1)")
    assert parse_rules("h.v6 = 2001:db8::1:fwd(1)") == parse_rules("h.v6 == 2001:db8::1 : fwd(1)")
    full = "h.v6 = fe80:0000:0000:0000:0000:0000:0000:0001:fwd(2);"
    assert parse_rules(full) == parse_rules("h.v6 == fe80::1: fwd(2)")


def test_prefixes_may_have_spaces_around_the_slash() -> None:
    v4 = ast.IPAddress(4, 0x0A000000, 8)
    for text in ["h.a = 10.0.0.0/8: drop", "h.a = 10.0.0.0 / 8: drop", "h.a = 10.0.0.0 /8: drop", "h.a = 10.0.0.0/\n 8: drop"]:
        assert parse_rules(text).rules[0].filter.value == v4, text
    v6 = ast.IPAddress(6, 0xFE80 << 112, 10)
    for text in ["h.b = fe80:0000:0000:0000:0000:0000:0000:0000/10 : drop", "h.b = fe80::/10: drop",
                 "h.b = fe80:: / 10 :drop", "h.b = fe80:0:0:0:0:0:0:0 /10: drop"]:
        assert parse_rules(text).rules[0].filter.value == v6, text


def test_single_equals_is_equality() -> None:
    assert parse_rules('h.a = 1 and h.s = "X" and h.v = 10.1.0.0/16: fwd(1)') == \
        parse_rules('h.a == 1 and h.s == "X" and h.v == 10.1.0.0/16: fwd(1)')


def test_bang_negates_one_comparison_as_in_camus() -> None:
    """Camus's grammar puts '!' on a single relation (`BANG lhsExpr EQ constExpr`): it binds tighter than and/or."""
    rule = parse_rules("! h.port = 7 and h.v6 = fe80::/10 : fwd(7);").rules[0]
    port = ast.Comparison(ast.Field("h.port"), "==", ast.Number(7))
    v6 = ast.Comparison(ast.Field("h.v6"), "==", ast.IPAddress(6, 0xFE80 << 112, 10))
    assert rule.filter == ast.And((ast.Not(port), v6))
    assert parse_rules("!h.port = 7 or h.v6 = fe80::/10: drop").rules[0].filter == ast.Or((ast.Not(port), v6))
    assert parse_rules("h.port = 7 and ! h.v6 = fe80:: / 10: drop").rules[0].filter == ast.And((port, ast.Not(v6)))
    assert parse_rules("!(h.port = 7 and h.v6 = fe80::/10): drop").rules[0].filter == ast.Not(ast.And((port, v6)))


def test_comments_and_terminators() -> None:
    text = ("# subscribers of floor 3\n"
            "h.a = 1: fwd(1);   # the first\n"
            "#h.a = 2: fwd(2);\n"
            "\n"
            "// another style\n"
            'h.s = "#tag": fwd(3);\n')
    rules = parse_rules(text, "c.sub")
    assert [str(r) for r in rules] == ["h.a == 1 : fwd(1);", 'h.s == "#tag" : fwd(3);']
    assert [r.location.line for r in rules] == [2, 6]
    assert parse_rules("h.a = 1: fwd(1);\nh.a = 2: fwd(2)") == parse_rules("h.a = 1: fwd(1);\nh.a = 2: fwd(2);")


def test_addresses_are_action_arguments() -> None:
    rule = parse_rules('h.name = "nx01": reply(10.0.0.9), tag(00:11:22:33:44:55), tag6(fd00::1)').rules[0]
    assert rule.actions == (ast.Call("reply", (ast.IPAddress(4, 0x0A000009, 32),)),
                            ast.Call("tag", (ast.MACAddress(0x001122334455),)),
                            ast.Call("tag6", (ast.IPAddress(6, (0xFD00 << 112) | 1, 128),)))
    assert parse_rules(str(parse_rules("h.a = 1: reply(10.0.0.9, 3)"))) == parse_rules("h.a == 1: reply(10.0.0.9, 3)")


def test_locations_point_at_each_rule() -> None:
    rules = parse_rules("# comment\nh.a == 1: drop;\n  h.b == 2 :\n fwd(3);", "x.sub")
    assert [(r.location.line, r.location.column) for r in rules] == [(2, 1), (3, 3)]
    assert str(rules.rules[1].location) == "x.sub:3:3"


SYNTAX_ERRORS = [
    ("h.a == 1 fwd(1);", 1, 10, "missing ':'"),
    ("h.a == 1: fwd(1)\nh.b == 2: fwd(2);", 2, 1, "missing ';'"),
    ("(h.a == 1: fwd(1);", 1, 10, "unclosed parenthesis"),
    ("h.a: fwd(1);", 1, 4, "needs an operator"),
    ("h.a == 1:", 1, 10, "missing actions"),
    ("h.a == 1: fwd();", 1, 15, "port numbers"),
    ("h.a == 1 : fwd(1);\n h.b == $: drop", 2, 9, "unexpected character '$'"),
    ("1 == 2: drop", 1, 1, "both sides of the comparison are constants"),
    ("h.a == h.b: drop", 1, 1, "both sides of the comparison are attributes"),
    ("h.a == 10.0.0.1/8: drop", 1, 8, "host bits set"),
    ("foo(h.a) > 1: drop", 1, 1, "unknown aggregate 'foo'"),
    ('"AB" prefix h.a: drop', 1, 1, "'prefix' takes the attribute on the left"),
    ("h.a == 10.0.0.1 / 8: drop", 1, 8, "host bits set; did you mean 10.0.0.0/8?"),
    ("h.a == ff02::1 / 16: drop", 1, 8, "host bits set; did you mean ff02::/16?"),
    ("h.a == 10.0.0.0 / 33: drop", 1, 8, "bad IPv4 address '10.0.0.0/33'"),
    ("h.a == 5 / 3: drop", 1, 10, "unexpected '/'"),
    ("h.a == 10.0.0.1 x: drop", 1, 17, "expected '/' (a prefix length), ':'"),
]


OLD_ACTIONS = [
    ("h.a = 1: 7;", 1, 10, "write ': fwd(7);'"),
    ("h.a = 1: fwd(1);\nh.a = 2 and h.b > 3: 2, 3;", 2, 22, "write ': fwd(2, 3);'"),
    ("h.a = 1: fwd(4), 2, mark(1), 4;", 1, 18, "write ': fwd(4, 2), mark(1);'"),
    ("e.mac = 00:11:22:33:44:55: 9;", 1, 28, "write ': fwd(9);'"),
]


@pytest.mark.parametrize("text,line,column,fix", OLD_ACTIONS)
def test_bare_port_numbers_of_the_first_compiler_are_refused_with_the_fwd_form(text, line, column, fix) -> None:
    with pytest.raises(ParseError) as info:
        parse_rules(text, "old.txt")
    err = info.value
    assert (err.location.line, err.location.column) == (line, column)
    assert "the ': N;' form of p4pubsub's first compiler" in err.message and fix in err.message


def test_every_bare_port_rule_of_a_file_is_reported_at_once() -> None:
    with pytest.raises(ErrorList) as info:
        parse_rules("h.a = 1: 1;\nh.a = 2: fwd(2);\nh.a = 3: 3, 4;\n", "old.txt")
    assert [(str(e.location), e.message.split("write ")[1]) for e in info.value.errors] == [
        ("old.txt:1:10", "': fwd(1);'"), ("old.txt:3:10", "': fwd(3, 4);'")]


@pytest.mark.parametrize("text,line,column,message", SYNTAX_ERRORS)
def test_syntax_errors_name_line_column_and_what_was_expected(text, line, column, message) -> None:
    with pytest.raises(ParseError) as info:
        parse_rules(text, "bad.sub")
    err = info.value
    assert (err.location.file, err.location.line, err.location.column) == ("bad.sub", line, column)
    assert message in err.message


def test_missing_rule_file_is_a_user_error(tmp_path) -> None:
    with pytest.raises(P4subError, match="no such rule file"):
        read_rules(tmp_path / "nope.sub")


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_the_projects_errors(data: bytes) -> None:
    try:
        parse_rules(data.decode("utf-8", errors="replace"))
    except P4subError:
        pass


TOKENS = ["h.a", "x", "==", "!=", "<", ">=", "prefix", "and", "or", "not", "(", ")", ":", ";", ",", "fwd", "drop",
          "fwd(1)", "1", "0x1f", "2.5", '"s"', "10.0.0.0/8", "::1", "00:11:22:33:44:55", "!", "&&", "||", "count(", "#c\n",
          "/", "10.0.0.1", "ff02::", "00:11:22:33:44:55:fwd(1)", "//c\n"]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(TOKENS), max_size=25))
def test_token_soups_raise_only_the_projects_errors(tokens: list[str]) -> None:
    try:
        parse_rules(" ".join(tokens))
    except P4subError:
        pass
