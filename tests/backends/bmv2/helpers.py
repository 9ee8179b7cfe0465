"""Pipelines to render, and a small reader of the generated program's declarations.

The reader is deliberately independent of the renderer: it finds tables, keys, actions and struct
members in the P4 text with regular expressions, so a test that compares them with the IR checks
the text p4c will see, not the renderer's own data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from compiler import ir
from compiler.compile import Compiled, CompileOptions, compile_rules
from compiler.compile import like as like_options
from compiler.rules.parser import parse_rules
from compiler.spec.model import Spec
from compiler.spec.reader import read_spec
from compiler.tables import TableOptions

ROOT = Path(__file__).resolve().parents[3]
ITCH_SPEC = ROOT / "apps/itch/itch.p4"
INT_SPEC = ROOT / "apps/int/int.p4"

ITCH_RULES = """
add_order.stock == "GOOGL" and add_order.price > 50.25 : fwd(1);
add_order.stock == "AAPL" : fwd(2);
add_order.shares > 1000 and add_order.buy_sell_indicator == "B" : fwd(3);
add_order.stock == "MSFT" : fwd(1, 2);
"""

INT_RULES = """
int_hop.switch_id == 5 : fwd(1);
int_hop.hop_latency > 1000 : fwd(2);
int_hop.switch_id == 7 and int_hop.queue_occupancy >= 64 : fwd(2, 3);
"""

# A scalar spec (no stacks): Ethernet / IPv4 with an LPM and a ternary-able field.
SCALAR_SPEC = """
header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
@query_field_lpm(ipv4.dst_addr)
@query_field(ipv4.ttl)
@query_field(ipv4.diffserv)
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            0x8600 &&& 0xff00: reject;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}
"""

SCALAR_RULES = """
ipv4.dst_addr == 10.0.0.0/8 and ipv4.ttl > 10 : fwd(1);
ipv4.dst_addr == 10.1.0.0/16 : fwd(2);
ipv4.ttl < 5 or ipv4.diffserv == 46 : fwd(3);
ipv4.dst_addr == 192.168.0.0/16 and ipv4.diffserv >= 8 and ipv4.diffserv <= 15 : fwd(1, 3);
"""


@lru_cache(maxsize=None)
def spec_from_text(text: str, tmpdir: str) -> Spec:
    path = Path(tmpdir) / f"spec_{abs(hash(text))}.p4"
    path.write_text(text)
    return read_spec(path)


@lru_cache(maxsize=None)
def itch_spec() -> Spec:
    return read_spec(ITCH_SPEC)


@lru_cache(maxsize=None)
def int_spec() -> Spec:
    return read_spec(INT_SPEC)


def compile_text(spec: Spec, rules: str, range_encoding: str = "range", per_field: dict | None = None,
                 like: ir.Pipeline | None = None, delivery: str = "auto", lanes: int | None = None) -> Compiled:
    """``like``: keep that pipeline's layout, state widths and table sizes (as ``p4sub compile --like``)."""
    options = CompileOptions(tables=TableOptions(range_encoding=range_encoding, per_field_encoding=per_field or {}),
                             delivery=delivery, lanes=lanes)
    if like is not None:
        options = like_options(like, options)
    return compile_rules(spec, parse_rules(rules), options)


@dataclass(frozen=True)
class ProgramKey:
    expression: str
    match_kind: str
    name: str


@dataclass(frozen=True)
class ProgramTable:
    name: str
    control: str
    keys: tuple[ProgramKey, ...]
    actions: tuple[str, ...]
    size: int


def _block(text: str, start: int) -> str:
    """The text of the brace block that opens at or after ``start``."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    raise ValueError("unbalanced braces")


def controls(text: str) -> dict[str, str]:
    return {m.group(1): _block(text, m.end()) for m in re.finditer(r"\ncontrol (\w+)\(", text)}


def tables(text: str) -> dict[str, ProgramTable]:
    """Every table declared in a control: @name, keys (expression, kind, @name), actions, size."""
    out = {}
    for control, body in controls(text).items():
        for m in re.finditer(r'@name\("([^"]+)"\) table (\w+) ', body):
            block = _block(body, m.end())
            keys = tuple(ProgramKey(k.group(1), k.group(2), k.group(3)) for k in
                         re.finditer(r'([\w.\[\]]+) : (\w+) @name\("([^"]+)"\);', block))
            acts = re.search(r"actions = \{(.*?)\}", block, re.S).group(1)
            size = int(re.search(r"size = (\d+);", block).group(1))
            out[m.group(1)] = ProgramTable(m.group(1), control, keys,
                                           tuple(a.strip() for a in acts.split(";") if a.strip()), size)
    return out


def actions(text: str) -> dict[str, tuple[tuple[str, int], ...]]:
    """Every action: @name -> ((param, width), ...)."""
    out = {}
    for m in re.finditer(r'@name\("([^"]+)"\) action (\w+)\(([^)]*)\)', text):
        params = tuple((p.split()[1], int(re.match(r"bit<(\d+)>", p.split()[0]).group(1)))
                       for p in m.group(3).split(",") if p.strip())
        out[m.group(1)] = params
    return out


def struct_members(text: str, struct: str) -> dict[str, str]:
    m = re.search(rf"struct {struct} \{{(.*?)\n\}}", text, re.S)
    out = {}
    for line in m.group(1).strip().splitlines():
        parts = line.strip().rstrip(";").split()
        out[parts[-1]] = parts[-2]
    return out


def header_types(text: str) -> dict[str, dict[str, int]]:
    out = {}
    for m in re.finditer(r"\nheader (\w+) \{(.*?)\n\}", text, re.S):
        out[m.group(1)] = {f.group(2): int(f.group(1)) for f in re.finditer(r"bit<(\d+)> (\w+);", m.group(2))}
    return out

# Protocols that never share a packet, on one switch: DNS-like and order-entry messages over UDP,
# and rules on plain IPv4. Each rule applies exactly when the headers it reads are valid.
COEXIST_SPEC = """
header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header dns_t { bit<16> id; bit<32> label; }
header order_t { bit<8> msg_type; bit<32> shares; bit<8> side; }
@query_field_lpm(ipv4.dst_addr)
@query_field(udp.dst_port)
@query_field_exact(dns.label)
@query_field(order.shares)
@query_field(order.side)
struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; dns_t dns; order_t order; }
struct metadata { }
parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: parse_udp; default: accept; }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { 53: parse_dns; 1234: parse_order; default: accept; }
    }
    state parse_dns { packet.extract(hdr.dns); transition accept; }
    state parse_order { packet.extract(hdr.order); transition accept; }
}
"""

COEXIST_RULES = """
ipv4.dst_addr == 10.0.0.2 : fwd(1);
dns.label == 97 : fwd(2);
order.shares > 100 and order.side == 66 : fwd(3);
udp.dst_port == 53 and ipv4.dst_addr == 10.0.0.1 : fwd(1, 3);
"""
