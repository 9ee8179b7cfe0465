"""The generated TNA program and entries: consistent with each other and with the IR."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

import backends.tofino as tofino
from backends.common.names import identifier
from backends.tofino.layout import TofinoOptions
from compiler.base.errors import P4subError, ResourceError, TargetError
from tests.backends.tofino.helpers import (
    ITCH_SPEC,
    SCALAR_RULES,
    actions_in,
    compile_text,
    control_body,
    int_pipeline,
    itch_pipeline,
    scalar_spec,
    tables_in,
)

MAX = (1 << 24) - 1


@pytest.fixture(scope="module")
def scalar():
    pipeline = compile_text(scalar_spec(), SCALAR_RULES, delivery="groups")
    return pipeline, tofino.build(pipeline)


@pytest.mark.parametrize("lanes", [2, 3])
def test_the_lanes_bitmaps_are_folded_into_the_first_before_the_table_that_reads_it(lanes):
    """Every lane's bitmap reaches ``meta.p4sub_ports`` exactly once through the OR tables, in the order
    the ingress applies them, before ``p4sub_no_ports`` reads it; the estimate places that table after
    the tree's last operation (a table per operation: bf-p4c merges consecutive statements)."""
    pipeline = compile_text(scalar_spec(), SCALAR_RULES, delivery="bitmap", lanes=lanes)
    fields = [f"meta.{f[len('meta.'):]}" for f in pipeline.delivery.fields]
    assert len(fields) == lanes
    r = tofino.build(pipeline)
    ingress = control_body(r.program.text, "SwitchIngress")
    body = {m[1]: (m[2], m[4]) for m in re.finditer(
        r"action (p4sub_ports_or_\d+)\(\) \{\s*(\S+) = (\S+) \| (\S+);", r.program.text) if m[2] == m[3]}
    order = re.findall(r"(p4sub_ports_or_\d+)_t\.apply\(\);", ingress)
    assert sorted(order) == sorted(body) and len(order) == lanes - 1
    held = {f: [f] for f in fields}
    for name in order:
        dst, src = body[name]
        held[dst] = held[dst] + held.pop(src)
    assert list(held) == [fields[0]] and sorted(held[fields[0]]) == sorted(fields)
    assert ingress.index(f"{order[-1]}_t.apply();") < ingress.index("p4sub_no_ports.apply()")
    placed = {u.name: (u.first_stage, u.last_stage) for u in r.estimate.tables}
    last_lane_table = max(last for name, (_, last) in placed.items() if name.startswith(("field_", "l")))
    assert placed["p4sub_no_ports"][0] > last_lane_table


@pytest.fixture(scope="module")
def scalar_bitmap():
    pipeline = compile_text(scalar_spec(), SCALAR_RULES, delivery="bitmap", lanes=2)
    return pipeline, tofino.build(pipeline)


