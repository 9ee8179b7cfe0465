"""The event space: S1's address layout, S2's interleaving, monotone attribute domains."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.pleroma import event_space, interleave, ipv6_prefix, ipv6_text
from compiler.pleroma.dz import Dimension, EventSpace
from compiler.rules import parse_rules
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (8, {"match_kind": "range"}), "m.b": (8, {"match_kind": "range"})})


def test_ipv6_addresses_are_s1s_examples():
    # S1 §III-B: dz 110 -> ff0e:c000::/19, 101101 -> ff0e:b400::/22, event 110010 -> ff0e:c800::.
    assert [(ipv6_text(a), n) for a, n in map(ipv6_prefix, ("110", "101101", "101"))] == [
        ("ff0e:c000::", 19), ("ff0e:b400::", 22), ("ff0e:a000::", 19)]
    assert ipv6_text(ipv6_prefix("110010")[0]) == "ff0e:c800::"


def test_interleaving_is_s2s_grid():
    # S2 Fig. 5.1: bit 1 = x, bit 2 = y, bit 3 = x, bit 4 = y; dimensions with fewer bits drop out.
    assert interleave([2, 2]) == ((0, 0), (1, 0), (0, 1), (1, 1))
    assert interleave([1, 3]) == ((0, 0), (1, 0), (1, 1), (1, 2))


def test_s1_event_example_on_a_domain_of_128():
    # S1 Fig. 2's e1 = {P=65, V=55} -> 110010 over [0,100]; on [0,128) with 8 cells the same halvings
    # (64, 32, 16 ...) give 65 -> 100, 55 -> 011, interleaved 1 0 0 1 0 1.
    dims = tuple(Dimension(f, tuple(range(16, 128, 16)), 3) for f in ("m.a", "m.b"))
    space = EventSpace(dims, interleave([3, 3]), "value", (8, 8))
    assert space.dz_of({"m.a": 65, "m.b": 55}, 6) == "100101"
    cols = {"m.a": np.array([65, 0, 127], dtype=np.uint64), "m.b": np.array([55, 127, 0], dtype=np.uint64)}
    assert [format(int(x), "06b") for x in space.event_dz(cols, 6)] == ["100101", "010101", "101010"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=1, max_size=6), st.sampled_from(["value", "rank"]),
       st.integers(0, 255), st.integers(0, 255))
def test_coordinates_are_monotone(consts, indexing, x, y):
    rules = parse_rules("".join(f"m.a > {c}: fwd(1);\n" for c in consts))
    space = event_space(SPEC.query_fields, [r.filter for r in rules], indexing, dimension_bits=4)
    (d,) = space.dimensions
    if x <= y:
        assert d.coordinate_of(x) <= d.coordinate_of(y)
    assert int(d.coordinate(np.array([x], dtype=np.uint64))[0]) == d.coordinate_of(x)
    assert d.coordinate_of(x) < 1 << d.bits


def test_rank_indexing_cuts_at_every_boundary():
    rules = parse_rules("m.a > 10 and m.b < 20: fwd(1);\nm.a == 5: fwd(2);")
    space = event_space(SPEC.query_fields, [r.filter for r in rules], "rank")
    a = next(d for d in space.dimensions if d.field == "m.a")
    assert a.cuts == (5, 6, 11)
    assert space.dimensions[0].field == "m.a"  # the most tested field comes first
    assert isinstance(rules.rules[0].filter, ast.And)
