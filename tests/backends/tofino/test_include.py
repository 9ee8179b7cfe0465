"""Include mode on Tofino (``p4sub compile --target tofino --emit control``).

Without tools: the control's signature, metadata struct and apply block, the BF Runtime names under
the user's instance (every table, action, key and data field of ``entries.bfrt.json`` checked
against the generated P4, read with regular expressions that share no code with the renderer), the
PRE records, the resource estimate of the control's tables, the refusals. With p4test: the TNA
host program examples/coexist/coexist_tna.p4 (a user's IPv4 router) type-checks against tna.p4 with
the generated control, for a pragma-only spec and for a whole spec.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import backends.tofino as tofino
from backends.tofino.include import DEFAULT_INSTANCE, IncludeOptions, build_include, render_include
from backends.tofino.layout import TofinoOptions
from compiler import ir
from compiler.base.errors import ResourceError, TargetError
from compiler.compile import CompileOptions, compile_rules
from compiler.default_path import parse_default
from compiler.rules.parser import parse_rules
from compiler.spec.reader import read_spec
from p4sub import main
from tests.backends.bmv2 import helpers as bmv2_helpers
from tests.backends.tofino.helpers import (
    ROOT,
    SCALAR_RULES,
    actions_in,
    compile_text,
    itch_pipeline,
    scalar_spec,
    tables_in,
)

EXAMPLE = ROOT / "examples/coexist"
HOST = EXAMPLE / "coexist_tna.p4"
PARAMS = ("control P4subIngress(inout headers hdr,\n"
          "                     inout p4sub_metadata_t p4sub,\n"
          "                     in ingress_intrinsic_metadata_t ig_intr_md,\n"
          "                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,\n"
          "                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {")


def example_pipeline(default: str = "drop", spec_path: Path = EXAMPLE / "itch-spec.p4") -> ir.Pipeline:
    """The coexistence example's rules, compiled as ``p4sub compile --target tofino`` does (Tofino's encodings)."""
    spec = read_spec(spec_path)
    options = CompileOptions(delivery="groups", default=parse_default(default))
    options = replace(options, tables=tofino.compile_options(spec, options.tables))
    return compile_rules(spec, parse_rules((EXAMPLE / "rules.sub").read_text()), options).pipeline


def whole_spec(tmp_path: Path) -> Path:
    """A whole spec over the host program's headers: the BMv2 twin (headers, parser) with the pragmas."""
    path = tmp_path / "whole-spec.p4"
    path.write_text((EXAMPLE / "coexist.p4").read_text() + (EXAMPLE / "itch-spec.p4").read_text())
    return path


def test_the_control_has_the_documented_signature_metadata_and_apply_block():
    text = render_include(example_pipeline())["p4sub_control.p4"]
    assert PARAMS in text
    assert "#ifndef P4SUB_CONTROL_P4" in text
    body = text.split("*/", 1)[1]
    for whole_program_only in (r"^Pipeline\(", r"^Switch\(", r"^parser ", r"^#include", r"^header "):
        assert not re.search(whole_program_only, body, re.M), whole_program_only
    members = bmv2_helpers.struct_members(text, "p4sub_metadata_t")
    assert list(members)[:2] == ["looked_at", "matched"] and members["matched"] == "bit<1>"
    assert "p4sub_state" in members
    apply = text[text.index("    apply {"):]
    assert "p4sub.looked_at = 1w0;\n        p4sub.matched = 1w0;" in apply
    assert "if (hdr.add_order.isValid()) {\n            p4sub.looked_at = 1w1;" in apply
    assert "if (leaf_actions.apply().hit) { p4sub.matched = 1w1; }" in apply
    assert "else {" not in apply  # no --default: unclaimed packets are the host program's
    # The port a rule tests is TNA's, named as the spec names it; p4sub's metadata is the parameter's.
    assert 'ig_intr_md.ingress_port : exact @name("standard_metadata.ingress_port");' in text
    assert 'p4sub.p4sub_state : exact @name("meta.p4sub_state");' in text
    # A claimed packet's fate, in TNA's intrinsic metadata, through the control's own parameters.
    actions = {m.group(1): m.group(2) for m in re.finditer(r'@name\("(\w+)"\) action \w+\([^)]*\) \{(.*?)\n    \}',
                                                             text, re.S)}
    # forwarding undoes an earlier drop (an L3 hit after an L2 miss on the default path)
    assert actions["forward"].strip() == "ig_tm_md.ucast_egress_port = port; ig_dprsr_md.drop_ctl = 3w0;"
    assert actions["multicast"].strip() == ("ig_tm_md.mcast_grp_a = group; ig_tm_md.rid = group; "
                                            "ig_dprsr_md.drop_ctl = 3w0;")
    assert actions["drop_packet"].strip() == "ig_dprsr_md.drop_ctl = 3w1;"
    # The leaf's miss leaves the packet to the user's program.
    leaf = tables_in(text)["leaf_actions"]
    assert "NoAction" in leaf["actions"]
    assert re.search(r'@name\("leaf_actions"\) table leaf_actions \{.*?default_action = NoAction\(\);', text, re.S)
    assert "hdr.add_order: a header with" in text and "bit<64> stock" in text
    assert "p4sub.apply(hdr, meta.p4sub, ig_intr_md, ig_dprsr_md, ig_tm_md);" in text


