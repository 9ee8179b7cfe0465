"""P4_14 specs: header_type, instances, parser functions, the preprocessor, pragmas, errors.

The inputs are written for these tests: they use the P4_14 features Camus's public specs use
(``#define`` constants, include-guarded headers split from the parser, ``latest``,
``return ingress``, ``@pragma query_field(h.f)``), plus the rest of what p4sub reads.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import ErrorList, P4subError, ParseError, SpecError
from compiler.spec.model import Extract, ParserState, SelectCase, Spec
from compiler.spec.reader import parse_spec, read_spec
from runtime.parse_graph import ParseGraph

P4_14_SPEC = """\
// A P4_14 spec: Ethernet, up to two VLAN tags, IPv4, then TCP or UDP ports.
#define ETH_VLAN 0x8100
#define ETH_IPV4 0x0800   // IPv4
#define MAX_TAGS 2

header_type eth_t { fields { dst : 48; src : 48; kind : 16; } }
header_type vlan_t {
    fields {
        pcp : 3;
        cfi : 1;
        vid : 12;
        kind : 16;
    }
}
header_type ip_t {
    fields {
        ver_ihl : 8; tos : 8; len : 16; id : 16; frag : 16;
        ttl : 8 (saturating); proto : 8; csum : 16; src : 32; dst : 32;
    }
    length : 20;
    max_length : 20;
}
header_type l4_t { fields { sport : 16; dport : 16; } }
header_type meta_t { fields { tagged : 1; spare : 2; } }

header eth_t eth;
header vlan_t vlan[MAX_TAGS];
header ip_t ip;
header l4_t l4;
metadata meta_t meta;

@pragma query_field_exact(ip.proto)
@pragma query_field_lpm(ip.dst, 32)
@pragma query_field(l4.dport)
@pragma query_field_range(vlan.vid)

parser start {
    extract(eth);
    return select(latest.kind) {
        ETH_VLAN : parse_vlan;
        ETH_IPV4 : parse_ip;
        default : ingress;
    }
}

parser parse_vlan {
    extract(vlan[next]);
    return select(latest.kind) {
        ETH_VLAN : parse_vlan;
        ETH_IPV4 : parse_ip;
        default : ingress;
    }
}

field_list ip_fields { ip.src; ip.dst; }
field_list_calculation ip_csum { input { ip_fields; } algorithm : csum16; output_width : 16; }
calculated_field ip.csum { verify ip_csum; update ip_csum; }

parser parse_ip {
    extract(ip);
    return select(ip.ver_ihl, ip.frag, ip.proto) {
        0x45000006 mask 0xff3fffff, 0x45000011 mask 0xff3fffff : parse_l4;
        default : ingress;
    }
}

parser parse_l4 {
    extract(l4);
    return select(current(4, 4)) {
        5 : ingress;
        default : parse_error p4_pe_default;
    }
}

