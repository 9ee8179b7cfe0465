"""Counters on TNA (backends/tofino/state.py): one Register + RegisterAction per value read, the parser's
global timestamp in 1.024 µs ticks, keys on the reads' metadata; what Tofino cannot do is refused
with the reason; p4test type-checks the program against tna.p4."""

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
    assert "Register<p4sub_pair_t, bit<10>>(1024) p4sub_rate_count;" in ingress
    assert "RegisterAction<p4sub_pair_t, bit<10>, bit<32>>(p4sub_rate_count) p4sub_rate_count_update = {" in ingress
    assert f"cell.end = meta.p4sub_now + 32w{window_ticks(100_000)};" in ingress
    assert window_ticks(100_000) == 97657  # 100 ms in 1.024 us ticks, rounded up
    apply = ingress[ingress.index("    apply {"):]
    assert "meta.p4sub_now = ig_intr_md_from_prsr.global_tstamp[41:10];" in apply
    assert "meta.p4sub_rate_cell = p4sub_rate_hash.get({ hdr.add_order.stock })[9:0];" in apply
    assert "meta.p4sub_st_rate_count = p4sub_rate_count_update.execute(meta.p4sub_rate_cell);" in apply
    assert apply.index("execute(") < apply.index(".apply()")
    # a wide range: a prefix cover, or (high, low) slices of it (backends.tofino.slices)
    assert re.search(r"meta\.p4sub_st_rate_count(\[\d+:\d+\])? : (range|ternary) @name\(\"rate(\[\d+:\d+\])?\"\);", ingress)
    # volume's rules read only its sum: the sum register keeps its own windows, no count register.
    assert "p4sub_volume_sum_update" in ingress and "p4sub_volume_count_update" not in ingress
    assert r.resources["notes"]["counter_registers"] == 2


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
