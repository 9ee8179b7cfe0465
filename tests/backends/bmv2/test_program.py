"""program.p4: what p4c will see agrees with the IR (tables, keys, widths, actions, parser, emits)."""

from __future__ import annotations

import json
import re

import pytest

import backends.bmv2 as bmv2
from backends.bmv2.program import Bmv2Options, build_program
from backends.bmv2.target import UNION_GROUP
from backends.common.headers import METADATA_STRUCT
from compiler import ir
from compiler.base.errors import P4subError, ResourceError, TargetError
from compiler.spec.reader import read_spec
from tests.backends.bmv2 import helpers as h


@pytest.fixture(scope="module")
def itch():
    return h.compile_text(h.itch_spec(), h.ITCH_RULES).pipeline


@pytest.fixture(scope="module")
def int_pipeline():
    return h.compile_text(h.int_spec(), h.INT_RULES).pipeline


@pytest.fixture(scope="module")
def scalar(tmp_path_factory):
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path_factory.mktemp("spec")))
    return h.compile_text(spec, h.SCALAR_RULES, per_field={"ipv4.diffserv": "ternary"}).pipeline


def all_pipelines(itch, int_pipeline, scalar):
    return {"itch": itch, "int": int_pipeline, "scalar": scalar}


def _width_of(expr: str, text: str, pipeline: ir.Pipeline) -> int:
    """Width of a key expression in the program: a metadata member's declared type, or a header field's."""
    if expr.startswith("meta."):
        members = h.struct_members(text, METADATA_STRUCT)
        return int(re.match(r"bit<(\d+)>", members[expr[5:]]).group(1))
    if expr == "standard_metadata.mcast_grp":
        return 16
    _, inst, field = expr.split(".")
    inst = inst.split("[")[0]
    type_name = pipeline.spec.header(inst).type_name
    return h.header_types(text)[type_name][field]


@pytest.mark.parametrize("which", ["itch", "int", "scalar"])
def test_every_ir_table_is_declared_with_the_irs_keys_kinds_and_widths(which, itch, int_pipeline, scalar):
    pipeline = all_pipelines(itch, int_pipeline, scalar)[which]
    text = build_program(pipeline).text
    declared = h.tables(text)
    for table in pipeline.tables:
        assert table.name in declared, table.name
        t = declared[table.name]
        assert t.control == "MyIngress"
        assert [k.name for k in t.keys] == [k.field for k in table.keys]
        assert [k.match_kind for k in t.keys] == [k.match_kind for k in table.keys]
        assert [_width_of(k.expression, text, pipeline) for k in t.keys] == [k.width for k in table.keys]
        assert set(t.actions) == set(table.actions)
        assert t.size == table.size


@pytest.mark.parametrize("which", ["itch", "int", "scalar"])
def test_every_table_and_action_the_entries_name_exists_in_the_program(which, itch, int_pipeline, scalar):
    pipeline = all_pipelines(itch, int_pipeline, scalar)[which]
    files = bmv2.render(pipeline)
    text = files[bmv2.PROGRAM]
    declared = h.tables(text)
    acts = h.actions(text)
    request = json.loads(files[bmv2.ENTRIES])
    seen_tables = set()
    for update in request["updates"]:
        te = update["entity"].get("table_entry")
        if te is None:
            continue
        control, _, table = te["table_name"].partition(".")
        assert table in declared and declared[table].control == control
        seen_tables.add(table)
        key_names = {k.name for k in declared[table].keys}
        assert {m["field_name"] for m in te["match"]} <= key_names
        action = te["action"]["action"]["action_name"]
        short = action.partition(".")[2] or action
        assert short in declared[table].actions
        if short != "NoAction":
            assert [p["param_name"] for p in te["action"]["action"]["params"]] == [p for p, _ in acts[short]]
    assert seen_tables >= {e.table for e in pipeline.entries}


def test_action_parameters_have_the_irs_widths(itch):
    acts = h.actions(build_program(itch).text)
    for action in itch.actions:
        if action.name == "NoAction":
            continue
        assert [w for _, w in acts[action.name]] == [p.width for p in action.params]


def test_header_and_parser_part_reads_back_as_the_same_spec(itch, tmp_path):
    """The generated header types, headers struct and parser, read by the project's spec reader,
    give the spec the program was generated from (locations aside)."""
    text = build_program(itch).text
    head = text[:text.index("control MyVerifyChecksum")]
    head = re.sub(rf"struct {METADATA_STRUCT} \{{.*?\n\}}", f"struct {METADATA_STRUCT} {{\n}}", head, flags=re.S)
    path = tmp_path / "head.p4"
    path.write_text(head)
    again = read_spec(path)
    original = itch.spec
    assert [(x.name, x.type_name, x.stack_size) for x in again.headers] == \
        [(x.name, x.type_name, x.stack_size) for x in original.headers]
    for name, htype in original.header_types.items():
        if htype.is_struct:
            continue
        assert [(f.name, f.width) for f in again.header_types[name].fields] == [(f.name, f.width) for f in htype.fields]
    assert set(again.parser_states) == set(original.parser_states)
    for name, st in original.parser_states.items():
        got = again.parser_states[name]
        assert (got.statements, got.select_keys, got.cases) == (st.statements, st.select_keys, st.cases), name


