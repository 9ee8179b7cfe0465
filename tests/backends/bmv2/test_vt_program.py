"""The v1model VT program: p4c-bm2-ss accepts the edge and transit programs; the entries match the plan."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from backends.bmv2.vt_program import PRESERVED, render_vt
from compiler.delivery.vt.combined import plan_vt
from compiler.network.host_rules import read_network_rules
from compiler.network.topology_arg import parse_topology_arg
from compiler.spec.reader import read_spec
from tests.backends.bmv2.switch import tool

ROOT = Path(__file__).resolve().parents[3]


def example_plan(strategy: str):
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    return plan_vt(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), strategy, max_rules=6, target="bmv2")


@pytest.mark.parametrize("strategy", ["broadcast", "relation"])
def test_entries_are_the_plans_state(strategy):
    plan = example_plan(strategy)
    for name, sp in plan.switches.items():
        files = render_vt(plan, name)
        cmds = files["commands.txt"].splitlines()
        assert sum(c.startswith("table_add MyIngress.check_tree ") for c in cmds) == len(sp.trees)
        assert sum(c.startswith("table_add MyIngress.check_hop ") for c in cmds) == len(sp.links)
        assert sum(c.startswith("table_add MyIngress.check_stop ") for c in cmds) == len(sp.links)
        assert sum(c.startswith("table_add MyIngress.vt_push ") for c in cmds) == len(sp.pushes)
        assert [c for c in cmds if c.startswith("mirroring_add ")] == [f"mirroring_add {p} {p}" for p in sp.ports]
        assert not any(c.startswith("mc_") for c in cmds), "copies are clones, not multicast replicas"
        for vt_id, mask in sp.trees:
            assert f"table_add MyIngress.check_tree MyIngress.vt_tree {0x4000 | vt_id} => {mask}" in cmds
        request = json.loads(files["entries.p4rt.json"])
        tables = [u["entity"]["table_entry"]["table_name"] for u in request["updates"] if "table_entry" in u["entity"]]
        assert tables.count("MyIngress.check_tree") == len(sp.trees)
        sessions = [u["entity"]["packet_replication_engine_entry"]["clone_session_entry"] for u in request["updates"]
                    if "packet_replication_engine_entry" in u["entity"]]
        assert [(c["session_id"], [r["egress_port"] for r in c["replicas"]]) for c in sessions] == \
            [(p, [p]) for p in sp.ports]
        text = files["program.p4"]
        assert plan.mask_width == 8  # fat-tree-4's highest port is under 8 (compiler.delivery.vt.combined.mask_bits)
        assert text.count(": vt_set_port(") == 8, "extract_port: one const entry per bit of the port mask"
        for field in PRESERVED:
            assert re.search(rf"@field_list\(1\) bit<\d+> {field};", text), field
        assert ("table vt_push" in text) == sp.ingress


@pytest.mark.p4c
@pytest.mark.parametrize("strategy,switch", [("broadcast", "e1_1"), ("broadcast", "c1"), ("relation", "a2_1")])
def test_p4c_accepts_the_vt_programs(strategy, switch, tmp_path):
    if tool("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not installed")
    plan = example_plan(strategy)
    (tmp_path / "program.p4").write_text(render_vt(plan, switch)["program.p4"])
    r = subprocess.run([tool("p4c-bm2-ss"), "-o", str(tmp_path / "program.json"), str(tmp_path / "program.p4")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr
    compiled = json.loads((tmp_path / "program.json").read_text())
    preserved = {e["value"][1].split(".")[-1] for fl in compiled["field_lists"] for e in fl["elements"]}
    assert preserved == set(PRESERVED)
