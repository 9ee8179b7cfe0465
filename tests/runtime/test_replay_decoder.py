"""Replay and netsim agree with a decoder of this file's own, on ITCH, INT and a protocol of the user's.

The decoder shares no code with the readers, the parse graph or the model: it walks the pcap with
``struct``, follows each spec's parser by hand (apps/itch/itch.p4, apps/int/int.p4,
examples/dns-order.p4, written out below as plain Python), and evaluates the subscriptions, kept
here as tuples, directly. Replay's per-port counts and netsim's per-host deliveries must equal it.

The ITCH feed is a generated one (``p4sub gen itch``): about 4 % of its add orders are 'F' (Add
Order with MPID), which itch.p4 skips like any other message type. Reading them as add orders (as
the old hand-written ITCH reader did) delivers messages the switch never sends; these tests fail
on such a reader.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter
from pathlib import Path

import pytest

from compiler.compile import compile_rules
from compiler.network.compile import compile_network
from compiler.network.host_rules import parse_network_rules
from compiler.network.topology import fat_tree
from compiler.rules.parser import parse_rules
from compiler.spec.reader import read_spec
from p4sub import main
from runtime.netsim import load_network, simulate, trace_batches
from runtime.replay import replay_local

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------
# The decoder
# ------------------------------------------------------------------------------------------------


def pcap_frames(path: Path) -> list[tuple[bytes, int]]:
    """(captured bytes, original length) of every record of a classic pcap file."""
    raw = path.read_bytes()
    endian = "<" if struct.unpack("<I", raw[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    out, pos = [], 24
    while pos + 16 <= len(raw):
        _, _, incl, orig = struct.unpack(endian + "IIII", raw[pos : pos + 16])
        out.append((raw[pos + 16 : pos + 16 + incl], orig))
        pos += 16 + incl
    return out


def ipv4_udp(d: bytes, at: int = 14, options: bool = False) -> tuple[dict, int] | None:
    """IPv4 then UDP at ``at`` when the spec's parser goes there: (fields, offset of the UDP payload)."""
    if len(d) < at + 20:
        return None
    ihl, frag, proto = d[at] & 0xF, struct.unpack("!H", d[at + 6 : at + 8])[0] & 0x1FFF, d[at + 9]
    ip = {"ipv4.dst_addr": struct.unpack("!I", d[at + 16 : at + 20])[0]}
    if options:  # dns-order.p4: any ihl, options skipped by ((ihl - 5) mod 16) words
        if (frag, proto) != (0, 17):
            return ip, -1
        at += 20 + ((ihl - 5) % 16) * 4
    else:
        if (ihl, frag, proto) != (5, 0, 17):
            return ip, -1
        at += 20
    if len(d) < at + 8:
        return ip, -1
    ip["udp.dst_port"] = struct.unpack("!H", d[at + 2 : at + 4])[0]
    return ip, at + 8


def itch_messages(frames) -> tuple[list[dict], Counter]:
    """itch.p4 by hand: type 'A' blocks of the first 12 of a MoldUDP64 packet on port 1234."""
    rows, types = [], Counter()
    for k, (d, _) in enumerate(frames):
        if d[12:14] != b"\x08\x00" or (found := ipv4_udp(d)) is None or found[1] < 0:
            continue
        ip, at = found
        if ip["udp.dst_port"] != 1234 or len(d) < at + 20:
            continue
        count = struct.unpack("!H", d[at + 18 : at + 20])[0]
        pos = at + 20
        for _ in range(0 if count in (0, 0xFFFF) else min(count, 12)):
            if pos + 3 > len(d):
                break
            length, mtype = struct.unpack("!HB", d[pos : pos + 3])
            pos += 3
            types[chr(mtype)] += 1
            if mtype == ord("A"):
                if pos + 35 > len(d):
                    break
                _, _, _, _, side, shares, stock, price = struct.unpack("!HH6sQcI8sI", d[pos : pos + 35])
                rows.append({"packet": k, "add_order.stock": stock, "add_order.price": price,
                             "add_order.shares": shares, "add_order.buy_sell_indicator": side})
                pos += 35
            else:
                pos += (length - 1) % 65536
                if pos > len(d):
                    break
    return rows, types


