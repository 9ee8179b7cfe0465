"""compiler.stateful and the spec's counters: key= and field=, binding rule attributes to counters,
and the registers, updates and reads a stateful pipeline carries (docs/compiler.md, "Stateful
subscriptions")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compiler import ir
from compiler.base.errors import CompileError, ErrorList, P4subError
from compiler.compile import compile_files, compile_rules
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from compiler.spec.reader import parse_spec
from compiler.stateful import bind, plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stateful"

SPEC = """
#include <core.p4>
header h_t { bit<64> stock; bit<32> price; bit<16> qty; }
@query_field(h.stock, string)
@query_field_range(h.price, scale=4)
{counters}
struct headers { h_t h; }
parser P(packet_in p, out headers hdr) { state start { p.extract(hdr.h); transition accept; } }
"""


def spec_of(counters: str):
    return parse_spec(SPEC.replace("{counters}", counters), "s.p4")


def test_key_and_field_are_read_with_their_widths() -> None:
    spec = spec_of("@query_counter(rate, 1000, 64, key=h.stock, field=h.price, width=16)\n"
                   "@query_counter(port_rate, 5, 8, key=standard_metadata.ingress_port)\n"
                   "@query_field_counter(plain, 77)")
    rate, port_rate, plain = spec.counters.values()
    assert (rate.key, rate.field, rate.width, rate.slots) == ("h.stock", "h.price", 16, 64)
    assert (port_rate.key, port_rate.field) == ("standard_metadata.ingress_port", None)
    assert (plain.key, plain.field, plain.slots, plain.window_us) == (None, None, 1, 77)


@pytest.mark.parametrize("args, message", [
    ("key=h.nope", "key=h.nope: header h (h_t) has no field 'nope'"),
    ("key=x.stock", "key=x.stock: unknown header instance 'x'"),
    ("key=3", "key= takes a field, header.field"),
    ("field=h", "field= takes a field, header.field"),
    ("key=h.stock, key=h.price", "takes a name"),
    ("colour=h.stock", "takes a name"),
])
def test_bad_key_or_field_is_a_spec_error(args: str, message: str) -> None:
    with pytest.raises(P4subError, match=re.escape(message)) as info:
        spec_of(f"@query_counter(rate, 1000, 4, {args})")
    assert info.value.location is not None and info.value.location.line == 6


def typed_of(counters: str, rules: str):
    return check_rules(parse_rules(rules), spec_of(counters))


def test_attributes_bind_to_counters_and_functions() -> None:
    typed = typed_of("@query_counter(rate, 1000, 4, key=h.stock)\n@query_counter(px, 1000, 4, field=h.price, width=20)",
                     "rate > 1 or count(rate) > 2 or sum(px) > 3 or avg(h.price) > 1.5 or count(h.price) < 9: fwd(1);")
    spec = typed.spec
    got = {name: (c.name, f) for name, c, f in
           ((a.attribute.name, *bind(a.attribute, spec)) for a in _comparisons(typed))}
    assert got == {"rate": ("rate", "count"), "count(rate)": ("rate", "count"), "sum(px)": ("px", "sum"),
                   "avg(h.price)": ("px", "avg"), "count(h.price)": ("px", "count")}
    # Aggregates have their counter's width and their field's scale (count: none).
    assert typed.fields["avg(h.price)"].width == 20 and typed.fields["avg(h.price)"].scale == 4
    assert typed.fields["sum(px)"].scale == 4 and typed.fields["count(h.price)"].scale == 0
    assert typed.fields["rate"].width == 32


def _comparisons(typed):
    from compiler import rules as ast

    return [c for r in typed.rules for c in ast.comparisons(r.filter)]


@pytest.mark.parametrize("counters, rule, message", [
    ("@query_counter(rate, 1000, 4)", "sum(rate) > 1: fwd(1);", "counter 'rate' adds up no field"),
    ("@query_counter(rate, 1000, 4)", "avg(h.price) > 1: fwd(1);", "avg(h.price) needs a window"),
    ("@query_counter(a, 1000, 4, field=h.price)\n@query_counter(b, 10, 4, field=h.price)", "avg(h.price) > 1: fwd(1);",
     "ambiguous: counters a, b"),
])
def test_unbound_aggregates_are_compile_errors_with_locations(counters: str, rule: str, message: str) -> None:
    typed = typed_of(counters, "h.stock == A: fwd(2);\n" + rule)
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        plan(typed)
    assert info.value.location.line == 2
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_rules(typed.spec, typed.rules)


def test_all_binding_errors_are_reported_together() -> None:
    typed = typed_of("@query_counter(rate, 1000, 4)", "sum(rate) > 1: fwd(1);\navg(h.price) > 1: fwd(1);")
    with pytest.raises(ErrorList) as info:
        plan(typed)
    assert [e.location.line for e in info.value.errors] == [1, 2]


def test_stateless_pipelines_are_unchanged() -> None:
    typed = typed_of("@query_counter(rate, 1000, 4)", "h.stock == A: fwd(1);")
    pipeline = compile_rules(typed.spec, typed.rules).pipeline
    assert pipeline.updates == () and pipeline.registers == () and pipeline.format_version == ir.FORMAT_VERSION


def test_the_example_pipeline_carries_registers_updates_and_reads(tmp_path: Path) -> None:
    pipeline = compile_files(EXAMPLE / "itch-rate.p4", EXAMPLE / "itch-rate.rules").pipeline
    assert pipeline.format_version == ir.STATEFUL_VERSION == 4
    rate, volume = pipeline.updates
    assert (rate.counter, rate.window_us, rate.size, rate.index, rate.total, rate.when) == (
        "rate", 100_000, 1024, "add_order.stock", "", ("add_order",))
    assert [(r.attribute, r.function, r.field) for r in rate.reads] == [("rate", "count", "meta.p4sub_st_rate_count")]
    assert (volume.value, volume.total) == ("add_order.shares", "p4sub_volume_sum")
    assert {(r.attribute, r.function) for r in volume.reads} == {("avg(add_order.shares)", "avg"), ("sum(volume)", "sum")}
    assert [(r.name, r.width, r.size, r.index) for r in pipeline.registers] == [
        ("p4sub_rate_end", 64, 1024, "add_order.stock"), ("p4sub_rate_count", 32, 1024, "add_order.stock"),
        ("p4sub_volume_end", 64, 1024, "add_order.stock"), ("p4sub_volume_count", 32, 1024, "add_order.stock"),
        ("p4sub_volume_sum", 32, 1024, "add_order.stock")]
    metadata = {m.name: m.width for m in pipeline.metadata}
    assert all(metadata[r.field] == 32 for u in pipeline.updates for r in u.reads)
    # The tables match the attributes like fields; the reads say which metadata holds them.
    keys = {k.field for t in pipeline.tables for k in t.keys}
    assert {"rate", "avg(add_order.shares)", "sum(volume)"} <= keys
    assert set(pipeline.state_reads()) == {"rate", "avg(add_order.shares)", "sum(volume)"}
    ir.save(pipeline, tmp_path / "pipeline.json")
    assert ir.load(tmp_path) == pipeline


def test_an_unkeyed_counter_has_one_cell() -> None:
    typed = typed_of("@query_counter(rate, 1000, 64)", "rate > 1: fwd(1);")
    (update,) = plan(typed).updates
    assert (update.size, update.index, update.when) == (1, "", ())


def test_relax_takes_state_as_holding_in_either_polarity() -> None:
    from compiler import rules as ast
    from compiler.oracle import filter_holds
    from compiler.stateful import relax

    typed = typed_of("@query_counter(rate, 1000, 4)",
                     "h.stock == A and rate > 3: fwd(1);\nnot (rate > 3 and h.price > 1) or h.stock == B: fwd(2);\n"
                     "h.price < 2: fwd(3);")
    first, second, plain = (r.filter for r in typed.rules)
    assert str(relax(first)) == 'h.stock == "A" and true'
    assert str(relax(second)) == 'not (false and h.price > 1) or h.stock == "B"'
    assert relax(plain) is plain
    # A superset: wherever the rule holds for some counter value, the relaxed filter holds.
    fields = typed.fields
    for stock in (0x41 << 56 | 0x20202020202020, 0x42 << 56 | 0x20202020202020, 7):
        for price in (0, 1, 2, 3):
            for rate in (0, 3, 4):
                values = {"h.stock": stock, "h.price": price, "rate": rate}
                for f in (first, second):
                    if filter_holds(f, fields, values):
                        assert filter_holds(relax(f), fields, values)


def test_routing_judges_state_at_the_last_hop_only() -> None:
    from compiler.network.routing import UP_PORT, route
    from compiler.network.topology import fat_tree

    topo = fat_tree(4)
    text = f"h.stock == A and rate > 3: fwd({topo.node_id('h1')}, {topo.node_id('h5')});"
    typed = check_rules(parse_rules(text), spec_of("@query_counter(rate, 1000, 4)"), port_bits=32)
    per = route(topo, typed.rules, typed.fields)
    edge = {r.ports: str(r.filter) for r in per["e1_1"].rules}
    assert edge == {(3,): 'h.stock == "A" and rate > 3', (UP_PORT,): 'h.stock == "A" and true'}
    assert all("rate" not in str(r.filter) for s in ("a2_1", "c1") for r in per[s].rules)
    assert any(per[s].rules for s in ("a2_1", "c1"))


def test_simulate_takes_each_packets_time(tmp_path: Path, capsys) -> None:
    from p4sub import main

    out = tmp_path / "out"
    assert main(["compile", str(EXAMPLE / "itch-rate.p4"), str(EXAMPLE / "itch-rate.rules"), "-o", str(out)]) == 0
    ms = [0, 1, 2, 3, 150]
    lines = [f'{{"add_order.stock": "GOOGL", "add_order.shares": 100, "timestamp_ns": {t * 1_000_000}}}' for t in ms]
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["simulate", str(out), "--packets", str(tmp_path / "p.jsonl")]) == 0
    got = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert got == ['{"ports": [1]}'] * 3 + ['{"ports": [1, 2]}', '{"ports": [1]}']


def test_explain_takes_the_counters_values_as_given(tmp_path: Path, capsys) -> None:
    from p4sub import main

    out = tmp_path / "out"
    assert main(["compile", str(EXAMPLE / "itch-rate.p4"), str(EXAMPLE / "itch-rate.rules"), "-o", str(out)]) == 0
    packet = '{"add_order.stock": "GOOGL", "add_order.shares": 100, "rate": 7, "avg(add_order.shares)": 600}'
    capsys.readouterr()
    assert main(["explain", str(out), "--packet", packet]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == '{"ports": [1, 2, 3]}'
    assert main(["explain", str(out), "--packet", '{"add_order.stock": "GOOGL", "add_order.shares": 100}']) == 0
    assert capsys.readouterr().out.splitlines()[-1] == '{"ports": [1]}'  # counters left out read 0


def test_check_reports_an_aggregate_no_counter_keeps(tmp_path: Path, capsys) -> None:
    from p4sub import main

    (tmp_path / "bad.sub").write_text("avg(add_order.price) > 1: fwd(1);\n")
    assert main(["check", str(EXAMPLE / "itch-rate.p4"), str(tmp_path / "bad.sub")]) == 2
    assert "bad.sub:1:1: avg(add_order.price) needs a window" in capsys.readouterr().err
