"""Network rule files: host names in fwd, filters parsed by the one front end with their locations kept."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.base.errors import ParseError, SourceLocation
from compiler.network.host_rules import parse_network_rules, read_network_rules, subscriptions
from compiler.network.topology import fat_tree, leaf_spine
from compiler.rules.parser import parse_rules

TOPO = fat_tree(4)


def test_hosts_become_host_ids_and_filters_keep_their_locations():
    text = ("# header ; with a semicolon: and a colon\n"
            "add_order.stock == GOOGL and add_order.price > 53: fwd(h12, h4);\n"
            "  (add_order.shares < 5 or add_order.price == 1) :\n"
            "     fwd(h1),\n fwd(h16), drop; add_order.shares > 7 : fwd(h2)")
    rules = parse_network_rules(text, TOPO, "net.rules")
    assert [r.ports for r in rules] == [(4, 12), (1, 16), (2,)]
    assert any(isinstance(a, ast.Drop) for a in rules.rules[1].actions)
    assert rules.rules[1].actions[0].location == SourceLocation("net.rules", 4, 6)
    assert [r.location for r in rules] == [SourceLocation("net.rules", 2, 1), SourceLocation("net.rules", 3, 3),
                                           SourceLocation("net.rules", 5, 18)]
    cmp = list(ast.comparisons(rules.rules[2].filter))[0]
    assert cmp.location == SourceLocation("net.rules", 5, 18)
    subs = subscriptions(rules, TOPO)
    assert subs["h12"] == [rules.rules[0].filter] and subs["h3"] == []
    assert subs["h1"] == [rules.rules[1].filter]


@pytest.mark.parametrize("text, where, message", [
    ("add_order.price > 1: fwd(h99);", (1, 26), "'h99', which is not a host"),
    ("add_order.price > 1: fwd(h1, e1_1);", (1, 30), "'e1_1', which is a switch"),
    ("add_order.price > 1: fwd(3);", (1, 26), "names hosts"),
    ("add_order.price > 1: fwd(h1;", (1, 28), "expected ',' or ')'"),
    ("add_order.price > 1: fwd();", (1, 26), "at least one host"),
    ("add_order.price > 1: mark(h1);", (1, 22), "user action 'mark'"),
    ("add_order.price > : fwd(h1);", (1, 19), "operator and a constant"),
])
def test_errors_name_file_line_and_column(text, where, message):
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse_network_rules("\n" + text, TOPO, "x.rules")
    assert info.value.location == SourceLocation("x.rules", where[0] + 1, where[1])


def test_read_network_rules_reports_missing_files(tmp_path):
    with pytest.raises(Exception, match="no such rule file"):
        read_network_rules(tmp_path / "none.rules", TOPO)
    path = tmp_path / "ok.rules"
    path.write_text("add_order.price > 1: fwd(h3);\n")
    assert read_network_rules(path, TOPO).rules[0].ports == (3,)


# A rule file written with host names parses to the same filters, at the same places, as the same
# file written with the host ids padded to the names' width: the oracle is the plain parser.
FIELDS = ("add_order.price", "add_order.shares", "m.x")


@st.composite
def network_files(draw):
    topo = draw(st.sampled_from([TOPO, leaf_spine(3, 2, 4)]))
    hosts = topo.hosts()
    rules = []
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 3))
        cmps = [f"{draw(st.sampled_from(FIELDS))} {draw(st.sampled_from(['<', '>', '==', '!=']))} "
                f"{draw(st.integers(0, 999))}" for _ in range(n)]
        joiner = draw(st.sampled_from([" and ", " or ", "\n  and "]))
        filt = joiner.join(cmps)
        if draw(st.booleans()):
            filt = f"not ({filt})"
        targets = draw(st.lists(st.sampled_from(hosts), min_size=1, max_size=3))
        groups = draw(st.integers(1, 2))
        sep = draw(st.sampled_from([", ", ",\n   "]))
        rules.append((filt, targets, groups, sep, draw(st.sampled_from(["", "  # note; with : chars"]))))
    return topo, rules


def _render(rules, name_of) -> str:
    out = []
    for filt, targets, groups, sep, comment in rules:
        parts = [targets[i::groups] for i in range(groups)]
        acts = sep.join(f"fwd({', '.join(name_of(h) for h in part)})" for part in parts if part)
        out.append(f"{filt} : {acts};{comment}\n")
    return "".join(out)


@settings(max_examples=120, deadline=None)
@given(network_files())
def test_network_parse_agrees_with_the_plain_parser_on_filters_and_locations(case):
    topo, rules = case
    named = _render(rules, lambda h: h)
    numbered = _render(rules, lambda h: str(topo.node_id(h)).rjust(len(h)))
    got = parse_network_rules(named, topo, "f")
    want = parse_rules(numbered, "f")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.filter == w.filter
        assert g.location == w.location
        assert [c.location for c in ast.comparisons(g.filter)] == [c.location for c in ast.comparisons(w.filter)]
        assert g.ports == w.ports
