"""Specs as users have them: pragma-only specs, Camus's annotations, intrinsic metadata fields.

Every input here is written for these tests; they exercise the features Camus's public specs use
(pragma-only include-mode specs, ``query_default_action``, ``ig_intr_md.ingress_port``).
"""

from __future__ import annotations

import re

import pytest

from compiler.base.errors import ErrorList, P4subError, SpecError
from compiler.spec.reader import parse_spec


def error_of(text: str, kind: type[P4subError] = P4subError) -> P4subError:
    with pytest.raises((kind, ErrorList)) as info:
        parse_spec(text, "t.p4")
    return info.value


def messages(err: P4subError) -> list[str]:
    return [str(e) for e in err.errors] if isinstance(err, ErrorList) else [str(err)]


SMALL = """
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct headers { eth_t eth; }
struct metadata { bit<8> m; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
"""


# ---------------------------------------------------------------------------------------------
# pragma-only specs


PRAGMAS = """\
@pragma query_field_exact(tunnel.vni, 24)
@pragma query_field_lpm(inner.dst, 128)
@pragma query_field(tunnel.flags, 8)
  @pragma query_field_exact(ig_intr_md.ingress_port, 9)
@pragma query_default_action(no_match)
"""


def test_pragma_only_spec_synthesises_one_header_type_per_instance():
    spec = parse_spec(PRAGMAS, "t.p4")
    assert spec.pragma_only and not spec.parser_states and spec.parser_name == ""
    assert [(h.name, h.type_name, h.stack_size) for h in spec.headers] == [
        ("tunnel", "tunnel_t", None), ("inner", "inner_t", None)]
    assert [(f.name, f.width) for f in spec.header_types["tunnel_t"].fields] == [("vni", 24), ("flags", 8)]
    assert [(f.name, f.width) for f in spec.header_types["inner_t"].fields] == [("dst", 128)]
    assert list(spec.query_fields) == ["tunnel.vni", "inner.dst", "tunnel.flags", "ig_intr_md.ingress_port"]
    assert spec.query_fields["inner.dst"].match_kind == "lpm"
    assert spec.field_width("tunnel.flags") == 8
    port = spec.query_fields["ig_intr_md.ingress_port"]
    assert port.metadata and port.width == 9 and spec.header("ig_intr_md") is None
    assert spec.field_width("ig_intr_md.ingress_port") == 9
    assert spec.default_action == "no_match" and spec.default_action_location.line == 5


def test_pragma_only_spec_needs_widths():
    err = error_of("@pragma query_field(tunnel.vni)\n@pragma query_field(tunnel.flags, 8)\n", SpecError)
    assert messages(err) == ["t.p4:1:1: @pragma query_field(tunnel.vni) needs the field's width in a pragma-only "
                             "spec (there are no header declarations to take it from): "
                             "@pragma query_field(tunnel.vni, W)"]


def test_pragma_only_spec_metadata_width_must_agree_and_field_must_exist():
    err = error_of("@pragma query_field_exact(ig_intr_md.ingress_port, 16)\n"
                   "@pragma query_field(standard_metadata.egress_spec, 9)\n", SpecError)
    text = "\n".join(messages(err))
    assert "t.p4:1:1: @pragma query_field_exact(ig_intr_md.ingress_port, 16): width 16 does not match the " \
           "declared width of ig_intr_md.ingress_port (bit<9> in tna's ig_intr_md)" in text
    assert "t.p4:2:21: @pragma query_field(standard_metadata.egress_spec): v1model's standard_metadata " \
           "(standard_metadata_t) has no queryable field 'egress_spec'" in text


def test_pragma_only_spec_with_the_same_field_twice_is_an_error():
    err = error_of("@pragma query_field(t.a, 8)\n@pragma query_field_exact(t.a, 8)\n", SpecError)
    assert "t.p4:2:1: t.a is annotated twice (first at t.p4:1:1)" in messages(err)


def test_comments_and_directives_do_not_stop_a_spec_being_pragma_only():
    spec = parse_spec("// a Camus spec\n#include <core.p4>\n/* x */ @pragma query_field(car.speed, 16)\n", "t.p4")
    assert spec.pragma_only and spec.includes == ("<core.p4>",)


# ---------------------------------------------------------------------------------------------
# Camus annotations in ordinary specs


def test_default_action_counters_and_query_control_pragmas():
    spec = parse_spec(SMALL + "@pragma query_default_action(flood)\n@pragma query_field_counter(bursts, )\n"
                      "@query_field_counter(slow, 500)\n@pragma query_control\n", "t.p4")
    assert spec.default_action == "flood"
    assert (spec.counters["bursts"].window_us, spec.counters["bursts"].slots, spec.counters["bursts"].width) == \
        (10000, 1, 32)
    assert spec.counters["slow"].window_us == 500
    assert len(spec.notes) == 1 and re.match(r"t\.p4:\d+:1: note: ignored @pragma query_control", spec.notes[0])


