"""The regular-expression fast path builds exactly what the lark grammar builds, locations included."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import lang
from compiler.fastparse import parse_flat

WS = st.sampled_from([" ", "  ", "\n", " \n\t", ""])
FIELD = st.sampled_from(["a.b", "add_order.price", "h.f_1", "x.y.z"])
CONST = st.one_of(st.integers(0, 2**70).map(str), st.integers(0, 2**40).map(hex), st.sampled_from(['"GOOGL"', '""', '"A B"']),
                  st.sampled_from(["10.0.0.0/8", "192.168.1.1", "1.2.3.4/32", "50.25", "0.5", "10.0.0.1/8"]))
OP = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "="])


@st.composite
def flat_files(draw) -> str:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        conds = [f"{draw(FIELD)}{draw(WS)}{draw(OP)}{draw(WS)}{draw(CONST)}" for _ in range(draw(st.integers(1, 3)))]
        joiner = draw(st.sampled_from([" and ", "\nand ", " && ", "&&"]))
        acts = draw(st.lists(st.one_of(st.lists(st.integers(0, 600), min_size=1, max_size=3).map(lambda ps: f"fwd({', '.join(map(str, ps))})"),
                                       st.just("drop")), min_size=1, max_size=3))
        out.append(f"{draw(WS)}{joiner.join(conds)}{draw(WS)}:{draw(WS)}{', '.join(acts)}")
    return ";".join(out) + draw(st.sampled_from([";", "", ";\n"]))


def locations(node) -> list:
    """Every (class, location) in an AST, depth first: equality of ASTs ignores locations, this does not."""
    out = []
    if dataclasses.is_dataclass(node):
        out.append((type(node).__name__, getattr(node, "location", None)))
        for f in dataclasses.fields(node):
            out.extend(locations(getattr(node, f.name)))
    elif isinstance(node, tuple):
        for x in node:
            out.extend(locations(x))
    return out


@settings(max_examples=300, deadline=None)
@given(flat_files())
def test_fast_path_equals_the_grammar(text: str) -> None:
    fast = parse_flat(text, "f.sub")
    try:
        slow = lang._ToAst("f.sub").transform(lang._parser().parse(text))
    except Exception:
        assert fast is None  # whatever the grammar rejects, the fast path must leave to it
        return
    if fast is not None:
        assert fast == slow
        assert locations(fast) == locations(slow)


def test_fast_path_declines_what_it_does_not_cover() -> None:
    for text in ["a.b == 1 or a.c == 2: drop", "# c\na.b == 1: drop", "(a.b == 1): drop", "a.b == GOOGL: drop",
                 "not a.b == 1: drop", "a.b == ::1: drop", "a.b prefix \"A\": drop", "a.b == 1: mark(1)"]:
        assert parse_flat(text, "f") is None
