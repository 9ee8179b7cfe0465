"""Stateful subscriptions on BMv2: the program compiles with p4c, and simple_switch forwards a timed
burst of ITCH-like orders as the reference model says, across several window boundaries.

Time on simple_switch is its own ingress clock (``ingress_global_timestamp``): ``--use-files`` does
not replay a capture's timestamps (it sends every packet at once), so the packets are sent on a
schedule through the network-namespace harness (``Bmv2Switch.exchange(..., at=...)``) and the model
gets the times they were actually sent. The schedule keeps every window decision far from its
boundary: rounds of orders 15 ms apart, each round within 0.15 s, windows of 0.5 s, a round a
second. With 4 cells, AMZN shares GOOGL's cell and IBM shares MSFT's (crc32 mod 4), so the switch
must hash keys as the model does.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import backends.bmv2 as bmv2
from apps.itch.orders import ITCH_PORT, order_frame
from compiler.compile import compile_files, compile_rules
from compiler.rules.parser import read_rules
from compiler.spec.reader import parse_spec
from runtime.model import Model
from runtime.parse_graph import ParseGraph
from tests.backends.bmv2.switch import Bmv2Switch, tool

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "examples/stateful/itch-rate.p4"
RULES = ROOT / "examples/stateful/itch-rate.rules"
P4C = tool("p4c-bm2-ss")

# Rounds of (stock, shares); round k starts at k seconds.
ROUNDS = [
    [("GOOGL", 100)] * 5 + [("MSFT", 400)] * 3,
    [("AMZN", 900)] * 3 + [("GOOGL", 100), ("IBM", 950), ("MSFT", 100)],
    [("GOOGL", 100)] * 2 + [("MSFT", 600)] * 2,
    [("GOOGL", 100)] * 4,
]


def test_example_program_declares_registers_and_updates_before_the_tables() -> None:
    pipeline = compile_files(SPEC, RULES).pipeline
    text = bmv2.build_program(pipeline).text
    ingress = text[text.index("control MyIngress"):text.index("control MyEgress")]
    assert "register<bit<64>>(1024) p4sub_rate_end;" in ingress
    assert "register<bit<32>>(1024) p4sub_volume_sum;" in ingress
    apply = ingress[ingress.index("    apply {"):]
    assert apply.index("standard_metadata.ingress_global_timestamp") < apply.index(".apply()")
    assert "hash(p4sub_rate_cell, HashAlgorithm.crc32, 32w0, { hdr.add_order.stock }, 32w1024);" in apply
    assert "if (p4sub_now >= p4sub_rate_e) {" in apply
    # The keys match the metadata the updates wrote, under the rule attributes' names.
    assert 'meta.p4sub_st_rate_count : range @name("rate");' in ingress
    assert 'meta.p4sub_st_volume_avg : range @name("avg(add_order.shares)");' in ingress


@pytest.mark.p4c
def test_p4c_compiles_the_stateful_program(tmp_path) -> None:
    if P4C is None:
        pytest.skip("p4c-bm2-ss is not installed (see docs/bmv2.md)")
    path = tmp_path / "program.p4"
    path.write_text(bmv2.build_program(compile_files(SPEC, RULES).pipeline).text)
    done = subprocess.run([P4C, str(path), "-o", str(tmp_path / "program.json")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr


def _pipeline():
    text = SPEC.read_text().replace("100000, 1024,", "500000, 4,")
    assert text.count("500000, 4,") == 2
    return compile_rules(parse_spec(text, str(SPEC)), read_rules(RULES)).pipeline


def _skip_reason() -> str | None:
    if P4C is None or tool("simple_switch") is None or tool("simple_switch_CLI") is None:
        return "p4c-bm2-ss, simple_switch or simple_switch_CLI is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


@pytest.mark.bmv2
@pytest.mark.p4c
def test_simple_switch_forwards_a_timed_burst_as_the_model_says(tmp_path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    pipeline = _pipeline()
    out = tmp_path / "out"
    bmv2.emit(pipeline, out)
    from p4sub import main

    assert main(["build", str(out), "--p4c", P4C]) == 0
    frames, at = [], []
    for k, round_ in enumerate(ROUNDS):
        for i, (stock, shares) in enumerate(round_):
            frames.append(order_frame(stock, shares, 1000, order_ref=len(frames)))
            at.append(k * 1.0 + i * 0.015)
    switch = Bmv2Switch([0, 1, 2, 3, 4], tmp_path, program_json=out / "program.json")
    try:
        text = switch.cli((out / "commands.txt").read_text())
        assert "Error" not in text and "Invalid" not in text, text
        got = switch.exchange([(0, f) for f in frames], [1, 2, 3, 4], [ITCH_PORT], at=at)
        sent = switch.sent_at
    finally:
        switch.close()
    # Every decision is robust to the schedule's jitter: the sent times are those asked for, give or
    # take far less than the margins (0.35 s inside a window, 0.5 s between rounds).
    assert max(abs(s - a) for s, a in zip(sent, at)) < 0.2, sent
    model = Model(pipeline)
    graph = ParseGraph(pipeline.spec)
    rows = [graph.parse(f).row(model.inputs + model.validity) for f in frames]
    cols = {name: np.array([r[name] for r in rows], dtype=np.uint64) for name in rows[0]}
    cols["timestamp_ns"] = (np.array(sent) * 1e9).astype(np.int64)
    result = model.run(cols)
    expected = Counter((p, f) for f, ports in zip(frames, result.port_sets()) for p in ports)
    # What the schedule is meant to show, per round: GOOGL's 4th and 5th orders to port 2, then a
    # new window (AMZN's orders in the same cell make GOOGL's single order the cell's 4th), then
    # two quiet GOOGL orders, then a 4th again; MSFT to port 4 until its cell passes 1000 shares.
    rate = result.metadata["meta.p4sub_st_rate_count"].tolist()
    assert rate == [1, 2, 3, 4, 5, 1, 2, 3, 1, 2, 3, 4, 1, 2, 1, 2, 1, 2, 1, 2, 3, 4], rate
    assert [sorted(p) for p in result.port_sets()][:8] == [[1], [1], [1], [1, 2], [1, 2], [4], [4], []]
    assert sorted(result.port_sets()[11]) == [1, 2, 3]
    missing, extra = expected - Counter(got), Counter(got) - expected
    assert not missing and not extra, (f"{sum(missing.values())} missing, {sum(extra.values())} unexpected: "
                                       f"missing {[(p, frames.index(f)) for p, f in missing]}, "
                                       f"extra {[(p, frames.index(f)) for p, f in extra]}")


@pytest.mark.p4c
def test_include_mode_renders_counters_in_the_control_and_p4c_compiles_the_users_program(tmp_path) -> None:
    """Camus's users write pragma-only specs for their own program (examples/coexist): a counter in
    such a spec runs in the included control, on the control's own metadata."""
    if P4C is None:
        pytest.skip("p4c-bm2-ss is not installed (see docs/bmv2.md)")
    from backends.bmv2.include import render_include
    from compiler.compile import CompileOptions
    from compiler.rules.parser import parse_rules

    spec_text = (ROOT / "examples/coexist/itch-spec.p4").read_text() + \
        "@pragma query_counter(rate, 100000, 64, key=add_order.stock, field=add_order.shares)\n"
    spec = parse_spec(spec_text, "itch-spec.p4")
    rules = parse_rules('add_order.stock == "GOOGL" and rate > 3 : fwd(2);\navg(add_order.shares) > 500 : fwd(3);')
    files = render_include(compile_rules(spec, rules, CompileOptions(delivery="groups")).pipeline)
    control = files["p4sub_control.p4"]
    assert "register<bit<64>>(64) p4sub_rate_end;" in control
    assert 'p4sub.p4sub_st_rate_count : range @name("rate");' in control
    assert " *   hdr.add_order: a header with bit<64> stock, bit<32> shares" in control
    (tmp_path / "p4sub_control.p4").write_text(control)
    done = subprocess.run([P4C, "-I", str(tmp_path), "-o", str(tmp_path / "coexist.json"),
                           str(ROOT / "examples/coexist/coexist.p4")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def test_counters_over_a_header_stack_are_refused() -> None:
    from compiler.base.errors import TargetError
    from compiler.rules.parser import parse_rules

    itch = (ROOT / "apps/itch/itch.p4").read_text().replace(
        "@query_counter(msg_rate, 100000, 4)", "@query_counter(msg_rate, 100000, 4, key=add_order.stock)")
    p = compile_rules(parse_spec(itch, "itch.p4"), parse_rules('add_order.stock == "A" and msg_rate > 3: fwd(1);'))
    with pytest.raises(TargetError, match="header stack"):
        bmv2.build_program(p.pipeline)