def test_scalar_parser_keeps_masks_and_defaults(scalar):
    text = build_program(scalar).text
    assert "16w0x800: parse_ipv4;" in text
    assert "16w0x8600 &&& 16w0xff00: reject;" in text
    assert "default: accept;" in text


def test_deparser_emits_every_header_with_itch_message_blocks_interleaved(itch):
    text = build_program(itch).text
    emits = re.findall(r"packet\.emit\(hdr\.([\w\[\]]+)\);", h.controls(text)["MyDeparser"])
    assert emits[:4] == ["ethernet", "ipv4", "udp", "moldudp"]
    assert emits[4:] == [f"{s}[{i}]" for i in range(12) for s in ("mold_msg", "add_order")]


def test_deparser_emits_int_stack_whole(int_pipeline):
    text = build_program(int_pipeline).text
    emits = re.findall(r"packet\.emit\(hdr\.([\w\[\]]+)\);", h.controls(text)["MyDeparser"])
    assert emits == [x.name for x in int_pipeline.spec.headers]


def test_v1model_signatures_and_main(itch):
    text = build_program(itch).text
    assert "#include <core.p4>" in text and "#include <v1model.p4>" in text
    assert re.search(r"parser MyParser\(packet_in packet,\s+out p4sub_headers_t hdr,\s+inout p4sub_metadata_t meta,"
                     r"\s+inout standard_metadata_t standard_metadata\)", text)
    assert "control MyVerifyChecksum(inout p4sub_headers_t hdr, inout p4sub_metadata_t meta)" in text
    assert "control MyComputeChecksum(inout p4sub_headers_t hdr, inout p4sub_metadata_t meta)" in text
    assert "control MyDeparser(packet_out packet, in p4sub_headers_t hdr)" in text
    assert ("V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;"
            in text)


def test_ipv4_checksum_covers_every_field_but_the_checksum_in_order(itch):
    body = h.controls(build_program(itch).text)["MyComputeChecksum"]
    fields = re.findall(r"hdr\.ipv4\.(\w+)", body.split("hdr.ipv4.hdr_checksum")[0])
    assert fields[0] == "isValid"
    assert fields[1:] == ["version", "ihl", "diffserv", "total_len", "identification", "flags", "frag_offset", "ttl",
                          "protocol", "src_addr", "dst_addr"]
    assert "HashAlgorithm.csum16" in body


def test_modes_itch_prunes_int_unions_scalar_is_single(itch, int_pipeline, scalar):
    assert build_program(itch).mode == "prune"
    assert build_program(int_pipeline).mode == "union"
    assert build_program(scalar).mode == "single"
    assert build_program(itch, Bmv2Options(batch="first")).mode == "first"
    assert build_program(itch, Bmv2Options(batch="union")).mode == "union"
    with pytest.raises(TargetError):
        build_program(int_pipeline, Bmv2Options(batch="prune"))
    with pytest.raises(TargetError):
        build_program(scalar, Bmv2Options(batch="union"))
    with pytest.raises(TargetError):
        build_program(itch, Bmv2Options(batch="sometimes"))


def test_prune_fixes_count_and_lengths_by_the_message_size(itch):
    program = build_program(itch)
    egress = h.controls(program.text)["MyEgress"]
    assert program.layout.message_bytes == 38  # 2-byte length + 1-byte type + 35-byte Add Order body
    assert "hdr.moldudp.msg_cnt = hdr.moldudp.msg_cnt - (bit<16>)removed;" in egress
    assert "hdr.ipv4.total_len = hdr.ipv4.total_len - (bit<16>)removed * 16w38;" in egress
    assert "hdr.udp.length = hdr.udp.length - (bit<16>)removed * 16w38;" in egress
    assert "hdr.udp.checksum = 16w0;" in egress
    for j in range(12):
        assert f"hdr.mold_msg[{j}].setInvalid();" in egress and f"hdr.add_order[{j}].setInvalid();" in egress


def test_union_mode_drops_copies_but_never_removes_headers(int_pipeline):
    egress = h.controls(build_program(int_pipeline).text)["MyEgress"]
    assert "setInvalid" not in egress
    assert "mark_to_drop(standard_metadata);" in egress


def test_batched_program_resubmits_and_preserves_the_per_message_results(itch):
    program = build_program(itch)
    members = h.struct_members(program.text, METADATA_STRUCT)
    assert "resubmit_preserving_field_list(8w1);" in program.text
    text = program.text
    for j in range(12):
        assert re.search(rf"@field_list\(1\) bit<512> p4sub_set_{j};", text)
        assert f"p4sub_set_{j}" in members
    assert re.search(r"@field_list\(1\) bit<8> p4sub_msg;", text)
    assert program.union_group == ir.MulticastGroup(UNION_GROUP, (1, 2, 3))