def test_bitmap_program_ors_the_lanes_bitmaps_and_prunes_copies_in_the_egress(scalar_bitmap):
    pipeline, r = scalar_bitmap
    d = pipeline.delivery
    assert pipeline.lanes == 2 and d.fields == ("meta.p4sub_ports", "meta.p4sub_ports_l1")
    text = r.program.text
    ingress, egress = control_body(text, "SwitchIngress"), control_body(text, "SwitchEgress")
    assert set(tables_in(ingress)) == {t.name for t in r.batched.pipeline.tables} - {"p4sub_port_bit"}
    assert set(tables_in(egress)) == {"p4sub_port_bit"}
    # Whole PHV containers: the 5-bit bitmap is declared 8 bits wide, bit i still port i.
    assert "bit<8> p4sub_ports;" in text and "bit<8> p4sub_ports_l1;" in text and "bit<5>" not in text
    assert "meta.p4sub_ports = meta.p4sub_ports | meta.p4sub_ports_l1;" in ingress
    # Tables, not conditions, read the bitmap (a Tofino condition reads at most 4 bytes and 12 bits).
    assert "if (!p4sub_no_ports.apply().hit) {" in ingress and "ig_intr_md_for_tm.mcast_grp_a = 16w1;" in ingress
    assert "hdr.p4sub_bridge.p4sub_ports = meta.p4sub_ports;" in ingress
    assert "if (!p4sub_port_bit.apply().hit) {" in egress
    assert "eg_intr_md.egress_port : exact" in egress and "hdr.p4sub_bridge.p4sub_ports : ternary" in egress

    def hits(table: str, port: int | None, bitmap: int) -> bool:
        for rec in r.entries["entries"]:
            if rec["table_name"].endswith(table):
                k = rec["key"]
                if port is not None and k["eg_intr_md.egress_port"]["value"] != port:
                    continue
                if bitmap & k["meta.p4sub_ports"]["mask"] == k["meta.p4sub_ports"]["value"]:
                    return True
        return False
    # Every bitmap a packet can have: dropped in the ingress iff empty; a copy kept iff its port's bit is set.
    for bitmap in range(1 << d.width):
        assert hits("SwitchIngress.p4sub_no_ports", None, bitmap) == (bitmap == 0)
        for port in d.ports + (max(d.ports) + 1,):
            assert hits("SwitchEgress.p4sub_port_bit", port, bitmap) == (port in d.ports_of(bitmap))
    # each lane ORs into its own bitmap, so the estimate may put both lanes' tables in one stage
    stages = {u.name: u.first_stage for u in r.estimate.tables}
    assert stages["field_" + pipeline.field_order[0].replace(".", "_")] is not None
    assert [(g.id, g.ports) for g in pipeline.multicast_groups] == [(1, d.ports)]
    assert text.count("{") == text.count("}")


def test_program_uses_tna_exactly(scalar):
    _, r = scalar
    text = r.program.text
    assert "#include <core.p4>" in text and "#include <tna.p4>" in text
    assert re.search(r"state start \{\s*pkt\.extract\(ig_intr_md\);\s*pkt\.advance\(PORT_METADATA_SIZE\);", text)
    assert "out ingress_intrinsic_metadata_t ig_intr_md)" in text
    for decl in ("inout ingress_intrinsic_metadata_for_deparser_t ig_intr_md_for_dprsr",
                 "inout ingress_intrinsic_metadata_for_tm_t ig_intr_md_for_tm",
                 "in ingress_intrinsic_metadata_from_parser_t ig_intr_md_from_prsr",
                 "out egress_intrinsic_metadata_t eg_intr_md",
                 "inout egress_intrinsic_metadata_for_output_port_t eg_intr_md_for_oport"):
        assert decl in text
    assert re.search(r"Pipeline\(SwitchIngressParser\(\),\s*SwitchIngress\(\),\s*SwitchIngressDeparser\(\),\s*"
                     r"SwitchEgressParser\(\),\s*SwitchEgress\(\),\s*SwitchEgressDeparser\(\)\) pipe;", text)
    assert "Switch(pipe) main;" in text
    assert "ig_intr_md_for_tm.ucast_egress_port = port;" in text
    assert "ig_intr_md_for_tm.mcast_grp_a = group;" in text
    assert "ig_intr_md_for_dprsr.drop_ctl = 3w1;" in text
    assert text.count("{") == text.count("}")