@pytest.mark.parametrize("annotation, needle", [
    ("@pragma query_default_action()", "takes the name of the action to run when no rule matches"),
    ("@pragma query_default_action(a, b)", "takes the name of the action"),
    ("@pragma query_default_action(a)\n@query_default_action(b)", "is given twice (first 'a' at t.p4:"),
    ("@pragma query_field_counter(c, 1, 2)", "takes a counter name and optionally a window"),
    ("@pragma query_field_counter(7)", "the first argument is the counter's name"),
    ("@pragma query_field_counter(eth, 10)", "has the name of a header instance"),
    ("@pragma query_control(x)", "takes no arguments"),
    ("@pragma query_default(x)", "did you mean 'query_default_action'?"),
])
def test_camus_annotation_errors(annotation, needle):
    err = error_of(SMALL + annotation + "\n", SpecError)
    assert any(needle in m for m in messages(err)), messages(err)


def test_intrinsic_metadata_fields_in_a_full_spec():
    spec = parse_spec(SMALL + "@query_field(standard_metadata.ingress_port)\n@query_field_exact(eth.kind)\n", "t.p4")
    port = spec.query_fields["standard_metadata.ingress_port"]
    assert port.metadata and port.width == 9 and not spec.query_fields["eth.kind"].metadata


@pytest.mark.parametrize("annotation, needle", [
    ("@query_field(meta.m)", "meta is a parameter of the parser (metadata), not a header: user metadata fields "
                             "are not queryable yet"),
    ("@query_field(meta.a.b)", "nested struct fields are not queryable yet"),
    ("@query_field(hdr.eth.kind)", "name the header instance without the 'hdr.' prefix"),
    ("@pragma query_field(eth.kind, 32)", "width 32 does not match the declared width of eth.kind (bit<16> in "
                                          "eth_t)"),
])
def test_query_fields_that_are_not_header_fields_are_explained(annotation, needle):
    err = error_of(SMALL + annotation + "\n", SpecError)
    assert any(needle in m for m in messages(err)), messages(err)


# ---------------------------------------------------------------------------------------------
# whole P4_16 programs: what a spec does not need is skipped, with one note per kind

PROGRAM = """\
/* -*- P4_16 -*- */
#include <core.p4>
#include <v1model.p4>
const bit<16> TYPE_IP = 0x800;
typedef bit<9> port_t;
enum Verdict { PASS, FAIL }
error { BadLength }
match_kind { fuzzy }
extern Tally { Tally(bit<32> n); void bump(in bit<32> i); }
extern void note_it<T>(in T data);
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
header ip_t { bit<8> ttl; bit<8> proto; bit<32> dst; }
struct headers { eth_t eth; ip_t ip; }
struct metadata { bool seen; Verdict v; }
@pragma query_field_exact(ip.proto, 8)
parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.kind) { TYPE_IP: parse_ip; default: accept; }
    }
    state parse_ip { pkt.extract(hdr.ip); transition accept; }
}
bit<8> halve(in bit<8> x) { return x >> 1; }
@name("Check") control MyVerify(inout headers hdr, inout metadata meta) { apply { } }
@pragma query_field(ip.ttl)
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action fwd(port_t p) { sm.egress_spec = p; /* a } in a comment */ }
    action nop() { }
    table route {
        key = { hdr.ip.dst: lpm; }
        actions = { fwd; nop; }
        const entries = { 0x0a000000 &&& 0xff000000 : fwd(1); }
    }
    apply {
        if (hdr.ip.isValid() && hdr.ip.ttl > 1) { route.apply(); }
        note_it("{ not a brace }"); // nor } this
    }
}
control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
package Pkg(MyParser p);
V1Switch(MyParser(), MyVerify(), MyIngress(), MyIngress(), MyVerify(), MyDeparser()) main;
"""


def test_whole_program_reads_headers_parser_and_annotations_and_notes_the_rest():
    spec = parse_spec(PROGRAM, "prog.p4")
    assert [h.name for h in spec.headers] == ["eth", "ip"] and spec.parser_name == "MyParser"
    assert list(spec.parser_states) == ["start", "parse_ip"]
    assert list(spec.query_fields) == ["ip.proto", "ip.ttl"]  # a pragma before a skipped control still counts
    assert spec.constants == {"TYPE_IP": 0x800} and spec.typedefs == {"port_t": 9}
    assert "metadata" not in spec.header_types  # a bool member: not needed, skipped with a note
    why = "(a spec needs only headers, structs, consts, typedefs and the parser)"
    assert spec.notes == (
        f"prog.p4:6:1: note: skipped enum Verdict {why}",
        f"prog.p4:7:1: note: skipped error declaration {why}",
        f"prog.p4:8:1: note: skipped match_kind declaration {why}",
        f"prog.p4:9:1: note: skipped 2 extern declarations: Tally, note_it {why}",
        "prog.p4:14:1: note: skipped struct metadata: field metadata.seen: bool is not supported in a spec file "
        "(use bit<N>) (the headers struct does not use it)",
        f"prog.p4:23:1: note: skipped function halve {why}",
        f"prog.p4:24:16: note: skipped 3 controls: MyVerify, MyIngress, MyDeparser {why}",
        f"prog.p4:40:1: note: skipped package declaration Pkg {why}",
        f"prog.p4:41:1: note: skipped instantiation V1Switch(...) main {why}",
    )


