"""Wide range keys cut in (high, low) slices: the Tofino layout's rendered entries forward exactly as
the rules say. The evaluator here reads the rendered rows itself (exact, ternary, lpm and range
matches over slices of the packet's fields, highest priority first); it shares no code with the
layout, the reference model or the renderer, and its oracle is the rules (compiler.oracle)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.tofino.fold import fold_miss_tables
from backends.tofino.layout import KeyLayout, Layout, TofinoOptions, plan
from backends.tofino.resources import estimate
from backends.tofino.slices import pieces, steps
from compiler import ir, oracle
from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules
from compiler.tables import TableOptions
from tests.compiler.specs import make_spec

SPEC = make_spec({
    "m.px": (32, {"match_kind": "range"}),
    "m.big": (40, {"match_kind": "range"}),
    "m.qty": (8, {"match_kind": "range"}),
    "m.id": (16, {"match_kind": "exact"}),
})
WIDTH = {"m.px": 32, "m.big": 40, "m.qty": 8, "m.id": 16}
# Thresholds near the slice boundaries the layout may cut at (bit 4 .. 20) and near the ends.
EDGES = sorted({max(0, min((1 << 32) - 1, (1 << b) + d)) for b in (4, 8, 12, 16, 20, 24, 31, 32) for d in (-1, 0, 1)})


def _threshold(field: str) -> st.SearchStrategy[int]:
    """Edges, any value, and values whose high and low slices are both busy (hypothesis draws small
    integers first: XOR with a pattern spreads their bits over the whole field)."""
    top = (1 << WIDTH[field]) - 1
    return st.one_of(st.sampled_from([min(top, e) for e in EDGES]), st.integers(0, top),
                     st.integers(0, top).map(lambda v: v ^ (0x5A5A5A5A5A & top)))


def _comparison(field: str) -> st.SearchStrategy[ast.Comparison]:
    ops = ["==", "!=", "<", "<=", ">", ">="] if field != "m.id" else ["==", "!="]
    return st.builds(lambda op, v: ast.Comparison(ast.Field(field), op, ast.Number(v)), st.sampled_from(ops),
                     _threshold(field))


filters = st.recursive(
    st.one_of(*[_comparison(f) for f in WIDTH]),
    lambda ch: st.one_of(st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.And(tuple(x))),
                         st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.Or(tuple(x))), ch.map(ast.Not)),
    max_leaves=4)
rule = st.builds(lambda flt, ports: ast.Rule(flt, (ast.Forward(tuple(sorted(ports))),)), filters,
                 st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True))


def _packets(rules: list[ast.Rule]) -> st.SearchStrategy[dict[str, int]]:
    """Packets whose values sit on and next to the rules' thresholds, or anywhere."""
    near: dict[str, set[int]] = {f: {0, (1 << w) - 1} for f, w in WIDTH.items()}

    def visit(node) -> None:
        if isinstance(node, ast.Comparison):
            v, name = int(node.value.value), node.attribute.name
            near[name] |= {max(0, min((1 << WIDTH[name]) - 1, v + d)) for d in (-1, 0, 1)}
        elif isinstance(node, (ast.And, ast.Or)):
            for item in node.items:
                visit(item)
        elif isinstance(node, ast.Not):
            visit(node.item)

    for r in rules:
        visit(r.filter)
    return st.fixed_dictionaries({f: st.one_of(st.sampled_from(sorted(near[f])), st.integers(0, (1 << w) - 1))
                                  for f, w in WIDTH.items()})


# ------------------------------------------------------------------------------------------------
# The independent evaluator of a Tofino layout
# ------------------------------------------------------------------------------------------------


def _key_value(key: KeyLayout, packet: dict[str, int], meta: dict[str, int]) -> int:
    value = meta.get(key.field, 0) if key.field.startswith("meta.") else packet[key.field]
    if key.bits is not None:
        msb, lsb = key.bits
        value = (value >> lsb) & ((1 << (msb - lsb + 1)) - 1)
    return value


def _row_matches(match: ir.Match, value: int, width: int) -> bool:
    if isinstance(match, ir.Exact):
        return value == match.value
    if isinstance(match, ir.Ternary):
        return value & match.mask == match.value & match.mask
    if isinstance(match, ir.Range):
        return match.lo <= value <= match.hi
    shift = width - match.prefix_len
    return value >> shift == match.value >> shift


