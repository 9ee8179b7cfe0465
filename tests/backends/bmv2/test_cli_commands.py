"""commands.txt: simple_switch_CLI syntax, and priorities inverted (BMv2's lower number wins)."""

from __future__ import annotations

import re

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import ir

import backends.bmv2 as bmv2
from backends.bmv2.cli_commands import cli_match, cli_priorities, multicast_commands
from backends.bmv2.program import build_program

from tests.backends.bmv2 import helpers as h


@given(st.lists(st.integers(min_value=1, max_value=1 << 20), min_size=1, max_size=40))
@settings(max_examples=200)
def test_cli_priorities_reverse_p4runtime_order_and_keep_ties(prios):
    entries = [ir.Entry("t", (), "a", (), p) for p in prios]
    cli = cli_priorities(entries)
    for a in prios:
        assert cli[a] >= 1
        for b in prios:
            # P4Runtime: a beats b iff a > b.  BMv2 CLI: a beats b iff cli[a] < cli[b].
            assert (a > b) == (cli[a] < cli[b])
            assert (a == b) == (cli[a] == cli[b])
    assert cli[max(prios)] == 1


def test_hand_checked_inversion():
    entries = [ir.Entry("t", (), "a", (), p) for p in (1, 3, 2, 3)]
    assert cli_priorities(entries) == {3: 1, 2: 2, 1: 3}


def test_match_syntax():
    assert cli_match(ir.Key("x.e", 8, "exact"), ir.Exact(66)) == "66"
    assert cli_match(ir.Key("x.s", 64, "exact"), ir.Exact(0x474F4F474C202020)) == "0x474f4f474c202020"
    assert cli_match(ir.Key("x.d", 32, "lpm"), ir.Lpm(0x0A0102FF, 16)) == "0xa010000/16"
    assert cli_match(ir.Key("x.t", 8, "ternary"), ir.Ternary(0xB7, 0xF0)) == "176&&&240"
    assert cli_match(ir.Key("x.p", 32, "range"), ir.Range(1001, 0xFFFFFFFF)) == "1001->0xffffffff"


def test_multicast_groups_use_sequential_node_handles():
    assert multicast_commands((ir.MulticastGroup(1, (2, 1)), ir.MulticastGroup(7, (3,)))) == [
        "mc_mgrp_create 1", "mc_node_create 1 1 2", "mc_node_associate 1 0",
        "mc_mgrp_create 7", "mc_node_create 1 3", "mc_node_associate 7 1",
    ]


@pytest.mark.parametrize("delivery", ["groups", "bitmap"])
def test_every_entry_becomes_one_table_add_with_its_priority_when_needed(tmp_path, delivery):
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path))
    pipeline = h.compile_text(spec, h.SCALAR_RULES, per_field={"ipv4.diffserv": "ternary"}, delivery=delivery).pipeline
    lines = bmv2.render(pipeline)[bmv2.COMMANDS].splitlines()
    adds = [line for line in lines if line.startswith("table_add ")]
    # Bitmap delivery adds the egress table that gives each port its bit, one entry per port.
    port_bits = [line for line in adds if line.startswith("table_add MyEgress.p4sub_port_bit ")]
    ports = pipeline.delivery.ports
    assert [line.split()[3] for line in port_bits] == [str(p) for p in ports]
    adds = [line for line in adds if line not in port_bits]
    assert len(adds) == len(pipeline.entries)
    tables = {t.name: t for t in pipeline.tables}
    in_table_order = [e for t in pipeline.tables for e in pipeline.entries_of(t.name)]
    for e, line in zip(in_table_order, adds):
        m = re.match(r"table_add MyIngress\.(\w+) MyIngress\.(\w+) (.*?) => ?(.*)$", line)
        assert m, line
        assert (m.group(1), m.group(2)) == (e.table, e.action)
        assert len(m.group(3).split()) == len(e.matches)
        after = m.group(4).split()
        n_args = len(e.args)
        assert [int(x, 0) for x in after[:n_args]] == list(e.args)
        assert len(after) == n_args + (1 if tables[e.table].needs_priority else 0)
    if delivery == "groups":
        assert "table_set_default MyIngress.leaf_actions MyIngress.drop_packet" in lines
    else:
        assert pipeline.delivery.is_bitmap and pipeline.multicast_groups == (ir.MulticastGroup(1, ports),)


def test_batched_itch_commands_create_the_union_group_and_the_group_port_bitmaps():
    pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES).pipeline
    program = build_program(pipeline)
    lines = bmv2.render(pipeline)[bmv2.COMMANDS].splitlines()
    assert "mc_mgrp_create 32767" in lines
    assert lines[lines.index("mc_mgrp_create 32767") + 1] == "mc_node_create 1 1 2 3"
    ports_lines = [line for line in lines if line.startswith("table_add MyIngress.p4sub_group_ports ")]
    assert len(ports_lines) == len(program.extra_entries) == len(pipeline.multicast_groups)
    for g in pipeline.multicast_groups:
        bitmap = sum(1 << p for p in g.ports)
        assert f"table_add MyIngress.p4sub_group_ports MyIngress.p4sub_set_ports {g.id} => {bitmap}" in ports_lines
