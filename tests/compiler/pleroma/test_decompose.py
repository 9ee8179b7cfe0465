"""Decomposition: a subscription's dz's cover exactly its cells (a superset when truncated)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.oracle import filter_holds
from compiler.pleroma import decompose, event_space, minimise
from compiler.rules import check_rules, parse_rules
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (4, {"match_kind": "range"}), "m.b": (4, {"match_kind": "range"})})
OPS = ("==", "!=", "<", "<=", ">", ">=")


def _filters():
    cmp = st.builds(lambda f, op, c: f"m.{f} {op} {c}", st.sampled_from("ab"), st.sampled_from(OPS), st.integers(0, 15))
    term = st.lists(cmp, min_size=1, max_size=3).map(" and ".join)
    neg = st.builds(lambda t, n: f"not ({t})" if n else t, term, st.booleans())
    return st.lists(neg, min_size=1, max_size=2).map(lambda ts: " or ".join(f"({t})" for t in ts))


@settings(max_examples=150, deadline=None)
@given(_filters(), st.lists(_filters(), max_size=3), st.sampled_from(["value", "rank"]), st.integers(1, 8),
       st.sampled_from([None, 2, 5]))
def test_dzs_cover_the_filter_exactly_or_a_superset_when_truncated(text, others, indexing, resolution, max_dz):
    typed = check_rules(parse_rules("".join(f"{t}: fwd(1);\n" for t in [text, *others])), SPEC)
    space = event_space(typed.fields, [r.filter for r in typed.rules], indexing, dimension_bits=4)
    f = list(typed.rules)[0].filter
    d = decompose(space, f, typed.fields, resolution, max_dz)
    assert max_dz is None or len(d.dzs) <= max(max_dz, 1) or d.resolution == 0
    assert list(d.dzs) == minimise(d.dzs)  # no dz covers another, no sibling pair left
    full = space.max_length
    for a, b in itertools.product(range(16), repeat=2):
        values = {"m.a": a, "m.b": b}
        if "m.a" not in typed.fields:
            values.pop("m.a")
        if "m.b" not in typed.fields:
            values.pop("m.b")
        holds = filter_holds(f, typed.fields, values)
        dz = space.dz_of(values, full)
        covered = any(dz.startswith(p) for p in d.dzs)
        if holds:
            assert covered, (values, d)  # never a missed event
        if d.exact and not holds:
            assert not covered, (values, d)  # exact: no event outside the filter


def test_rank_indexing_at_full_resolution_is_exact():
    typed = check_rules(parse_rules("m.a > 3 and m.b <= 9: fwd(1);\nm.a == 7: fwd(2);\nm.b != 2: fwd(3);"), SPEC)
    space = event_space(typed.fields, [r.filter for r in typed.rules], "rank")
    for r in typed.rules:
        assert decompose(space, r.filter, typed.fields, 64).exact


def test_a_cap_makes_the_cover_coarser_never_narrower():
    text = "m.a > 3 and m.b > 5: fwd(1);\nm.a < 1 and m.b < 1: fwd(2);\nm.a > 14: fwd(3);"
    typed = check_rules(parse_rules(text), SPEC)
    space = event_space(typed.fields, [r.filter for r in typed.rules], "value", dimension_bits=4)
    fine = decompose(space, list(typed.rules)[0].filter, typed.fields, 8)
    coarse = decompose(space, list(typed.rules)[0].filter, typed.fields, 8, max_dz=2)
    assert len(coarse.dzs) <= 2 < len(fine.dzs)
    assert all(any(f.startswith(c) for c in coarse.dzs) for f in fine.dzs)
    assert not coarse.exact
