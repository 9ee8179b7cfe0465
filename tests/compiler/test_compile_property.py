"""Invariant 1: the reference model running the compiled pipeline forwards every packet exactly where the
rules say, for every table encoding and every layout (groups; port bitmaps in one lane or several,
with the partition forced or chosen). The oracle (compiler/oracle.py) evaluates the rules themselves."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ir, oracle
from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules
from compiler.rules.typecheck import check_rules
from compiler.rules.values import encode_string
from compiler.tables import TableOptions
from runtime.model import Model
from tests.compiler.specs import make_spec

SPEC = make_spec({
    "m.sym": (32, {"match_kind": "exact", "is_string": True}),
    "m.tag": (16, {"is_string": True}),
    "m.px": (16, {"match_kind": "range", "scale": 2}),
    "m.qty": (8, {}),
    "m.big": (64, {}),
    "ip.dst": (32, {"match_kind": "lpm"}),
})
SYMS = ["AB", "ABC", "B", "ZZZZ"]
TAGS = ["A", "AB", "B", "Q"]
PREFIXES = [(0x0A000000, 8), (0x0A010000, 16), (0x0A010200, 24), (0x0A010203, 32), (0, 0), (0xC0A80000, 16)]
QTY = [0, 1, 5, 100, 254, 255]
BIG = [0, 1, 2**32, 2**63, 2**64 - 2, 2**64 - 1]
PX = [Decimal("0"), Decimal("1.5"), Decimal("10"), Decimal("655.35"), Decimal("3.01")]


def comparison() -> st.SearchStrategy[ast.Comparison]:
    f = ast.Field
    return st.one_of(
        st.builds(lambda op, s: ast.Comparison(f("m.sym"), op, ast.String(s)), st.sampled_from(["==", "!="]), st.sampled_from(SYMS)),
        st.builds(lambda op, s: ast.Comparison(f("m.tag"), op, ast.String(s)), st.sampled_from(["==", "!=", "prefix"]), st.sampled_from(TAGS)),
        st.builds(lambda op, v: ast.Comparison(f("m.px"), op, ast.Number(v)), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), st.sampled_from(PX)),
        st.builds(lambda op, v: ast.Comparison(f("m.qty"), op, ast.Number(v)), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), st.sampled_from(QTY)),
        st.builds(lambda op, v: ast.Comparison(f("m.big"), op, ast.Number(v)), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), st.sampled_from(BIG)),
        st.builds(lambda op, p: ast.Comparison(f("ip.dst"), op, ast.IPAddress(4, p[0], p[1])), st.sampled_from(["==", "!="]), st.sampled_from(PREFIXES)),
    )


def filters():
    return st.recursive(
        st.one_of(comparison(), st.booleans().map(ast.Const)),
        lambda ch: st.one_of(st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.And(tuple(x))),
                             st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.Or(tuple(x))),
                             ch.map(ast.Not)),
        max_leaves=5,
    )


rule = st.builds(
    lambda flt, ports, drop: ast.Rule(flt, ((ast.Forward(tuple(sorted(ports))),) if ports else ()) + ((ast.Drop(),) if drop or not ports else ())),
    filters(), st.lists(st.integers(1, 6), max_size=3, unique=True), st.booleans())


def near(values: list[int], top: int) -> st.SearchStrategy[int]:
    edges = sorted({max(0, min(top, v + d)) for v in values for d in (-1, 0, 1)} | {0, top})
    return st.one_of(st.sampled_from(edges), st.integers(0, top))


packet = st.fixed_dictionaries({
    "m.sym": st.one_of(st.sampled_from(SYMS + ["A"]).map(lambda s: encode_string(s, 32)), st.integers(0, 2**32 - 1)),
    "m.tag": st.one_of(st.sampled_from(TAGS + ["AA", "BA"]).map(lambda s: encode_string(s, 16)), st.integers(0, 2**16 - 1)),
    "m.px": near([int(p * 100) for p in PX], 2**16 - 1),
    "m.qty": near(QTY, 255),
    "m.big": near(BIG, 2**64 - 1),
    "ip.dst": near([p for p, _ in PREFIXES] + [p | ((1 << (32 - n)) - 1) for p, n in PREFIXES], 2**32 - 1),
})


#: (delivery, lanes): the legacy layout, bitmaps in 1, 2 or 3 lanes, and the automatic choice.
LAYOUTS = [("groups", None), ("bitmap", 1), ("bitmap", 2), ("bitmap", 3), ("bitmap", None), ("auto", None)]
layouts = st.sampled_from(LAYOUTS)


def layout_options(layout: tuple[str, int | None], **tables) -> CompileOptions:
    delivery, lanes = layout
    return CompileOptions(tables=TableOptions(**tables), delivery=delivery, lanes=lanes)


def run_all(pipeline: ir.Pipeline, packets: list[dict[str, int]]) -> list[frozenset[int]]:
    model = Model(pipeline)
    fields = model.inputs
    cols = {f: np.array([p[f] for p in packets], dtype=np.uint64) for f in fields}
    if not fields:
        return [model.run_one({})[0] for _ in packets]
    return model.run(cols).port_sets()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, max_size=8), st.lists(packet, min_size=1, max_size=25),
       st.sampled_from(["range", "ternary", "compress"]), layouts)
def test_model_of_compile_equals_direct_evaluation(rules, packets, encoding, layout) -> None:
    ruleset = ast.RuleSet(tuple(rules) + tuple(rules[:1]))  # a duplicate rule too
    compiled = compile_rules(SPEC, ruleset, layout_options(layout, range_encoding=encoding))
    if layout[1] is not None and len(rules) >= layout[1]:
        assert compiled.pipeline.lanes <= layout[1]
    got = run_all(compiled.pipeline, packets)
    for pkt, ports in zip(packets, got):
        assert ports == oracle.evaluate(compiled.typed, pkt).ports
        assert compiled.evaluate(pkt).ports == ports


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, max_size=6), st.lists(packet, min_size=1, max_size=10), layouts)
def test_literal_p4runtime_lookup_agrees_with_the_vectorised_model(rules, packets, layout) -> None:
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), layout_options(layout, range_encoding="ternary"))
    model = Model(compiled.pipeline)
    vectorised = run_all(compiled.pipeline, packets)
    for pkt, ports in zip(packets, vectorised):
        assert model.run_one(pkt)[0] == ports


def test_pipeline_json_round_trips(tmp_path) -> None:
    text_rules = (ast.Rule(ast.Comparison(ast.Field("m.qty"), ">", ast.Number(5)), (ast.Forward((1, 2)),)),
                  ast.Rule(ast.Comparison(ast.Field("ip.dst"), "==", ast.IPAddress(4, 0x0A000000, 8)), (ast.Forward((3,)),)))
    compiled = compile_rules(SPEC, ast.RuleSet(text_rules))
    ir.save(compiled.pipeline, tmp_path / "pipeline.json")
    assert ir.load(tmp_path) == compiled.pipeline


def test_unsatisfiable_rules_produce_no_entries() -> None:
    q = ast.Field("m.qty")
    rules = (ast.Rule(ast.And((ast.Comparison(q, ">", ast.Number(10)), ast.Not(ast.Comparison(q, ">", ast.Number(5))))), (ast.Forward((1,)),)),
             ast.Rule(ast.And((ast.Comparison(q, "==", ast.Number(1)), ast.Comparison(q, "==", ast.Number(2)))), (ast.Forward((2,)),)))
    compiled = compile_rules(SPEC, ast.RuleSet(rules))
    assert compiled.pipeline.entries == ()
    assert run_all(compiled.pipeline, [{"m.qty": v} for v in range(256)]) == [frozenset()] * 256


def test_overlapping_prefixes_deliver_to_both_rules() -> None:
    ip = ast.Field("ip.dst")
    rules = (ast.Rule(ast.Comparison(ip, "==", ast.IPAddress(4, 0x0A000000, 8)), (ast.Forward((1,)),)),
             ast.Rule(ast.Comparison(ip, "==", ast.IPAddress(4, 0x0A010000, 16)), (ast.Forward((2,)),)))
    compiled = compile_rules(SPEC, ast.RuleSet(rules), CompileOptions(delivery="groups"))
    lpm = [t for t in compiled.pipeline.tables if t.attribute == "ip.dst" and t.role == "field"][0]
    assert lpm.keys[1].match_kind == "lpm"
    assert len(compiled.pipeline.entries_of(lpm.name)) == 2  # ORTC: nested prefixes, not a prefix cover
    got = run_all(compiled.pipeline, [{"ip.dst": 0x0A010101}, {"ip.dst": 0x0A020101}, {"ip.dst": 0x0B000000}])
    assert got == [frozenset({1, 2}), frozenset({1}), frozenset()]


def test_multicast_groups_are_shared_by_port_set() -> None:
    q = ast.Field("m.qty")
    rules = tuple(ast.Rule(ast.Comparison(q, "==", ast.Number(v)), (ast.Forward((1, 2)),)) for v in (1, 3, 5)) + (
        ast.Rule(ast.Comparison(q, "==", ast.Number(7)), (ast.Forward((2, 3)),)),)
    compiled = compile_rules(SPEC, ast.RuleSet(rules), CompileOptions(delivery="groups"))
    assert [g.ports for g in compiled.pipeline.multicast_groups] == [(1, 2), (2, 3)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rule, min_size=1, max_size=40), st.sampled_from(["groups", "bitmap"]))
def test_last_level_nodes_built_with_numpy_equal_the_python_sweep(rules, delivery):
    """compiler.bdd builds big last-level nodes with numpy (_last_level_edges); forced on every
    node it may take, the pipeline must be the Python sweep's, node for node."""
    from compiler import bdd

    rs = ast.RuleSet(tuple(rules))
    options = CompileOptions(delivery=delivery)
    saved = bdd._VECTOR_MIN
    try:
        bdd._VECTOR_MIN = 10**9
        python = compile_rules(SPEC, rs, options).pipeline
        bdd._VECTOR_MIN = 1
        vector = compile_rules(SPEC, rs, options).pipeline
    finally:
        bdd._VECTOR_MIN = saved
    assert vector == python


