"""Counters on TNA (backends/tofino/state.py): a Register + RegisterAction per value read (and a window
register beside a sum), the MAC timestamp in 1.024 µs ticks, keys on the reads' metadata; what Tofino
cannot do is refused with the reason; p4test type-checks the program against tna.p4 and bf-p4c
compiles it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import backends.tofino as tofino
from backends.tofino.state import window_ticks
from compiler.base.errors import TargetError
from compiler.compile import compile_rules
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec
from tests.backends.tofino.test_program import _tna_include

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "examples/stateful/itch-rate.p4"
# The example's rules without avg (Tofino has no divider).
RULES = "\n".join(line for line in (ROOT / "examples/stateful/itch-rate.rules").read_text().splitlines()
                  if "avg(" not in line)


def pipeline(rules: str = RULES, spec_text: str | None = None):
    spec = parse_spec(spec_text if spec_text is not None else SPEC.read_text(), str(SPEC))
    return compile_rules(spec, parse_rules(rules)).pipeline


def test_registers_actions_clock_and_keys() -> None:
    r = tofino.build(pipeline())
    text = r.program.text
    ingress = text[text.index("control SwitchIngress("):text.index("control SwitchIngressDeparser")]
    now = "ig_intr_md.ingress_mac_tstamp[41:10]"
    # rate's rules read only its count: one register of (end, value) pairs, the roll-over in one action.
    assert "Register<p4sub_pair_t, bit<10>>(1024) p4sub_rate_count;" in ingress
    assert "RegisterAction<p4sub_pair_t, bit<10>, bit<32>>(p4sub_rate_count) p4sub_rate_count_update = {" in ingress
    assert f"cell.end = {now} + 32w{window_ticks(100_000)};" in ingress
    assert window_ticks(100_000) == 97657  # 100 ms in 1.024 us ticks, rounded up
    apply = ingress[ingress.index("    apply {"):]
    # The hash addresses the register and the ALU reads the MAC timestamp: no copy into metadata first
    # (each copy is a stage before the registers).
    assert "global_tstamp" not in text and "meta.p4sub_now" not in text and "_cell" not in text
    assert ("meta.p4sub_st_rate_count = p4sub_rate_count_update.execute("
            "p4sub_rate_hash.get({ hdr.add_order.stock })[9:0]);") in apply
    assert apply.index("execute(") < apply.index(".apply()")
    # a wide range: a prefix cover, or (high, low) slices of it (backends.tofino.slices)
    assert re.search(r"meta\.p4sub_st_rate_count(\[\d+:\d+\])? : (range|ternary) @name\(\"rate(\[\d+:\d+\])?\"\);", ingress)
    # volume's rules read only its sum: its window ends in a register of their own, whose action says
    # whether a window opened, and the sum in a register of single words that starts again from the
    # packet's field on that flag (the pair's update would read the clock and the field, which a
    # Tofino 1 stateful ALU cannot take together); no count register.
    assert "RegisterAction<bit<32>, bit<10>, bit<8>>(p4sub_volume_window) p4sub_volume_window_update = {" in ingress
    assert f"if (end == 32w0 || {now} - end < 32w0x80000000) {{" in ingress
    assert "RegisterAction<bit<32>, bit<10>, bit<32>>(p4sub_volume_sum) p4sub_volume_sum_update = {" in ingress
    assert "if (meta.p4sub_volume_fresh == 8w1) {" in ingress
    assert "value = value + (bit<32>)hdr.add_order.shares;" in ingress
    assert apply.index("meta.p4sub_volume_fresh = p4sub_volume_window_update") < apply.index("p4sub_volume_sum_update")
    assert "p4sub_volume_count_update" not in ingress
    assert r.resources["notes"]["counter_registers"] == 3


def test_the_estimate_counts_the_registers_and_their_stages() -> None:
    """Two RAMs per register of 1,024 cells (its words and a spare), and the tables that match a sum
    two stages after the counters start (window, then value), as bf-p4c placed examples/stateful."""
    plain = tofino.build(pipeline('add_order.stock == "GOOGL": fwd(1);'))
    r = tofino.build(pipeline())
    assert r.estimate.sram_blocks - sum(t.sram_blocks for t in r.estimate.tables) == 3 * 2
    assert plain.estimate.sram_blocks == sum(t.sram_blocks for t in plain.estimate.tables)
    first = {t.name: t.first_stage for t in r.estimate.tables}
    assert first["field_add_order_stock"] >= 1 and first["field_rate"] >= 1 and first["field_sum_volume"] >= 2
    assert {t.name: t.first_stage for t in plain.estimate.tables}["field_add_order_stock"] == 0


@pytest.mark.parametrize("rules, spec_change, message", [
    ("avg(add_order.shares) > 5: fwd(1);", None, "no divider"),
    ("rate > 5: fwd(1);", ("key=add_order.stock)", "key=add_order.stock, width=16)"), "32-bit"),
    ("rate > 5: fwd(1);", ("100000, 1024, key=add_order.stock)", "100000, 1000, key=add_order.stock)"),
     "power of two"),
])
def test_what_tofino_cannot_do_is_refused(rules, spec_change, message) -> None:
    text = SPEC.read_text()
    if spec_change:
        assert spec_change[0] in text
        text = text.replace(spec_change[0], spec_change[1], 1)
    with pytest.raises(TargetError, match=message):
        tofino.build(pipeline(rules, text))


def test_counters_over_a_header_stack_are_refused() -> None:
    itch = (ROOT / "apps/itch/itch.p4").read_text().replace(
        "@query_counter(msg_rate, 100000, 4)", "@query_counter(msg_rate, 100000, 4, key=add_order.stock)")
    p = compile_rules(parse_spec(itch, "itch.p4"), parse_rules('add_order.stock == "A" and msg_rate > 3: fwd(1);')).pipeline
    with pytest.raises(TargetError, match="stack"):
        tofino.build(p)


@pytest.mark.p4c
def test_p4test_type_checks_the_stateful_program(tmp_path) -> None:
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE)")
    path = tmp_path / "program.p4"
    path.write_text(tofino.build(pipeline()).program.text)
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


@pytest.mark.tofino
def test_bf_p4c_places_the_stateful_program() -> None:
    """bf-p4c refused the (end, value) pair of a sum: the clock and the field together did not fit a
    stateful ALU's input crossbar."""
    if shutil.which("bf-p4c") is None:
        pytest.skip("bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON)")
    from backends.tofino import bf_p4c
    measured = bf_p4c.judge(tofino.build(pipeline()).program.text, timeout=600)
    assert measured.stages <= 12