def test_every_ir_table_is_declared_with_its_keys_widths_and_actions(scalar):
    _, r = scalar
    pipeline = r.batched.pipeline  # the IR rendered (miss tables folded in)
    ingress = control_body(r.program.text, "SwitchIngress")
    declared = tables_in(ingress)
    assert set(declared) == {t.name for t in pipeline.tables}
    meta = {n: int(w) for w, n in re.findall(r"bit<(\d+)> (\w+);",
                                              r.program.text.split("struct p4sub_metadata_t {")[1].split("}")[0])}
    header = dict((n, int(w)) for w, n in re.findall(r"bit<(\d+)> (\w+);", r.program.text.split("header order_t {")[1].split("}")[0]))
    for t in pipeline.tables:
        d = declared[t.name]
        laid = r.layout.table(t.name)
        # every IR key, whole or cut in (high, low) slices that together span it
        assert [name for _, _, name in d["keys"]] == [k.name for k in laid.keys]
        assert [k.field for k in laid.keys if k.bits is None or k.bits[1] == 0] == [k.field for k in t.keys]
        assert [kind for _, kind, _ in d["keys"]] == [k.match_kind for k in laid.keys]
        for (expr, _, name), key in zip(d["keys"], laid.keys):
            width = sum(k.width for k in laid.keys if k.field == key.field)
            if name.startswith("meta."):
                assert expr == name and meta[name[5:]] == width
            else:
                assert expr == f"hdr.{name}" and header[key.field.split(".")[1]] == width
                if key.bits is not None:
                    assert key.bits[0] - key.bits[1] + 1 == key.width
        assert d["actions"] == [identifier(a) if a != "NoAction" else a for a in t.actions]
        assert d["size"] == laid.size >= len(laid.entries)
    declared_actions = actions_in(ingress)
    for a in pipeline.actions:
        if a.name != "NoAction":
            assert [(f"bit<{p.width}>", identifier(p.name)) for p in a.params] == \
                [tuple(x) for x in declared_actions[a.name]]


def test_entries_name_declared_tables_keys_actions_and_params(scalar):
    pipeline, r = scalar
    declared = tables_in(control_body(r.program.text, "SwitchIngress"))
    declared_actions = actions_in(r.program.text)
    by_table = {}
    for rec in r.entries["entries"]:
        prefix, control, table = rec["table_name"].split(".")
        assert (prefix, control) == ("pipe", "SwitchIngress")
        d = declared[table]
        names = [n for _, _, n in d["keys"]]
        kinds = {n: k for _, k, n in d["keys"]}
        key = dict(rec["key"])
        prio = key.pop("$MATCH_PRIORITY", None)
        assert list(key) == names
        assert (prio is not None) == any(k in ("ternary", "range") for k in kinds.values())
        for n, fields in key.items():
            assert set(fields) == {"exact": {"value"}, "ternary": {"value", "mask"}, "range": {"low", "high"},
                                   "lpm": {"value", "prefix_len"}}[kinds[n]]
        action = rec["action"].split(".")[-1]
        assert rec["action"] == f"SwitchIngress.{action}" and action in d["actions"]
        assert list(rec["data"]) == [name for _, name in declared_actions[action]]
        by_table[table] = by_table.get(table, 0) + 1
    for t in r.layout.tables:
        assert by_table.get(t.name, 0) == len(t.entries)
    assert len(r.entries["entries"]) >= len(pipeline.entries)


def test_bfrt_priorities_invert_the_ir_order(scalar):
    pipeline, r = scalar
    for t in r.layout.tables:
        if not t.needs_priority:
            continue
        recs = [rec for rec in r.entries["entries"] if rec["table_name"].endswith("." + t.name)]
        for e, rec in zip(t.entries, recs):
            assert rec["key"]["$MATCH_PRIORITY"]["value"] == MAX - e.priority
    ternary = compile_text(scalar_spec(), SCALAR_RULES, encoding="ternary")
    r2 = tofino.build(ternary)
    recs = [rec for rec in r2.entries["entries"] if "$MATCH_PRIORITY" in rec["key"]]
    ir_prios = sorted({e.priority for e in r2.batched.pipeline.entries
                       if r2.layout.table(e.table).needs_priority})
    bf_prios = sorted({rec["key"]["$MATCH_PRIORITY"]["value"] for rec in recs})
    assert len(ir_prios) > 2
    assert bf_prios == sorted(MAX - p for p in ir_prios)  # higher IR priority -> lower BF-RT value


