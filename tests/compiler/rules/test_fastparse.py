"""The hand-written parser reads exactly what the lark grammar reads: the same ASTs with the same
source locations for every valid file in every spelling (and without handing any of it to lark), the
same located errors for every damaged one. The oracle is the grammar alone (lark's parser and
transformer over the whole text, as parse_rules read every file before the fast parser existed)."""

from __future__ import annotations

import dataclasses
import ipaddress
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.base.errors import P4subError
from compiler.base.inputs import strip_bom
from compiler.rules import fastparse
from compiler.rules import parser as lang
from compiler.rules import shapes as rule_shapes
from tests.compiler.strategies import rule_sets
from tests.fuzz.mutations import HOSTILE_TOKENS, mutated_text


def grammar_reading(text: str, path: str = "f.sub") -> ast.RuleSet:
    """The rule file as the lark grammar alone reads it."""
    text = strip_bom(text)
    if not text.isascii():
        lang._refuse_non_ascii_digits(text, path)
    return lang._grammar_rules(text, text, path)


def nodes(node) -> list:
    """Every node of an AST (and of tuples of them), depth first."""
    out = []
    if dataclasses.is_dataclass(node):
        out.append(node)
        for f in dataclasses.fields(node):
            out.extend(nodes(getattr(node, f.name)))
    elif isinstance(node, tuple):
        for x in node:
            out.extend(nodes(x))
    return out


def locations(node) -> list:
    """Every (class, location) in an AST, depth first: equality of ASTs ignores locations, this does not."""
    return [(type(n).__name__, getattr(n, "location", None)) for n in nodes(node)]


def outcome(read, text: str):
    try:
        rules = read(text, "f.sub")
    except P4subError as exc:  # anything else escaping is a bug and fails the test
        return ("error", type(exc).__name__, str(exc))
    return ("rules", rules, locations(rules))


def assert_same_reading(text: str) -> None:
    assert outcome(lang.parse_rules, text) == outcome(grammar_reading, text)


# -- printing random ASTs in random spellings ---------------------------------------------------------
KEYWORDS = {"and": ["and", "AND", "And", "&&", "∧", "^"], "or": ["or", "OR", "Or", "||", "∨"],
            "not": ["not", "NOT", "Not", "!", "¬"], "prefix": ["prefix", "PREFIX", "Prefix"],
            "true": ["true", "TRUE"], "false": ["false", "False"]}
# Between two tokens: blanks, comments (never right after a '/', which would make '//'), or nothing
# where one side is punctuation.
SEPARATORS = [" ", " ", " ", "  ", "\n", "\t", " \n  ", " # note; a: fwd(9)\n", "\n// c\n", "\r\n", " # (x) )\n"]
PUNCTUATION = set("(),;:") | {"==", "!=", "<=", ">=", "<", ">", "=", "&&", "||", "^", "∧", "∨", "¬", "!"}


def _case(draw, word: str) -> str:
    return draw(st.sampled_from(KEYWORDS[word]))


def _constant(draw, c, left: bool = False) -> list[str]:
    if isinstance(c, ast.String):
        keyword = left and c.value.lower() in ("not", "true", "false")  # where a filter starts, a keyword
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", c.value) and not keyword and draw(st.booleans()):
            return [c.value]  # Camus's bare word
        body = "".join(("\\" + ch) if ch in '"\\' or (ch.isalpha() and draw(st.integers(0, 9)) == 0) else ch
                       for ch in c.value)
        return [f'"{body}"']
    if isinstance(c, ast.Number):
        if c.hex:
            digits = format(c.value, "x")
            return [draw(st.sampled_from(["0x", "0X"])) + (digits.upper() if draw(st.booleans()) else digits)]
        text = str(c)
        if "." in text and draw(st.booleans()):
            text += "0"
        return [text]
    if isinstance(c, ast.MACAddress):
        text = str(c)
        return [text.upper() if draw(st.booleans()) else text]
    if isinstance(c, ast.IPAddress):
        if c.version == 4:
            addr = str(ipaddress.IPv4Address(c.value))
        else:
            a = ipaddress.IPv6Address(c.value)
            addr = a.exploded if draw(st.booleans()) else str(a)
        if c.prefix_len == c.width and draw(st.booleans()):
            return [addr]
        return [addr, "/", str(c.prefix_len)]
    raise AssertionError(c)