def test_the_default_path_claims_the_packets_no_rule_looks_at(tmp_path):
    text = render_include(example_pipeline("table", whole_spec(tmp_path)))["p4sub_control.p4"]
    apply = text[text.index("    apply {"):]
    assert ("} else {\n            // No header a subscription reads: the default path (p4sub compile --default).\n"
            "            p4sub_default_l2.apply();\n            p4sub_default_l3.apply();\n"
            "            p4sub.matched = 1w1;\n        }") in apply
    assert 'hdr.ipv4.isValid() : exact @name("ipv4.$valid");' in text  # a validity key


@pytest.mark.parametrize("instance", [DEFAULT_INSTANCE, "Router.subs", "SwitchIngress.outer.p4sub"])
def test_every_bfrt_name_is_one_the_control_declares(instance):
    """Tables ``pipe.<instance>.<@name>``, actions ``<instance>.<@name>`` (``NoAction`` as is), key fields
    the keys' ``@name``s, data fields the action's parameters: bf-p4c's names for a nested control."""
    pipeline = example_pipeline()
    files = render_include(pipeline, IncludeOptions(instance=instance))
    text, doc = files["p4sub_control.p4"], json.loads(files["entries.bfrt.json"])
    tables, actions = tables_in(text), actions_in(text)
    assert doc["mode"] == "include" and doc["instance"] == instance and doc["p4_name"] is None

    def local(name: str, prefix: str) -> str:
        assert name.startswith(prefix + "."), (name, prefix)
        return name[len(prefix) + 1:]

    assert {local(t["table_name"], f"pipe.{instance}") for t in doc["tables"]} == set(tables)
    for t in doc["tables"]:
        table = tables[local(t["table_name"], f"pipe.{instance}")]
        assert [k["name"] for k in t["keys"]] == [k[2] for k in table["keys"]]
        assert [a if a == "NoAction" else local(a, instance) for a in t["actions"]] == table["actions"]
        assert t["size"] == table["size"]
    for e in doc["entries"]:
        table = tables[local(e["table_name"], f"pipe.{instance}")]
        action = local(e["action"], instance)
        assert action in table["actions"]
        assert set(e["key"]) - {"$MATCH_PRIORITY"} <= {k[2] for k in table["keys"]}
        assert set(e["data"]) == {name for _, name in actions[action]}
    # Every entry of the layout (range keys widened into prefix covers count once per prefix), no more.
    layout = build_include(pipeline, IncludeOptions(instance=instance)).layout
    assert len(doc["entries"]) == sum(len(t.entries) for t in layout.tables) >= len(pipeline.entries)
    assert {local(e["table_name"], f"pipe.{instance}") for e in doc["entries"]} == {e.table for e in pipeline.entries}
    # PRE: every group a multicast entry names has a node with its ports, and nothing else.
    groups = {g.id: sorted(g.ports) for g in pipeline.multicast_groups}
    used = {e["data"]["group"] for e in doc["entries"] if e["action"].endswith(".multicast")}
    assert used == set(groups)
    nodes = {r["key"]["$MULTICAST_NODE_ID"]["value"]: r["data"]["$DEV_PORT"] for r in doc["pre"]
             if r["table_name"] == "$pre.node"}
    mgids = {r["key"]["$MGID"]["value"]: r["data"]["$MULTICAST_NODE_ID"] for r in doc["pre"]
             if r["table_name"] == "$pre.mgid"}
    assert nodes == groups and mgids == {g: [g] for g in groups}
    info = json.loads(files["tofino.json"])
    assert info["bfrt_prefix"] == f"pipe.{instance}" and info["mode"] == "include"
    assert info["reads"]["add_order"] == ["buy_sell_indicator", "stock", "price", "shares"]
    assert info["metadata_reads"] == ["ig_intr_md.ingress_port"]


