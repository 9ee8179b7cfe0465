"""Layout: Tofino's match kinds and re-encoded entries look up exactly what the IR's entries do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.tofino.layout import TofinoOptions, plan
from backends.tofino.target import TOFINO1
from compiler import ir
from runtime.model import lookup
from tests.backends.tofino.helpers import SCALAR_RULES, compile_text, scalar_spec


def _pipeline(table: ir.Table, entries: list[ir.Entry]) -> ir.Pipeline:
    actions = (ir.Action("NoAction"),
               ir.Action("set_state", (ir.Param("state", 8),), (ir.Primitive("set_meta", (ir.STATE, "state")),)))
    return ir.Pipeline(spec=scalar_spec(), metadata=(ir.Metadata(ir.STATE, 8),), actions=actions, tables=(table,),
                       control=(table.name,), entries=tuple(entries))


@st.composite
def range_tables(draw):
    width = draw(st.sampled_from([6, 8, 24]))
    n = draw(st.integers(1, 6))
    entries = []
    for i in range(n):
        state = draw(st.integers(0, 2))
        lo = draw(st.integers(0, (1 << width) - 1))
        hi = draw(st.integers(lo, min((1 << width) - 1, lo + draw(st.sampled_from([0, 3, 40, 1 << 20])))))
        entries.append(ir.Entry("t", (ir.Exact(state), ir.Range(lo, hi)), "set_state", (i + 1,), draw(st.integers(1, 5))))
    table = ir.Table("t", (ir.Key(ir.STATE, 8, "exact"), ir.Key("order.qty", width, "range")), ("set_state", "NoAction"),
                     "NoAction", size=64, role="field")
    return table, entries, width


def _winner_action(table, entries, key):
    hit = lookup(table, entries, key)
    return None if hit is None else hit.args


@settings(max_examples=80, deadline=None)
@given(range_tables(), st.data())
def test_rendered_entries_look_up_what_the_ir_entries_do(case, data):
    table, entries, width = case
    layout = plan(_pipeline(table, entries))
    t = layout.table("t")
    rendered_table = ir.Table("t", tuple(ir.Key(k.name, k.width, k.match_kind) for k in t.keys), table.actions,
                              table.default_action)

    def rendered_key(state: int, value: int) -> tuple[int, ...]:
        """The rendered keys' values: a sliced key matches bits ``msb..lsb`` of the value."""
        return (state,) + tuple(value if k.bits is None else (value >> k.bits[1]) & ((1 << k.width) - 1)
                                for k in t.keys[1:])

    # Overlapping ranges with equal priorities have no defined winner (in P4Runtime either): compare
    # the set of admissible answers, i.e. only keys whose best priority is held by one entry.
    for _ in range(40):
        state = data.draw(st.integers(0, 2))
        value = data.draw(st.integers(0, (1 << width) - 1))
        matching = [e for e in entries if e.matches[0].value == state and e.matches[1].lo <= value <= e.matches[1].hi]
        if matching and sum(1 for e in matching if e.priority == max(m.priority for m in matching)) > 1:
            continue
        assert _winner_action(rendered_table, list(t.entries), rendered_key(state, value)) == \
            _winner_action(table, entries, (state, value))


def test_a_range_key_wider_than_five_nibbles_becomes_ternary_prefixes():
    table = ir.Table("t", (ir.Key(ir.STATE, 8, "exact"), ir.Key("order.price", 32, "range")), ("set_state", "NoAction"),
                     "NoAction", size=64)
    entries = [ir.Entry("t", (ir.Exact(0), ir.Range(1, 6)), "set_state", (1,), 1)]
    t = plan(_pipeline(table, entries), TofinoOptions(wide_ranges="prefix-cover")).table("t")
    assert [k.match_kind for k in t.keys] == ["exact", "ternary"]
    assert t.keys[1].encoding == "prefix-cover"
    # [1, 6] = 1, 2-3, 4-5, 6: four prefixes, each with the entry's priority.
    assert sorted((m[1].value, m[1].mask) for m in (e.matches for e in t.entries)) == \
        [(1, 0xFFFFFFFF), (2, 0xFFFFFFFE), (4, 0xFFFFFFFE), (6, 0xFFFFFFFF)]
    assert {e.priority for e in t.entries} == {1}