def int_hops(frames) -> list[dict]:
    """int.p4 by hand: the hop stack of INT-MD with bitmap 0xF000, 4 words a hop, at most 8 hops."""
    rows = []
    for k, (d, _) in enumerate(frames):
        if d[12:14] != b"\x08\x00" or (found := ipv4_udp(d)) is None or found[1] < 0:
            continue
        ip, at = found
        if ip["udp.dst_port"] != 0x1234 or len(d) < at + 16 or d[at] >> 4 != 1:
            continue
        words, hop_ml = d[at + 1], (struct.unpack("!I", d[at + 4 : at + 8])[0] >> 8) & 0x1F
        bitmap = struct.unpack("!H", d[at + 8 : at + 10])[0]
        if bitmap != 0xF000 or hop_ml != 4 or words not in range(7, 36, 4):
            continue
        for i in range((words - 3) // 4):
            hop = d[at + 16 + 16 * i : at + 32 + 16 * i]
            if len(hop) < 16:
                break
            switch_id, _, _, latency, _ = struct.unpack("!IHHIB", hop[:13])
            rows.append({"packet": k, "int_hop.switch_id": switch_id, "int_hop.hop_latency": latency,
                         "int_hop.queue_occupancy": int.from_bytes(hop[13:16], "big")})
    return rows


def dns_order_packets(frames) -> list[dict]:
    """examples/dns-order.p4 by hand: one row per packet, with the headers it carries."""
    rows = []
    for k, (d, _) in enumerate(frames):
        row: dict = {"packet": k, "headers": set()}
        rows.append(row)
        if len(d) < 14:
            continue
        at, ether = 14, struct.unpack("!H", d[12:14])[0]
        if ether == 0x8100:
            if len(d) < 18:
                continue
            at, ether = 18, struct.unpack("!H", d[16:18])[0]
        if ether != 0x0800 or (found := ipv4_udp(d, at, options=True)) is None:
            continue
        ip, at = found
        row.update(ip)
        row["headers"].add("ipv4")
        if at < 0:
            continue
        port = row["udp.dst_port"]
        if port == 53 and len(d) >= at + 16:
            _, _, _, qname, qtype = struct.unpack("!HHH8sH", d[at : at + 16])
            row.update({"dns.qname": qname, "dns.qtype": qtype})
            row["headers"].add("dns")
        elif port & 0xF000 == 0x1000 and len(d) >= at + 18:
            _, shares, side, _, _ = struct.unpack("!BIc8sI", d[at : at + 18])
            row.update({"order.shares": shares, "order.side": side})
            row["headers"].add("order")
    return rows


# ------------------------------------------------------------------------------------------------
# Subscriptions: (atoms, ports), an atom (field, op, value as the packet holds it, text for the rule)
# ------------------------------------------------------------------------------------------------

ITCH_SUBS = [
    ([("add_order.stock", "==", b"AAPL    ", '"AAPL"'), ("add_order.price", ">", 500_000, "50")], [1]),
    ([("add_order.stock", "==", b"MSFT    ", '"MSFT"')], [2]),
    ([("add_order.shares", "<", 100, "100"), ("add_order.buy_sell_indicator", "==", b"B", '"B"')], [3]),
    ([("add_order.price", ">=", 3_000_000, "300")], [4, 1]),
]
INT_SUBS = [
    ([("int_hop.hop_latency", ">", 100_000, "100000")], [1]),
    ([("int_hop.switch_id", "==", 5, "5"), ("int_hop.queue_occupancy", ">", 10, "10")], [2]),
    ([("int_hop.switch_id", "==", 7, "7")], [3]),
]
DNS_SUBS = [
    ([("dns.qname", "==", b"KQX     ", '"KQX"')], [1]),
    ([("order.shares", ">", 2_000_000_000, "2000000000")], [2]),
    ([("order.side", "==", b"B", '"B"')], [3]),
    ([("dns.qtype", "<", 100, "100"), ("ipv4.dst_addr", "in", (10 << 24, 8), "10.0.0.0/8")], [4]),
    ([("ipv4.dst_addr", "in", (10 << 24, 8), "10.0.0.0/8")], [1]),
]


def holds(atom, row) -> bool:
    name, op, value, _ = atom
    x = row[name]
    if op == "in":
        base, bits = value
        return x >> (32 - bits) == base >> (32 - bits)
    return {"==": x == value, "<": x < value, ">": x > value, ">=": x >= value}[op]


def wanted(subs, row) -> set[int]:
    """Ports of every subscription whose atoms hold; an atom on a header the packet lacks never holds."""
    carried = row.get("headers")
    out: set[int] = set()
    for atoms, ports in subs:
        if carried is not None and any(a[0].split(".")[0] not in carried for a in atoms):
            continue
        if all(holds(a, row) for a in atoms):
            out |= set(ports)
    return out


def rules_text(subs, host: bool = False) -> str:
    def atom(a):
        op = "==" if a[1] == "in" else a[1]
        return f"{a[0]} {op} {a[3]}"

    return "".join(" and ".join(atom(a) for a in atoms) + " : fwd(" +
                   ", ".join(f"h{p}" if host else str(p) for p in ports) + ");\n" for atoms, ports in subs)


def oracle_counts(subs, rows) -> tuple[Counter, Counter]:
    """Per port: wanted messages, and packets with at least one wanted message."""
    msgs, packets = Counter(), {}
    for row in rows:
        for p in wanted(subs, row):
            msgs[p] += 1
            packets.setdefault(p, set()).add(row["packet"])
    return msgs, Counter({p: len(s) for p, s in packets.items()})


# ------------------------------------------------------------------------------------------------
# Traces and checks
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dns_trace(tmp_path_factory) -> Path:
    """A trace of the user's protocol written by `p4sub gen --spec`, values near the rules' constants."""
    d = tmp_path_factory.mktemp("dns")
    rules = d / "dns.sub"
    rules.write_text(rules_text(DNS_SUBS))
    path = d / "dns.pcap"
    assert main(["gen", "--spec", str(ROOT / "examples/dns-order.p4"), "--packets", "3000", "--seed", "4",
                 "--rules", str(rules), "-o", str(path), "-q"]) == 0
    return path


def cases(itch_feed, int_feed, dns_trace):
    return {
        "itch": (ROOT / "apps/itch/itch.p4", ITCH_SUBS, itch_feed, lambda f: itch_messages(f)[0]),
        "int": (ROOT / "apps/int/int.p4", INT_SUBS, int_feed, int_hops),
        "dns": (ROOT / "examples/dns-order.p4", DNS_SUBS, dns_trace, dns_order_packets),
    }


def test_the_itch_feed_has_f_messages_the_switch_skips(itch_feed):
    rows, types = itch_messages(pcap_frames(itch_feed))
    assert types["F"] > 100 and types["A"] == len(rows)
    assert 0.02 < types["F"] / (types["A"] + types["F"]) < 0.08


@pytest.mark.parametrize("name", ["itch", "int", "dns"])
def test_replay_counts_equal_the_independent_decoder(name, itch_feed, int_feed, dns_trace):
    spec_path, subs, trace, decode = cases(itch_feed, int_feed, dns_trace)[name]
    spec = read_spec(spec_path)
    compiled = compile_rules(spec, parse_rules(rules_text(subs), f"{name}.sub"))
    result = replay_local(compiled.pipeline, compiled.typed, [trace], partitions=3, batch_packets=700)
    rows = decode(pcap_frames(trace))
    msgs, packets = oracle_counts(subs, rows)
    ports = result.space.ports
    got = {m: Counter({p: int(v) for p, v in zip(ports, result.total.ports[m]) if v})
           for m in ("wanted", "delivered", "wanted_packets", "delivered_packets")}
    assert result.total.scalars["rows"] == len(rows)
    assert got["wanted"] == msgs and got["delivered"] == msgs
    assert got["wanted_packets"] == packets and got["delivered_packets"] == packets
    assert all(msgs[p] > 0 for _, ps in subs for p in ps), msgs  # every subscription meets traffic


@pytest.mark.parametrize("name", ["itch", "int", "dns"])
def test_netsim_deliveries_equal_the_independent_decoder(name, itch_feed, int_feed, dns_trace, tmp_path):
    spec_path, subs, trace, decode = cases(itch_feed, int_feed, dns_trace)[name]
    topo = fat_tree(4)
    compile_network(topo, parse_network_rules(rules_text(subs, host=True), topo, "net.rules"), read_spec(spec_path),
                    policy="tr", out_dir=tmp_path, jobs=1)
    network = load_network(tmp_path)
    batches, mode = trace_batches(trace, network)
    assert mode == {"itch": "prune", "int": "union", "dns": "prune"}[name]
    sim = simulate(network, batches, "h16", mode)
    msgs, packets = oracle_counts(subs, decode(pcap_frames(trace)))
    expect = msgs if mode == "prune" else packets
    for h, st in sim.hosts.items():
        if h == "h16":
            continue
        port = int(h[1:])
        assert (st.delivered, st.wanted, st.false_positives, st.false_negatives) == (expect[port], expect[port], 0, 0), h


def test_dns_rules_apply_only_to_packets_that_carry_their_headers(dns_trace):
    """The trace mixes DNS, orders, other UDP, other IP and VLAN frames; a rule over order.* never
    applies to a DNS packet (whose order fields read as 0): the decoder and replay agree above, and
    here the mix is checked to be a real one."""
    rows = dns_order_packets(pcap_frames(dns_trace))
    kinds = Counter("dns" if "dns" in r["headers"] else "order" if "order" in r["headers"] else
                    "ipv4" if "ipv4" in r["headers"] else "other" for r in rows)
    assert min(kinds.values()) > 100, kinds
    assert ipaddress.IPv4Address(10 << 24)  # the /8 the rules route


def test_cli_replay_and_netsim_take_the_spec_of_a_users_protocol(dns_trace, tmp_path, capsys):
    rules = tmp_path / "dns.sub"
    rules.write_text(rules_text(DNS_SUBS))
    out = tmp_path / "out"
    spec = str(ROOT / "examples/dns-order.p4")
    assert main(["compile", spec, str(rules), "-o", str(out)]) == 0
    import argparse

    from compiler import ir
    from p4sub.replay import typed_rules
    from runtime.replay import replay_local as local

    pipeline = ir.load(out)
    args = argparse.Namespace(out=str(out), rules=str(rules), spec=spec, app=None)
    result = local(pipeline, typed_rules(args, pipeline), [dns_trace])
    assert result.app == "dns-order" and result.exact
    net_rules = tmp_path / "net.rules"
    net_rules.write_text(rules_text(DNS_SUBS, host=True))
    topo_file = ROOT / "examples/fat-tree-4.topo"
    capsys.readouterr()
    assert main(["route", str(topo_file), str(net_rules), "--spec", spec, "--jobs", "1", "-o", str(tmp_path / "net")]) == 0
    assert main(["netsim", str(tmp_path / "net"), "--trace", str(dns_trace), "--publisher", "h16", "--spec", spec]) == 0
    printed = capsys.readouterr().out
    assert "3000 messages in 3000 packets" in printed and "0 false positives, 0 false negatives" in printed