def test_skipping_keeps_locations_of_later_errors():
    text = PROGRAM.replace("@name(\"Check\") ", "@name(\"Check\") @pragma query_field(ip.nope) ")
    err = error_of(text, SpecError)
    assert str(err).startswith("t.p4:24:36: @pragma query_field(ip.nope): header ip (ip_t) has no field 'nope'")


def test_a_skipped_body_may_be_unbalanced_only_inside_strings_and_comments():
    text = PROGRAM.replace("control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }",
                           "control MyDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); }")
    assert str(error_of(text)) == "t.p4:41:91: unclosed '{' (missing '}'): the '{' at line 39, column 52 is never closed"
    text = PROGRAM.replace("pkt.emit(hdr); }", "pkt.emit(hdr]; }")
    assert str(error_of(text)) == "t.p4:39:74: unbalanced ']' in the control declaration starting at line 39 (p4sub " \
                                  "skips it, but it must be well formed)"


def test_the_headers_struct_of_a_program_is_still_checked():
    text = PROGRAM.replace("struct headers { eth_t eth; ip_t ip; }", "struct headers { eth_t eth; ip_t ip; bool b; }")
    err = error_of(text, SpecError)
    assert any("t.p4:13:" in m and "bool is not supported" in m for m in messages(err)), messages(err)


def test_check_prints_the_notes_on_stderr(tmp_path, capsys):
    from p4sub import main

    (tmp_path / "prog.p4").write_text(PROGRAM)
    (tmp_path / "r.sub").write_text("ip.proto == 17: fwd(1);\n")
    assert main(["check", str(tmp_path / "prog.p4"), str(tmp_path / "r.sub")]) == 0
    captured = capsys.readouterr()
    assert "1 rules, OK" in captured.out
    assert f"{tmp_path / 'prog.p4'}:24:16: note: skipped 3 controls" in captured.err


TWO_PARSERS = """
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct ig_headers_t { eth_t eth; }
struct eg_headers_t { eth_t eth; }

struct ig_meta_t { bit<8> x; }
parser IgParser(packet_in pkt, out ig_headers_t hdr, out ig_meta_t meta, out ingress_intrinsic_metadata_t ig_md) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
parser EgParser(packet_in pkt, out {eg_type} hdr, out egress_intrinsic_metadata_t eg_md) {
    Checksum() csum;
    state start { pkt.extract(hdr.eth); csum.add(hdr.eth); transition accept; }
}
"""


def two_parsers(eg_type: str = "eg_headers_t", tna: bool = True) -> str:
    text = TWO_PARSERS.replace("{eg_type}", eg_type)
    return text if tna else text.replace("out ingress_intrinsic_metadata_t ig_md", "in bit<8> x")


def test_of_several_parsers_the_one_writing_the_headers_struct_is_read():
    spec = parse_spec(two_parsers(eg_type="ig_meta_t"), "t.p4")  # only IgParser writes a headers struct
    assert spec.parser_name == "IgParser" and spec.headers_struct == "ig_headers_t"
    assert "t.p4:10:1: note: skipped parser EgParser (p4sub reads one parser: IgParser, whose out parameter is the " \
           "headers struct)" in spec.notes


def test_a_headers_mark_or_tna_ingress_breaks_a_tie_between_parsers():
    marked = two_parsers(tna=False).replace("struct ig_headers_t", "@headers struct ig_headers_t")
    assert parse_spec(marked, "t.p4").parser_name == "IgParser"
    marked = marked.replace("state start { pkt.extract(hdr.eth); transition accept; }", "")  # IgParser now broken
    assert "parser IgParser has no 'start' state" in str(error_of(marked))
    assert parse_spec(two_parsers(), "t.p4").parser_name == "IgParser"  # the one with ingress intrinsic metadata


def test_parsers_that_tie_are_an_error_naming_them():
    err = error_of(two_parsers(eg_type="ig_headers_t", tna=False), SpecError)
    assert str(err).startswith("t.p4:10:1: 2 parsers write a headers struct: IgParser (out ig_headers_t, at t.p4:7:1), "
                               "EgParser (out ig_headers_t, at t.p4:10:1); p4sub reads one parser.")
