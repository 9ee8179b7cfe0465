"""A switch's PLEROMA flows as a v1model program: entries in the P4Runtime and CLI shapes, and
(with p4c on PATH) a program p4c compiles whose P4Info names the table and actions the entries use."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from backends.bmv2.pleroma_program import flow_entries, render
from compiler.base import P4subError


FLOWS = {1: {"110": frozenset({2}), "110010": frozenset({2, 3})}, 3: {"": frozenset({1, 2})}}


def test_flows_become_lpm_entries_on_the_ipv6_destination(tmp_path):
    entries, groups = flow_entries(FLOWS)
    assert [g.ports for g in groups] == [(2, 3), (1, 2)]
    by_dz = {(e.matches[0].value, e.matches[1].prefix_len): e for e in entries}
    e = by_dz[(1, 19)]  # dz 110 -> ff0e:c000::/19, one port
    assert e.matches[1].value == 0xFF0EC000 << 96 and e.action == "pleroma_port" and e.args == (2,)
    assert by_dz[(1, 22)].action == "pleroma_group"  # 110010 -> ff0e:c800::/22, ports 2 and 3
    assert by_dz[(3, 16)].matches[1].value == 0xFF0E << 112  # the empty dz: all of ff0e::/16
    paths = render("s1", FLOWS, tmp_path)
    doc = json.loads(paths[1].read_text())
    matches = [u["entity"]["table_entry"]["match"] for u in doc["updates"] if "table_entry" in u["entity"]]
    assert {"field_name": "hdr.ipv6.dst_addr", "lpm": {"value": "0xff0ec000000000000000000000000000",
                                                        "prefix_len": 19}} in matches[0] + matches[1]
    assert sum("multicast_group_entry" in u["entity"].get("packet_replication_engine_entry", {})
               for u in doc["updates"]) == 2
    commands = paths[2].read_text().splitlines()
    assert ("table_add MyIngress.pleroma_flows MyIngress.pleroma_port 1 0xff0ec000000000000000000000000000/19 => 2"
            in commands)
    assert "mc_mgrp_create 1" in commands


@pytest.mark.p4c
def test_p4c_compiles_the_program_and_its_p4info_names_what_the_entries_use(tmp_path):
    compiler = shutil.which("p4c-bm2-ss")
    if compiler is None or shutil.which("p4test") is None:
        pytest.skip("p4c-bm2-ss / p4test are not on PATH")
    program, entries, _ = render("s1", FLOWS, tmp_path)
    r = subprocess.run(["p4test", str(program)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([compiler, str(program), "-o", str(tmp_path / "out.json"), "--p4runtime-files",
                        str(tmp_path / "p4info.txt")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    p4info = (tmp_path / "p4info.txt").read_text()
    for name in ("MyIngress.pleroma_flows", "MyIngress.pleroma_port", "MyIngress.pleroma_group", "hdr.ipv6.dst_addr",
                 "standard_metadata.ingress_port"):
        assert f'"{name}"' in p4info, name


def test_the_entries_read_back_as_the_flows_they_came_from(tmp_path):
    """netsim runs a PLEROMA network directory from its entries: they must give back the flows exactly."""
    from backends.bmv2.pleroma_program import read_flows

    flows = {**FLOWS, 2: {"0": frozenset({5}), "01": frozenset({1, 3, 5}), "1" * 60: frozenset({3})}}
    _, entries, _ = render("s1", flows, tmp_path)
    assert read_flows(entries) == flows
    doc = json.loads(entries.read_text())
    doc["updates"] = [u for u in doc["updates"] if "packet_replication_engine_entry" not in u["entity"]]
    entries.write_text(json.dumps(doc))
    with pytest.raises(P4subError, match="never created"):
        read_flows(entries)
    entries.write_text("{}")
    with pytest.raises(P4subError, match="unreadable entries"):
        read_flows(entries)
