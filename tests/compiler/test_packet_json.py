"""One packet JSON reader for simulate, explain, netsim and compile --trace (compiler/packet_json.py),
with one encoding per field kind (docs/packets.md). Issue 19, "Silent misreadings"."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.packet_json import PacketField, fields_from_query, read_lines, read_packet
from compiler.spec.reader import parse_spec
from p4sub import main

REPO = Path(__file__).resolve().parents[2]
ITCH = REPO / "apps/itch/itch.p4"

PRICE = PacketField("add_order.price", 32, "decimal", 4)
SHARES = PacketField("add_order.shares", 32, "integer")
STOCK = PacketField("add_order.stock", 64, "string")
DST = PacketField("ipv4.dst_addr", 32, "integer")
V6 = PacketField("ipv6.dst", 128, "integer")
MAC = PacketField("eth.dst", 48, "integer")
LABEL = PacketField("dns.label", 32, "integer")
FLAGS = PacketField("tcp.flags", 12, "integer")
NAME4 = PacketField("h.name", 32, "string")


def value(field: PacketField, raw_json: str) -> int:
    return read_packet(f'{{"{field.name}": {raw_json}}}', {field.name: field}, "p")[field.name]


def refused(field: PacketField, raw_json: str, message: str) -> P4subError:
    with pytest.raises(P4subError, match=message) as info:
        value(field, raw_json)
    assert info.value.location is not None and info.value.location.file == "p"
    assert field.name in str(info.value) or "JSON" in str(info.value)
    return info.value


def test_a_scaled_field_reads_whole_units_as_the_rules_do():
    # `price > 12` in a rule means 12.0000: so do 12, 12.0, "12" and "12.00" in a packet
    assert {value(PRICE, v) for v in ("12", "12.0", '"12"', '"12.00"', "12.0000", "1.2e1")} == {120000}
    assert value(PRICE, "123.45") == value(PRICE, '"123.45"') == 1234500
    assert value(PRICE, '"123"') == 1230000  # not the ASCII bytes 0x313233..
    assert value(PRICE, "0.0001") == 1
    refused(PRICE, "12.00001", "more decimals than the field's 4")
    refused(PRICE, '"12.5.1"', r'expected a decimal number such as "123.45"')
    refused(PRICE, '"abc"', "expected a decimal number")
    refused(PRICE, '"1e3"', "expected a decimal number")  # strings hold plain decimals only
    refused(PRICE, "-1", "negative")
    refused(PRICE, "429496.7296", "does not fit in 32 bits")


def test_a_field_without_scale_takes_integers_addresses_of_its_width_and_ascii_as_the_rules_do():
    assert value(SHARES, "500") == 500
    # `shares == "abc"` is a rule Camus's users write: the ASCII bytes, space-padded; so is the packet's "abc"
    assert value(SHARES, '"abc"') == int.from_bytes(b"abc ", "big")
    assert value(SHARES, '"123"') == int.from_bytes(b"123 ", "big")  # the text, as `== "123"` in a rule
    refused(SHARES, '"abcde"', "has 5 bytes; the field holds 4")
    refused(FLAGS, '"a"', "a string needs a field of whole bytes; the field has 12 bits")
    refused(SHARES, "12.0", "12.0 is not a JSON integer .it has a fraction or an exponent. and the field has no decimal")
    refused(SHARES, "4294967296", "does not fit in 32 bits")
    assert value(DST, '"10.0.0.1"') == 0x0A000001
    refused(DST, '"::1"', "is an IPv6 address; a 32-bit field does not hold one")
    refused(DST, '"300.1.1.1"', "not an IPv4 address")
    refused(DST, '"aa:bb:cc:dd:ee:ff"', "is a MAC address; a 32-bit field")
    assert value(V6, '"::1"') == 1
    refused(V6, '"10.0.0.1"', "is an IPv4 address; a 128-bit field")
    assert value(MAC, '"aa:bb:cc:dd:ee:01"') == 0xAABBCCDDEE01


def test_a_string_field_takes_its_text_or_the_raw_integer():
    assert value(STOCK, '"GOOGL"') == int.from_bytes(b"GOOGL   ", "big")
    assert value(STOCK, '"1.2.3.4"') == int.from_bytes(b"1.2.3.4 ", "big")  # text first on a string field
    assert value(NAME4, '"1.2.3.4"') == 0x01020304  # too long for text: the address a rule could write
    assert value(STOCK, "5") == 5  # `stock == 5` is a rule too
    refused(STOCK, "5.5", "not a JSON integer")
    refused(STOCK, '"TOOLONGSYM"', "has 10 bytes; the field holds 8")
    refused(STOCK, '"\\u00e9"', "not ASCII")


def test_a_pragma_only_field_reads_as_any_other_field():
    assert value(LABEL, '"no97"') == int.from_bytes(b"no97", "big")
    assert value(LABEL, "6") == 6
    assert value(LABEL, '"10.0.0.97"') == 0x0A000061
    refused(LABEL, '"::1"', "is an IPv6 address; a 32-bit field")


@pytest.mark.parametrize("raw, message", [
    ("true", "got the boolean true"),
    ("false", "got the boolean false"),
    ("null", "got null"),
    ("NaN", "NaN is not a number a field can hold"),
    ("Infinity", "Infinity is not a number"),
    ("-Infinity", "-Infinity is not a number"),
    ("1e400", "does not fit in 32 bits|1E.400 is not a JSON integer"),
    ("1e-400", "more decimals|1E-400 is not a JSON integer"),
    ("9" * 5000, "a number of 5000 digits"),
    ("0." + "1" * 5000, "a number of 5002 characters"),
    ('{"a": 1}', "got an object"),
    ("[1]", "got an array"),
])
def test_values_that_are_no_field_value_are_refused_naming_the_field(raw, message):
    for field in (PRICE, SHARES):
        err = refused(field, raw, message)
        assert err.location.line == 1 and err.location.column == 2  # at the key


def test_the_packet_itself_must_be_one_flat_json_object():
    for text, message in [("null", "got null"), ("[]", "got an array"), ("5", "got int"), ("{", "not JSON"),
                          ('{"add_order.shares": 1, "add_order.shares": 2}', "given twice"),
                          ("[" * 100000 + "]" * 100000, "nested more than 32 levels")]:
        with pytest.raises(P4subError, match=message):
            read_packet(text, {SHARES.name: SHARES}, "--packet")


def test_json_lines_errors_name_file_line_and_column_and_validity_is_kept():
    text = ['{"add_order.shares": 1, "ipv4.dst_addr": "1.2.3.4"}\n', "\n", '{"ipv4.dst_addr": "1.2.3.4"}\n',
            '{"ipv4.$valid": 0, "add_order.shares": 7}\n', '{"add_order.shares": 1, "ipv4.dst_addr": "::1"}\n']
    rows = read_lines(text, "p.jsonl", {SHARES.name: SHARES, DST.name: DST}, headers=["add_order", "ipv4"])
    got = [next(rows)[2] for _ in range(3)]
    assert got[0] == {"add_order.$valid": 1, "ipv4.$valid": 1, "add_order.shares": 1, "ipv4.dst_addr": 0x01020304}
    assert got[1] == {"add_order.$valid": 0, "ipv4.$valid": 1, "add_order.shares": 0, "ipv4.dst_addr": 0x01020304}
    assert got[2] == {"add_order.$valid": 1, "ipv4.$valid": 0, "add_order.shares": 7, "ipv4.dst_addr": 0}
    with pytest.raises(P4subError) as info:
        next(rows)
    assert str(info.value) == "p.jsonl:5:25: ipv4.dst_addr: '::1' is an IPv6 address; a 32-bit field does not hold one"


def test_kinds_come_from_the_spec():
    spec = parse_spec(ITCH.read_text(), "itch.p4")
    kinds = {f.name: f.kind for f in fields_from_query(spec.query_fields).values()}
    assert kinds == {"add_order.stock": "string", "add_order.price": "decimal", "add_order.shares": "integer",
                     "add_order.buy_sell_indicator": "string", "ipv4.dst_addr": "integer"}
    camus = parse_spec("@pragma query_field_exact(dns.label, 32)\n", "dns.p4")
    assert {f.kind for f in fields_from_query(camus.query_fields).values()} == {"integer"}


@pytest.fixture(scope="module")
def itch_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pj") / "out"
    assert main(["compile", str(ITCH), str(REPO / "apps/itch/rules.sub"), "-o", str(out)]) == 0
    return out


def _packet(**overrides) -> dict:
    base = {"add_order.stock": "GOOGL", "add_order.price": 123.45, "add_order.shares": 100,
            "add_order.buy_sell_indicator": "B", "ipv4.dst_addr": "233.54.12.1"}
    return {**base, **overrides}


def test_simulate_and_explain_read_the_same_packet_the_same_way(itch_out, tmp_path, capsys):
    packets = [_packet(), _packet(**{"add_order.price": "123.45"}), _packet(**{"add_order.price": 12}),
               _packet(**{"add_order.price": 12.0})]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in packets))
    capsys.readouterr()
    assert main(["simulate", str(itch_out), "--packets", str(path)]) == 0
    simulated = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert simulated[0] == simulated[1] and simulated[2] == simulated[3]
    for p, s in zip(packets, simulated):
        assert main(["explain", str(itch_out), "--packet", json.dumps(p)]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1]) == s


@pytest.mark.parametrize("packet, message", [
    ("null", "--packet:1:1: expected a JSON object of field values, got null"),
    (json.dumps(_packet(**{"add_order.price": "123"}))[:-1] + ', "x": NaN}', None),
    (json.dumps(_packet(**{"add_order.shares": "abcde"})), "add_order.shares: string 'abcde' has 5 bytes"),
    (json.dumps(_packet(**{"add_order.price": "GOOGL"})), "add_order.price: expected a decimal number"),
    (json.dumps(_packet(**{"ipv4.dst_addr": "::1"})), "ipv4.dst_addr: '::1' is an IPv6 address"),
    (json.dumps(_packet()).replace("123.45", "NaN"), "add_order.price: NaN is not a number"),
    (json.dumps(_packet()).replace("123.45", "1e400"), "add_order.price: value 1E+400 does not fit"),
    (json.dumps(_packet()).replace("123.45", "9" * 5000), "add_order.price: a number of 5000 digits"),
    (json.dumps(_packet()).replace("123.45", "true"), "add_order.price: expected a decimal number"),
])
def test_explain_refuses_bad_packets_with_exit_2(itch_out, capsys, packet, message):
    code = main(["explain", str(itch_out), "--packet", packet])
    err = capsys.readouterr().err
    if message is None:  # a NaN under a key the pipeline does not read is not a value of any field
        assert code == 0, err
        return
    assert code == 2 and message in err and "Traceback" not in err


def test_simulate_names_the_line_of_a_bad_value(itch_out, tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(_packet()) + "\n" + json.dumps(_packet(**{"add_order.stock": 7.5})) + "\n")
    assert main(["simulate", str(itch_out), "--packets", str(path)]) == 2
    assert f"{path}:2:2: add_order.stock: 7.5 is not a JSON integer" in capsys.readouterr().err


def test_verify_prints_counterexamples_explain_reads_back(tmp_path, capsys):
    import dataclasses

    from compiler import ir

    rules = tmp_path / "r.sub"
    rules.write_text('add_order.stock == "GOOGL" and add_order.price > 50.25 : fwd(3);\n')
    out = tmp_path / "out"
    assert main(["compile", str(ITCH), str(rules), "-o", str(out)]) == 0
    pipeline = ir.load(out)
    entry = next(e for e in pipeline.entries if isinstance(e.matches[-1], ir.Range) and e.matches[-1].lo == 502501)
    wide = dataclasses.replace(entry, matches=(*entry.matches[:-1], ir.Range(502500, entry.matches[-1].hi)))
    ir.save(dataclasses.replace(pipeline, entries=tuple(wide if e == entry else e for e in pipeline.entries)),
            out / "pipeline.json")
    capsys.readouterr()
    assert main(["verify", str(out), "--json"]) == 1
    extra = json.loads(capsys.readouterr().out)["differences"][0]["extra"]
    assert extra["add_order.price"] == "50.25"
    assert main(["explain", str(out), "--packet", json.dumps(extra)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"ports": [3]}  # the widened entry's doing


# -- one rule for packets and rules (issue 27 item 3) ----------------------------------------------

CAMUS_FIELDS = {  # as Camus's ITCH specs declare them: widths and match kinds, no `string` marker
    "add_order.stock": (64, {"match_kind": "exact"}),
    "add_order.shares": (32, {"match_kind": "range"}),
    "ipv4.dstAddr": (32, {"match_kind": "lpm"}),
    "ipv6.dst": (128, {"match_kind": "exact"}),
    "add_order.side": (8, {"match_kind": "exact", "is_string": True}),
}


@st.composite
def constants(draw: st.DrawFn) -> tuple[str, str, object, int]:
    """(field, the constant as a rule writes it, the same value as JSON, the integer), the integer
    worked out here from the bytes (not by p4sub's encoders)."""
    field = draw(st.sampled_from(sorted(CAMUS_FIELDS)))
    width = CAMUS_FIELDS[field][0]
    text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"\\'),
                   min_size=1, max_size=width // 8)
    forms = ["text", "int"] + (["ipv4"] if width == 32 else []) + (["ipv6"] if width == 128 else [])
    form = draw(st.sampled_from(forms))
    if form == "text":
        s = draw(text.filter(lambda s: not _looks_like_address(s, field)))
        return field, f'"{s}"', s, int.from_bytes(s.encode().ljust(width // 8, b" "), "big")
    if form == "int":
        n = draw(st.integers(0, (1 << width) - 1))
        return field, str(n), n, n
    if form == "ipv4":
        a = ipaddress.IPv4Address(draw(st.integers(0, (1 << 32) - 1)))
        return field, str(a), str(a), int(a)
    a = ipaddress.IPv6Address(draw(st.integers(0, (1 << 128) - 1)))
    return field, str(a), str(a), int(a)


def _looks_like_address(s: str, field: str) -> bool:
    """Text a JSON string cannot tell from an address on a field without `string`: "1.2.3.4" on a
    32-bit field and "::1" on a 128-bit one are the addresses (a rule writes the text quoted)."""
    if CAMUS_FIELDS[field][1].get("is_string"):
        return False
    return bool(re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}|([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}", s)) or ":" in s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(constants(), min_size=1, max_size=6, unique_by=lambda c: (c[0], c[3])))
def test_a_packet_value_written_as_the_rules_constant_matches_that_rule(cases) -> None:
    """`f == C: fwd(i)` compiled; the packet that gives f as C is written in JSON and goes to port i."""
    from compiler.compile import CompileOptions, compile_rules
    from compiler.rules.parser import parse_rules
    from runtime.model import Model
    from tests.compiler.specs import make_spec

    spec = make_spec(CAMUS_FIELDS)
    rules = "".join(f"{field} == {rule}: fwd({i + 1});\n" for i, (field, rule, _, _) in enumerate(cases))
    model = Model(compile_rules(spec, parse_rules(rules, "r.sub"), CompileOptions()).pipeline)
    fields = fields_from_query(spec.query_fields)
    for i, (field, _, raw, expected) in enumerate(cases):
        row = read_packet(json.dumps({field: raw}), {field: fields[field]}, "--packet")
        assert row[field] == expected
        packet = {f: 0 for f in model.inputs} | {field: expected}
        assert i + 1 in model.run_one(packet)[0]
