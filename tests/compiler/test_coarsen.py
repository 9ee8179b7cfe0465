"""Coarsened thresholds (compiler/coarsen.py): never a missed delivery, never more cuts than asked.

The oracle (compiler/oracle.py) evaluates the rules themselves; the reference model runs the compiled
pipeline. With ``codes`` a packet may reach more ports than the rules say, never fewer, and the code
table of the coarsened field holds no more intervals than the cuts kept allow.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import oracle
from compiler import rules as ast
from compiler.coarsen import choose_cuts, cuts_of, snap
from compiler.compile import CompileOptions, compile_rules
from compiler.predicates import IntervalSet
from compiler.tables import TableOptions
from tests.compiler.test_compile_property import LAYOUTS, SPEC, packet, rule, run_all

intervals = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=4).map(
    lambda xs: IntervalSet.union_of([(min(a, b), max(a, b)) for a, b in xs], 1000))


@given(intervals, st.lists(st.integers(1, 1000), max_size=8, unique=True))
def test_snapping_widens_to_the_kept_cuts(s: IntervalSet, kept: list[int]) -> None:
    cuts = sorted(kept)
    wide = snap(s, cuts)
    for lo, hi in s.intervals:  # a superset
        for v in {lo, hi, (lo + hi) // 2}:
            assert any(a <= v <= b for a, b in wide.intervals)
    for lo, hi in wide.intervals:  # every end on a kept cut or the domain's edge
        assert lo == 0 or lo in cuts
        assert hi == 1000 or hi + 1 in cuts


@given(st.lists(intervals, min_size=1, max_size=12), st.integers(0, 6))
def test_at_most_the_limit_of_the_cuts_there_were(sets: list[IntervalSet], limit: int) -> None:
    cubes = [[((("f", s),)), ()] for s in sets]
    cubes = [[(cube, actions)] for cube, actions in cubes]
    kept = choose_cuts(cubes, "f", limit)
    assert len(kept) <= limit or kept == tuple(cuts_of(cubes, "f"))
    assert set(kept) <= set(cuts_of(cubes, "f"))


def test_the_cheapest_cuts_go_first() -> None:
    """Three filters at 100, 101 and 900 on a field whose traffic is spread evenly: with two cuts
    kept, 101 goes (merging it into 100 widens by one value; dropping 900 would widen by 800)."""
    cubes = [[(((("f", IntervalSet.of(v, 1000, 1000)),)), ())] for v in (100, 101, 900)]
    assert choose_cuts(cubes, "f", 2) == (100, 900)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, max_size=8), st.lists(packet, min_size=1, max_size=25), st.sampled_from(LAYOUTS),
       st.integers(1, 4), st.sampled_from(["m.px", "m.big", "m.qty"]))
def test_coarsened_compiles_deliver_a_superset(rules, packets, layout, limit, name) -> None:
    delivery, lanes = layout
    options = CompileOptions(tables=TableOptions(range_encoding="compress"), delivery=delivery, lanes=lanes,
                             codes=((name, limit),))
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), options)
    got = run_all(compiled.pipeline, packets)
    for pkt, ports in zip(packets, got):
        assert oracle.evaluate(compiled.typed, pkt).ports <= ports
    code_tables = [t for t in compiled.pipeline.tables if t.role == "code" and t.attribute == name]
    for t in code_tables:  # limit cuts make at most limit + 1 intervals, one entry each
        assert sum(e.table == t.name for e in compiled.pipeline.entries) <= limit + 1
    if compiled.stats["exact"]:
        assert "coarsened" not in compiled.stats


def test_a_sample_keeps_the_cuts_where_the_traffic_is() -> None:
    """Traffic only between 500 and 510: the cuts there are kept, the far one goes."""
    cubes = [[(((("f", IntervalSet.of(v, 1000, 1000)),)), ())] for v in (100, 502, 505)]
    sample = {"f": np.arange(500, 510, dtype=np.uint64)}
    assert choose_cuts(cubes, "f", 2, sample) == (502, 505)


def test_each_cube_is_costed_on_the_traffic_its_other_constraints_hold_for() -> None:
    """Stock 1 trades around 100, stock 2 around 900: with one cut to spare, the stock-1 filter at
    900 and the stock-2 filter at 100 lose theirs (nobody's traffic is there), not the busy ones."""
    def cube(stock: int, v: int) -> list:
        return [((("f", IntervalSet.of(v, 1000, 1000)), ("s", IntervalSet.of(stock, stock, 3))), ())]

    cubes = [cube(1, 100), cube(2, 900), cube(1, 905), cube(2, 95)]
    sample = {"f": np.array([98, 99, 101, 102, 898, 899, 901, 902] * 10, dtype=np.uint64),
              "s": np.array([1, 1, 1, 1, 2, 2, 2, 2] * 10, dtype=np.uint64)}
    assert choose_cuts(cubes, "f", 2, sample) == (100, 900)
