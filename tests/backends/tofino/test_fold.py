"""Folding miss tables into their field tables changes no forwarding decision (oracle: the rules themselves)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.tofino.fold import fold_miss_tables
from compiler import oracle
from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules
from compiler.tables import TableOptions
from tests.compiler.test_compile_property import SPEC, packet, rule, run_all


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, max_size=8), st.lists(packet, min_size=1, max_size=25),
       st.sampled_from(["range", "ternary", "compress"]), st.sampled_from([0, 16, 64]))
def test_folded_pipeline_forwards_as_the_rules_say(rules, packets, encoding, max_exact_width) -> None:
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(tables=TableOptions(range_encoding=encoding)))
    folded = fold_miss_tables(compiled.pipeline, max_exact_width)
    for pkt, ports in zip(packets, run_all(folded, packets)):
        assert ports == oracle.evaluate(compiled.typed, pkt).ports


def test_folding_removes_miss_tables_and_keeps_wide_exact_keys_apart() -> None:
    text_rules = (ast.Rule(ast.And((ast.Comparison(ast.Field("m.qty"), ">", ast.Number(5)),
                                    ast.Comparison(ast.Field("m.big"), "==", ast.Number(7)))), (ast.Forward((1,)),)),
                  ast.Rule(ast.Comparison(ast.Field("m.qty"), "<", ast.Number(3)), (ast.Forward((2,)),)))
    pipeline = compile_rules(SPEC, ast.RuleSet(text_rules)).pipeline
    folded = fold_miss_tables(pipeline)
    misses = {t.name: t.on_miss for t in pipeline.tables if t.on_miss}
    assert misses, "the example needs miss tables"
    kept = {t.name for t in folded.tables}
    for table, miss in misses.items():
        field_key = pipeline.table(table).keys[1]
        wide_exact = field_key.match_kind == "exact" and field_key.width > 16
        assert (miss in kept) == wide_exact, table
        if not wide_exact:
            wildcards = [e for e in folded.entries_of(table) if e.priority == 0]
            assert len(wildcards) == len(pipeline.entries_of(miss))
    assert set(folded.control) <= kept


def test_a_big_exact_table_stays_exact_whatever_its_key_width() -> None:
    # hICN-like: many exact values of one wide field. Made ternary (to hold its miss table's wildcards) it
    # would take TCAM for every entry (bf-p4c: 245 of 288 blocks for 100k ids); it keeps its miss table.
    text_rules = tuple(ast.Rule(ast.And((ast.Comparison(ast.Field("m.big"), "==", ast.Number(i)),
                                         ast.Comparison(ast.Field("m.qty"), ">", ast.Number(i % 7)))),
                                (ast.Forward((1 + i % 3,)),)) for i in range(300))
    pipeline = compile_rules(SPEC, ast.RuleSet(text_rules)).pipeline
    wide = [t for t in pipeline.tables if t.on_miss and t.keys[1].match_kind == "exact" and t.keys[1].width > 16]
    assert wide, "the example needs a wide exact field table with a miss table"
    small = fold_miss_tables(pipeline, None, max_exact_entries=10 ** 9)
    assert all(t.on_miss not in {x.name for x in small.tables} for t in wide)
    capped = fold_miss_tables(pipeline, None, max_exact_entries=min(t.size for t in wide) - 1)
    assert all(t.on_miss in {x.name for x in capped.tables} for t in wide)