action set_port(port) { modify_field(standard_metadata.egress_spec, port); }
table route { reads { ip.dst : lpm; } actions { set_port; } size : 1024; }
control ingress {
    if (valid(ip)) { apply(route); } /* } */
    @pragma query_control
}
"""

P4_16_SPEC = """\
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
header vlan_t { bit<3> pcp; bit<1> cfi; bit<12> vid; bit<16> kind; }
header ip_t {
    bit<8> ver_ihl; bit<8> tos; bit<16> len; bit<16> id; bit<16> frag;
    bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
header l4_t { bit<16> sport; bit<16> dport; }
struct meta_t { bit<1> tagged; bit<2> spare; }
struct headers { eth_t eth; vlan_t[2] vlan; ip_t ip; l4_t l4; }
@query_field_exact(ip.proto)
@query_field_lpm(ip.dst)
@query_field(l4.dport)
@query_field_range(vlan.vid)
parser ParserImpl(packet_in packet, out headers hdr, inout meta_t meta) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.kind) { 0x8100: parse_vlan; 0x0800: parse_ip; default: accept; }
    }
    state parse_vlan {
        packet.extract(hdr.vlan.next);
        transition select(hdr.vlan.last.kind) { 0x8100: parse_vlan; 0x0800: parse_ip; default: accept; }
    }
    state parse_ip {
        packet.extract(hdr.ip);
        transition select(hdr.ip.ver_ihl, hdr.ip.frag, hdr.ip.proto) {
            (0x45, 0 &&& 0x3fff, 6): parse_l4;
            (0x45, 0 &&& 0x3fff, 17): parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        packet.extract(hdr.l4);
        transition select(packet.lookahead<bit<8>>()) { 5 &&& 0xf: accept; default: reject; }
    }
}
"""


def p4_14(text: str, path: str = "t.p4") -> Spec:
    return parse_spec("// -*- P4_14 -*-\n" + text, path)


def error_of(text: str, kind: type[P4subError] = P4subError) -> P4subError:
    with pytest.raises((kind, ErrorList)) as info:
        parse_spec("// -*- P4_14 -*-\n" + text, "t.p4")
    return info.value


def messages(err: P4subError) -> list[str]:
    return [str(e) for e in err.errors] if isinstance(err, ErrorList) else [str(err)]


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


HEADERS = "header_type h_t { fields { a : 8; b : 8; } }\nheader h_t h;\nheader h_t s[3];\nmetadata h_t m;\n"


def _shape(spec: Spec):
    types = {n: (t.is_struct, [(f.name, f.width) for f in t.fields]) for n, t in spec.header_types.items()}
    headers = [(h.name, h.type_name, h.stack_size) for h in spec.headers]
    states = {n: (s.statements, s.select_keys, s.cases) for n, s in spec.parser_states.items()}
    fields = {n: (q.width, q.match_kind) for n, q in spec.query_fields.items()}
    return types, headers, spec.headers_struct, spec.parser_name, states, fields


# ---------------------------------------------------------------------------------------------
# the translation


def test_p4_14_spec_reads_into_the_same_spec_as_its_p4_16_equivalent():
    old, new = parse_spec(P4_14_SPEC, "old.p4"), parse_spec(P4_16_SPEC, "new.p4")
    assert old.version == "P4_14" and new.version == "P4_16"
    assert _shape(old) == _shape(new)
    assert old.constants == {"ETH_VLAN": 0x8100, "ETH_IPV4": 0x800, "MAX_TAGS": 2}
    assert old.header_types["meta_t"].is_struct and not old.header_types["vlan_t"].is_struct


def _frame(*parts: bytes) -> bytes:
    return b"".join(parts)


ETH = bytes(12)
IP_TCP = bytes([0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]) + bytes([10, 0, 0, 1, 10, 0, 0, 2])
L4 = bytes([0x04, 0xd2, 0x00, 0x50])
FRAMES = [
    _frame(ETH, b"\x08\x00", IP_TCP, L4, b"\x05\x00"),                        # accepted, lookahead 0x05
    _frame(ETH, b"\x08\x00", IP_TCP, L4, b"\x15\xff"),                        # low nibble 5 again
    _frame(ETH, b"\x08\x00", IP_TCP, L4, b"\x06"),                            # parse_error: reject
    _frame(ETH, b"\x08\x00", IP_TCP, L4),                                     # lookahead runs out
    _frame(ETH, b"\x81\x00", b"\x20\x05\x81\x00", b"\x00\x07\x08\x00", IP_TCP, L4, b"\x05"),
    _frame(ETH, b"\x81\x00", b"\x00\x01\x81\x00", b"\x00\x02\x81\x00", b"\x00\x03\x08\x00"),  # 3 tags: stack full
    _frame(ETH, b"\x08\x00", bytes([0x46]) + IP_TCP[1:]),                    # options: not followed
    _frame(ETH, b"\x86\xdd", bytes(40)),
    b"\x00" * 5,
]


@pytest.mark.parametrize("frame", FRAMES)
def test_p4_14_and_p4_16_parse_graphs_agree_on_packets(frame):
    old, new = ParseGraph(parse_spec(P4_14_SPEC, "old.p4")), ParseGraph(parse_spec(P4_16_SPEC, "new.p4"))
    assert old.parse(frame) == new.parse(frame)


def test_the_example_frames_cover_every_outcome():
    graph = ParseGraph(parse_spec(P4_14_SPEC, "old.p4"))
    statuses = {graph.parse(f).status for f in FRAMES}
    assert statuses == {"accept", "reject", "packet_too_short", "stack_out_of_bounds"}
    assert graph.parse(FRAMES[4]).value("vlan[1].vid") == 7


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FRAMES), st.binary(max_size=24), st.integers(0, 60))
def test_p4_14_and_p4_16_parse_graphs_agree_on_mutated_packets(frame, noise, at):
    frame = frame[:at] + noise + frame[at + len(noise):]
    old, new = ParseGraph(parse_spec(P4_14_SPEC, "old.p4")), ParseGraph(parse_spec(P4_16_SPEC, "new.p4"))
    assert old.parse(frame) == new.parse(frame)


def test_select_values_split_over_concatenated_keys_and_value_lists():
    spec = p4_14(HEADERS + """