NARROW = make_spec({"m.a": (8, {"match_kind": "range"}), "m.b": (12, {"match_kind": "range"})})
narrow_rule = st.builds(
    lambda a, op_a, b, op_b, ports: ast.Rule(
        ast.And((ast.Comparison(ast.Field("m.a"), op_a, ast.Number(a)),
                 ast.Comparison(ast.Field("m.b"), op_b, ast.Number(b)))),
        (ast.Forward(tuple(sorted(ports))),)),
    st.integers(0, 255), st.sampled_from(["<", ">", ">="]), st.integers(0, 4095),
    # "!=" makes a residual of two intervals, which the numpy path hands back to the Python sweep
    st.sampled_from(["<", ">", "<=", "==", "<", ">", "<=", "!="]),
    st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True))


def _both_ways(rs: ast.RuleSet) -> tuple[ir.Pipeline, ir.Pipeline, list[bool]]:
    """The pipeline built by the Python sweep alone, and with numpy on every last-level node of
    8 residuals or more; and per numpy attempt, whether it built the node."""
    from compiler import bdd

    options = CompileOptions(delivery="groups", field_order=("m.a", "m.b"))
    calls: list[bool] = []
    original = bdd._Builder._last_level_edges

    def counted(self, objs, top):
        edges = original(self, objs, top)
        calls.append(edges is not None)
        return edges

    saved = bdd._VECTOR_MIN
    try:
        bdd._VECTOR_MIN = 10**9
        python = compile_rules(NARROW, rs, options).pipeline
        bdd._VECTOR_MIN = 8
        bdd._Builder._last_level_edges = counted
        vector = compile_rules(NARROW, rs, options).pipeline
    finally:
        bdd._VECTOR_MIN = saved
        bdd._Builder._last_level_edges = original
    return python, vector, calls


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(narrow_rule, min_size=20, max_size=120))
def test_numpy_last_level_on_wide_nodes_equals_the_python_sweep_and_the_oracle(rules):
    """compiler.bdd builds last-level nodes over many residuals with numpy (_last_level_edges):
    the pipeline must be the Python sweep's, node for node, and forward as the rules say."""
    rs = ast.RuleSet(tuple(rules))
    python, vector, _ = _both_ways(rs)
    assert vector == python
    a = np.arange(0, 256, 3, dtype=np.uint64).repeat(8)
    b = np.tile(np.array([0, 1, 39, 40, 41, 2000, 4094, 4095], dtype=np.uint64), len(a) // 8)
    typed = check_rules(rs, NARROW)
    got = Model(vector).run({"m.a": a, "m.b": b}).port_sets()
    for x, y, ports in zip(a.tolist(), b.tolist(), got):
        assert ports == oracle.evaluate(typed, {"m.a": x, "m.b": y}).ports, (x, y)


def test_the_numpy_path_runs_and_hands_two_interval_nodes_back():
    import random

    rng = random.Random(1)
    rules = [ast.Rule(ast.And((ast.Comparison(ast.Field("m.a"), rng.choice(["<", ">"]), ast.Number(rng.randint(0, 255))),
                               ast.Comparison(ast.Field("m.b"), ">", ast.Number(rng.randint(0, 4095))))),
                      (ast.Forward((rng.randint(1, 8),)),))
             for _ in range(100)]
    python, vector, calls = _both_ways(ast.RuleSet(tuple(rules)))
    assert vector == python and calls and all(calls)
    rules.append(ast.Rule(ast.Comparison(ast.Field("m.b"), "!=", ast.Number(7)), (ast.Forward((2,)),)))
    python, vector, calls = _both_ways(ast.RuleSet(tuple(rules)))
    assert vector == python and calls and not any(calls)