def _attribute(draw, a) -> list[str]:
    if isinstance(a, ast.Aggregate):
        name = a.function.upper() if draw(st.integers(0, 3)) == 0 else a.function
        return [name, "(", *_attribute(draw, a.argument), ")"]
    return [a.name]


def _filter(draw, f, parent: type | None = None) -> list[str]:
    if isinstance(f, ast.Or):
        out: list[str] = []
        for i, item in enumerate(f.items):
            out += ([_case(draw, "or")] if i else []) + _filter(draw, item, ast.Or)
        body = out
    elif isinstance(f, ast.And):
        out = []
        for i, item in enumerate(f.items):
            out += ([_case(draw, "and")] if i else []) + _filter(draw, item, ast.And)
        body = out
    elif isinstance(f, ast.Not):
        body = [_case(draw, "not"), *_filter(draw, f.item, ast.Not)]
    elif isinstance(f, ast.Const):
        body = [_case(draw, "true" if f.value else "false")]
    else:
        op = f.op
        if op == "==" and draw(st.booleans()):
            op = "="
        if op == "prefix":
            op = _case(draw, "prefix")
        attr = _attribute(draw, f.attribute)
        if f.op != "prefix" and draw(st.integers(0, 4)) == 0:  # the constant on the left
            value = _constant(draw, f.value, left=True)
            flipped = ast.FLIPPED[f.op]
            body = value + [flipped if flipped != "==" or op != "=" else "="] + attr
        else:
            body = attr + [op] + _constant(draw, f.value)
    needs = (parent is ast.And and isinstance(f, ast.Or)) or (parent is ast.Not and isinstance(f, (ast.And, ast.Or)))
    if needs or draw(st.integers(0, 6)) == 0:
        return ["(", *body, ")"]
    return body


def _actions(draw, actions: tuple) -> list[str]:
    pieces: list[list[str]] = []
    for a in actions:
        if isinstance(a, ast.Forward):
            ports = list(a.ports)
            split = draw(st.integers(0, len(ports)))
            for group in (ports[:split], ports[split:]):
                if group:
                    shown = [hex(p) if draw(st.integers(0, 5)) == 0 else str(p) for p in group]
                    pieces.append(["fwd", "(", *sum(([p, ","] for p in shown), [])[:-1], ")"])
        elif isinstance(a, ast.Drop):
            pieces.append(draw(st.sampled_from([["drop"], ["drop", "(", ")"]])))
        else:
            args = [_constant(draw, x) if not isinstance(x, (ast.Field, ast.StateVar, ast.Aggregate))
                    else _attribute(draw, x) for x in a.args]
            pieces.append([a.name, "(", *sum((x + [","] for x in args), [])[:-1], ")"])
    pieces = draw(st.permutations(pieces))
    return sum((p + [","] for p in pieces), [])[:-1]


def _join(draw, tokens: list[str]) -> str:
    out = [tokens[0]] if tokens else []
    for prev, tok in zip(tokens, tokens[1:]):
        if (prev in PUNCTUATION or tok in PUNCTUATION) and prev != "/" and draw(st.integers(0, 2)) == 0:
            sep = ""
        else:
            sep = draw(st.sampled_from(SEPARATORS))
            if prev == "/" and sep.lstrip(" \t").startswith(("#", "//")):
                sep = " "
        out.append(sep + tok)
    return "".join(out)


@st.composite
def spelled_files(draw) -> str:
    """A random rule set printed in a random mix of the accepted spellings."""
    rules = draw(rule_sets)
    out = [draw(st.sampled_from(["", "# generated\n", "// header\n\n", "\ufeff", "  \n"]))]
    for i, rule in enumerate(rules):
        tokens = _filter(draw, rule.filter) + [":"] + _actions(draw, rule.actions)
        last = i == len(rules) - 1
        end = draw(st.sampled_from([";", ";", ""])) if last else ";"
        out.append(_join(draw, tokens + ([end] if end else [])))
        out.append(draw(st.sampled_from(["\n", "\n", " # trailing\n", "\n\n", " ", "\r\n"])) if not last or end else "\n")
    return "".join(out)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelled_files())
