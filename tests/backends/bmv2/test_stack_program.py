"""The v1model header-stack program of a combined compile: rendering, entries, and p4c on it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from backends.bmv2.stack_program import ENTRIES, PROGRAM, render_stack
from compiler.delivery.combined import plan_combined
from compiler.network.host_rules import read_network_rules
from compiler.network.topology_arg import parse_topology_arg
from compiler.spec.reader import read_spec
from tests.backends.bmv2.switch import tool

ROOT = Path(__file__).resolve().parents[3]
P4C = tool("p4c-bm2-ss")
ENCODINGS = ["port", "bitmask", "mcgroup", "mixed"]
#: Small enough that some trees fall back, big enough for 8-bit stored-tree ids.
FALLBACK_LABELS = {"port": 12, "bitmask": 8, "mcgroup": 8, "mixed": 8}


def example_plan(encoding: str, max_labels: int | None = None):
    topo = parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    return topo, plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), encoding, target="bmv2",
                               max_labels=max_labels)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_entries_carry_the_plan_state(encoding):
    topo, plan = example_plan(encoding, max_labels=FALLBACK_LABELS[encoding])
    assert plan.fallbacks > 0
    for switch in ("e1_1", "c1"):
        sp = plan.switches[switch]
        request = json.loads(render_stack(plan, switch)[ENTRIES])
        groups = [u["entity"]["packet_replication_engine_entry"]["multicast_group_entry"]
                  for u in request["updates"] if "packet_replication_engine_entry" in u["entity"]]
        # Group id = port bitmap; replicas = exactly the bitmap's ports.
        for g in groups:
            ports = {r["egress_port"] for r in g["replicas"]}
            assert g["multicast_group_id"] == sum(1 << (p - 1) for p in ports)
        assert len(groups) == 2 ** len(topo.ports(switch)) - 1
        tables = [u["entity"]["table_entry"] for u in request["updates"] if "table_entry" in u["entity"]]
        own = [t for t in tables if t.get("is_default_action")]
        assert len(own) == 1 and int(own[0]["action"]["action"]["params"][0]["value"], 16) == sp.switch_id
        pushes = [t for t in tables if t["table_name"] == "MyIngress.p4sub_push"]
        assert len(pushes) == (len(plan.receiver_sets) if sp.ingress else 0)
        stored = [t for t in tables if t["table_name"] == "MyIngress.p4sub_stored"]
        assert len(stored) == len(sp.stored)
        for t in pushes:
            params = t["action"]["action"]["params"]
            assert len(params) == 1 + plan.max_labels and int(params[0]["value"], 16) <= plan.max_labels
        # The push arguments are the plan's labels, byte for byte (tags included for mixed).
        by_rsid = {p.rsid: p for p in sp.pushes}
        for t in pushes:
            push = by_rsid[int(t["match"][0]["exact"]["value"], 16)]
            packed = [int(p["value"], 16) for p in t["action"]["action"]["params"][1:1 + len(push.labels)]]
            assert packed == [i << (8 * plan.value_bytes) | v for i, v in push.labels]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_program_has_no_recirculation_and_a_fixed_stack(encoding):
    _, plan = example_plan(encoding)
    text = render_stack(plan, "a1_1")[PROGRAM]
    assert "recirculate" not in text and "resubmit" not in text and "clone" not in text
    assert f"p4sub_label_t[{plan.max_labels}] p4sub_label;" in text
    assert "p4sub_push" not in text  # a transit switch pushes nothing
    edge = render_stack(plan, "e1_1")[PROGRAM]
    assert "p4sub_push.apply();" in edge and "state p4sub_spec_start" in edge


@pytest.mark.p4c
@pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not installed (see docs/bmv2.md)")
@pytest.mark.parametrize("encoding,switch", [("port", "e1_1"), ("port", "c1"), ("bitmask", "e2_2"), ("bitmask", "a1_1"),
                                             ("mcgroup", "e3_1"), ("mcgroup", "c2"), ("mixed", "e4_2"), ("mixed", "a2_1")])
def test_p4c_accepts_the_stack_program_and_names_match_the_entries(encoding, switch, tmp_path):
    _, plan = example_plan(encoding, max_labels=12)
    files = render_stack(plan, switch)
    (tmp_path / PROGRAM).write_text(files[PROGRAM])
    done = subprocess.run([P4C, "--p4runtime-files", str(tmp_path / "p4info.txt"), "-o", str(tmp_path / "out.json"),
                           str(tmp_path / PROGRAM)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    p4info = (tmp_path / "p4info.txt").read_text()
    names = set(re.findall(r'name: "([^"]+)"', p4info))
    for u in json.loads(files[ENTRIES])["updates"]:
        te = u["entity"].get("table_entry")
        if te:
            assert te["table_name"] in names
            assert te["action"]["action"]["action_name"] in names
            for m in te.get("match", []):
                assert m["field_name"] in names
            for p in te["action"]["action"]["params"]:
                assert p["param_name"] in names
