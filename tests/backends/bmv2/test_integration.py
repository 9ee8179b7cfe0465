"""With the real tools: p4c compiles the generated programs; BMv2 forwards as the reference model says.

``p4c`` tests need ``p4c-bm2-ss``; ``bmv2`` tests also need ``simple_switch_grpc``, root (network
namespaces) and a Python with p4runtime-shell (see ``p4sub install --help``). Each skips with the
reason when something is missing.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
import random
import re
import struct
from collections import Counter
from pathlib import Path

import pytest

import backends.bmv2 as bmv2
from compiler.base.outputs import staged_dir
from compiler.compile import CompileOptions, compile_rules
from compiler.default_path import parse_default
from compiler.rules.parser import parse_rules
from p4sub.install import TargetError, find_p4rt_python
from runtime.model import Model
from tests.backends.bmv2 import helpers as h
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import Bmv2Switch, require_cli_switch, tool

P4C = tool("p4c-bm2-ss")
SWITCH = tool("simple_switch_grpc")

needs_p4c = pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not installed (see docs/bmv2.md)")


def _p4rt_python() -> str | None:
    try:
        return find_p4rt_python()
    except TargetError:
        return None


def bmv2_skip_reason() -> str | None:
    if P4C is None:
        return "p4c-bm2-ss is not installed"
    if SWITCH is None:
        return "simple_switch_grpc is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if _p4rt_python() is None:
        return "no Python with p4runtime-shell (see p4sub install --help)"
    return None


def build(pipeline, out: Path) -> None:
    with staged_dir(out, "compile") as stage:  # as p4sub compile writes it: install needs the manifest
        bmv2.emit(pipeline, stage)
    from p4sub import main

    rc = main(["build", str(out), "--p4c", P4C])
    assert rc == 0
    assert (out / "program.json").is_file() and (out / "p4info.txt").is_file()


@contextmanager
def cli_switch(pipeline, out: Path, tmp_path: Path):
    """The program built into ``out``, running on simple_switch (ports 0-3) with commands.txt loaded
    through its CLI; closed afterwards."""
    build(pipeline, out)
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path, program_json=out / "program.json")
    try:
        text = switch.cli((out / bmv2.COMMANDS).read_text())
        assert "Error" not in text and "Invalid" not in text, text
        yield switch
    finally:
        switch.close()


def scalar_probes(model: Model, ttls: tuple[int, ...]) -> tuple[list, list]:
    """IPv4/UDP probes over destinations, TTLs and DSCPs of the scalar rules, and where the model sends each."""
    send, expected = [], []
    for i, (dst, ttl, tos) in enumerate((d, t, s) for d in (0x0A000001, 0x0A010203, 0xC0A80101, 0x08080808)
                                        for t in ttls for s in (0, 8, 12, 16, 46)):
        pkt = bytearray(pk.ipv4_udp(i.to_bytes(4, "big"), 5000))
        pkt[15], pkt[22] = tos, ttl
        pkt[30:34] = dst.to_bytes(4, "big")
        pkt[24:26] = b"\0\0"
        pkt[24:26] = pk.ipv4_checksum(bytes(pkt[14:34])).to_bytes(2, "big")
        send.append((0, bytes(pkt)))
        ports, _ = model.run_one({"ipv4.dst_addr": dst, "ipv4.ttl": ttl, "ipv4.diffserv": tos})
        expected += [(p, bytes(pkt)) for p in ports]
    return send, expected


def scalar_pipeline(tmp_path):
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path))
    return h.compile_text(spec, h.SCALAR_RULES, per_field={"ipv4.diffserv": "ternary"}).pipeline


@pytest.mark.p4c
@needs_p4c
@pytest.mark.parametrize("which", ["itch", "int", "scalar", "itch-first", "itch-union"])
def test_p4c_compiles_the_generated_program_and_names_match_the_entries(which, tmp_path):
    if which.startswith("itch"):
        pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES).pipeline
    elif which == "int":
        pipeline = h.compile_text(h.int_spec(), h.INT_RULES).pipeline
    else:
        pipeline = scalar_pipeline(tmp_path)
    out = tmp_path / "out"
    options = bmv2.Bmv2Options(batch=which.split("-")[1]) if "-" in which else None
    bmv2.emit(pipeline, out, options)
    from p4sub import main

    assert main(["build", str(out), "--p4c", P4C]) == 0
    p4info = (out / "p4info.txt").read_text()
    tables = dict(re.findall(r'tables \{\s+preamble \{\s+id: (\d+)\s+name: "([^"]+)"', p4info))
    names = set(tables.values())
    request = json.loads((out / bmv2.ENTRIES).read_text())
    for u in request["updates"]:
        te = u["entity"].get("table_entry")
        if te:
            assert te["table_name"] in names
            for m in te["match"]:
                assert f'name: "{m["field_name"]}"' in p4info
            assert f'name: "{te["action"]["action"]["action_name"]}"' in p4info


def _compare(received: list[tuple[int, bytes]], expected: list[tuple[int, bytes]]) -> None:
    got, want = Counter(received), Counter(expected)
    missing = want - got
    extra = got - want
    assert not missing and not extra, (
        f"{sum(missing.values())} expected packets missing, {sum(extra.values())} unexpected; "
        f"first missing: {[(p, d.hex()) for p, d in list(missing)[:2]]}; first extra: {[(p, d.hex()) for p, d in list(extra)[:2]]}")


@pytest.mark.bmv2
@pytest.mark.p4c
def test_itch_on_bmv2_matches_the_reference_model_and_updates_atomically(tmp_path):
    reason = bmv2_skip_reason()
    if reason:
        pytest.skip(reason)
    pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES).pipeline
    out = tmp_path / "itch"
    build(pipeline, out)
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path)
    try:
        r = switch.p4sub("install", str(out), "--grpc", switch.grpc, "--batch-size", "7")
        assert r.returncode == 0, r.stderr
        assert "holds exactly the wanted entries" in r.stdout
        send, expected = pk.itch_probes(Model(pipeline), random.Random(7))
        send.append((0, pk.ipv4_udp(b"not moldudp", 9999)))          # not a query packet: dropped
        send.append((0, pk.itch_packet([], 999)))                      # heartbeat: no message, dropped
        _compare(switch.exchange(send, [1, 2, 3], [pk.ITCH_PORT, 9999]), expected)

        # A changed rule set with the same tables: only the differences are written.
        changed = h.ITCH_RULES.replace('"AAPL" : fwd(2)', '"AAPL" : fwd(3)').replace("fwd(1, 2)", "fwd(2)")
        pipeline2 = h.compile_text(h.itch_spec(), changed, like=pipeline).pipeline
        out2 = tmp_path / "itch2"
        build(pipeline2, out2)
        assert (out2 / "program.p4").read_text() == (out / "program.p4").read_text()
        r = switch.p4sub("install", str(out2), "--grpc", switch.grpc, "--batch-size", "7")
        assert r.returncode == 0, r.stderr
        assert "pipeline unchanged" in r.stdout
        plan = re.search(r"plan: (\d+) insert, (\d+) modify, (\d+) delete", r.stdout)
        changes = sum(int(x) for x in plan.groups())
        assert 0 < changes < len(json.loads((out2 / bmv2.ENTRIES).read_text())["updates"])
        rng = random.Random(8)
        send, expected = [], []
        for seq in range(20):
            orders = pk.random_orders(rng, rng.randint(1, 4), seq * 100)
            send.append((0, pk.itch_packet(orders, seq)))
            expected += list(pk.expected_itch(Model(pipeline2), orders, seq).items())
        _compare(switch.exchange(send, [1, 2, 3], [pk.ITCH_PORT]), expected)

        # An install the switch refuses part-way is rolled back: the switch keeps rule set 2.
        bad = tmp_path / "bad"
        with staged_dir(bad, "compile") as stage:  # entries p4sub wrote (in its manifest) that the switch refuses
            for name in ("program.p4", "program.json", "p4info.txt"):
                (stage / name).write_bytes((out / name).read_bytes())
            request = json.loads((out / bmv2.ENTRIES).read_text())
            leaf = next(u for u in request["updates"] if u["entity"].get("table_entry", {}).get("table_name")
                        == "MyIngress.leaf_actions")
            broken = json.loads(json.dumps(leaf))
            broken["entity"]["table_entry"]["match"][0]["exact"]["value"] = "0x7f"   # wider than the state key
            request["updates"].append(broken)
            (stage / bmv2.ENTRIES).write_text(json.dumps(request))
        r = switch.p4sub("install", str(bad), "--grpc", switch.grpc, "--batch-size", "3")
        assert r.returncode == 2
        assert "refused" in r.stderr and "MyIngress.leaf_actions" in r.stderr and "rolled back" in r.stderr
        r = switch.p4sub("install", str(out2), "--grpc", switch.grpc, "--dry-run")
        assert r.returncode == 0 and "plan: 0 insert, 0 modify, 0 delete" in r.stdout, r.stdout + r.stderr
    finally:
        switch.close()


@pytest.mark.bmv2
@pytest.mark.p4c
def test_int_on_bmv2_goes_to_the_union_of_the_hops_ports(tmp_path):
    reason = bmv2_skip_reason()
    if reason:
        pytest.skip(reason)
    pipeline = h.compile_text(h.int_spec(), h.INT_RULES).pipeline
    out = tmp_path / "int"
    build(pipeline, out)
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path)
    try:
        r = switch.p4sub("install", str(out), "--grpc", switch.grpc)
        assert r.returncode == 0, r.stderr
        rng = random.Random(11)
        send, expected = [], []
        for tag in range(40):
            hops = pk.random_hops(rng, rng.randint(1, 8))
            send.append((0, pk.int_packet(hops, tag)))
            expected += list(pk.expected_int(Model(pipeline), hops, tag).items())
        _compare(switch.exchange(send, [1, 2, 3], [pk.INT_PORT]), expected)
    finally:
        switch.close()


@pytest.mark.bmv2
@pytest.mark.p4c
def test_scalar_single_message_path_on_bmv2(tmp_path):
    reason = bmv2_skip_reason()
    if reason:
        pytest.skip(reason)
    pipeline = scalar_pipeline(tmp_path)
    out = tmp_path / "scalar"
    build(pipeline, out)
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path)
    try:
        r = switch.p4sub("install", str(out), "--grpc", switch.grpc)
        assert r.returncode == 0, r.stderr
        model = Model(pipeline)
        rng = random.Random(3)
        send, expected = [], []
        for i in range(60):
            dst = rng.choice([0x0A000001, 0x0A010203, 0xC0A80101, 0x08080808])
            ttl = rng.choice([1, 4, 5, 10, 11, 64])
            tos = rng.choice([0, 8, 12, 15, 16, 46])
            pkt = bytearray(pk.ipv4_udp(i.to_bytes(4, "big"), 5000))
            pkt[14 + 1] = tos
            pkt[14 + 8] = ttl
            pkt[14 + 16:14 + 20] = dst.to_bytes(4, "big")
            pkt[14 + 10:14 + 12] = b"\0\0"
            pkt[14 + 10:14 + 12] = pk.ipv4_checksum(bytes(pkt[14:34])).to_bytes(2, "big")
            send.append((0, bytes(pkt)))
            ports, _ = model.run_one({"ipv4.dst_addr": dst, "ipv4.ttl": ttl, "ipv4.diffserv": tos})
            expected += [(p, bytes(pkt)) for p in ports]
        _compare(switch.exchange(send, [1, 2, 3], [5000]), expected)
    finally:
        switch.close()


@pytest.mark.bmv2
@pytest.mark.p4c
def test_commands_txt_on_simple_switch_cli_gives_the_same_forwarding(tmp_path):
    """The CLI path: priorities inverted for BMv2's lower-wins rule (ternary diffserv entries)."""
    require_cli_switch()
    pipeline = scalar_pipeline(tmp_path)
    assert any(e.priority > 1 for e in pipeline.entries), "the test needs entries with different priorities"
    probe_cli_switch(pipeline, tmp_path / "scalar", tmp_path, (1, 5, 11))