def test_every_spelling_reads_as_the_grammar_reads_it_without_the_grammar(text: str) -> None:
    fast = fastparse.parse(strip_bom(text), "f.sub")
    assert not fast.stopped and not fast.doubtful, "a valid file must not need the grammar"
    assert_same_reading(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelled_files().flatmap(lambda text: mutated_text(text)))
def test_damaged_files_get_the_grammars_errors_at_the_same_places(text: str) -> None:
    assert_same_reading(text)


PIECES = ["h.a", "a.b.c", "x", "not.x", "true.y", "and.z", "prefix", "fwd", "drop", "==", "=", "!=", "<", ">=",
          "and", "AND", "or", "||", "&&", "^", "not", "!", "¬", "∧", "∨", "(", ")", ":", ";", ",", "/", "1", "08",
          "0x1F", "0x", "2.5", "1.2.3", '"s"', '"a\\"b"', "GOOGL", "10.0.0.0", "10.0.0.1", "8", "33", "256.1.1.1",
          "::1", "ff02::", "ff02:::", "fe80::1:2", "00:11:22:33:44:55", "1:2:3", "ab:cd::ef", "count", "COUNT",
          "foo", "fwd(1)", "fwd(0x2, 3)", "drop()", "mark(1)", "true", "false", "#c\n", "//c\n", "\n", " ", ""]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(PIECES + HOSTILE_TOKENS[:40]), max_size=24))
def test_token_soups_read_alike(tokens: list[str]) -> None:
    assert_same_reading(" ".join(tokens))
    assert_same_reading("".join(tokens))


EDGES = [
    "", "   \n", "# only a comment", ";", "a.b == 1: drop;;", "a.b == 1: drop; ;",
    "not.x == 1: drop", "1 == not.x: drop", "and.x == 1: drop", "h.a == and and h.b == 1: drop",
    "fwd == 1: fwd(1)", "h.a == 1: and(1), or(2), not(3)", "h.a == 1: mark(true, fwd, drop)",
    "h.a == 1: fwdx(1), Fwd(2), DROP()", "h.a == 1: fwd.x(1)", "h.a == 1: drop(1)", "h.a == 1: fwd", "h.a == 1: fwd()",
    "h.m = 00:11:22:aa:bb:cc:fwd(1)", "h.m = 00:11:22:aa:bb:cc:add(1)", "h.v = ff02:::fwd(1)", "h.v = ::1:fwd(2)",
    "h.v = 2001:db8::1:fwd(1)", "h.v == fe80::/10:drop", "h.a = 10.0.0.0//8\n: drop", "h.a = 10.0.0.0 / 8: drop",
    "h.a = 10.0.0.0/ 08: drop", "h.a = 010.0.0.0: drop", "h.a = 10.0.0.1/8: drop", "h.a = 10.0.0.0/33: drop",
    "h.a == 1and h.b == 2: drop", "h.a == 0x1fand h.b == 2: drop", "h.a == GOOGLand h.b == 2: drop",
    "h.a == 1.2.3: drop", "h.a == 1:2:3: drop", "h.s prefix GOOGL: drop", '"AB" prefix h.s: drop',
    "count(x) > 1 and sum(count(y)) < 2: drop", "foo(x) > 1: drop", "h.a == h.b: drop", "1 == 2: drop",
    "h.a = 1: 7;", "h.a = 1: fwd(4), 2, mark(1), 4;", "h.a = 1: 1;\nh.a = 2: fwd(2);\nh.a = 3: 3, 4;\n",
    "h.a = 1: fwd(1)\nh.b = 2: fwd(2);", "h.a = 1: fwd(1);\nh.b = $: fwd(2);", "(h.a == 1: fwd(1);",
    "h.a == 1: fwd(1);\n(((h.b == 2))) or not not h.c = 3: drop\n",
    "h.a == " + "9" * 201 + ": drop", "h.a == 1: fwd(" + "1" * 201 + ")", "h.a == 10.0.0.0/" + "0" * 201 + ": drop",
    "h.a == 1: fwd(1);\nh.b == " + "9" * 300 + ": drop;\nh.c == 10.0.0.1/8: drop;\n",
    "h.a = 1: fwd(1); h.a = 2 and h.b > 3: 2, 3; h.c == h.d: drop",
    "not " * 95 + "h.a == 1: drop", "not " * 99 + "h.a == 1: drop", "! " * 120 + "h.a == 1: drop",
    "(" * 60 + "h.a == 1" + ")" * 60 + ": drop", "".join("(h.a == 1 " + ("or " if i % 2 else "and ") for i in range(60))
    + "h.a == 2" + ")" * 60 + ": drop",
    "h.s == \"caf\u00e9\": drop", "h.\u00e9 == 1: drop", "h.a == \uff11: drop", "falſe: drop", "h.a == 1: drop # \u00e9",
]


