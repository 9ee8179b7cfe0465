"""AST nodes are values: built once, never assigned to. They are plain slotted dataclasses for speed
(compiler/rules/nodes.py), so the suite puts the frozen check back (tests/conftest.py): this holds that
check to refusing every write to every kind of node a rule file makes, and to leaving construction,
pickling and copying alone."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from compiler import rules as ast
from compiler.base.errors import SourceLocation
from compiler.rules import parser as lang
from tests.compiler.rules.test_fastparse import locations, nodes

RICH = ('(h.a == 1 or h.b < 0x2) and not (h.s prefix "ab" or h.c = 1.5) : fwd(3, 4), mark(4), drop;\n'
        "h.v == fe80::/10 and h.m == 00:11:22:33:44:55 and h.p == 10.0.0.0/8 or true : report(10.0.0.1);\n"
        "count(x) > 2 and avg(h.a) < 3 and v == GOOGL : fwd(1);\n")


def test_a_rule_files_nodes_refuse_every_write() -> None:
    made = [n for rule in lang.parse_rules(RICH, "rich.sub") for n in nodes(rule)]
    kinds = {type(n) for n in made}
    assert kinds == set(ast.NODES) | {SourceLocation}
    for n in made:
        for f in dataclasses.fields(n):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(n, f.name, None)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(n, f.name)
        assert type(n) is ast.Rule or not hasattr(n, "__dict__")


def test_guarded_nodes_still_build_pickle_and_copy() -> None:
    rules = lang.parse_rules(RICH, "rich.sub")
    for again in (pickle.loads(pickle.dumps(rules)), copy.deepcopy(rules), copy.copy(rules)):
        assert again == rules and locations(again) == locations(rules)
        assert [hash(r) for r in again] == [hash(r) for r in rules]
    where = SourceLocation("f", 1, 2)
    assert dataclasses.replace(where, line=3) == SourceLocation("f", 3, 2) and where.line == 1