def test_the_whole_program_names_are_unchanged():
    """A whole program's tables stay ``pipe.SwitchIngress.<table>`` (the instance is include mode's)."""
    r = tofino.build(compile_text(scalar_spec(), SCALAR_RULES, delivery="groups"))
    assert all(t["table_name"].startswith("pipe.SwitchIngress.") and t["table_name"].count(".") == 2
               for t in r.entries["tables"])
    assert "mode" not in r.entries and r.entries["p4_name"] == "program"


def test_the_estimate_runs_on_the_controls_tables():
    pipeline = example_pipeline()
    rendered = build_include(pipeline)
    resources = json.loads(rendered.files["resources.json"])
    assert {t["name"] for t in resources["tables"]} == {t.name for t in pipeline.tables}
    assert 1 <= resources["stages"] <= 12 and resources["multicast_groups"] == len(pipeline.multicast_groups)
    assert all(t["first_stage"] >= 0 for t in resources["tables"])
    assert resources["notes"]["mode"] == "include" and "your program's own tables" in resources["notes"]["scope"]
    # The estimate is a check too: a chip too small for the control's chain refuses it.
    small = TofinoOptions(target=tofino.Target(name="small", stages=2), fold_misses="never")
    with pytest.raises(ResourceError, match="does not fit"):
        render_include(pipeline, IncludeOptions(tofino=small))


def test_a_queried_stack_needs_batch_first_which_reads_element_0():
    pipeline = itch_pipeline(delivery="groups")
    with pytest.raises(TargetError, match=r"one message per packet.*add_order\[12\]: compile with --batch first"):
        render_include(pipeline)
    with pytest.raises(TargetError, match=r"--batch first"):
        render_include(pipeline, IncludeOptions(tofino=TofinoOptions(batch="union")))
    text = render_include(pipeline, IncludeOptions(tofino=TofinoOptions(batch="first")))["p4sub_control.p4"]
    # the price is a key on element 0, whole or cut in slices (backends.tofino.slices)
    assert re.search(r'hdr\.add_order\[0\]\.price(\[\d+:\d+\])? : \w+ @name\("add_order\.price(\[\d+:\d+\])?"\);', text)
    assert "hdr.add_order[0].isValid()" in text and "hdr.add_order[0]: a header with" in text


def test_refusals_say_what_to_do():
    bitmap = compile_text(scalar_spec(), SCALAR_RULES, delivery="bitmap", lanes=2)
    with pytest.raises(TargetError, match="port-bitmap delivery needs an egress table .* --delivery groups"):
        render_include(bitmap)
    scalar = compile_text(scalar_spec(), SCALAR_RULES, delivery="groups")
    with pytest.raises(TargetError, match=r"--allow-recirculation needs the ingress parser .*\(--emit program\)"):
        render_include(scalar, IncludeOptions(tofino=TofinoOptions(allow_recirculation=True)))
    with pytest.raises(TargetError, match="routed switches as whole programs"):
        render_include(scalar, IncludeOptions(tofino=tofino.network_options((1,))))
    with pytest.raises(TargetError, match="--batch first needs a queried header stack"):
        render_include(scalar, IncludeOptions(tofino=TofinoOptions(batch="first")))
    with pytest.raises(TargetError, match=r"--instance 'p4sub': expected CONTROL.NAME, .*\(default SwitchIngress.p4sub\)"):
        render_include(scalar, IncludeOptions(instance="p4sub"))
    with pytest.raises(TargetError, match=r"--instance 'pipe.SwitchIngress.p4sub': give the path inside the pipe "
                                          r"\(SwitchIngress.p4sub\)"):
        render_include(scalar, IncludeOptions(instance="pipe.SwitchIngress.p4sub"))
    with pytest.raises(TargetError, match="--headers-type 'my headers'"):
        render_include(scalar, IncludeOptions(headers_type="my headers"))