@pytest.mark.parametrize("text", EDGES)
def test_edges_read_alike(text: str) -> None:
    assert_same_reading(text)
    assert_same_reading("h.z == 1: fwd(1);\n" * 3 + text)  # after rules the fast parser read


def test_the_scanner_uses_the_grammars_terminals() -> None:
    terminals = {t.name: t.pattern.value.replace("\n", "\\n") for t in lang._parser().terminals}
    for name in ("ADDRESS", "IPV4", "HEX", "DECIMAL", "INT", "DOTTED", "NAME", "STRING"):
        assert getattr(fastparse, f"{name}_RE") == terminals[name], name


def test_a_large_valid_file_never_reaches_the_grammar(monkeypatch) -> None:
    def refuse(*_args):
        raise AssertionError("the grammar was asked")

    monkeypatch.setattr(lang, "_grammar_rules", refuse)
    text = "".join(f'add_order.stock = "S{i % 97}" and ! add_order.shares > {i}: fwd({i % 200});\n'
                   f"h.v == fe80::{i:x}/128 or h.s prefix \"ab\" : mark({i}), drop # {i}\n;" for i in range(2000))
    rules = lang.parse_rules(text, "big.sub")
    assert len(rules) == 4000 and rules.rules[-1].location.line == 4000


ONE_MATCH = [
    '(h.a == 1 or h.b < 2) and not (h.s prefix "ab" or h.c = 1) : fwd(3), mark(4);',
    "true and h.a == 1 or FALSE : fwd(1);",
    'h.s == "x"  # a comment\n  and // another\n h.b < 2 : drop;',
    " and ".join(f"h.f{j} > {j}" for j in range(16)) + " : fwd(1);",
    "not not ( ((h.a == 1)) or (h.b == 2 and (h.c == 3))) and ! (h.d == 4) : fwd(1);",
    "(h.a == 1 and h.b == 2) or (h.c == 3 or h.d == 4) and h.e == 5 : fwd(1);",
]


@pytest.mark.parametrize("text", ONE_MATCH)
def test_parentheses_negations_constants_and_comments_take_one_match(text: str, monkeypatch) -> None:
    """These shapes are read by the one match of the usual rule (the speed of issue 16 item 4 rests
    on it), into the grammar's AST and locations."""
    def refuse(_self):
        raise AssertionError("read token by token")

    monkeypatch.setattr(fastparse._Parser, "rule", refuse)
    assert_same_reading(text)
    assert_same_reading("h.z == 1: fwd(1);\n" + text + "\n" + text)


def test_rules_past_the_known_shapes_read_alike(monkeypatch) -> None:
    """Once rule_shapes knows MAX_SHAPES shapes, rules of a new shape are read token by token, into the
    same AST; a known shape keeps its builder."""
    known = rule_shapes.known()
    monkeypatch.setattr(rule_shapes, "MAX_SHAPES", known + 2)
    text = "".join(f"h.new{i} == 1 {'or h.b == 2 ' * i}: fwd(1);\n" * 2 for i in range(12, 16))
    assert_same_reading(text)
    assert rule_shapes.known() == known + 2