def test_pre_records_make_one_node_and_group_per_multicast_group(scalar):
    pipeline, r = scalar
    pre = r.entries["pre"]
    nodes = [p for p in pre if p["table_name"] == "$pre.node"]
    mgids = [p for p in pre if p["table_name"] == "$pre.mgid"]
    assert pre == nodes + mgids and len(nodes) == len(mgids) == len(pipeline.multicast_groups) > 0
    for g, node, mgid in zip(pipeline.multicast_groups, nodes, mgids):
        assert node["key"] == {"$MULTICAST_NODE_ID": {"value": g.id}}
        assert node["data"]["$DEV_PORT"] == sorted(g.ports) and node["data"]["$MULTICAST_RID"] == g.id
        assert mgid["key"] == {"$MGID": {"value": g.id}}
        assert mgid["data"]["$MULTICAST_NODE_ID"] == [g.id]
        assert mgid["data"]["$MULTICAST_NODE_L1_XID_VALID"] == [False]
        # no ECMP members, said outright: BF Runtime reads a group back with all six of its fields
        assert [mgid["data"][f] for f in ("$MULTICAST_ECMP_ID", "$MULTICAST_ECMP_L1_XID_VALID",
                                          "$MULTICAST_ECMP_L1_XID")] == [[], [], []]


def test_emit_writes_three_files_and_nothing_when_it_does_not_fit(scalar, tmp_path):
    pipeline, _ = scalar
    tofino.emit(pipeline, tmp_path / "ok")
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == ["entries.bfrt.json", "program.p4", "resources.json"]
    res = json.loads((tmp_path / "ok" / "resources.json").read_text())
    assert set(res["camus_table1"]) == {"sram_percent", "tcam_percent", "multicast_percent"}
    tiny = TofinoOptions(target=tofino.Target(name="tiny", stages=2))
    with pytest.raises(ResourceError, match="does not fit"):
        tofino.emit(pipeline, tmp_path / "bad", tiny)
    assert not (tmp_path / "bad").exists()


def test_recirculation_splits_the_ingress_over_two_passes(scalar):
    pipeline, _ = scalar
    small = TofinoOptions(target=tofino.Target(name="small", stages=2), allow_recirculation=True)
    r = tofino.build(pipeline, small)
    text = r.program.text
    assert r.estimate.passes == 2 and r.program.recirculates
    assert "header p4sub_recirc_h {" in text and "pkt.emit(hdr.p4sub_recirc);" in text
    assert "ig_intr_md_for_tm.ucast_egress_port = 9w68;" in text
    assert re.search(r"transition select\(ig_intr_md\.ingress_port\) \{\s*9w68: parse_p4sub_recirc;", text)
    first, second = text.split("} else if (")[0], text.split("} else if (")[1]
    passes = {u.name: u.passes for u in r.estimate.tables}
    for t in pipeline.control:
        where = second if passes[t][0] == 0 else first
        assert f"{t}.apply()" in where


def test_itch_batches_become_per_message_copies_with_egress_keep_tables():
    pipeline = itch_pipeline(per_field=tofino.compile_options(itch_pipeline().spec).per_field_encoding)
    r = tofino.build(pipeline)
    text = r.program.text
    assert r.batched.mode == "union"
    ingress = tables_in(control_body(text, "SwitchIngress"))
    egress = tables_in(control_body(text, "SwitchEgress"))
    depth = 12
    # Every miss table is folded into its field table: an `if (!t.apply().hit)` branch per slot would
    # chain the slots on Tofino as a validity condition would.
    assert r.resources["notes"]["miss_tables_folded"] and "apply().hit" not in text
    field_tables = [t.name for t in pipeline.tables if t.role not in ("leaf", "miss")]
    assert set(ingress) == {f"{n}_m{i}" for n in field_tables for i in range(depth)}
    assert set(egress) == {f"keep_m{i}" for i in range(depth)}
    for i in (0, 7):
        keys = ingress[f"field_add_order_price_code_m{i}"]["keys"]
        assert re.fullmatch(rf"hdr\.add_order\[{i}\]\.price(\[\d+:\d+\])?", keys[0][0])
        assert keys[0][2] == "add_order.price" + keys[0][0][len(f"hdr.add_order[{i}].price"):]
        assert egress[f"keep_m{i}"]["keys"][0][0] == "eg_intr_md.egress_port"
        assert egress[f"keep_m{i}"]["keys"][1][0] == f"hdr.p4sub_bridge.p4sub_state_m{i}"
        assert egress[f"keep_m{i}"]["keys"][2][0] == f"hdr.p4sub_bridge.p4sub_valid_m{i}"
        assert re.search(rf"pkt.extract\(hdr.add_order\[{i}\]\);\n\s*meta.p4sub_valid_m{i} = 1w1;", text)
    # No slot is guarded by a condition of its own (bf-p4c would chain the slots): one validity
    # condition, the packet's (ITCH at all).
    apply_block = control_body(text, "SwitchIngress").split("    apply {")[1]
    assert re.findall(r"if \((.*)\) \{", apply_block) == ["hdr.add_order[0].isValid()"]
    assert "ig_intr_md_for_tm.mcast_grp_a = 16w0xffff;" in text
    assert r.entries["pre"][0]["key"] == {"$MULTICAST_NODE_ID": {"value": 0xFFFF}}
    assert r.resources["notes"]["parser_stops_at"]  # ITCH skips other messages by their length
    assert "packet.advance" not in text and "pkt.advance(PORT_METADATA_SIZE)" in text
    # Keep entries: one per (port, leaf state) of the IR's leaf entries.
    leaf_rows = 0
    groups = {g.id: g.ports for g in pipeline.multicast_groups}
    for e in pipeline.entries_of("leaf_actions"):
        leaf_rows += 1 if e.action == "forward" else len(groups[e.args[0]]) if e.action == "multicast" else 0
    keep0 = [rec for rec in r.entries["entries"] if rec["table_name"] == "pipe.SwitchEgress.keep_m0"]
    assert len(keep0) == leaf_rows