def probe_cli_switch(pipeline, out: Path, tmp_path: Path, ttls: tuple[int, ...]) -> list:
    """Build the program, load commands.txt into simple_switch through its CLI, send the scalar probes
    and compare what comes out with the reference model; returns the expected (port, frame) list."""
    with cli_switch(pipeline, out, tmp_path) as switch:
        send, expected = scalar_probes(Model(pipeline), ttls)
        _compare(switch.exchange(send, [1, 2, 3], [5000]), expected)
        return expected


@pytest.mark.bmv2
@pytest.mark.p4c
def test_multi_lane_bitmap_program_on_simple_switch_forwards_as_the_model(tmp_path):
    """Port-bitmap delivery in three lanes: the lanes OR their bitmaps, one group replicates to every
    rule port, and the egress drops the copies whose bit is clear; simple_switch must agree with the
    reference model on every probe, and send nothing where no rule matches."""
    require_cli_switch()
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path))
    rules = h.SCALAR_RULES + "ipv4.diffserv == 12 and ipv4.ttl < 9 : fwd(2);\nipv4.ttl == 11 : fwd(3);\n"
    pipeline = h.compile_text(spec, rules, delivery="bitmap", lanes=3).pipeline
    assert pipeline.lanes == 3 and pipeline.delivery.is_bitmap
    expected = probe_cli_switch(pipeline, tmp_path / "bitmap", tmp_path, (1, 5, 8, 11, 12))
    assert len({p for p, _ in expected}) == 3, "the probes must reach every port"