def test_rules_past_the_kept_regexes_read_alike(monkeypatch) -> None:
    """Past _MAX_FIXED shapes' own regexes, rules are read by the general regex, or token by token."""
    monkeypatch.setattr(fastparse, "_MAX_FIXED", len(fastparse._FIXED))
    text = "".join(f"h.a == {i} {'or h.b == 2 ' * (i % 5)}: fwd(1);\n{i} < count(x) {'and v == 3 ' * (i % 4)}: drop;\n"
                   for i in range(20))
    assert_same_reading(text)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["(", "not (", "! (", "(not ", "( (", "(#(\n"])), min_size=1, max_size=40))
def test_a_new_shape_in_every_rule_reads_alike(parts: list[tuple[int, str]]) -> None:
    """Every rule of its own shape (where the '(' and 'not' runs and the ')'s fall): each gets a builder."""
    rules = []
    for i, (n, opening) in enumerate(parts):
        atoms = [f"h.f{j} == {i}" for j in range(n + 1)]
        rules.append(" or ".join(atoms[:-1] + [opening + atoms[-1] + ")"]) + f" : fwd({i});")
    assert_same_reading("\n".join(rules))


@st.composite
def rule_and_kin(draw) -> tuple[str, str]:
    """One rule spelled at random, and a kin: spelled again, or the same text with other numbers."""
    rule = draw(rule_sets.filter(len).map(lambda rules: rules.rules[0]))

    def spelled() -> str:
        return _join(draw, _filter(draw, rule.filter) + [":"] + _actions(draw, rule.actions) + [";"])

    first = spelled()
    how = draw(st.sampled_from(["respell", "renumber", "edit", "edit"]))
    if how == "respell":
        return first, spelled()
    numbers = draw(st.lists(st.integers(0, 300), min_size=1, max_size=4))
    kin = re.sub(r"[0-9]+", lambda m: str(numbers[m.start() % len(numbers)]), first)
    if how == "edit":  # one token or blank of the structure written otherwise
        edits = [(old, new) for old, new in KIN_EDITS if old in kin]
        if edits:
            old, new = draw(st.sampled_from(edits))
            at = [m.start() for m in re.finditer(re.escape(old), kin)]
            i = draw(st.sampled_from(at))
            kin = kin[:i] + new + kin[i + len(old):]
    return first, kin


KIN_EDITS = [("and", "AND"), ("and", "&&"), ("AND", "and"), ("&&", "and"), ("or", "OR"), ("or", "||"), ("||", "or"),
             ("not", "NOT"), ("not", "!"), ("!", "not "), ("==", "="), ("=", "=="), (" ", "  "), (" ", "\n"),
             ("(", "( "), ("(", "(("), (")", ") "), (")", "))"), ("(", "not ("), ("fwd(", "fwd ("), ("drop", "drop()"),
             ("drop()", "drop"), (";", ""), ("true", "TRUE"), ("false", "true"), (": ", ":"), (",", ", "),
             ("fwd(", "mark("), ("drop", "fwd(1)"), (";", ", drop;"), (", ", ";"), ('"', "'"), ("prefix", "PREFIX")]


def _general(layout: rule_shapes.Layout, text: str) -> tuple:
    """The match of the layout's own general regex and its shape (with only the slots the rule
    fills), or (None, None)."""
    if layout is rule_shapes.USUAL:
        m = fastparse._RULE.match(text) or fastparse._long_rule().match(text)
        if m is None:
            return None, None
        of = fastparse._SHAPE_OF_RULE if m.re is fastparse._RULE else fastparse._SHAPE_OF_LONG_RULE
        return m, rule_shapes.own_slots(of(m.groups()))
    m = fastparse._OPERAND_RULE.match(text)
    return (m, rule_shapes.operands_shape(m.groups(), fastparse._SHORT_SLOTS)) if m else (None, None)


@settings(max_examples=2500, deadline=None)
@given(rule_and_kin())
def test_a_shapes_own_regex_matches_what_the_general_one_matches(pair: tuple[str, str]) -> None:
    """_shape_regex(shape of A) matches A, and matches B only where the layout's general regex
    (_RULE, or _OPERAND_RULE) matches B with that same shape and the same groups at the same
    places: then the shape's builder makes of it what it makes of the general match."""
    for layout in (rule_shapes.USUAL, rule_shapes.OPERANDS):
        _own_regex_against_general(layout, *pair)


