"""compiler.spec.reader: the P4 subset, the shipped specs' contract, annotations, and every error path."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import ErrorList, P4subError, ParseError, SpecError
from compiler.spec import expr as ex
from compiler.spec.model import Advance, Extract, SelectCase
from compiler.spec.reader import parse_expression, parse_spec, read_spec

ROOT = Path(__file__).resolve().parents[3]
ITCH = ROOT / "apps" / "itch" / "itch.p4"
INT = ROOT / "apps" / "int" / "int.p4"

BASE = """
#include <core.p4>
const bit<16> TYPE_A = 16w0x800;
const bit<32> N = 4;
typedef bit<8> byte_t;
typedef byte_t octet_t;
header a_t { bit<16> kind; octet_t len; bit<8> tag; }
header b_t { bit<4> x; bit<4> y; bit<32> v; }
struct headers { a_t a; b_t[N] b; }
struct metadata { bit<8> m; }
"""

PARSER = """
parser P(packet_in pkt, out headers hdr, inout metadata meta) {
    state start {
        pkt.extract(hdr.a);
        transition select(hdr.a.kind) { TYPE_A: more; default: accept; }
    }
    state more {
        pkt.extract(hdr.b.next);
        transition select(hdr.b.last.x) { 1: more; default: accept; }
    }
}
"""


def spec_of(body: str = "", parser: str = PARSER, base: str = BASE):
    return parse_spec(base + body + parser, "t.p4")


def error_of(text: str, kind: type[P4subError] = P4subError) -> P4subError:
    """The error reading ``text`` raises; several errors of ``kind`` may come as an ErrorList."""
    with pytest.raises((kind, ErrorList)) as info:
        parse_spec(text, "t.p4")
    err = info.value
    assert all(isinstance(e, kind) for e in (err.errors if isinstance(err, ErrorList) else [err]))
    return err


def messages(err: P4subError) -> list[str]:
    return [str(e) for e in err.errors] if isinstance(err, ErrorList) else [str(err)]


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# ---------------------------------------------------------------------------------------------
# the shipped specs: names and widths other modules code against


def test_itch_spec_instances_and_widths_are_the_contract():
    spec = read_spec(ITCH)
    assert [(h.name, h.stack_size) for h in spec.headers] == [
        ("ethernet", None), ("ipv4", None), ("udp", None), ("moldudp", None), ("mold_msg", 12), ("add_order", 12)]
    assert spec.constants["MAX_MSGS"] == 12
    widths = {ref: spec.field_width(ref) for ref in spec.all_fields()}
    expected = {
        "ethernet.dst_addr": 48, "ethernet.src_addr": 48, "ethernet.ether_type": 16,
        "ipv4.version": 4, "ipv4.ihl": 4, "ipv4.diffserv": 8, "ipv4.total_len": 16, "ipv4.identification": 16,
        "ipv4.flags": 3, "ipv4.frag_offset": 13, "ipv4.ttl": 8, "ipv4.protocol": 8, "ipv4.hdr_checksum": 16,
        "ipv4.src_addr": 32, "ipv4.dst_addr": 32,
        "udp.src_port": 16, "udp.dst_port": 16, "udp.length": 16, "udp.checksum": 16,
        "moldudp.session": 80, "moldudp.seq": 64, "moldudp.msg_cnt": 16,
        "mold_msg.msg_len": 16, "mold_msg.msg_type": 8,
        "add_order.stock_locate": 16, "add_order.tracking_number": 16, "add_order.timestamp": 48,
        "add_order.order_ref_number": 64, "add_order.buy_sell_indicator": 8, "add_order.shares": 32,
        "add_order.stock": 64, "add_order.price": 32,
    }
    assert widths == expected
    assert spec.header_types["add_order_t"].width == 35 * 8
    assert spec.header_types["moldudp_t"].width == 20 * 8


def test_itch_spec_annotations_are_the_contract():
    spec = read_spec(ITCH)
    got = {name: (q.width, q.match_kind, q.scale, q.is_string) for name, q in spec.query_fields.items()}
    assert got == {
        "add_order.stock": (64, None, 0, True),  # no match kind: the compiler picks exact or prefix
        "add_order.price": (32, "range", 4, False),
        "add_order.shares": (32, "range", 0, False),
        "add_order.buy_sell_indicator": (8, "exact", 0, True),
        "ipv4.dst_addr": (32, "lpm", 0, False),
    }
    assert list(spec.query_fields) == ["add_order.stock", "add_order.price", "add_order.shares",
                                       "add_order.buy_sell_indicator", "ipv4.dst_addr"]
    counter = spec.counters["msg_rate"]
    assert (counter.window_us, counter.slots) == (100_000, 4)
    assert spec.includes == ("<core.p4>", "<v1model.p4>")
    assert spec.headers_struct == "headers" and spec.parser_name == "ItchParser"


def test_itch_parser_covers_every_message_count_up_to_the_stack_size():
    spec = read_spec(ITCH)
    states = spec.parser_states
    moldudp = states["parse_moldudp"]
    assert moldudp.select_keys == ("moldudp.msg_cnt",)
    targets = {case.values[0][0]: case.next_state for case in moldudp.cases if not case.is_default}
    assert targets[0] == "accept" and targets[0xFFFF] == "accept"
    assert all(targets[k] == f"msgs_{k}" for k in range(1, 13))
    assert moldudp.cases[-1] == SelectCase((None,), "msgs_12", True)
    for k in range(1, 13):
        after = f"msgs_{k - 1}" if k > 1 else "accept"
        assert states[f"msgs_{k}"].statements == (Extract("mold_msg", True),)
        assert states[f"msgs_{k}"].select_keys == ("mold_msg.last.msg_type",)
        assert states[f"msgs_{k}"].cases[0] == SelectCase(((0x41, 0xFF),), f"add_order_{k}", False)
        assert states[f"add_order_{k}"].statements == (Extract("add_order", True),)
        assert states[f"add_order_{k}"].cases == (SelectCase((), after, True),)
        (skip,) = states[f"skip_{k}"].statements
        assert skip.bits is None
        assert parse_expression(skip.expression) == ex.Binary(
            "*", ex.Cast(32, ex.Binary("-", ex.Ref("mold_msg.last.msg_len"), ex.Num(1))), ex.Num(8))


def test_int_spec_is_the_contract():
    spec = read_spec(INT)
    assert [(h.name, h.stack_size) for h in spec.headers] == [
        ("ethernet", None), ("ipv4", None), ("udp", None), ("int_shim", None), ("int_md", None), ("int_hop", 8)]
    fields = lambda t: [(f.name, f.width) for f in spec.header_types[t].fields]  # noqa: E731
    assert fields("int_shim_t") == [("int_type", 4), ("npt", 2), ("res", 2), ("len", 8), ("udp_ip_dscp", 16)]
    assert fields("int_md_t") == [("ver", 4), ("d", 1), ("e", 1), ("m", 1), ("reserved", 12), ("hop_ml", 5),
                                  ("remaining_hop_cnt", 8), ("instruction_bitmap", 16), ("domain_id", 16),
                                  ("ds_instruction", 16), ("ds_flags", 16)]
    assert fields("int_hop_t") == [("switch_id", 32), ("ingress_port_id", 16), ("egress_port_id", 16),
                                   ("hop_latency", 32), ("queue_id", 8), ("queue_occupancy", 24)]
    assert {n: q.match_kind for n, q in spec.query_fields.items()} == {
        "int_hop.switch_id": "exact", "int_hop.hop_latency": "range", "int_hop.queue_occupancy": "range"}
    assert spec.constants["INT_UDP_PORT"] == 0x1234 and spec.constants["MAX_HOPS"] == 8
    md = spec.parser_states["parse_int_md"]
    assert md.select_keys == ("int_md.instruction_bitmap", "int_md.hop_ml", "int_shim.len")
    hops = {case.values[2][0]: case.next_state for case in md.cases if not case.is_default}
    assert hops == {3: "accept", **{3 + 4 * k: f"hops_{k}" for k in range(1, 9)}}


@pytest.mark.parametrize("app, count", [("itch", 15), ("int", 10)])
def test_shipped_rule_files_type_check_against_their_specs(app, count):
    from compiler.rules.parser import read_rules
    from compiler.rules.typecheck import check_rules

    spec = read_spec(ROOT / "apps" / app / f"{app}.p4")
    rules = read_rules(ROOT / "apps" / app / "rules.sub")
    typed = check_rules(rules, spec)
    assert len(rules.rules) == count
    assert set(typed.fields) == set(spec.query_fields)


# ---------------------------------------------------------------------------------------------
# the subset


def test_literals_typedef_chains_and_stack_sizes_resolve():
    spec = spec_of("const bit<8> H = 0xF_f; const bit<8> B = 0b1010; const bit<4> W = 4w9; const int I = 1 << 40;")
    assert spec.constants == {"TYPE_A": 0x800, "N": 4, "H": 255, "B": 10, "W": 9, "I": 1 << 40}
    assert spec.typedefs == {"byte_t": 8, "octet_t": 8}
    a_t = spec.header_types["a_t"]
    assert [(f.name, f.width, f.type_name) for f in a_t.fields] == [
        ("kind", 16, "bit<16>"), ("len", 8, "octet_t"), ("tag", 8, "bit<8>")]
    assert spec.header("b").stack_size == 4
    assert spec.header_types["metadata"].is_struct
    assert spec.field_width("b.v") == 32


def test_parser_states_keep_extracts_selects_and_masks():
    parser = """
    parser P(packet_in pkt, out headers hdr) {
        state start {
            pkt.extract(hdr.a);
            pkt.advance(16);
            pkt.advance((bit<32>)hdr.a.len << 3);
            transition select(hdr.a.kind, pkt.lookahead<bit<8>>()) {
                (TYPE_A, 0x10 &&& 0xF0): s2;
                (16w0x86dd, _): reject;
                (_, 7): accept;
                default: accept;
            }
        }
        state s2 { pkt.extract(hdr.b.next); pkt.extract(hdr.b.next); transition accept; }
        state s3 { pkt.extract(hdr.b.next); }
    }"""
    spec = spec_of(parser=parser)
    start = spec.parser_states["start"]
    assert start.statements == (Extract("a"), Advance(16), Advance(None, "(bit<32>)a.len << 3"))
    assert start.select_keys == ("a.kind", "lookahead:8")
    assert start.cases == (
        SelectCase(((0x800, 0xFFFF), (0x10, 0xF0)), "s2"),
        SelectCase(((0x86DD, 0xFFFF), None), "reject"),
        SelectCase((None, (7, 0xFF)), "accept"),
        SelectCase((None, None), "accept", True),
    )
    assert spec.parser_states["s2"].statements == (Extract("b", True), Extract("b", True))
    # P4_16: a state without a transition statement goes to reject
    assert spec.parser_states["s3"].cases == (SelectCase((), "reject", True),)
    assert spec.parser_states["start"].location.line == line_of(BASE + parser, "state start")


def test_masked_values_are_stored_masked():
    parser = "parser P(packet_in p, out headers hdr) { state start { p.extract(hdr.a); " \
             "transition select(hdr.a.kind) { 0x1234 &&& 0xFF00: accept; } } }"
    spec = spec_of(parser=parser)
    assert spec.parser_states["start"].cases == (SelectCase(((0x1200, 0xFF00),), "accept"),)


def test_v1model_parameters_and_out_param_picks_the_headers_struct():
    text = BASE.replace("struct headers", "struct my_headers_t") + """
    parser MyParser(packet_in packet, out my_headers_t h, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
        state start { packet.extract(h.a); transition accept; }
    }"""
    spec = parse_spec(text, "t.p4")
    assert spec.headers_struct == "my_headers_t" and spec.parser_name == "MyParser"
    assert [h.name for h in spec.headers] == ["a", "b"]


@pytest.mark.parametrize("mark", ["@headers\n", ""])
def test_without_a_parser_the_headers_struct_is_marked_named_or_the_only_one(mark):
    text = BASE.replace("struct headers", f"{mark}struct hs") if mark else BASE
    spec = parse_spec(text + "@query_field(a.tag)", "t.p4")
    assert [h.name for h in spec.headers] == ["a", "b"]
    assert spec.parser_states == {} and spec.parser_name == ""
    assert list(spec.query_fields) == ["a.tag"]


def test_include_guards_and_comments_are_accepted():
    text = "#ifndef X_P4\n#define X_P4\n/* block\n comment */ // line\n" + BASE + PARSER + "#endif\n"
    spec = parse_spec(text, "t.p4")
    assert spec.includes == ("<core.p4>",)


def test_include_keeps_its_delimiters():
    spec = parse_spec('#include "mine.p4"\n#include <core.p4>\n' + BASE + PARSER, "t.p4")
    assert spec.includes == ('"mine.p4"', "<core.p4>", "<core.p4>")


# ---------------------------------------------------------------------------------------------
# annotations


def test_every_annotation_form_is_read():
    body = """
    @query_field(a.tag)
    @query_field_exact(a.len, string)
    @query_field_range(b.v, scale=2)
    @query_field_lpm(a.kind, 16)
        @pragma query_field_ternary(b.x, 4)
    @query_counter(rate, 1000, 8)
    @query_counter(wide, 5, 1, width=64)
    @query_action(set_mark, 8, 16)
    @query_action(mark)
    @name("ignored") @hidden
    """
    spec = spec_of(body)
    got = {n: (q.width, q.match_kind, q.scale, q.is_string) for n, q in spec.query_fields.items()}
    assert got == {"a.tag": (8, None, 0, False), "a.len": (8, "exact", 0, True), "b.v": (32, "range", 2, False),
                   "a.kind": (16, "lpm", 0, False), "b.x": (4, "ternary", 0, False)}
    assert [(c.name, c.window_us, c.slots, c.width) for c in spec.counters.values()] == [
        ("rate", 1000, 8, 32), ("wide", 5, 1, 64)]
    assert [(a.name, a.arg_widths) for a in spec.actions.values()] == [("set_mark", (8, 16)), ("mark", ())]


def test_camus_pragmas_at_any_indentation_inside_and_between_declarations():
    text = """
    header a_t {
        bit<16> kind;
            @pragma query_field(a.kind, 16)
        bit<8> len;
    }
    @pragma query_field_exact(a.len, 8)
    header b_t { bit<8> x; }
  @pragma query_counter(my_counter, 100, 1000)
    struct headers { a_t a; b_t b; }
    parser P(packet_in p, out headers hdr) { state start { p.extract(hdr.a); transition accept; } }
    """
    spec = parse_spec(text, "t.p4")
    assert {n: q.match_kind for n, q in spec.query_fields.items()} == {"a.kind": None, "a.len": "exact"}
    assert spec.counters["my_counter"].slots == 1000
    assert spec.query_fields["a.kind"].location.line == 4


def test_old_style_width_must_equal_the_declared_width():
    err = error_of(BASE + "@query_field(b.v, 16)\n" + PARSER, SpecError)
    assert "width 16" in str(err) and "bit<32>" in str(err) and str(err).startswith("t.p4:")


def test_unknown_header_instance_names_location_and_suggestion():
    text = BASE + "\n@query_field_exact(aa.tag)\n" + PARSER
    err = error_of(text, SpecError)
    assert str(err).startswith(f"t.p4:{line_of(text, '@query_field_exact')}:20:")
    assert "unknown header instance 'aa'" in str(err) and "did you mean 'a'?" in str(err)


def test_unknown_field_suggests_the_close_one():
    err = error_of(BASE + "@query_field(a.tga)\n" + PARSER, SpecError)
    assert "no field 'tga'" in str(err) and "did you mean 'tag'?" in str(err)


def test_type_name_or_hdr_prefix_in_a_query_field_is_explained():
    assert "name the instance: a.tag" in str(error_of(BASE + "@query_field(a_t.tag)" + PARSER))
    assert "without the 'hdr.' prefix" in str(error_of(BASE + "@query_field(hdr.a.tag)" + PARSER))


@pytest.mark.parametrize("annotation, needle", [
    ("@query_feild(a.tag)", "did you mean 'query_field'?"),
    ("@pragma header_ordering(a)", "@pragma header_ordering is not supported"),
    ("@query_field()", "needs the field"),
    ("@query_field(a.tag, bogus)", "unknown argument"),
    ("@query_field(a.tag, scale=99)", "scale is a number of decimal digits"),
    ("@query_field(a.tag, string, scale=2)", "both a string and scaled"),
    ("@query_field(b.x, string)", "whole number of bytes"),
    ("@query_field(a.tag) @query_field_exact(a.tag)", "annotated twice"),
    ("@query_counter(c, 0, 4)", "window_us must be a positive integer"),
    ("@query_counter(c, 10)", "takes a name"),
    ("@query_counter(c, 1, 1) @query_counter(c, 2, 2)", "duplicate counter"),
    ("@query_action(fwd, 9)", "'fwd' is built in"),
    ("@query_action(f, x)", "argument widths"),
    ("@headers(1)", "takes no arguments"),
])
def test_bad_annotations_are_errors(annotation, needle):
    err = error_of(BASE + annotation + "\n" + PARSER, SpecError)
    assert needle in str(err)
    assert re.match(r"t\.p4:\d+:\d+: ", str(err))


def test_several_errors_are_reported_together():
    err = error_of(BASE + "@query_field(x.y)\n@query_field(a.nope)\n" + PARSER, SpecError)
    assert isinstance(err, ErrorList) and len(err.errors) == 2 and all(re.match(r"t\.p4:\d+:\d+: ", m) for m in messages(err))


# ---------------------------------------------------------------------------------------------
# semantic checks


def _state(body: str) -> str:
    return BASE + "parser P(packet_in pkt, out headers hdr, inout metadata meta) {" + body + "}"


@pytest.mark.parametrize("text, needle", [
    (_state("state start { transition parse_b; } state parse_a { transition accept; }"),
     "undefined state 'parse_b'; did you mean 'parse_a'?"),
    (_state("state start { pkt.extract(hdr.a.kind); transition accept; }"), "extract of a non-header"),
    (_state("state start { pkt.extract(meta); transition accept; }"), "extract of a non-header"),
    (_state("state start { pkt.extract(hdr.c); transition accept; }"), "unknown header instance 'c'"),
    (_state("state start { pkt.extract(hdr.b); transition accept; }"), "extract into hdr.b.next"),
    (_state("state start { pkt.extract(hdr.a.next); transition accept; }"), "not a stack"),
    (_state("state start { pkt.extract(hdr.a, 8); transition accept; }"), "varbit"),
    (_state("state start { pkt.emit(hdr.a); transition accept; }"), "unknown packet method 'emit'"),
    (_state("state start { meta.m = 1; transition accept; }"), "assignments in parser states are not supported"),
    (_state("state start { verify(hdr.a.tag == 1, error.NoMatch); transition accept; }"),
     "verify(...) is not supported"),
    (_state("state start { pkt.extract(hdr.a); transition select(meta.m) { default: accept; } }"),
     "parser metadata is not supported"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.a.tag + 1) { default: accept; } }"),
     "expressions are not supported"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.b.x) { default: accept; } }"),
     "name an element: b.last or b[i]"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.b[9].x) { default: accept; } }"),
     "index 9 is out of range"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.a.tag) { 1..3: accept; } }"),
     "range keysets"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.a.tag) { 256: accept; } }"),
     "does not fit the 8-bit key a.tag"),
    (_state("state start { pkt.extract(hdr.a); transition select(hdr.a.tag) { (1, 2): accept; } }"),
     "2 value(s) for 1 key(s)"),
    (_state("state start { pkt.advance(hdr.a.len); transition accept; }"), "packet.advance takes bit<32>"),
    (_state("state start { pkt.advance((bit<32>)hdr.a.len + hdr.a.kind); transition accept; }"),
     "different widths (bit<32> and bit<16>)"),
    (_state("state start { pkt.advance(UNKNOWN); transition accept; }"), "unknown constant 'UNKNOWN'"),
    (_state("state start { transition accept; } state start { transition accept; }"), "duplicate state 'start'"),
    (_state("state begin { transition accept; }"), "no 'start' state"),
    (_state("state start { transition accept; } state accept { transition reject; }"), "is built in"),
    (BASE + "const bit<8> TYPE_A = 1;" + PARSER, "duplicate declaration of 'TYPE_A'"),
    (BASE + "header a_t { bit<8> z; }" + PARSER, "duplicate declaration of 'a_t'"),
    (BASE + "header c_t { bit<8> z; bit<8> z; }" + PARSER, "duplicate field 'z'"),
    (BASE + "header c_t { bit<7> z; }" + PARSER, "whole number of bytes"),
    (BASE + "header c_t { a_t inner; }" + PARSER, "headers hold only bit fields"),
    (BASE + "header c_t { nope_t z; }" + PARSER, "unknown type 'nope_t'"),
    (BASE + "header c_t { bit<8> z; varbit<64> w; }" + PARSER, "varbit<64> is not supported"),
    (BASE + "const bit<4> BIG = 16;" + PARSER, "does not fit in bit<4>"),
    (BASE + "const bit<8> X = 8w1 + 16w1;" + PARSER, "different widths"),
    (BASE + "const bit<8> X = 4w17;" + PARSER, "does not fit in 4 bits"),
    (BASE + "const bit<8> X = 8s1;" + PARSER, "signed"),
    (BASE + "const bit<8> X = 1 / 0;" + PARSER, "division by zero"),
    (BASE + "typedef a_t t_t;" + PARSER, "is a header or struct type"),
    (BASE.replace("struct headers { a_t a; b_t[N] b; }", "struct headers { a_t a; bit<8> x; }") + PARSER,
     "is a bit field"),
    (BASE + PARSER + PARSER.replace("parser P", "parser Q"), "2 parsers write a headers struct: P (out headers, at "
                                                            "t.p4:12:1), Q (out headers, at t.p4:23:1)"),
    (BASE + "parser P(packet_in p, inout headers hdr) { state start { transition accept; } }",
     "no 'out' parameter"),
    (BASE + "parser P(out headers hdr) { state start { transition accept; } }", "no packet_in parameter"),
    ("header a_t { bit<8> x; } struct s1 { a_t a; } struct s2 { a_t b; }", "cannot tell which struct"),
    (BASE + "#define X 5\n" + PARSER, "#define with a value is not supported"),
    (BASE + "#ifdef X\n#endif\n" + PARSER, "#ifdef is not supported"),
    (BASE + "#ifndef X\n" + PARSER, "#ifndef without a matching #endif"),
    (BASE + "#include core.p4\n" + PARSER, "malformed #include"),
    (BASE + "@query_field(a.tag)\n@headers struct other { a_t a; }" + PARSER, "@headers marks struct other"),
])
def test_semantic_errors_name_the_problem_and_the_place(text, needle):
    err = error_of(text, SpecError)
    assert any(needle in m for m in messages(err)), messages(err)
    assert all(re.match(r"t\.p4:\d+:\d+: ", m) for m in messages(err))


def test_undefined_state_error_points_at_the_target():
    text = _state("state start {\n  transition nowhere;\n}")
    err = error_of(text, SpecError)
    assert str(err).startswith(f"t.p4:{line_of(text, 'transition nowhere')}:14:")


# ---------------------------------------------------------------------------------------------
# constructs outside the subset


@pytest.mark.parametrize("text, what", [
    (BASE + "header_union u_t { a_t a; b_t b; }", "header unions"),
    (BASE + "enum bit<8> E { A = 1, B = 2 }", "enums"),
    (BASE + "type bit<8> t8;", "type declarations"),
    (BASE + "bit<8> x;", "does not start a declaration"),
    (BASE + "@name(\"x\") header_union u_t { a_t a; }", "header unions"),
    (_state("state start { if (hdr.a.isValid()) { transition accept; } }"), "if statements"),
    (_state("value_set<bit<16>>(4) pvs; state start { transition accept; }"), "parser value sets"),
    (_state("bit<8> tmp; state start { transition accept; }"), "only states may appear in a parser"),
    (_state("state start { #define X\n transition accept; }"), "directives may only stand between"),
])
def test_unsupported_constructs_are_named(text, what):
    err = error_of(text, SpecError)
    assert what in str(err) and re.match(r"t\.p4:\d+:\d+: ", str(err))
    if "does not start" not in what and "only states" not in what and "directives" not in what:
        assert "not supported in a spec file (p4sub reads headers, structs, consts, typedefs and one parser)" in str(err)


def test_unsupported_construct_points_at_its_keyword():
    text = BASE + "\n   header_union u_t { a_t a; b_t b; }"
    err = error_of(text, SpecError)
    assert str(err).startswith(f"t.p4:{line_of(text, 'header_union')}:4:")


# ---------------------------------------------------------------------------------------------
# syntax errors


@pytest.mark.parametrize("text, label", [
    ("header h_t { bit<8> a bit<8> b; }", "missing ';'"),
    ("const bit<8> X = 1\nconst bit<8> Y = 2;", "missing ';'"),
    (_state("state start { pkt.extract(hdr.a) transition accept; }"), "missing ';'"),
    ("header h_t { bit<8> a;\n", "unclosed '{'"),
    (_state("state start { transition accept; }").rstrip("}"), "unclosed '{'"),
    ("struct s { a_t a;\n header b_t { bit<8> b; }", "unclosed '{'"),
    (_state("state start { pkt.extract(hdr.a; transition accept; }"), "unclosed '('"),
    ("header h_t { ttl; }", "a field needs a type and a name"),
    ("header h_t { bit<8 a; }", "a width is written bit<N>"),
    (_state("state start { transition select(hdr.a.tag) { 1 accept; } }"), "a select case is"),
    ("const X = 1;", "a constant needs a type"),
    ("header h_t { bit<8> a; } }", "extra '}'"),
])
def test_syntax_errors_get_a_label_and_a_location(text, label):
    err = error_of(text, ParseError)
    assert label in str(err), str(err)
    assert re.match(r"t\.p4:\d+:\d+: ", str(err))


def test_syntax_error_location_is_the_offending_token():
    text = "header h_t {\n    bit<8> a\n    bit<8> b;\n}"
    err = error_of(text, ParseError)
    assert err.location.line == 3 and err.location.column == 5
    assert "unexpected 'bit'" in str(err)


def test_unterminated_comment_and_stray_characters():
    assert "unterminated /* comment" in str(error_of(BASE + "/* never closed", ParseError))
    assert "unexpected character '$'" in str(error_of(BASE + "$", ParseError))
    assert "NUL byte" in str(error_of(BASE + "\x00", ParseError))


def test_read_spec_reports_missing_and_binary_files(tmp_path):
    with pytest.raises(P4subError, match="no such spec file"):
        read_spec(tmp_path / "missing.p4")
    bad = tmp_path / "bad.p4"
    bad.write_bytes(b"\xff\xfe\x00header")
    with pytest.raises(SpecError, match="not UTF-8"):
        read_spec(bad)


# ---------------------------------------------------------------------------------------------
# robustness: whatever the input, only P4subError comes out

_VOCABULARY = ["header", "struct", "const", "typedef", "parser", "state", "transition", "select", "default",
               "bit", "<", ">", "8", "16w0x800", "{", "}", "(", ")", "[", "]", ";", ":", ",", ".", "=", "&&&",
               "..", "_", "@query_field", "@pragma", "query_field", "hdr", "a", "a_t", "packet", "extract",
               "advance", "lookahead", "next", "last", "accept", "reject", "out", "packet_in", "#include <x>",
               "\n", "control", "+", "-", "*", "<<", ">>", "(bit<32>)", "0x", "//", "/*", "*/", '"s"']


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_VOCABULARY), max_size=60))
def test_token_soup_only_raises_p4sub_errors(tokens):
    try:
        parse_spec(" ".join(tokens), "soup.p4")
    except P4subError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.printable + "λ€\x00", max_size=300))
def test_random_text_only_raises_p4sub_errors(text):
    try:
        parse_spec(text, "rand.p4")
    except P4subError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_in_a_file_only_raise_p4sub_errors(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("bytes") / "rand.p4"
    path.write_bytes(data)
    try:
        read_spec(path)
    except P4subError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_itch_spec_reads_or_raises_p4sub_errors(data):
    text = ITCH.read_text()
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        span = data.draw(st.integers(0, 12))
        insert = data.draw(st.sampled_from(["", ";", "}", "{", "(", "x", "<", "@query_field(", "hdr.", "0"]))
        text = text[:pos] + insert + text[pos + span:]
    try:
        parse_spec(text, "itch.p4")
    except P4subError as exc:
        assert exc.location is not None or isinstance(exc, ErrorList)


def test_redundant_parentheses_are_fine_and_deep_nesting_is_an_error_not_a_crash():
    spec = parse_spec(BASE + "const bit<8> X = " + "(" * 3000 + "1" + ")" * 3000 + ";" + PARSER, "t.p4")
    assert spec.constants["X"] == 1
    with pytest.raises(SpecError, match="nested too deeply"):
        parse_spec(BASE + "const bit<8> X = " + "1 + (" * 3000 + "1" + ")" * 3000 + ";" + PARSER, "t.p4")