parser start { extract(h); return select(h.a, h.b) { 0x0102 : s1; 0x0300 mask 0xff00, 0x04ff : s2; default : ingress; } }
parser s1 { extract(s[next]); extract(s[next]); return select(s[last].a, s[0].b) { 0x0000 mask 0x0000 : ingress; } }
parser s2 { return select(current(0, 16), current(8, 8)) { 0x0102ff : ingress; default : parse_error e; } }
""")
    start, s1, s2 = spec.parser_states["start"], spec.parser_states["s1"], spec.parser_states["s2"]
    assert start.select_keys == ("h.a", "h.b")
    assert start.cases == (SelectCase(((1, 0xff), (2, 0xff)), "s1"), SelectCase(((3, 0xff), None), "s2"),
                           SelectCase(((4, 0xff), (0xff, 0xff)), "s2"), SelectCase((None, None), "accept", True))
    assert s1.statements == (Extract("s", True), Extract("s", True))
    assert s1.select_keys == ("s.last.a", "s[0].b") and s1.cases == (SelectCase((None, None), "accept"),)
    assert s2.select_keys == ("lookahead:16", "lookahead:16")
    assert s2.cases[0] == SelectCase(((0x0102, 0xffff), (0xff, 0xff)), "accept")
    assert s2.cases[1] == SelectCase((None, None), "reject", True)


def test_latest_is_the_last_extract_of_the_state_and_ingress_is_accept():
    spec = p4_14(HEADERS + "parser start { extract(h); extract(s[next]); return select(latest.b) { 1 : start; "
                           "default : ingress; } }")
    assert spec.parser_states["start"].select_keys == ("s.last.b",)
    assert spec.parser_states["start"].cases[1].next_state == "accept"
    assert spec.parser_name == "ParserImpl" and spec.headers_struct == "headers"


def test_headers_follow_the_parse_graph_as_p4_14_deparses_them():
    spec = p4_14("header_type h_t { fields { a : 8; } }\nheader h_t late;\nheader h_t unused;\nheader h_t tag[2];\n"
                 "header h_t first;\nheader h_t mid;\n"
                 "parser start { extract(first); return select(latest.a) { 1 : tags; default : rest; } }\n"
                 "parser tags { extract(tag[next]); return select(latest.a) { 1 : tags; default : rest; } }\n"
                 "parser rest { extract(mid); extract(late); return ingress; }\n")
    assert [h.name for h in spec.headers] == ["first", "tag", "mid", "late", "unused"]


def test_a_parser_may_return_to_any_control():
    spec = p4_14(HEADERS + "parser start { extract(h); return my_ctl; }\ncontrol my_ctl { }\n")
    assert spec.parser_states["start"].cases == (SelectCase((), "accept", True),)


def test_header_type_kinds_follow_their_instances():
    spec = p4_14("header_type used_t { fields { a : 8; } }\nheader_type meta_t { fields { a : 8; } }\n"
                 "header_type odd_t { fields { a : 3; } }\nheader_type whole_t { fields { a : 16; } }\n"
                 "header used_t u;\nmetadata meta_t m { a : 5; };\n")
    kinds = {n: t.is_struct for n, t in spec.header_types.items()}
    assert kinds == {"used_t": False, "meta_t": True, "odd_t": True, "whole_t": False}
    assert [h.name for h in spec.headers] == ["u"] and not spec.parser_states


def test_p4_14_pragmas_counters_actions_and_metadata_fields():
    spec = p4_14(HEADERS + """