def _own_regex_against_general(layout: rule_shapes.Layout, a: str, b: str) -> None:
    ma, shape = _general(layout, a)
    if ma is None:
        return
    regex = fastparse._shape_regex(layout, shape)
    mine = regex.match(a)
    assert mine is not None and mine.end() == ma.end()
    fixed = regex.match(b)
    event(f"{'usual' if layout is rule_shapes.USUAL else 'operands'}: the kin has {'the' if fixed else 'another'} shape")
    if fixed is None:
        return
    general, general_shape = _general(layout, b)
    assert general is not None and general.end() == fixed.end()
    assert general_shape == shape
    slots = layout.slots(shape)
    actions = rule_shapes.action_groups(layout, slots)[0]
    general_actions = rule_shapes.action_groups(layout, (general.re.groups - 11) // layout.slot_groups)[0]
    pairs = [(g, g) for g in range(1, actions)] + [(actions + i, general_actions + i) for i in range(12)]
    for mine, theirs in pairs:
        if shape[-1] is None and mine == actions + 10:
            continue  # no more actions: the group of their text is '' in the general regex, None here
        assert fixed.span(mine) == general.span(theirs), (mine, theirs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule_and_kin(), min_size=1, max_size=6))
def test_rules_of_a_few_shapes_read_alike(pairs: list[tuple[str, str]]) -> None:
    """Each rule, then its kin (read by the first's own regex where their shapes agree), in turn."""
    text = "\n".join(f"{a}\n{b}\n{a}" for a, b in pairs)
    assert_same_reading(text)


def test_a_file_of_one_shape_is_read_by_the_shapes_own_regex(monkeypatch) -> None:
    read_by = []
    plain = fastparse._Parser.flat_rule

    def spy(self, m, layout, shape, groups):
        read_by.append(m.re in (fastparse._RULE, fastparse._long_rule()))
        return plain(self, m, layout, shape, groups)

    monkeypatch.setattr(fastparse._Parser, "flat_rule", spy)
    text = "".join(f'(h.a == {i} or h.b < {i}) and not h.s prefix "x{i}" : fwd({i}), mark({i});\n' for i in range(100))
    assert_same_reading(text)
    assert read_by.count(True) == 1 and read_by.count(False) == 99
    read_by.clear()  # other operands: the general regex's match is read again by the shape's own at once
    text = "".join(f"count(flow) > {i} and {i} < h.p and v == GOOGL : fwd({i});\n" for i in range(100))
    assert_same_reading(text)
    assert read_by == [False] * 100


def test_an_error_deep_in_a_large_file_is_reported_from_there() -> None:
    text = "h.a == 1: fwd(1);\n" * 20000 + "h.a == 1 fwd(1);\n"
    with pytest.raises(P4subError) as info:
        lang.parse_rules(text, "big.sub")
    assert str(info.value.location) == "big.sub:20001:10" and "unexpected 'fwd'; expected ':'" in info.value.message


def _addresses(regex: str, lengths) -> st.SearchStrategy:
    return st.tuples(st.from_regex(re.compile(regex), fullmatch=True),
                     st.one_of(st.just(""), lengths.map(str), st.sampled_from(["0128", "00", "08", "032"])))


@settings(max_examples=2000, deadline=None)
@given(st.one_of(_addresses(fastparse.ADDRESS_RE, st.integers(0, 140)).map(lambda a: ("colon", *a)),
                 _addresses(fastparse.IPV4_RE, st.integers(0, 40)).map(lambda a: ("ipv4", *a))))
def test_addresses_without_ipaddress_read_as_with_it(case: tuple) -> None:
    from compiler.rules import build as rule_build

    kind, address, length = case
    text = f"{address}/{length}" if length else address
    fast, reference = (fastparse._colon, rule_build.colon_address) if kind == "colon" else (fastparse._ipv4, rule_build.ipv4)
    assert fast(address, length, None) == reference(text, None)