def test_emit_control_writes_the_files_or_nothing(tmp_path):
    paths = tofino.emit_control(example_pipeline(), tmp_path / "ok")
    assert sorted(p.name for p in paths) == ["entries.bfrt.json", "p4sub_control.p4", "resources.json", "tofino.json"]
    with pytest.raises(TargetError):
        tofino.emit_control(example_pipeline(), tmp_path / "bad", IncludeOptions(instance="nope"))
    assert not (tmp_path / "bad").exists()


def _compile(spec: Path, *extra: str, out: Path) -> int:
    return main(["compile", str(spec), str(EXAMPLE / "rules.sub"), "-o", str(out), *extra])


def test_cli_include_mode_and_its_refusals(tmp_path, capsys):
    out = tmp_path / "out"
    assert _compile(EXAMPLE / "itch-spec.p4", "--target", "tofino", "--emit", "control", out=out) == 0
    assert {p.name for p in out.iterdir()} == {"p4sub_control.p4", "entries.bfrt.json", "resources.json",
                                               "tofino.json", "pipeline.json", "stats.json", "sources.json",
                                               "compiled_rules.sub", "manifest.json"}
    said = capsys.readouterr().out
    assert "p4sub.apply(hdr, meta.p4sub, ig_intr_md, ig_dprsr_md, ig_tm_md);" in said
    assert "tables pipe.SwitchIngress.p4sub.<table>" in said
    for extra in ((), ("--dry-run",)):
        assert main(["install", str(out), "--target", "tofino", *extra]) == 2
        err = capsys.readouterr().err
        assert "include-mode control" in err and "your program's own multicast" in err, err
    for extra, message in [
        (("--target", "tofino"), "compile with --emit control to get the subscription control"),
        (("--emit", "control"), "add --target bmv2 or --target tofino"),
        (("--target", "tofino", "--emit", "control", "--delivery", "bitmap"), "use --delivery groups"),
        (("--target", "tofino", "--emit", "control", "--default", "drop"), "left to your program"),
        (("--target", "tofino", "--emit", "control", "--allow-recirculation"), "your program's parser"),
        (("--target", "tofino", "--instance", "A.b"), "--instance is an include-mode option: add --emit control"),
    ]:
        assert _compile(EXAMPLE / "itch-spec.p4", *extra, out=tmp_path / "bad") == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)
    assert not (tmp_path / "bad").exists()


# -- with p4test -----------------------------------------------------------------------------------


def _tna_include() -> str | None:
    from tests.backends.tofino.test_program import _tna_include as find

    return find()


@pytest.mark.p4c
@pytest.mark.parametrize("spec", ["pragma-only", "whole"])
def test_p4test_accepts_the_host_program_with_the_generated_control(spec, tmp_path):
    """examples/coexist/coexist_tna.p4 (a user's TNA router) with the control ``#include``d, against tna.p4."""
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE to p4c's "
                    "backends/tofino/bf-p4c/p4include or to $SDE_INSTALL/share/p4c/p4include)")
    out = tmp_path / "out"
    if spec == "pragma-only":
        assert read_spec(EXAMPLE / "itch-spec.p4").pragma_only
        assert _compile(EXAMPLE / "itch-spec.p4", "--target", "tofino", "--emit", "control", out=out) == 0
    else:
        path = whole_spec(tmp_path)
        assert not read_spec(path).pragma_only
        assert _compile(path, "--target", "tofino", "--emit", "control", "--default", "table", out=out) == 0
        assert "p4sub_default_l3" in (out / "p4sub_control.p4").read_text()
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, "-I", str(out), str(HOST)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr
