"""entries.p4rt.json: P4Runtime encodings checked by hand against the specification's rules."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import backends.bmv2 as bmv2
from backends.bmv2.p4runtime import hexbytes, match_field, multicast_group_entry, table_entry
from compiler import ir
from compiler.base.errors import P4subError
from tests.backends.bmv2 import helpers as h

STATE = ir.Key(ir.STATE, 5, "exact")


def test_canonical_bytes_are_minimal():
    assert hexbytes(0) == "0x00"
    assert hexbytes(1) == "0x01"
    assert hexbytes(255) == "0xff"
    assert hexbytes(256) == "0x0100"
    assert hexbytes(0x474F4F474C202020) == "0x474f4f474c202020"


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
@settings(max_examples=200)
def test_canonical_bytes_have_no_leading_zero_byte_and_round_trip(value):
    text = hexbytes(value)
    data = bytes.fromhex(text[2:])
    assert int.from_bytes(data, "big") == value
    assert len(data) == 1 or data[0] != 0


def test_exact():
    assert match_field(ir.Key("ipv4.protocol", 8, "exact"), ir.Exact(17)) == \
        {"field_name": "ipv4.protocol", "exact": {"value": "0x11"}}


def test_lpm_zeroes_bits_beyond_the_prefix():
    key = ir.Key("ipv4.dst_addr", 32, "lpm")
    assert match_field(key, ir.Lpm(0x0A0102FF, 16)) == \
        {"field_name": "ipv4.dst_addr", "lpm": {"value": "0x0a010000", "prefix_len": 16}}
    # 10.0.0.0/8: canonical bytes drop nothing (the first byte is not zero)
    assert match_field(key, ir.Lpm(0x0A000000, 8))["lpm"] == {"value": "0x0a000000", "prefix_len": 8}
    # 0.0.0.0/1 .. : a value whose leading bytes are zero is shortened
    assert match_field(key, ir.Lpm(0x00000100, 24))["lpm"] == {"value": "0x0100", "prefix_len": 24}


def test_lpm_of_length_zero_is_omitted():
    assert match_field(ir.Key("ipv4.dst_addr", 32, "lpm"), ir.Lpm(0, 0)) is None


def test_ternary_zeroes_value_bits_outside_the_mask():
    key = ir.Key("ipv4.diffserv", 8, "ternary")
    assert match_field(key, ir.Ternary(0xB7, 0xF0)) == \
        {"field_name": "ipv4.diffserv", "ternary": {"value": "0xb0", "mask": "0xf0"}}


def test_ternary_with_empty_mask_is_omitted():
    assert match_field(ir.Key("ipv4.diffserv", 8, "ternary"), ir.Ternary(0x12, 0)) is None


def test_range():
    key = ir.Key("add_order.price", 32, "range")
    assert match_field(key, ir.Range(500001, 0xFFFFFFFF)) == \
        {"field_name": "add_order.price", "range": {"low": "0x07a121", "high": "0xffffffff"}}
    assert match_field(key, ir.Range(0, 0xFFFFFFFF)) is None
    with pytest.raises(P4subError):
        match_field(key, ir.Range(5, 4))


def test_values_wider_than_the_key_are_refused():
    with pytest.raises(P4subError):
        match_field(ir.Key("ipv4.protocol", 8, "exact"), ir.Exact(256))


def test_match_kind_must_agree_with_the_key():
    with pytest.raises(P4subError):
        match_field(ir.Key("ipv4.protocol", 8, "exact"), ir.Range(1, 2))


SET_STATE = ir.Action("set_state", (ir.Param("state", 5),), (ir.Primitive("set_meta", (ir.STATE, "state")),))


def test_priority_is_set_for_range_tables_and_omitted_for_exact_ones():
    rt = ir.Table("field_p", (STATE, ir.Key("a.p", 32, "range")), ("set_state", "NoAction"), "NoAction")
    et = ir.Table("field_s", (STATE, ir.Key("a.s", 8, "exact")), ("set_state", "NoAction"), "NoAction")
    e = table_entry(ir.Entry("field_p", (ir.Exact(3), ir.Range(1, 9)), "set_state", (7,), 5), rt, SET_STATE, "MyIngress")
    assert e == {
        "table_name": "MyIngress.field_p",
        "match": [{"field_name": "meta.p4sub_state", "exact": {"value": "0x03"}},
                  {"field_name": "a.p", "range": {"low": "0x01", "high": "0x09"}}],
        "action": {"action": {"action_name": "MyIngress.set_state",
                              "params": [{"param_name": "state_", "value": "0x07"}]}},
        "priority": 5,
    }
    e = table_entry(ir.Entry("field_s", (ir.Exact(3), ir.Exact(66)), "set_state", (7,)), et, SET_STATE, "MyIngress")
    assert "priority" not in e
    with pytest.raises(P4subError, match="needs a priority"):
        table_entry(ir.Entry("field_p", (ir.Exact(3), ir.Range(1, 9)), "set_state", (7,), 0), rt, SET_STATE, "MyIngress")
    with pytest.raises(P4subError, match="only tables with ternary or range"):
        table_entry(ir.Entry("field_s", (ir.Exact(3), ir.Exact(1)), "set_state", (7,), 2), et, SET_STATE, "MyIngress")


def test_priority_of_a_fully_wildcarded_ternary_entry_is_kept():
    t = ir.Table("t", (ir.Key("a.b", 8, "ternary"),), ("set_state",), "NoAction")
    e = table_entry(ir.Entry("t", (ir.Ternary(0, 0),), "set_state", (1,), 1), t, SET_STATE, "MyIngress")
    assert e["match"] == [] and e["priority"] == 1


def test_action_arguments_must_fit():
    t = ir.Table("t", (STATE,), ("set_state",), "NoAction")
    with pytest.raises(P4subError):
        table_entry(ir.Entry("t", (ir.Exact(1),), "set_state", (32,)), t, SET_STATE, "MyIngress")


def test_multicast_group_has_one_replica_per_port():
    assert multicast_group_entry(ir.MulticastGroup(3, (4, 1, 4))) == {"multicast_group_entry": {
        "multicast_group_id": 3,
        "replicas": [{"egress_port": 1, "instance": 1}, {"egress_port": 4, "instance": 1}]}}


@pytest.mark.parametrize("delivery", ["groups", "bitmap"])
def test_whole_request_holds_every_ir_entry_and_group_once(tmp_path, delivery):
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path))
    pipeline = h.compile_text(spec, h.SCALAR_RULES, per_field={"ipv4.diffserv": "ternary"}, delivery=delivery).pipeline
    request = json.loads(bmv2.render(pipeline)[bmv2.ENTRIES])
    updates = request["updates"]
    assert all(u["type"] == "INSERT" for u in updates)
    groups = [u["entity"]["packet_replication_engine_entry"] for u in updates if "packet_replication_engine_entry" in u["entity"]]
    assert [g["multicast_group_entry"]["multicast_group_id"] for g in groups] == [g.id for g in pipeline.multicast_groups]
    entries = [u["entity"]["table_entry"] for u in updates if "table_entry" in u["entity"]]
    port_bits = [e for e in entries if e["table_name"] == "MyEgress.p4sub_port_bit"]
    assert len(port_bits) == len(pipeline.delivery.ports)  # bitmap delivery: each port's bit, in the egress
    assert len(entries) == len(pipeline.entries) + len(port_bits)
    # groups come before the entries that name them
    first_table = next(i for i, u in enumerate(updates) if "table_entry" in u["entity"])
    assert all("packet_replication_engine_entry" in u["entity"] for u in updates[:first_table])
    kinds = {m_kind for e in entries for m in e["match"] for m_kind in m if m_kind != "field_name"}
    assert {"exact", "lpm", "ternary"} <= kinds
    for e in entries:
        if any("ternary" in m or "range" in m for m in e["match"]) or e["table_name"].endswith("diffserv"):
            assert e["priority"] >= 1