def _apply(layout: Layout, name: str, packet: dict[str, int], meta: dict[str, int], out: dict) -> None:
    t = layout.table(name)
    values = [_key_value(k, packet, meta) for k in t.keys]
    hits = [e for e in t.entries if all(_row_matches(m, v, k.width) for m, v, k in zip(e.matches, values, t.keys))]
    if hits:
        best = max(e.priority for e in hits)
        winners = {(e.action, e.args) for e in hits if e.priority == best}
        assert len(winners) == 1, f"{name}: equal-priority rows disagree for {values}: {winners}"
        action, args = winners.pop()
    else:
        action, args = t.table.default_action, t.table.default_args
    act = layout.pipeline.action(action)
    bound = {p.name: a for p, a in zip(act.params, args)}
    for prim in act.body:
        if prim.op == "set_meta":
            meta[prim.args[0]] = bound[prim.args[1]]
        elif prim.op == "or_meta":
            meta[prim.args[0]] = meta.get(prim.args[0], 0) | bound[prim.args[1]]
        elif prim.op == "set_egress_port":
            out["ports"] = frozenset({bound[prim.args[0]]})
        elif prim.op == "set_mcast_group":
            group = next(g for g in layout.pipeline.multicast_groups if g.id == bound[prim.args[0]])
            out["ports"] = frozenset(group.ports)
        elif prim.op == "drop":
            out["ports"] = frozenset()
    if not hits and t.table.on_miss:
        _apply(layout, t.table.on_miss, packet, meta, out)


def forward(layout: Layout, packet: dict[str, int]) -> frozenset[int]:
    """The ports the rendered tables send ``packet`` to (one message, every header valid)."""
    meta: dict[str, int] = {}
    out: dict = {"ports": frozenset()}
    for name in layout.pipeline.control:
        _apply(layout, name, packet, meta, out)
    return out["ports"]


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, min_size=1, max_size=6), st.sampled_from(["range", "ternary", "compress"]),
       st.sampled_from(["auto", "slices", "prefix-cover"]), st.sampled_from([0, 1, 4, 7, 16, 20]), st.booleans(),
       st.data())
def test_the_rendered_entries_forward_as_the_rules_say(rules, encoding, wide, low_bits, fold, data) -> None:
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)),
                             CompileOptions(tables=TableOptions(range_encoding=encoding), delivery="groups"))
    # folded: miss tables become wildcard entries (the whole range) of their field tables
    pipeline = fold_miss_tables(compiled.pipeline) if fold else compiled.pipeline
    layout = plan(pipeline, TofinoOptions(wide_ranges=wide, low_slice_bits=low_bits))
    for k in (k for t in layout.tables for k in t.keys):
        assert k.match_kind != "range" or k.width <= 20, k
        if wide == "slices" and k.ir_kind == "range" and WIDTH.get(k.field, 0) > 20:
            assert k.encoding in ("slices", "steps") and k.bits is not None
    for packet in data.draw(st.lists(_packets(rules), min_size=1, max_size=20)):
        assert forward(layout, packet) == oracle.evaluate(compiled.typed, packet).ports, packet


@given(st.integers(2, 40).flatmap(lambda w: st.tuples(st.just(w), st.integers(1, w - 1), st.integers(0, (1 << w) - 1),
                                                      st.integers(0, (1 << w) - 1))), st.data())
def test_pieces_cover_exactly_the_range_and_are_disjoint(case, data) -> None:
    width, low, a, b = case
    lo, hi = min(a, b), max(a, b)
    parts = pieces(lo, hi, width, low)
    assert len(parts) <= 2 + 2 * (width - low)
    for v in data.draw(st.lists(st.one_of(st.integers(0, (1 << width) - 1),
                                          st.sampled_from([max(0, lo - 1), lo, hi, min((1 << width) - 1, hi + 1)])),
                                max_size=30)):
        hv, lv = v >> low, v & ((1 << low) - 1)
        hits = sum(1 for p in parts if hv & p.high_mask == p.high_value & p.high_mask and p.low_lo <= lv <= p.low_hi)
        assert hits == (1 if lo <= v <= hi else 0), (v, parts)


