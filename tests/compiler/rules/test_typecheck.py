"""Type errors: each names FILE:LINE:COL and what was expected; all errors of a file are reported."""

from __future__ import annotations

import pytest

from compiler.base.errors import ErrorList, TypeCheckError
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from tests.compiler.specs import ITCH_LIKE, make_spec


def errors_of(text: str) -> list[TypeCheckError]:
    try:
        check_rules(parse_rules(text, "r.sub"), ITCH_LIKE)
    except ErrorList as exc:
        return exc.errors
    except TypeCheckError as exc:
        return [exc]
    return []


CASES = [
    ("add_order.prise > 5: fwd(1);", 1, 1, "unknown field 'add_order.prise'; did you mean 'add_order.price'?"),
    ("add_order.shares == 4294967296: fwd(1);", 1, 1, "does not fit in 32-bit field 'add_order.shares'"),
    ('add_order.stock == "ALPHABETS": fwd(1);', 1, 1, "has 9 bytes; the field holds 8"),
    ('add_order.price == "AB": fwd(1);', 1, 1, "holds fixed-point numbers (scale=4)"),
    ('add_order.stock == "GOOGLÉ": fwd(1);', 1, 1, "is not ASCII"),
    ("add_order.shares prefix 12: fwd(1);", 1, 1, "'prefix' takes a string"),
    ("udp.dst_port == 10.0.0.0/8: fwd(1);", 1, 1, "needs a 32-bit field; 'udp.dst_port' has 16 bits"),
    ("udp.dst_port == 2001:db8::/32: fwd(1);", 1, 1, "needs a 128-bit field"),
    ("udp.dst_port == 00:11:22:33:44:55: fwd(1);", 1, 1, "a MAC address needs a 48-bit field"),
    ("udp.dst_port == 1: explode(1);", 1, 20, "unknown action 'explode'"),
    ("udp.dst_port == 1: fwd(512);", 1, 20, "port 512 is out of range: ports are 9-bit (0..511)"),
    ("add_order.shares > 2.5: fwd(1);", 1, 1, "has no decimal scale"),
    ("add_order.price > 2.12345: fwd(1);", 1, 1, "more decimals than the field's 4"),
    ("add_order.stock > 5: fwd(1);", 1, 1, "declared @query_field_exact: '>' needs a range"),
    ('add_order.stock < "B": fwd(1);', 1, 1, "declared @query_field_exact"),
    ('ethernet.dst_addr < "AB": fwd(1);', 1, 1, "strings are compared with"),
    ("ipv4.dst_addr > 10.0.0.0/8: fwd(1);", 1, 1, "ambiguous"),
    ("mark(1, 2) : fwd(1);", None, None, None),
    ("udp.dst_port == 1: mark(1, 2);", 1, 20, "takes 1 arguments, got 2"),
    ("udp.dst_port == 1: mark(256);", 1, 25, "does not fit in 8 bits"),
    ("udp.dst_port == 1: mark(10.0.0.1);", 1, 25,
     "argument 10.0.0.1 of 'mark' is a 32-bit IPv4 address; the argument has 8 bits"),
    ("udp.dst_port == 1: mark(2.5);", 1, 25, "is not an integer or an address"),
    ('udp.dst_port == 1: mark("A");', 1, 25, "is not an integer or an address"),
    ("udp.dst_port == 1: mark(udp.dst_port);", 1, 25, "arguments are constants"),
    ("rate > 5: fwd(1);", 1, 1, "unknown attribute 'rate'"),
    ("count(nothing) > 5: fwd(1);", 1, 7, "unknown state variable 'nothing'"),
]


@pytest.mark.parametrize("text,line,column,message", [c for c in CASES if c[1] is not None])
def test_type_errors_name_the_place_and_the_problem(text, line, column, message) -> None:
    errs = errors_of(text)
    assert len(errs) == 1, errs
    err = errs[0]
    assert (err.location.file, err.location.line, err.location.column) == ("r.sub", line, column)
    assert message in err.message


CAMUS_LIKE = make_spec({
    "dns_q.label": (32, {"match_kind": "exact"}),       # no `string` marker, as Camus's specs
    "order.symbol": (64, {}),
    "order.qty": (32, {"match_kind": "range"}),
    "tcp.flags": (12, {}),
    "ipv4.dstAddr": (32, {}),
}, actions={"answer": (32,), "answer6": (128,), "rewrite_mac": (48,), "wide": (64,), "narrow": (16,)})


def camus_errors(text: str) -> list[str]:
    try:
        check_rules(parse_rules(text, "c.sub"), CAMUS_LIKE)
    except (ErrorList, TypeCheckError) as exc:
        return [f"{e.location.line}:{e.location.column}: {e.message}" for e in getattr(exc, "errors", [exc])]
    return []


def test_strings_on_any_field_of_whole_bytes() -> None:
    assert camus_errors('dns_q.label = "ab12": answer(10.0.0.1);\n'
                        'order.symbol = "ACME" and order.qty > 10: fwd(1);\n'
                        'order.qty = "ZZ": fwd(2);\n'                  # numeric-looking, still bytes
                        'order.symbol prefix "AC": fwd(3);\n'
                        'dns_q.label = "": fwd(4);') == []
    assert camus_errors('tcp.flags = "A": fwd(1);\ndns_q.label = "toolong": fwd(1);') == [
        "1:1: a string needs a field of whole bytes; 'tcp.flags' has 12 bits",
        "2:1: string 'toolong' has 7 bytes; the field holds 4"]


def test_addresses_as_action_arguments() -> None:
    assert camus_errors("ipv4.dstAddr = 10.0.0.0/8: answer(10.0.0.97), answer6(2001:db8::1), rewrite_mac(00:11:22:33:44:55),"
                        " wide(10.0.0.1), wide(00:11:22:33:44:55);") == []
    assert camus_errors("ipv4.dstAddr = 10.0.0.1: answer(10.0.0.0/8);\n"
                        "ipv4.dstAddr = 10.0.0.2: answer(::1), narrow(00:11:22:33:44:55), narrow(10.0.0.1);") == [
        "1:33: argument 10.0.0.0/8 of 'answer' is a prefix; an action argument takes one address",
        "2:33: argument ::1 of 'answer' is a 128-bit IPv6 address; the argument has 32 bits",
        "2:46: argument 00:11:22:33:44:55 of 'narrow' is a 48-bit MAC address; the argument has 16 bits",
        "2:73: argument 10.0.0.1 of 'narrow' is a 32-bit IPv4 address; the argument has 16 bits"]


def test_all_errors_of_a_file_are_reported() -> None:
    errs = errors_of("add_order.prise > 1: fwd(1);\nudp.dst_port == 1: fwd(600);\nx.y == 1: fwd(1);")
    assert [e.location.line for e in errs] == [1, 2, 3]


def test_valid_rules_record_attribute_infos_in_spec_order() -> None:
    text = ('udp.dst_port == 7 and add_order.price > 50.25 and ipv4.dst_addr == 10.0.0.0/8: fwd(1), mark(3);\n'
            'count(msg_rate) > 5 and msg_rate < 10 and avg(add_order.price) > 1: drop;')
    typed = check_rules(parse_rules(text), ITCH_LIKE)
    assert list(typed.fields)[:2] == ["add_order.price", "ipv4.dst_addr"]
    assert typed.fields["add_order.price"].scale == 4
    assert typed.fields["count(msg_rate)"].width == 32
    assert typed.fields["udp.dst_port"].match_kind is None