@pytest.mark.p4c
@needs_p4c
@pytest.mark.parametrize("lanes", [1, 3])
def test_p4c_compiles_batched_itch_with_port_bitmaps(lanes, tmp_path):
    """Issue 26 item 2: several messages per packet with port-bitmap delivery (a bitmap per message
    kept across the passes): p4c accepts it and the program keeps one bitmap member per message."""
    pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES, delivery="bitmap", lanes=lanes).pipeline
    assert pipeline.delivery.is_bitmap and pipeline.lanes <= lanes
    out = tmp_path / "out"
    build(pipeline, out)
    text = (out / "program.p4").read_text()
    depth = h.itch_spec().header("add_order").stack_size
    width = pipeline.delivery.width
    assert all(f"bit<{width}> p4sub_set_{j};" in text for j in range(depth))
    assert "p4sub_group_ports" not in text  # no group-to-ports table: the bitmaps are the port sets


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("lanes", [1, 3])
def test_batched_itch_with_port_bitmaps_on_simple_switch_prunes_as_the_model(tmp_path, lanes):
    """Each port gets the packet with exactly the messages the model gives it (the others removed,
    count and lengths fixed), nothing where no message goes anywhere."""
    require_cli_switch()
    pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES, delivery="bitmap", lanes=lanes).pipeline
    out = tmp_path / "itch"
    with cli_switch(pipeline, out, tmp_path) as switch:
        send, expected = pk.itch_probes(Model(pipeline), random.Random(11))
        send.append((0, pk.itch_packet([], 999)))  # heartbeat: no message, dropped
        _compare(switch.exchange(send, [1, 2, 3], [pk.ITCH_PORT]), expected)


