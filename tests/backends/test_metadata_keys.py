"""Intrinsic metadata as table keys: a rule on the ingress port, on both targets.

A spec may query ``standard_metadata.ingress_port`` (v1model) or ``ig_intr_md.ingress_port`` (TNA);
both name the 9-bit port a packet came in on, so each target matches either name on its own
metadata. The reference model takes the field as an input column, like a packet field, and no
header's validity decides whether it is there. Checked here without tools (the rendered keys, the
refusals, the model and ``simulate``), with p4c-bm2-ss and p4test, and on simple_switch: only
packets sent in on port 1 take the rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import backends.bmv2 as bmv2
import backends.tofino as tofino
from backends.bmv2.program import build_program
from compiler import ir
from compiler.base.errors import TargetError
from compiler.compile import CompileOptions, compile_rules
from compiler.default_path import parse_default
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec
from runtime.model import Model
from runtime.parse_graph import ParseGraph
from tests.backends.bmv2 import helpers as h
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import Bmv2Switch, require_cli_switch, tool

SPEC = h.SCALAR_SPEC.replace("@query_field(ipv4.diffserv)", "@query_field(ipv4.diffserv)\n@query_field_exact(PORT)")
RULES = """
PORT == 1 and ipv4.dst_addr == 10.0.0.2 : fwd(2);
ipv4.dst_addr == 10.0.0.3 : fwd(3);
"""
V1 = "standard_metadata.ingress_port"
TNA = "ig_intr_md.ingress_port"


def pipeline_for(port: str, rules: str = RULES, **options) -> ir.Pipeline:
    spec = parse_spec(SPEC.replace("PORT", port), "spec.p4")
    return compile_rules(spec, parse_rules(rules.replace("PORT", port)),
                         CompileOptions(delivery="groups", **options)).pipeline


def key_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "ingress_port : exact" in line]


@pytest.mark.parametrize("port", [V1, TNA])
def test_both_targets_match_the_ingress_port_on_their_own_metadata(port):
    pipeline = pipeline_for(port)
    assert pipeline.guard_headers() == ("ipv4",)  # the port is no header: nothing to be valid
    assert key_lines(build_program(pipeline).text) == [f'standard_metadata.ingress_port : exact @name("{port}");']
    # (miss tables kept apart: folded, the port key becomes ternary to hold the miss wildcards)
    text = tofino.build(pipeline, tofino.TofinoOptions(fold_misses="never")).program.text
    assert key_lines(text) == [f'ig_intr_md.ingress_port : exact @name("{port}");']


def test_a_v1model_only_field_is_refused_on_tna_with_what_it_can_match():
    spec = parse_spec(SPEC.replace("PORT", V1) + "@query_field(standard_metadata.packet_length)\n", "spec.p4")
    pipeline = compile_rules(spec, parse_rules("standard_metadata.packet_length > 100 : fwd(1);"),
                             CompileOptions(delivery="groups")).pipeline
    assert "standard_metadata.packet_length : range" in build_program(pipeline).text
    with pytest.raises(TargetError) as err:
        tofino.build(pipeline)
    assert str(err.value) == (
        "tofino: cannot match standard_metadata.packet_length: v1model intrinsic metadata that the TNA ingress does "
        "not have; queryable metadata on tofino: ig_intr_md.ingress_mac_tstamp, ig_intr_md.ingress_port, "
        "standard_metadata.ingress_port (the ingress port maps across targets)")


def test_a_rule_on_the_port_alone_looks_at_every_packet():
    """Metadata is always present: a rule that reads only the port has no header to wait for, so the
    --default path never takes a packet, in the model and in the program."""
    pipeline = pipeline_for(V1, f"{V1} == 1 : fwd(2);", default=parse_default("fwd(3)"))
    assert pipeline.guard == () and pipeline.queried == ()
    model = Model(pipeline)
    assert model.inputs == [V1] and model.validity == []
    assert model.run_one({V1: 1})[0] == {2} and model.run_one({V1: 0})[0] == set()
    assert "if (!(true)) {" in build_program(pipeline).text


def test_the_model_takes_the_port_as_a_column_and_simulate_reads_it(tmp_path):
    pipeline = pipeline_for(V1)
    model = Model(pipeline)
    assert sorted(model.inputs) == sorted([V1, "ipv4.dst_addr"]) and model.validity == ["ipv4.$valid"]
    rows = {V1: [1, 0, 1, 0], "ipv4.dst_addr": [0x0A000002, 0x0A000002, 0x0A000003, 0x0A000003]}
    assert model.run(rows).port_sets() == [{2}, set(), {3}, {3}]
    ir.save(pipeline, tmp_path / "pipeline.json")
    packets = tmp_path / "p.jsonl"
    packets.write_text("".join(json.dumps({V1: p, "ipv4.dst_addr": d}) + "\n"
                               for p, d in [(1, "10.0.0.2"), (3, "10.0.0.2"), (3, "10.0.0.3")]))
    done = subprocess.run([sys.executable, "-m", "p4sub", "simulate", str(tmp_path), "--packets", str(packets)],
                          capture_output=True, text=True, cwd=h.ROOT, env={**os.environ, "PYTHONPATH": str(h.ROOT)})
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ports"] for line in done.stdout.splitlines()] == [[2], [], [3]]


def test_a_parse_graph_row_takes_the_port_from_the_caller():
    pipeline = pipeline_for(V1)
    graph, model = ParseGraph(pipeline.spec), Model(pipeline)
    frame = bytearray(pk.ipv4_udp(b"x", 9))
    frame[30:34] = bytes([10, 0, 0, 2])
    fields = model.inputs + model.validity
    assert graph.parse(bytes(frame)).row(fields, {V1: 1})[V1] == 1
    assert graph.parse(bytes(frame)).row(fields)[V1] == 0


def batched_port_pipeline() -> ir.Pipeline:
    text = h.ITCH_SPEC.read_text() + f"\n@query_field_exact({V1})\n"
    spec = parse_spec(text, str(h.ITCH_SPEC))
    return compile_rules(spec, parse_rules(f'{V1} == 1 and add_order.stock == "AAPL" : fwd(2);'),
                         CompileOptions(delivery="groups")).pipeline


def test_batched_programs_match_the_port_saved_on_the_first_pass():
    """BMv2 resubmits a packet once per message and does not keep its ingress port: the key reads
    the copy the first pass saved in a preserved metadata member."""
    program = build_program(batched_port_pipeline())
    assert program.mode == "prune"
    assert [line.strip() for line in program.text.splitlines() if "p4sub_in_port : exact" in line] == \
        [f'meta.p4sub_in_port : exact @name("{V1}");']
    assert "@field_list(1) bit<9> p4sub_in_port;" in program.text
    assert ("if (standard_metadata.instance_type == 32w0) { meta.p4sub_in_port = standard_metadata.ingress_port; }"
            in program.text)


def test_pragma_only_specs_cannot_make_a_whole_program():
    spec = parse_spec("@pragma query_field_exact(ipv4.dstAddr, 32)\n", "po.p4")
    pipeline = compile_rules(spec, parse_rules("ipv4.dstAddr == 10.0.0.1 : fwd(1);"),
                             CompileOptions(delivery="groups")).pipeline
    with pytest.raises(TargetError, match=r"bmv2: po.p4 is a pragma-only spec .* compile with --emit control"):
        build_program(pipeline)
    with pytest.raises(TargetError, match=r"tofino: po.p4 is a pragma-only spec .* compile with --emit control"):
        tofino.build(pipeline)


# -- with the tools -----------------------------------------------------------------------------


P4C = tool("p4c-bm2-ss")


def _tna_include() -> str | None:
    from tests.backends.tofino.test_program import _tna_include as include

    return include()


@pytest.mark.p4c
@pytest.mark.parametrize("port", [V1, TNA])
def test_p4c_and_p4test_accept_ingress_port_keys(port, tmp_path):
    pipeline = pipeline_for(port)
    if P4C is None:
        pytest.skip("p4c-bm2-ss is not installed (see docs/bmv2.md)")
    out = tmp_path / "bmv2"
    bmv2.emit(pipeline, out)
    done = subprocess.run([P4C, "--p4runtime-files", str(out / "p4info.txt"), "-o", str(out / "program.json"),
                           str(out / "program.p4")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f'name: "{port}"' in (out / "p4info.txt").read_text()
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("p4test or tna.p4 is not installed")
    (tmp_path / "tna.p4").write_text(tofino.build(pipeline).program.text)
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(tmp_path / "tna.p4")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


@pytest.mark.p4c
def test_p4c_accepts_the_batched_program_with_a_port_key(tmp_path):
    if P4C is None:
        pytest.skip("p4c-bm2-ss is not installed (see docs/bmv2.md)")
    bmv2.emit(batched_port_pipeline(), tmp_path)
    done = subprocess.run([P4C, "-o", str(tmp_path / "program.json"), str(tmp_path / "program.p4")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def _probe(dst: int, i: int) -> bytes:
    frame = bytearray(pk.ipv4_udp(i.to_bytes(4, "big"), 5000))
    frame[30:34] = dst.to_bytes(4, "big")
    frame[24:26] = b"\0\0"
    frame[24:26] = pk.ipv4_checksum(bytes(frame[14:34])).to_bytes(2, "big")
    return bytes(frame)


@pytest.mark.bmv2
@pytest.mark.p4c
def test_simple_switch_applies_the_port_rule_only_to_packets_from_port_1(tmp_path):
    require_cli_switch()
    pipeline = pipeline_for(V1)
    out = tmp_path / "out"
    bmv2.emit(pipeline, out)
    from p4sub import main

    assert main(["build", str(out), "--p4c", P4C]) == 0
    graph, model = ParseGraph(pipeline.spec), Model(pipeline)
    send, expected = [], []
    for i, (port, dst) in enumerate((p, d) for p in (0, 1) for d in (0x0A000002, 0x0A000003, 0x0A000004) for _ in range(3)):
        frame = _probe(dst, i)
        send.append((port, frame))
        ports, _ = model.run_one(graph.parse(frame).row(model.inputs + model.validity, {V1: port}))
        expected += [(p, frame) for p in ports]
    assert sorted({p for p, _ in expected}) == [2, 3] and sum(1 for p, _ in expected if p == 2) == 3
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path, program_json=out / "program.json")
    try:
        text = switch.cli((out / bmv2.COMMANDS).read_text())
        assert "Error" not in text and "Invalid" not in text, text
        got = switch.exchange(send, [2, 3], [5000])
    finally:
        switch.close()
    assert sorted(got) == sorted(expected)
