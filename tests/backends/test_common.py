"""backends.common: names, literals, declarations, parser states, emit order, message layout."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.common import controls, headers, literals, messages, names, parser
from backends.common.target import TargetFacts, check_match_kinds
from compiler import ir
from compiler.base.errors import SpecError, TargetError
from compiler.spec.model import Advance, Extract, FieldDef, HeaderInstance, HeaderType, ParserState, SelectCase, Spec
from tests.backends.bmv2 import helpers as h

P4_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@given(st.text(min_size=1, max_size=30))
@settings(max_examples=300)
def test_identifier_is_always_a_legal_non_keyword_p4_identifier(text):
    ident = names.identifier(text)
    assert P4_IDENT.match(ident)
    assert ident not in names.P4_KEYWORDS


def test_identifier_examples():
    assert names.identifier("add_order.price") == "add_order_price"
    assert names.identifier("avg(x.y)") == "avg_x_y"
    assert names.identifier("state") == "state_"
    assert names.identifier("9lives") == "_9lives"


def test_field_expressions_and_control_plane_names():
    assert names.field_expression("meta.p4sub_state") == "meta.p4sub_state"
    assert names.field_expression("ipv4.dst_addr") == "hdr.ipv4.dst_addr"
    assert names.field_expression("add_order.price", index=3) == "hdr.add_order[3].price"
    assert names.p4info_table_name("leaf_actions", "MyIngress") == "MyIngress.leaf_actions"
    assert names.p4info_action_name("NoAction", "MyIngress") == "NoAction"
    assert names.p4info_key_name(ir.Key("add_order.price", 32, "range")) == "add_order.price"
    assert names.name_annotation('a"b') == '@name("a\\"b")'


def test_literals():
    assert literals.literal(17, 8) == "8w17"
    assert literals.literal(500000, 32) == "32w0x7a120"
    with pytest.raises(ValueError):
        literals.literal(256, 8)
    assert literals.canonical_bytes(0) == b"\x00"
    assert literals.canonical_bytes(0x0100) == b"\x01\x00"
    assert literals.width_bytes(1, 9) == b"\x00\x01"
    assert literals.prefix_mask(8, 32) == 0xFF000000


@given(st.integers(1, 128).flatmap(lambda w: st.tuples(st.just(w), st.integers(0, (1 << w) - 1))))
@settings(max_examples=200)
def test_width_bytes_round_trip_with_the_fields_byte_length(wv):
    width, value = wv
    data = literals.width_bytes(value, width)
    assert len(data) == (width + 7) // 8 and literals.from_bytes(data) == value


def small_spec(states: dict[str, ParserState], stacks: dict[str, int] | None = None) -> Spec:
    types = {"a_t": HeaderType("a_t", (FieldDef("x", 8), FieldDef("y", 16))),
             "m_t": HeaderType("m_t", (FieldDef("len", 16),)),
             "b_t": HeaderType("b_t", (FieldDef("v", 32),))}
    stacks = stacks or {}
    insts = (HeaderInstance("a", "a_t"), HeaderInstance("m", "m_t", stacks.get("m")),
             HeaderInstance("b", "b_t", stacks.get("b")))
    return Spec(path="t.p4", header_types=types, headers_struct="headers", headers=insts, parser_states=states)


def test_parser_state_rendering_with_masks_wildcards_and_lookahead():
    st_ = ParserState("start", (Extract("a"), Advance(16)), ("a.x", "lookahead:8"), (
        SelectCase(((1, 0xFF), (0x27, 0xF0)), "next"),
        SelectCase((None, (3, 0xFF)), "accept"),
        SelectCase((None, None), "reject", is_default=True)))
    nxt = ParserState("next", (Extract("m", next=True),), (), (SelectCase((), "accept", is_default=True),))
    text = parser.parser_states(small_spec({"start": st_, "next": nxt}, {"m": 2}))
    assert text[0] == "\n".join([
        "state start {",
        "    packet.extract(hdr.a);",
        "    packet.advance(32w16);",
        "    transition select(hdr.a.x, packet.lookahead<bit<8>>()) {",
        "        (8w1, 8w32 &&& 8w240): next;",
        "        (_, 8w3): accept;",
        "        default: reject;",
        "    }",
        "}"])
    assert text[1] == "state next {\n    packet.extract(hdr.m.next);\n    transition accept;\n}"


def test_parser_refuses_unknown_states_and_missing_start():
    bad = ParserState("start", (), (), (SelectCase((), "nowhere", is_default=True),))
    with pytest.raises(SpecError):
        parser.parser_states(small_spec({"start": bad}))
    with pytest.raises(SpecError):
        parser.parser_states(small_spec({}))


def test_advance_expression_gets_the_hdr_prefix():
    st_ = ParserState("start", (Advance(None, "(bit<32>)(m.last.len - 1) * 8"),), (),
                      (SelectCase((), "accept", is_default=True),))
    text = parser.parser_states(small_spec({"start": st_}, {"m": 2}))[0]
    assert "packet.advance((bit<32>)(hdr.m.last.len - 1) * 8);" in text


def test_emit_lists_every_header_and_interleaves_adjacent_equal_stacks():
    spec = small_spec({}, {"m": 2, "b": 2})
    assert parser.emit_groups(spec) == [("a",), ("m", "b")]
    assert parser.emit_statements(spec) == ["packet.emit(hdr.a);", "packet.emit(hdr.m[0]);", "packet.emit(hdr.b[0]);",
                                            "packet.emit(hdr.m[1]);", "packet.emit(hdr.b[1]);"]
    spec = small_spec({}, {"m": 2, "b": 3})
    assert parser.emit_statements(spec) == ["packet.emit(hdr.a);", "packet.emit(hdr.m);", "packet.emit(hdr.b);"]


def test_header_declarations_and_struct_with_stacks():
    spec = small_spec({}, {"b": 4})
    assert headers.header_type_decls(spec)[0] == "header a_t {\n    bit<8> x;\n    bit<16> y;\n}"
    assert headers.headers_struct_decl(spec) == (
        "struct p4sub_headers_t {\n    a_t a;\n    m_t m;\n    b_t[4] b;\n}")
    assert headers.ref_width(spec, "b.last.v") == 32 and headers.ref_width(spec, "b[2].v") == 32
    assert headers.ref_width(spec, "a.zz") is None


def test_message_layout_of_itch_and_int():
    itch = h.compile_text(h.itch_spec(), h.ITCH_RULES).pipeline
    lay = messages.message_layout(itch)
    assert (lay.stack, lay.depth, lay.parallel, lay.message_bytes) == ("add_order", 12, ("mold_msg", "add_order"), 38)
    assert lay.count_field == "moldudp.msg_cnt" and lay.can_prune
    assert lay.length_fields == ("ipv4.total_len", "udp.length") and lay.udp_checksum == "udp.checksum"
    intp = h.compile_text(h.int_spec(), h.INT_RULES).pipeline
    lay = messages.message_layout(intp)
    assert (lay.stack, lay.depth, lay.parallel, lay.message_bytes) == ("int_hop", 8, ("int_hop",), 16)
    assert lay.count_field is None and not lay.can_prune and lay.batched


def test_ipv4_checksum_layout_found_in_the_shipped_specs():
    ck = messages.ipv4_checksum(h.itch_spec())
    assert ck.header == "ipv4" and ck.checksum == "hdr_checksum" and sum(w for _, w in ck.fields) == 144


def test_table_declaration_and_chained_apply():
    state = ir.Key(ir.STATE, 3, "exact")
    t = ir.Table("field_a_x", (state, ir.Key("a.x", 8, "range")), ("set_state", "NoAction"), "NoAction",
                 size=80, on_miss="field_a_x_miss", role="field")
    miss = ir.Table("field_a_x_miss", (state,), ("set_state", "NoAction"), "NoAction", role="miss")
    act = ir.Action("set_state", (ir.Param("state", 3),), (ir.Primitive("set_meta", (ir.STATE, "state")),))
    p = ir.Pipeline(small_spec({}), (ir.Metadata(ir.STATE, 3),), (ir.Action("NoAction"), act), (t, miss),
                    ("field_a_x",), ())
    decl = controls.table_decl(t, p, lambda k: names.field_expression(k.field))
    assert decl.splitlines()[:5] == [
        '@name("field_a_x") table field_a_x {',
        "    key = {",
        '        meta.p4sub_state : exact @name("meta.p4sub_state");',
        '        hdr.a.x : range @name("a.x");',
        "    }"]
    assert "    size = 80;" in decl and "    default_action = NoAction();" in decl
    assert controls.apply_statements(p) == ["if (!field_a_x.apply().hit) {", "    field_a_x_miss.apply();", "}"]
    facts = TargetFacts("t", "arch", (), frozenset({"exact"}), 9, 16, 511, "I", "E")
    assert controls.action_decl(act, facts) == '@name("set_state") action set_state(bit<3> state_) {\n' \
                                              "    meta.p4sub_state = state_;\n}"
    with pytest.raises(TargetError):
        check_match_kinds(p, facts)
    with pytest.raises(TargetError):
        facts.spell(ir.Primitive("drop"))


def test_user_actions_record_their_call_in_metadata():
    facts = TargetFacts("t", "arch", (), frozenset({"exact"}), 9, 16, 511, "I", "E")
    act = ir.Action("user_mark", (ir.Param("arg0", 8),), (ir.Primitive("user", ("mark",)),))
    assert controls.action_body(act, facts) == ["meta.p4sub_call_mark = 1w1;", "meta.p4sub_call_mark_arg0 = arg0;"]