def ipv6_udp(i: int, dport: int) -> bytes:
    """An IPv6/UDP frame: the coexistence spec parses no IPv6, so no subscription looks at it."""
    udp = struct.pack("!HHHH", 40000, dport, 14, 0x2222) + i.to_bytes(6, "big")
    head = struct.pack("!IHBB", 6 << 28, len(udp), 17, 64) + bytes(15) + b"\1" + bytes(15) + b"\2"
    return pk.ETH[:12] + b"\x86\xdd" + head + udp


def coexist_probes(pipeline, spec, seed: int = 5) -> tuple[list, list]:
    """UDP probes to plain, DNS and order ports, and IPv6 frames no rule looks at; where each goes is
    what the model says of the row that the spec's parse graph reads from its bytes (validity included)."""
    from runtime.parse_graph import ParseGraph

    rng = random.Random(seed)
    graph, model = ParseGraph(spec), Model(pipeline)
    send, expected = [], []
    for i in range(10):
        pkt = ipv6_udp(i, 9)
        send.append((0, pkt))
        ports, _ = model.run_one(graph.parse(pkt).row(model.inputs + model.validity))
        expected += [(p, pkt) for p in ports]
    for i in range(80):
        dport = rng.choice([53, 1234, 9])
        payload = {53: lambda: struct.pack("!HI", i, rng.choice([1, 97, 98])),
                   1234: lambda: struct.pack("!BIB", 65, rng.choice([5, 101, 5000]), rng.choice(b"BS")),
                   9: lambda: i.to_bytes(6, "big")}[dport]()
        pkt = bytearray(pk.ipv4_udp(payload, dport))
        pkt[30:34] = bytes([10, 0, 0, rng.choice([1, 2, 3])])
        pkt[24:26] = b"\0\0"
        pkt[24:26] = pk.ipv4_checksum(bytes(pkt[14:34])).to_bytes(2, "big")
        send.append((0, bytes(pkt)))
        row = graph.parse(bytes(pkt)).row(model.inputs + model.validity)
        ports, _ = model.run_one(row)
        expected += [(p, bytes(pkt)) for p in ports]
    return send, expected


@pytest.mark.bmv2
@pytest.mark.p4c
@pytest.mark.parametrize("delivery,default", [("groups", "drop"), ("bitmap", "drop"), ("groups", "fwd(2)"),
                                              ("bitmap", "fwd(2)")])