@pragma query_field(h.a, 8)
@pragma query_field_exact(s.b)
@pragma query_field_range(h.b, scale=2)
@pragma query_counter(rate, 1000, 4)
@pragma query_field_counter(bursts, )
@pragma query_action(mark, 8)
@pragma query_default_action(to_cpu)
@pragma query_field_exact(standard_metadata.ingress_port)
@pragma stage 3
@pragma ternary 1
""")
    assert list(spec.query_fields) == ["h.a", "s.b", "h.b", "standard_metadata.ingress_port"]
    assert spec.query_fields["h.b"].scale == 2 and spec.query_fields["standard_metadata.ingress_port"].metadata
    assert spec.counters["rate"].slots == 4 and spec.counters["bursts"].window_us == 10000
    assert spec.actions["mark"].arg_widths == (8,) and spec.default_action == "to_cpu"
    assert spec.notes == ("t.p4:15:1: note: ignored 2 pragmas p4sub does not read: stage, ternary (it reads "
                          "@pragma query_*)",)


def test_skipped_declarations_get_one_note_per_kind_and_bodies_may_hold_anything():
    spec = p4_14(HEADERS + """
counter c1 { type : packets; instance_count : 4; }
counter c2 { type : bytes; direct : t; }
register r { width : 32; instance_count : 16; }
meter m1 { type : bytes; static : t; instance_count : 4; }
primitive_action my_prim(a, b);
blackbox stateful_alu my_alu { reg : r; output_value : alu_lo; }
action_profile ap { actions { a; } size : 4; }
action a(x) { modify_field(h.a, x); /* } { */ }
table t { reads { h.a : exact; } actions { a; } }
control ingress { apply(t); if (h.a == 1) { apply(t); } }
parser_exception p4_pe_x { parser_drop; }
""")
    why = "(a P4_14 spec needs only header types, header instances and the parser)"
    assert spec.notes == (
        f"t.p4:7:1: note: skipped 2 counters: c1, c2 {why}",
        f"t.p4:9:1: note: skipped register r {why}",
        f"t.p4:10:1: note: skipped meter m1 {why}",
        f"t.p4:11:1: note: skipped primitive_action my_prim {why}",
        f"t.p4:12:1: note: skipped blackbox my_alu {why}",
        f"t.p4:13:1: note: skipped action_profile ap {why}",
        f"t.p4:14:1: note: skipped action a {why}",
        f"t.p4:15:1: note: skipped table t {why}",
        f"t.p4:16:1: note: skipped control ingress {why}",
        f"t.p4:17:1: note: skipped parser_exception p4_pe_x {why}",
    )


# ---------------------------------------------------------------------------------------------
# the preprocessor and includes


def test_include_guards_defines_and_relative_includes(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "headers.p4").write_text(
        "#ifndef LIB_HEADERS\n#define LIB_HEADERS 1\n#define KIND_IP 0x0800\n"
        "header_type eth_t { fields { dst : 48; src : 48; kind : 16; } }\n"
        "header_type ip_t { fields { ttl : 8; proto : 8; } }\n"
        "@pragma query_field(ip.proto)\n#endif // LIB_HEADERS\n")
    (tmp_path / "lib" / "parser.p4").write_text(
        '#include "headers.p4"\nheader eth_t eth;\nheader ip_t ip;\n'
        "parser start { extract(eth); return select(latest.kind) { KIND_IP : parse_ip; default : ingress; } }\n"
        "parser parse_ip { extract(ip); return ingress; }\n")
    (tmp_path / "spec.p4").write_text(  # the user's own spec joining two sibling files
        '// headers and parser side by side, as Camus passes them\n#include "lib/headers.p4"\n'
        '#include "lib/parser.p4"\n#include <tofino/intrinsic_metadata.p4>\n')
    spec = read_spec(tmp_path / "spec.p4")
    assert spec.version == "P4_14" and [h.name for h in spec.headers] == ["eth", "ip"]
    assert spec.parser_states["start"].cases[0] == SelectCase(((0x800, 0xffff),), "parse_ip")
    assert spec.includes == ('"lib/headers.p4"', '"lib/parser.p4"', '"headers.p4"', "<tofino/intrinsic_metadata.p4>")
    assert spec.constants == {"KIND_IP": 0x800} and list(spec.query_fields) == ["ip.proto"]


def test_errors_in_included_files_name_that_file(tmp_path):
    (tmp_path / "h.p4").write_text("header_type h_t { fields { a : 8; } }\nheader h_t h;\n"
                                   "parser start {\n  set_metadata(m.x, 1);\n  return ingress;\n}\n")
    (tmp_path / "spec.p4").write_text('#include "h.p4"\n')
    with pytest.raises(SpecError) as info:
        read_spec(tmp_path / "spec.p4")
    assert str(info.value).startswith(f"{tmp_path / 'h.p4'}:4:3: P4_14: set_metadata in a parser state is not "
                                      f"supported by p4sub; the parse graph holds only extracts and transitions")


def test_conditionals_and_macro_errors():
    spec = p4_14("#if 0\nthis is not read\n#elif defined(NOPE)\nnor this\n#else\n#define W 8\n#endif\n"
                 "#ifdef W\nheader_type h_t { fields { a : W; } }\n#endif\n#undef W\n#ifndef W\nheader h_t h;\n#endif\n")
    assert spec.header_types["h_t"].fields[0].width == 8 and spec.header("h") is not None
    assert "F is a function-like macro" in str(error_of("#define F(x) x\nheader_type h_t { fields { a : F(8); } }\n"))
    assert str(error_of("#error stop here\n")) == "t.p4:2:1: P4_14: #error stop here"
    assert "#ifndef at t.p4:2:1 has no #endif" in str(error_of("#ifndef X\nheader_type h_t { fields { a : 8; } }\n"))
    assert "#if A + 1: p4sub's preprocessor reads #if with a number" in str(error_of("#if A + 1\n#endif\n"))
    assert "#include \"nowhere.p4\": no such file" in str(error_of('#include "nowhere.p4"\n'))


# ---------------------------------------------------------------------------------------------
# what stays unsupported: errors say which version, what and what to write


@pytest.mark.parametrize("body, needle", [
    ("parser start { extract(h); set_metadata(m.a, 1); return ingress; }",
     "P4_14: set_metadata in a parser state is not supported by p4sub"),
    ("parser start { extract(m); return ingress; }", "P4_14: extract(m): m is a metadata instance"),
    ("parser start { extract(s); return ingress; }", "P4_14: extract(s): s is a header stack; extract s[next]"),
    ("parser start { extract(h[next]); return ingress; }", "h is a header, not a stack"),
    ("parser start { extract(s[1]); return ingress; }", "extract stacks with extract(s[next])"),
    ("parser_value_set pvs;\nparser start { extract(h); return select(h.a) { pvs : ingress; } }",
     "'pvs' in a select case is neither a number nor a #define'd constant"),
    ("parser start { extract(h); return select(h.a, h.b) { 0x10000 : ingress; } }",
     "select value 0x10000 does not fit the 16 bits of the select keys (h.a, h.b) concatenated"),
    ("parser start { extract(h); return select(current(h.a, 8)) { 1 : ingress; } }",
     "P4_14: current(offset, width) takes two constant numbers"),
    ("parser start { extract(h); return select(current(0, 0)) { 1 : ingress; } }", "current(0, 0) is not supported"),
    ("header hh_t x;", "P4_14: header hh_t x: unknown header_type 'hh_t'; did you mean 'h_t'?"),
    ("parser start { return select(latest.a) { 1 : ingress; } }", "latest.a in parser start, which extracts no "
                                                                  "header before its select"),
    ("parser start { extract(h); return select(m.a) { 1 : ingress; } }", "select on metadata (m.a) is not supported"),
    ("parser start { extract(h); return select(s.a) { 1 : ingress; } }", "name an element: s[last].a"),
    ("parser begin { extract(h); return ingress; }", "there is no 'parser start' function"),
    ("parser start { extract(h); return nowhere; }", "transition to undefined state 'nowhere'"),
    ("parser start { extract(h); return select(h.zz) { 1 : ingress; } }", "has no field 'zz'"),
    ("header_type v_t { fields { a : 8; opts : *; } length : a * 4; }", "variable-length field v_t.opts"),
    ("header_type v_t { fields { a : 8; } length : a * 4; }", "variable length; variable-length headers"),
    ("header_type v_t { fields { a : 8 (signed); } }", "signed field v_t.a"),
    ("header_type odd_t { fields { a : 7; } }\nheader odd_t o;", "header odd_t is 7 bits wide"),
    ("@pragma query_field(m.a)", "m is a P4_14 metadata instance, not a header: user metadata fields are not "
                                 "queryable yet"),
    ("@pragma query_field_lpm(h.a, 16)", "width 16 does not match the declared width of h.a (bit<8> in h_t)"),
    ("@pragma query_field h.a", "takes its arguments in parentheses"),
    ("@query_field(h.a)", "@query_field is a P4_16 annotation; P4_14 writes @pragma query_field(...)"),
    ("@pragma query_fild(h.a)", "did you mean 'query_field'?"),
    ("struct s { bit<8> a; }", "P4_14: 'struct' is P4_16; this spec is read as P4_14"),
    ("frobnicate x;", "P4_14: 'frobnicate' does not start a declaration p4sub reads"),
    ("action a() { ( }", "P4_14: unbalanced '}' in the action declaration"),
    ("control c { apply(t);", "P4_14: the control declaration at t.p4:6:1 never ends"),
    ("parser start { extract(h); return select(h.a) { 1 : ingress } }", "expected ';' after the select case's state"),
    ("parser start { extract(h) return ingress; }", "P4_14: expected ';' after extract(...), found 'return'"),
    ("parser start(packet_in p) { }", "looks like P4_16"),
])
def test_unsupported_p4_14_is_an_error_with_a_location(body, needle):
    err = error_of(HEADERS + body + "\n")
    text = "\n".join(messages(err))
    assert needle in text, text
    assert all(re.match(r"t\.p4:\d+:\d+: ", m) for m in messages(err))


def test_set_metadata_error_points_at_it():
    body = HEADERS + "parser start {\n    extract(h);\n    set_metadata(m.a, latest.a);\n    return ingress;\n}\n"
    err = error_of(body, SpecError)
    assert str(err).startswith(f"t.p4:{line_of(body, 'set_metadata') + 1}:5: P4_14: set_metadata")


# ---------------------------------------------------------------------------------------------
# which version a file is


def test_version_comes_from_content_or_a_marker():
    assert parse_spec(HEADERS, "t.p4").version == "P4_14"  # header_type: P4_14 without a marker
    assert parse_spec(HEADERS + "parser start { return ingress; }\n", "t.p4").version == "P4_14"
    assert "P4_14: the parser extracts no headers" in str(error_of("parser start { return ingress; }\n"))
    marked = parse_spec("/* -*- P4_14 -*- */\n@pragma query_field(x.y, 8)\n", "t.p4")
    assert marked.version == "P4_14" and marked.pragma_only


def test_a_file_mixing_versions_reads_as_p4_16_and_says_why_it_fails():
    text = "header_type h_t { fields { a : 8; } }\nheader g_t { bit<8> a; }\n"
    with pytest.raises(ParseError) as info:
        parse_spec(text, "t.p4")
    assert "the file also holds P4_14, e.g. 'header_type h_t {', but reads as P4_16" in str(info.value)


def test_parse_states_are_plain_parser_states():
    spec = parse_spec(P4_14_SPEC, "old.p4")
    assert all(isinstance(s, ParserState) for s in spec.parser_states.values())
    assert spec.parser_states["parse_vlan"].location.line == line_of(P4_14_SPEC, "parser parse_vlan")


# ---------------------------------------------------------------------------------------------
# robustness: whatever the input, only P4subError comes out

_VOCABULARY = ["header_type", "fields", "header", "metadata", "parser", "extract", "return", "select", "latest",
               "current", "mask", "default", "ingress", "parse_error", "next", "last", "set_metadata", "control",
               "action", "table", "field_list", "#define X 1\n", "#ifndef G\n", "#endif\n", "#if 0\n",
               '#include "x.p4"\n', "@pragma", "query_field", "{", "}", "(", ")", "[", "]", ";", ":", ",", ".",
               "*", "h_t", "h", "a", "8", "0x800", "16'5", "X", "\n", "//", "/*", "*/", '"s"', "-"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_VOCABULARY), max_size=60))
def test_p4_14_token_soup_only_raises_p4sub_errors(tokens):
    try:
        parse_spec("// -*- P4_14 -*-\n" + " ".join(tokens), "soup.p4")
    except P4subError:
        pass


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_p4_14_spec_reads_or_raises_p4sub_errors(data):
    text = P4_14_SPEC
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        span = data.draw(st.integers(0, 12))
        insert = data.draw(st.sampled_from(["", ";", "}", "{", "(", "x", "[", "latest.", "@pragma query_field(", "0",
                                            "#define", "\n#endif\n", ","]))
        text = text[:pos] + insert + text[pos + span:]
    try:
        parse_spec(text, "old.p4")
    except P4subError as exc:
        assert exc.location is not None or isinstance(exc, ErrorList)


# -- macro expansion is bounded (issue 27) -----------------------------------------------------------

_HEADER = "header_type h_t { fields { a : 8; } }\nheader h_t h;\nparser start { extract(h); return ingress; }\n"


@settings(max_examples=12, deadline=None)
@given(st.integers(18, 60), st.integers(2, 4))
def test_a_define_chain_that_multiplies_at_each_level_stops_with_its_use_located(levels, fan):
    """``#define A1 A0 A0`` ... grows as fan^levels; it is refused at the use, naming the definition,
    in time bounded by the limit rather than by the expansion."""
    import time

    from compiler.spec.p4_14_lex import MAX_MACRO_TOKENS
    defines = ["#define A0 x"] + [f"#define A{i} " + " ".join([f"A{i - 1}"] * fan) for i in range(1, levels + 1)]
    if fan ** levels <= MAX_MACRO_TOKENS:
        return
    started = time.monotonic()
    err = error_of("\n".join(defines) + "\n" + _HEADER + f"A{levels}\n", SpecError)
    assert time.monotonic() - started < 10
    assert err.location.line == levels + 6  # the use: after the mode line, the defines and the header
    assert f"macro A{levels} expands to more than" in str(err) and f"t.p4:{levels + 2}:1" in str(err)


def test_many_uses_of_a_large_macro_stop_at_the_total_bound():
    from compiler.spec.p4_14_lex import MAX_EXPANDED_TOKENS
    big = " ".join(["x"] * 50_000)
    err = error_of(f"#define B {big}\n" + "B\n" * (MAX_EXPANDED_TOKENS // 50_000 + 2), SpecError)
    assert "macros expand to more than" in str(err) and "the last was B" in str(err)


def test_a_deep_chain_of_one_token_defines_expands_without_recursion():
    """20,000 levels of ``#define A_i A_(i-1)`` are deep, not large: the value comes through."""
    defines = "\n".join(["#define A0 8"] + [f"#define A{i} A{i - 1}" for i in range(1, 20_001)])
    spec = p4_14(defines + "\nheader_type h_t { fields { a : A20000; } }\nheader h_t h;\n"
                 "parser start { extract(h); return ingress; }\n")
    assert spec.header_types["h_t"].width == 8


def test_self_and_mutually_referring_macros_expand_once_as_cpp_does():
    spec = p4_14("#define W W\n#define X Y\n#define Y X\n#define EIGHT 8\n"
                 "header_type h_t { fields { a : EIGHT; } }\nheader h_t h;\nparser start { extract(h); return ingress; }\n")
    assert spec.header_types["h_t"].width == 8
    assert "t.p4:3:1: P4_14: 'W' does not start a declaration" in str(error_of("#define W W\nW\n"))