@given(st.integers(21, 40).flatmap(lambda w: st.tuples(st.just(w), st.integers(1, 20),
                                                       st.lists(st.integers(1, (1 << w) - 1), min_size=1, max_size=12,
                                                                unique=True))), st.data())
def test_steps_give_each_value_the_last_interval_that_starts_at_or_below_it(case, data) -> None:
    width, low, starts = case
    starts = sorted(starts)
    bounds = starts + [1 << width]
    intervals = [(bounds[i], bounds[i + 1] - 1) for i in range(len(starts))]
    rows = steps(intervals, width, low)
    near = [max(0, min((1 << width) - 1, s + d)) for s in starts for d in (-1, 0, 1)]
    for v in data.draw(st.lists(st.one_of(st.integers(0, (1 << width) - 1), st.sampled_from(near)), max_size=30)):
        hv, lv = v >> low, v & ((1 << low) - 1)
        hits = [(i + 1, i) for p, i in rows
                if hv & p.high_mask == p.high_value & p.high_mask and p.low_lo <= lv <= p.low_hi]
        want = max((i for i, s in enumerate(starts) if s <= v), default=None)
        assert (max(hits)[1] if hits else None) == want, v


def test_a_32_bit_code_table_is_cut_in_slices_and_takes_fewer_tcam_blocks_than_its_prefix_cover() -> None:
    """1,000 thresholds on a 32-bit field (Camus's ITCH prices in 1/10,000 dollars): the code table."""
    px = ast.Field("m.px")
    rules = tuple(ast.Rule(ast.And((ast.Comparison(px, ">", ast.Number(p * 10_000)),
                                    ast.Comparison(px, "<=", ast.Number((p + 1) * 10_000)))), (ast.Forward((p % 6 + 1,)),))
                  for p in range(1, 1000))
    pipeline = compile_rules(SPEC, ast.RuleSet(rules),
                             CompileOptions(tables=TableOptions(per_field_encoding={"m.px": "compress"}))).pipeline
    sliced, covered = plan(pipeline), plan(pipeline, TofinoOptions(wide_ranges="prefix-cover"))
    code = next(t.name for t in pipeline.tables if t.role == "code")
    keys = sliced.table(code).keys
    assert [(k.match_kind, k.encoding, k.bits) for k in keys] == [("ternary", "steps", (31, keys[1].width)),
                                                                  ("range", "steps", (keys[1].width - 1, 0))]
    assert keys[1].width <= 20

    def blocks(layout: Layout) -> int:
        return next(u.tcam_blocks for u in estimate(layout, check=False).tables if u.name == code)

    assert blocks(sliced) * 2 <= blocks(covered)
    assert sliced.table(code).tcam_rows < math.ceil(covered.table(code).tcam_rows / 2)


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
@pytest.mark.parametrize("encoding", ["range", "compress"])
def test_one_comparison_on_a_wide_field_forwards_right_on_and_next_to_its_thresholds(op, encoding) -> None:
    """Every piece shape: thresholds inside a low block, on its edges, and across blocks, at every cut."""
    thresholds = [0x5A5A5A5A, 0x00012345, 0x0000FFFF, 0x00010000, 0xFFFF0000, 0x12345678]
    px = ast.Field("m.px")
    rules = [ast.Rule(ast.Comparison(px, op, ast.Number(t)), (ast.Forward((i + 1,)),)) for i, t in enumerate(thresholds)]
    rules.append(ast.Rule(ast.And((ast.Comparison(px, ">", ast.Number(thresholds[0])),
                                   ast.Comparison(px, "<", ast.Number(thresholds[-1] + 0x1000)))), (ast.Forward((9,)),)))
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)),
                             CompileOptions(tables=TableOptions(range_encoding=encoding), delivery="groups"))
    values = sorted({max(0, min((1 << 32) - 1, t + d)) for t in thresholds + [thresholds[-1] + 0x1000]
                     for d in (-0x10001, -0x100, -2, -1, 0, 1, 2, 0x100, 0x10001)} | {0, (1 << 32) - 1})
    for low in (0, 1, 4, 8, 16, 20):
        layout = plan(compiled.pipeline, TofinoOptions(wide_ranges="slices", low_slice_bits=low))
        for v in values:
            packet = {"m.px": v, "m.big": 0, "m.qty": 0, "m.id": 0}
            assert forward(layout, packet) == oracle.evaluate(compiled.typed, packet).ports, (low, hex(v))