def test_rules_over_disjoint_protocols_coexist_on_simple_switch(tmp_path, delivery, default):
    """Rules over DNS, order messages and plain IPv4 on one switch: each protocol's packets reach
    its subscribers (the program tests each header's validity, as the model does); IPv6 frames,
    which no rule looks at, are dropped or take the --default port."""
    require_cli_switch()
    spec = h.spec_from_text(h.COEXIST_SPEC, str(tmp_path))
    options = CompileOptions(delivery=delivery, default=parse_default(default))
    pipeline = compile_rules(spec, parse_rules(h.COEXIST_RULES), options).pipeline
    assert pipeline.guard == ()
    out = tmp_path / delivery
    with cli_switch(pipeline, out, tmp_path) as switch:
        send, expected = coexist_probes(pipeline, spec)
        assert {p for p, _ in expected} == {1, 2, 3}, "the probes must reach every rule's port"
        assert sum(1 for p, d in expected if d[12:14] == b"\x86\xdd") == (10 if default != "drop" else 0)
        _compare(switch.exchange(send, [1, 2, 3], [53, 1234, 9]), expected)


def coexistence_example_probes(pipeline, spec, seed: int = 11) -> tuple[list, list]:
    """Plain IPv4, ITCH Add Orders, DNS queries and INT reports for examples/coexistence, written
    here byte by byte; where each goes is what the model says of the row the spec's parse graph reads."""
    from runtime.parse_graph import ParseGraph

    rng = random.Random(seed)
    graph, model = ParseGraph(spec), Model(pipeline)

    def udp4(dst: int, dport: int, payload: bytes) -> bytes:
        pkt = bytearray(pk.ipv4_udp(payload, dport))
        pkt[30:34] = bytes([10, 0, 0, dst])
        pkt[24:26] = b"\0\0"
        pkt[24:26] = pk.ipv4_checksum(bytes(pkt[14:34])).to_bytes(2, "big")
        return bytes(pkt)

    def itch() -> bytes:
        order = (struct.pack("!HH", 1, 0) + (5).to_bytes(6, "big") + struct.pack("!Q", 7) + rng.choice(b"BS").to_bytes(1, "big")
                 + struct.pack("!I", rng.choice([10, 100])) + rng.choice([b"NVDA    ", b"AAPL    "])
                 + struct.pack("!I", rng.choice([2000000, 3500000])))
        body = b"A" + order
        return bytes(10) + struct.pack("!QH", 1, 1) + struct.pack("!H", len(body)) + body

    def dns() -> bytes:
        return struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + rng.choice([b"ab97", b"ab98", b"zz00"]) + b"\0"

    def int_report() -> bytes:
        return bytes([1, 0, 3, 0]) + struct.pack("!II", rng.choice([22, 23]), rng.choice([100, 9000]))

    send, expected = [], []
    for i in range(100):
        kind = rng.choice(["ip", "itch", "dns", "int"])
        dport, payload = {"ip": (9, lambda: i.to_bytes(4, "big")), "itch": (1234, itch), "dns": (53, dns),
                          "int": (5000, int_report)}[kind]
        pkt = udp4(rng.choice([2, 3, 4]), dport, payload() if callable(payload) else payload)
        send.append((0, pkt))
        ports, _ = model.run_one(graph.parse(pkt).row(model.inputs + model.validity))
        expected += [(p, pkt) for p in ports]
    return send, expected


@pytest.mark.bmv2
@pytest.mark.p4c
def test_coexistence_example_forwards_itch_int_dns_and_ipv4_on_simple_switch(tmp_path):
    """examples/coexistence: subscriptions of four protocols on one switch, on simple_switch."""
    require_cli_switch()
    from compiler.spec.reader import read_spec

    root = Path(__file__).resolve().parents[3] / "examples/coexistence"
    spec = read_spec(root / "coexistence.p4")
    compiled = compile_rules(spec, parse_rules((root / "rules.sub").read_text()))
    pipeline = compiled.pipeline
    out = tmp_path / "coexistence"
    with cli_switch(pipeline, out, tmp_path) as switch:
        send, expected = coexistence_example_probes(pipeline, spec)
        assert {p for p, _ in expected} == {1, 2, 3}
        kinds = {int.from_bytes(d[36:38], "big") for _, d in expected}
        assert kinds == {9, 1234, 53, 5000}, "every protocol must be forwarded somewhere"
        _compare(switch.exchange(send, [1, 2, 3], [9, 1234, 53, 5000]), expected)