def test_itch_first_mode_evaluates_element_zero_only():
    r = tofino.build(itch_pipeline(), TofinoOptions(batch="first"))
    ingress = tables_in(control_body(r.program.text, "SwitchIngress"))
    assert ingress["field_add_order_stock"]["keys"][1][0] == "hdr.add_order[0].stock"
    assert "SwitchEgress" not in json.dumps(r.entries["entries"])


def test_refusals_are_p4sub_errors():
    with pytest.raises(TargetError, match="advance"):
        tofino.build(itch_pipeline(), TofinoOptions(batch="first", variable_advance="refuse"))
    with pytest.raises(TargetError):
        tofino.build(compile_text(scalar_spec(), SCALAR_RULES), TofinoOptions(batch="union"))
    assert issubclass(TargetError, P4subError)


def test_int_hops_are_evaluated_side_by_side():
    r = tofino.build(int_pipeline())
    assert r.batched.mode == "union" and r.resources["notes"]["messages_per_packet"] == 8
    assert r.estimate.stages <= 12


def test_compile_options_compress_wide_range_fields_only():
    spec = scalar_spec()
    opts = tofino.compile_options(spec)
    assert opts.per_field_encoding == {"order.price": "compress"}


@pytest.mark.tofino
def test_bf_p4c_compiles_the_program(scalar, tmp_path):
    if shutil.which("bf-p4c") is None:
        pytest.skip("bf-p4c is not on PATH (it comes with the Tofino SDE)")
    _, r = scalar
    (tmp_path / "program.p4").write_text(r.program.text)
    done = subprocess.run(["bf-p4c", "--target", "tofino", "--arch", "tna", "-o", str(tmp_path / "build"),
                           str(tmp_path / "program.p4")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def _tna_include() -> str | None:
    """A directory holding ``tna.p4``: $P4SUB_TNA_INCLUDE, the SDE's install, or a p4c source tree beside p4test."""
    import os
    from pathlib import Path

    candidates = [os.environ.get("P4SUB_TNA_INCLUDE", "")]
    if os.environ.get("SDE_INSTALL"):
        candidates.append(f"{os.environ['SDE_INSTALL']}/share/p4c/p4include")
    p4test = shutil.which("p4test")
    if p4test:
        candidates.append(str(Path(p4test).resolve().parents[1] / "share/p4c/p4include"))
    return next((c for c in candidates if c and (Path(c) / "tna.p4").is_file()), None)


@pytest.mark.p4c
@pytest.mark.parametrize("which", ["scalar", "scalar-recirculating", "scalar-bitmap", "itch-union", "itch-union-folded",
                                   "itch-first", "int", "coexist-groups", "coexist-bitmap"])
def test_p4test_type_checks_the_tna_program(which, tmp_path):
    """p4c's front and mid end against tna.p4 itself (signatures, intrinsic metadata, externs)."""
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE to p4c's "
                    "backends/tofino/bf-p4c/p4include or to $SDE_INSTALL/share/p4c/p4include)")
    if which.startswith("coexist"):  # header validity as keys (hdr.h.isValid()), no guard
        from tests.backends.bmv2 import helpers as bmv2_helpers

        spec = bmv2_helpers.spec_from_text(bmv2_helpers.COEXIST_SPEC, str(tmp_path))
        r = tofino.build(compile_text(spec, bmv2_helpers.COEXIST_RULES, delivery=which.split("-")[1]))
        assert ".isValid()" in r.program.text
    elif which == "scalar-bitmap":
        r = tofino.build(compile_text(scalar_spec(), SCALAR_RULES, delivery="bitmap", lanes=2))
        assert "p4sub_port_bit" in r.program.text
    elif which.startswith("scalar"):
        # slices asked for: with the state key beside it the price's prefix cover is one TCAM block wide and
        # auto takes it; the slices' rendering is what p4test is to see here
        small = TofinoOptions(target=tofino.Target(name="small", stages=2), allow_recirculation=True,
                              wide_ranges="slices")
        r = tofino.build(compile_text(scalar_spec(), SCALAR_RULES, delivery="groups"),
                         small if which.endswith("recirculating") else TofinoOptions(wide_ranges="slices"))
        # the 32-bit price is cut in a ternary high and a native range low slice (backends.tofino.slices)
        assert re.search(r"hdr\.order\.price\[31:\d+\] : ternary .*\n.*hdr\.order\.price\[\d+:0\] : range", r.program.text)
    elif which.startswith("itch-union"):
        fold = "always" if which.endswith("folded") else "never"
        r = tofino.build(itch_pipeline(per_field=tofino.compile_options(itch_pipeline().spec).per_field_encoding),
                         TofinoOptions(fold_misses=fold))
        assert re.search(r"hdr\.add_order\[0\]\.price\[\d+:0\] : range", r.program.text)  # a code table's steps
    elif which == "itch-first":
        r = tofino.build(itch_pipeline(), TofinoOptions(batch="first"))
    else:
        r = tofino.build(int_pipeline())
    (tmp_path / "program.p4").write_text(r.program.text)
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(tmp_path / "program.p4")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


def test_the_shipped_itch_example_folds_every_miss_table():
    """apps/itch/rules.sub over 12 stacked messages: each field table holds its miss entries (a miss
    branch per slot chains the slots on Tofino, whatever the estimate says)."""
    from compiler.spec.reader import read_spec

    spec = read_spec(ITCH_SPEC)
    rules = (ITCH_SPEC.parent / "rules.sub").read_text()
    pipeline = compile_text(spec, rules, per_field=tofino.compile_options(spec).per_field_encoding)
    assert any(t.on_miss for t in tofino.build(pipeline, TofinoOptions(fold_misses="never")).batched.pipeline.tables)
    r = tofino.build(pipeline)
    assert r.resources["notes"]["miss_tables_folded"] and r.resources["notes"]["messages_per_packet"] == 12
    assert r.estimate.stages <= 12 and not any(t.on_miss for t in r.batched.pipeline.tables)


def test_a_default_path_is_refused_where_the_egress_expects_a_bridged_header():
    """--default fwd(PORT) on the batched ITCH program: a clear refusal, not a crash in the estimate."""
    from compiler.compile import CompileOptions, compile_rules
    from compiler.default_path import parse_default
    from compiler.rules.parser import parse_rules
    from compiler.spec.reader import read_spec

    spec = read_spec(ITCH_SPEC)
    rules = parse_rules((ITCH_SPEC.parent / "rules.sub").read_text())
    pipeline = compile_rules(spec, rules, CompileOptions(default=parse_default("fwd(3)"))).pipeline
    with pytest.raises(TargetError, match="--default fwd\\(3\\)"):
        tofino.build(pipeline)
    assert tofino.build(pipeline, TofinoOptions(batch="first")).program.text.count("p4sub_default") >= 2