def test_group_ports_table_maps_each_group_to_its_port_bitmap(itch):
    program = build_program(itch)
    rows = {(e.table, e.matches[0].value, e.action, e.args) for e in program.extra_entries}
    expected = {("p4sub_group_ports", g.id, "p4sub_set_ports", (sum(2 ** p for p in g.ports),))
                for g in itch.multicast_groups}
    assert rows == expected
    declared = h.tables(program.text)["p4sub_group_ports"]
    assert declared.control == "MyIngress"
    assert [(k.expression, k.match_kind, k.name) for k in declared.keys] == \
        [("standard_metadata.mcast_grp", "exact", "standard_metadata.mcast_grp")]
    assert h.actions(program.text)["p4sub_set_ports"] == (("ports", 512),)


def test_egress_keeps_a_message_when_its_bitmap_has_the_egress_port(itch):
    egress = h.controls(build_program(itch).text)["MyEgress"]
    assert "bit<8> low = standard_metadata.egress_port[7:0];" in egress
    assert "bool high = standard_metadata.egress_port[8:8] == 1w1;" in egress
    for j in range(12):
        assert f"bit<512> set_{j} = meta.p4sub_set_{j} >> low;" in egress
        assert f"if (high) {{ set_{j} = set_{j} >> 8w128 >> 8w128; }}" in egress
        assert f"if ((set_{j} & 512w1) == 512w1) {{" in egress


def test_non_query_traffic_is_dropped(scalar, itch):
    for pipeline, cond in ((scalar, "hdr.ipv4.isValid()"), (itch, "hdr.add_order[0].isValid()")):
        ingress = h.controls(build_program(pipeline).text)["MyIngress"]
        m = re.search(r"apply \{\s+if \((.*?)\) \{", ingress)
        assert m.group(1) == cond
        assert ingress.rstrip().rstrip("}").rstrip().endswith("}") and "} else {" in ingress
        assert re.search(r"\} else \{\s+// Not a packet.*?\n\s+mark_to_drop\(standard_metadata\);", ingress, re.S)


def test_table_sizes_come_from_the_ir_and_can_be_overridden(scalar):
    name = scalar.tables[0].name
    text = build_program(scalar, Bmv2Options(table_sizes={name: 4096})).text
    assert h.tables(text)[name].size == 4096
    with pytest.raises(TargetError):
        build_program(scalar, Bmv2Options(table_sizes={"no_such_table": 8}))


def test_emit_writes_nothing_when_the_pipeline_does_not_fit(scalar, tmp_path):
    busy = max(scalar.tables, key=lambda t: len(scalar.entries_of(t.name)))
    out = tmp_path / "out"
    with pytest.raises(ResourceError):
        bmv2.emit(scalar, out, Bmv2Options(table_sizes={busy.name: len(scalar.entries_of(busy.name)) - 1}))
    assert not out.exists()


def test_emit_writes_the_four_files(scalar, tmp_path):
    paths = bmv2.emit(scalar, tmp_path)
    assert sorted(p.name for p in paths) == sorted([bmv2.PROGRAM, bmv2.ENTRIES, bmv2.COMMANDS, bmv2.INFO])
    info = json.loads((tmp_path / bmv2.INFO).read_text())
    assert info["mode"] == "single" and info["union_group"] is None


def test_aggregate_keys_are_refused_through_the_unsupported_channel(itch):
    key = ir.Key("msg_rate", 32, "range")
    table = ir.Table("field_msg_rate", (ir.Key(ir.STATE, 5, "exact"), key), ("set_state", "NoAction"), "NoAction")
    bad = ir.Pipeline(itch.spec, itch.metadata, itch.actions, itch.tables + (table,), itch.control, itch.entries)
    with pytest.raises(TargetError, match="state variables and aggregates"):
        build_program(bad)


def test_spec_without_a_start_state_is_a_user_error(scalar):
    from dataclasses import replace

    broken = replace(scalar, spec=replace(scalar.spec, parser_states={}))
    with pytest.raises(P4subError):
        build_program(broken)


def test_network_stage_only_for_routed_switches(itch):
    lone = build_program(itch).text
    assert "p4sub_in_port" not in lone
    text = build_program(itch, Bmv2Options(network_up_ports=(1, 2))).text
    assert "@field_list(1) bit<9> p4sub_in_port;" in text
    ingress, egress = h.controls(text)["MyIngress"], h.controls(text)["MyEgress"]
    assert "if (standard_metadata.instance_type == 32w0) { meta.p4sub_in_port = standard_metadata.ingress_port; }" in ingress
    assert ("if (standard_metadata.egress_port == meta.p4sub_in_port ||\n"
            "            ((meta.p4sub_in_port == 9w1 || meta.p4sub_in_port == 9w2) && "
            "(standard_metadata.egress_port == 9w1 || standard_metadata.egress_port == 9w2))) {") in egress
    core = build_program(itch, Bmv2Options(network_up_ports=())).text
    assert "standard_metadata.egress_port == meta.p4sub_in_port) {" in h.controls(core)["MyEgress"]