def test_range_entries_that_are_all_points_become_an_exact_key():
    table = ir.Table("t", (ir.Key(ir.STATE, 8, "exact"), ir.Key("order.qty", 16, "range")), ("set_state", "NoAction"),
                     "NoAction", size=64)
    entries = [ir.Entry("t", (ir.Exact(0), ir.Range(v, v)), "set_state", (v,), 1) for v in (3, 9, 12)]
    t = plan(_pipeline(table, entries)).table("t")
    assert [k.match_kind for k in t.keys] == ["exact", "exact"]
    assert not t.needs_priority and {e.priority for e in t.entries} == {0}
    kept = plan(_pipeline(table, entries), TofinoOptions(points_as_exact=False, expand_points=0)).table("t")
    assert kept.keys[1].match_kind == "range"


def test_a_narrow_range_key_with_few_values_per_entry_becomes_one_exact_entry_per_value():
    """A compressed code matched in ranges: SRAM exact entries instead of TCAM rows, same lookups."""
    table = ir.Table("t", (ir.Key(ir.STATE, 8, "exact"), ir.Key("meta.p4sub_code_x", 6, "range")),
                     ("set_state", "NoAction"), "NoAction", size=64)
    entries = [ir.Entry("t", (ir.Exact(s), ir.Range(lo, hi)), "set_state", (10 * s + lo,), 1)
               for s in (0, 1) for lo, hi in ((0, 3), (4, 4), (5, 20))]
    t = plan(_pipeline(table, entries)).table("t")
    assert [k.match_kind for k in t.keys] == ["exact", "exact"] and t.keys[1].encoding == "expand"
    assert not t.uses_tcam and len(t.entries) == 2 * 21
    for s in (0, 1):
        for v in range(21):
            want = next(e.args for e in entries if e.matches[0].value == s and e.matches[1].lo <= v <= e.matches[1].hi)
            got = [e.args for e in t.entries if e.matches == (ir.Exact(s), ir.Exact(v))]
            assert got == [want]
    # wide ranges (more than expand_points values per entry) stay in TCAM
    wide = [ir.Entry("t", (ir.Exact(0), ir.Range(0, 63)), "set_state", (1,), 1)]
    assert plan(_pipeline(table, wide), TofinoOptions(expand_points=16)).table("t").keys[1].match_kind == "range"
    # overlapping entries of one state (a folded miss's wildcard under a range) cannot be expanded
    overlap = [ir.Entry("t", (ir.Exact(0), ir.Range(2, 3)), "set_state", (1,), 2),
               ir.Entry("t", (ir.Exact(0), ir.Range(0, 5)), "set_state", (2,), 1)]
    assert plan(_pipeline(table, overlap)).table("t").keys[1].encoding != "expand"


def test_a_narrow_range_key_stays_range_when_nibble_rows_are_cheaper():
    table = ir.Table("t", (ir.Key(ir.STATE, 8, "exact"), ir.Key("order.qty", 16, "range")), ("set_state", "NoAction"),
                     "NoAction", size=64)
    # [1, 0xFFFE]: 7 nibble rows, but 30 prefixes.
    entries = [ir.Entry("t", (ir.Exact(0), ir.Range(1, 0xFFFE)), "set_state", (1,), 1)]
    t = plan(_pipeline(table, entries)).table("t")
    assert t.keys[1].match_kind == "range" and t.tcam_rows == 7
    # [0, 0x7FFF] is one prefix and one nibble row: the cover is not cheaper, range stays.
    entries = [ir.Entry("t", (ir.Exact(0), ir.Range(0, 0x7FFF)), "set_state", (1,), 1)]
    assert plan(_pipeline(table, entries)).table("t").keys[1].match_kind == "range"


def test_every_compiled_table_keeps_its_keys_widths_and_entry_count_or_grows_by_expansion():
    pipeline = compile_text(scalar_spec(), SCALAR_RULES)
    layout = plan(pipeline)
    for t in layout.tables:
        ir_table = pipeline.table(t.name)
        # a key cut in (high, low) slices keeps its field and width over its two slices, high first
        whole = [(k.field, sum(j.width for j in t.keys if j.field == k.field))
                 for k in t.keys if k.bits is None or k.bits[1] == 0]
        assert whole == [(k.field, k.width) for k in ir_table.keys]
        for high, low in zip(t.keys, t.keys[1:]):
            if high.bits is not None and high.field == low.field:
                assert high.bits[1] == low.bits[0] + 1 and low.bits[1] == 0
        assert set(k.match_kind for k in t.keys) <= set(TOFINO1.match_kinds)
        assert len(t.entries) >= len(pipeline.entries_of(t.name))
        assert t.size >= len(t.entries)
        for k in t.keys:
            if k.match_kind == "range":
                assert k.width <= TOFINO1.widest_range_key
