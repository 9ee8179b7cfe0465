"""Specs as users have them: pragma-only specs, Camus's annotations, intrinsic metadata fields.

Every input here is written for these tests; they exercise the features Camus's public specs use
(pragma-only include-mode specs, ``query_default_action``, ``ig_intr_md.ingress_port``).
"""

from __future__ import annotations

import re

import pytest

from compiler.errors import ErrorList, P4subError, SpecError
from compiler.spec_reader import parse_spec


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
