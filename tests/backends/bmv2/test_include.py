"""Include mode (``p4sub compile --target bmv2 --emit control``) and the coexistence example.

Without tools: the control's signature, metadata struct and apply block, the entries' names under
the user's instance, the refusals. With p4c: the example program (examples/coexist/coexist.p4, a
user's IPv4 router) compiles with the generated control, and every name in commands.txt and
entries.p4rt.json is one p4c gave. On simple_switch: the router's LPM entries and p4sub's entries
loaded, ITCH and plain IPv4 probes from two ports, every output checked against the reference model
(for packets a subscription claims) and the LPM routes (for the others).
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from backends.bmv2.include import IncludeOptions, include_pipeline, render_include
from compiler import ir
from compiler.base.errors import TargetError
from compiler.compile import CompileOptions, compile_rules
from compiler.default_path import parse_default
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec, read_spec
from p4sub import main
from runtime.model import Model
from runtime.parse_graph import ParseGraph
from tests.backends.bmv2 import helpers as h
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import Bmv2Switch, require_cli_switch, tool

EXAMPLE = h.ROOT / "examples/coexist"
PORT = "standard_metadata.ingress_port"
P4C = tool("p4c-bm2-ss")


def example_pipeline() -> ir.Pipeline:
    spec = read_spec(EXAMPLE / "itch-spec.p4")
    return compile_rules(spec, parse_rules((EXAMPLE / "rules.sub").read_text()),
                         CompileOptions(delivery="groups")).pipeline


def test_the_control_has_the_documented_signature_metadata_and_apply_block():
    files = render_include(example_pipeline())
    text = files["p4sub_control.p4"]
    assert "control P4subIngress(inout headers hdr,\n" in text
    assert "inout p4sub_metadata_t p4sub,\n" in text and "inout standard_metadata_t standard_metadata) {" in text
    members = h.struct_members(text, "p4sub_metadata_t")
    assert list(members)[:2] == ["looked_at", "matched"] and members["matched"] == "bit<1>"
    assert "p4sub_state" in members
    assert "#ifndef P4SUB_CONTROL_P4" in text and "V1Switch" not in text and "parser " not in text
    apply = text[text.index("    apply {"):]
    assert "if (hdr.add_order.isValid()) {\n            p4sub.looked_at = 1w1;" in apply
    assert "if (leaf_actions.apply().hit) { p4sub.matched = 1w1; }" in apply
    assert "standard_metadata.ingress_port : exact @name(\"standard_metadata.ingress_port\");" in text
    assert "p4sub.p4sub_state : exact @name(\"meta.p4sub_state\");" in text
    # The leaf's miss leaves the packet to the user's program.
    leaf = h.tables("\n" + text)["leaf_actions"]
    assert "NoAction" in leaf.actions
    assert re.search(r'@name\("leaf_actions"\) table leaf_actions \{.*?default_action = NoAction\(\);', text, re.S)
    assert "hdr.add_order: a header with" in text and "bit<64> stock" in text


def test_entries_name_the_tables_under_the_instance():
    pipeline = example_pipeline()
    files = render_include(pipeline, IncludeOptions(instance="Router.subs"))
    request = json.loads(files["entries.p4rt.json"])
    tables = {u["entity"]["table_entry"]["table_name"] for u in request["updates"] if "table_entry" in u["entity"]}
    assert tables == {f"Router.subs.{t.name}" for t in pipeline.tables if pipeline.entries_of(t.name)}
    actions = {u["entity"]["table_entry"]["action"]["action"]["action_name"] for u in request["updates"]
               if "table_entry" in u["entity"]}
    assert actions <= {f"Router.subs.{a.name}" for a in pipeline.actions}
    groups = [u for u in request["updates"] if "packet_replication_engine_entry" in u["entity"]]
    assert len(groups) == len(pipeline.multicast_groups) == 1
    commands = files["commands.txt"].splitlines()
    assert all(c.split()[1].startswith("Router.subs.") for c in commands if c.startswith("table_"))
    assert not any(c.startswith("table_set_default Router.subs.leaf_actions") for c in commands)
    info = json.loads(files["bmv2.json"])
    assert info["mode"] == "include" and info["instance"] == "Router.subs" and info["headers_type"] == "headers"
    assert info["reads"]["add_order"] == ["buy_sell_indicator", "stock", "price", "shares"]


def test_emit_control_writes_the_files_or_nothing(tmp_path):
    import backends.bmv2 as bmv2

    paths = bmv2.emit_control(example_pipeline(), tmp_path / "ok")
    assert sorted(p.name for p in paths) == sorted(["p4sub_control.p4", "entries.p4rt.json", "commands.txt",
                                                    "bmv2.json"])
    with pytest.raises(TargetError):
        bmv2.emit_control(example_pipeline(), tmp_path / "bad", IncludeOptions(instance="nope"))
    assert not (tmp_path / "bad").exists()


def test_include_pipeline_only_changes_the_leaf_miss():
    pipeline = example_pipeline()
    run = include_pipeline(pipeline)
    assert run.entries == pipeline.entries
    changed = [(a, b) for a, b in zip(pipeline.tables, run.tables) if a != b]
    assert [(a.name, a.default_action, b.default_action) for a, b in changed] == [
        ("leaf_actions", "drop_packet", "NoAction")]


def test_default_path_runs_for_packets_no_rule_looks_at_and_claims_them():
    spec = parse_spec(h.COEXIST_SPEC, "coexist.p4")
    pipeline = compile_rules(spec, parse_rules(h.COEXIST_RULES),
                             CompileOptions(delivery="groups", default=parse_default("fwd(2)"))).pipeline
    text = render_include(pipeline)["p4sub_control.p4"]
    apply = text[text.index("    apply {"):]
    assert ("} else {\n            // No header a subscription reads: the default path (p4sub compile --default).\n"
            "            p4sub_default.apply();\n            p4sub.matched = 1w1;\n        }") in apply
    assert "if (hdr.ipv4.isValid() || hdr.udp.isValid() || hdr.dns.isValid() || hdr.order.isValid()) {" in apply


def test_a_queried_stack_needs_batch_first_which_copies_element_0():
    pipeline = h.compile_text(h.itch_spec(), h.ITCH_RULES, delivery="groups").pipeline
    with pytest.raises(TargetError, match=r"one message per packet.*add_order\[12\]: compile with --batch first"):
        render_include(pipeline)
    text = render_include(pipeline, IncludeOptions(batch="first"))["p4sub_control.p4"]
    assert "p4sub.p4sub_q_add_order_price = hdr.add_order[0].price;" in text
    assert "p4sub.p4sub_q_add_order_price : range @name(\"add_order.price\");" in text
    assert "hdr.add_order[0]: a header with" in text


def test_refusals_say_what_to_do():
    bitmap = h.compile_text(h.spec_from_text(h.SCALAR_SPEC, "/tmp"), h.SCALAR_RULES, delivery="bitmap").pipeline
    with pytest.raises(TargetError, match="port-bitmap delivery needs an egress table .* --delivery groups"):
        render_include(bitmap)
    with pytest.raises(TargetError, match=r"--instance 'p4sub': expected CONTROL.NAME"):
        render_include(example_pipeline(), IncludeOptions(instance="p4sub"))
    with pytest.raises(TargetError, match="--headers-type 'my headers'"):
        render_include(example_pipeline(), IncludeOptions(headers_type="my headers"))


def _compile(*extra: str, out: Path) -> int:
    return main(["compile", str(EXAMPLE / "itch-spec.p4"), str(EXAMPLE / "rules.sub"), "-o", str(out), *extra])


def test_cli_include_mode_and_its_refusals(tmp_path, capsys):
    out = tmp_path / "out"
    assert _compile("--target", "bmv2", "--emit", "control", out=out) == 0
    assert {p.name for p in out.iterdir()} == {"p4sub_control.p4", "commands.txt", "entries.p4rt.json", "bmv2.json",
                                               "pipeline.json", "stats.json", "sources.json", "compiled_rules.sub", "manifest.json"}
    assert "p4sub.apply(hdr, meta.p4sub, standard_metadata);" in capsys.readouterr().out
    assert main(["build", str(out)]) == 2
    assert "include-mode control" in capsys.readouterr().err
    assert main(["install", str(out), "--target", "bmv2"]) == 2
    assert "would replace the entries of your program's own tables" in capsys.readouterr().err
    for extra, message in [
        (("--target", "bmv2"), "pragma-only spec"),
        (("--emit", "control"), "add --target bmv2"),
        (("--target", "bmv2", "--emit", "control", "--delivery", "bitmap"), "use --delivery groups"),
        (("--target", "bmv2", "--emit", "control", "--default", "drop"), "left to your program"),
        (("--target", "bmv2", "--instance", "A.b"), "--instance is an include-mode option: add --emit control"),
    ]:
        assert _compile(*extra, out=tmp_path / "bad") == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)


# -- the coexistence example with the tools -------------------------------------------------------


def build_example(out: Path) -> Path:
    """Compile the subscriptions (include mode) and the user's program with p4c; returns the BMv2 JSON."""
    assert _compile("--target", "bmv2", "--emit", "control", out=out) == 0
    done = subprocess.run([P4C, "-I", str(out), "--p4runtime-files", str(out / "coexist.p4info.txt"),
                           "-o", str(out / "coexist.json"), str(EXAMPLE / "coexist.p4")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out / "coexist.json"


@pytest.mark.p4c
def test_p4c_compiles_the_example_and_names_every_entry_as_p4c_does(tmp_path):
    if P4C is None:
        pytest.skip("p4c-bm2-ss is not installed (see docs/bmv2.md)")
    out = tmp_path / "out"
    build_example(out)
    p4info = (out / "coexist.p4info.txt").read_text()
    names = set(re.findall(r'name: "([^"]+)"', p4info))
    request = json.loads((out / "entries.p4rt.json").read_text())
    seen = 0
    for u in request["updates"]:
        te = u["entity"].get("table_entry")
        if te:
            seen += 1
            assert te["table_name"] in names and te["action"]["action"]["action_name"] in names
            assert {m["field_name"] for m in te["match"]} <= names
    assert seen == len(example_pipeline().entries)
    bmv2_json = json.loads((out / "coexist.json").read_text())
    json_tables = {t["name"] for p in bmv2_json["pipelines"] for t in p["tables"]}
    for line in (out / "commands.txt").read_text().splitlines():
        if line.startswith("table_"):
            assert line.split()[1] in json_tables, line


def read_routes(path: Path) -> list[tuple[ipaddress.IPv4Network, bytes, int]]:
    """The user's LPM entries (``table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward PREFIX => MAC PORT``)."""
    routes = []
    for line in path.read_text().splitlines():
        words = line.split()
        if words[:1] == ["table_add"]:
            routes.append((ipaddress.ip_network(words[3]), bytes.fromhex(words[5].replace(":", "")), int(words[6])))
    return routes


def routed(frame: bytes, routes) -> tuple[int, bytes] | None:
    """What the example's ipv4_lpm does: the longest prefix's port, MACs rewritten, TTL - 1, checksum
    recomputed; None when no route (the table's default drops)."""
    if frame[12:14] != b"\x08\x00":
        return None
    dst = ipaddress.ip_address(frame[30:34])
    best = max((r for r in routes if dst in r[0]), key=lambda r: r[0].prefixlen, default=None)
    if best is None:
        return None
    out = bytearray(frame)
    out[0:6], out[6:12] = best[1], frame[0:6]
    out[22] -= 1
    out[24:26] = b"\0\0"
    out[24:26] = pk.ipv4_checksum(bytes(out[14:34])).to_bytes(2, "big")
    return best[2], bytes(out)


def with_dst(frame: bytes, dst: str) -> bytes:
    out = bytearray(frame)
    out[30:34] = ipaddress.ip_address(dst).packed
    out[24:26] = b"\0\0"
    out[24:26] = pk.ipv4_checksum(bytes(out[14:34])).to_bytes(2, "big")
    return bytes(out)


def example_probes(rng: random.Random) -> list[tuple[int, bytes, str]]:
    """(ingress port, frame, kind): single Add Orders, heartbeats, a non-Add-Order message, plain UDP."""
    out = []
    dsts = ["10.0.2.5", "10.0.3.7", "10.1.4.4", "10.9.9.9"]
    for i in range(64):
        order = pk.AddOrder(rng.choice([b"GOOGL", b"AAPL", b"MSFT", b"IBM"]), rng.choice([100, 500000, 500001, 900000]),
                            rng.choice([1, 1000, 1001, 50000]), rng.choice([b"B", b"S"]), i)
        out.append((rng.choice([0, 1]), with_dst(pk.itch_packet([order], i), rng.choice(dsts)), "itch"))
    for i in range(12):
        out.append((rng.choice([0, 1]), with_dst(pk.itch_packet([], 1000 + i), rng.choice(dsts)), "heartbeat"))
        delete = b"D" + bytes(18)
        mold = b"P4SUBTEST1" + struct.pack("!QHH", 2000 + i, 1, len(delete)) + delete
        out.append((rng.choice([0, 1]), with_dst(pk.ipv4_udp(mold, pk.ITCH_PORT), rng.choice(dsts)), "other-itch"))
        out.append((rng.choice([0, 1]), with_dst(pk.ipv4_udp(i.to_bytes(6, "big"), 9), rng.choice(dsts)), "ipv4"))
    return out


@pytest.mark.bmv2
@pytest.mark.p4c
def test_the_coexistence_example_on_simple_switch(tmp_path):
    """Subscribed Add Orders go where the rules say (the model), unchanged; everything else is routed
    by the user's LPM table (rewritten by it), or dropped where it has no route."""
    require_cli_switch()
    out = tmp_path / "out"
    program = build_example(out)
    pipeline = ir.load(out)
    model = Model(pipeline)
    graph = ParseGraph(read_spec(EXAMPLE / "coexist.p4"))  # the user's own parser
    routes = read_routes(EXAMPLE / "routes.txt")
    send, expected, kinds = [], [], set()
    for port, frame, kind in example_probes(random.Random(14)):
        send.append((port, frame))
        ports, _ = model.run_one(graph.parse(frame).row(model.inputs + model.validity, {PORT: port}))
        if ports:
            expected += [(p, frame) for p in ports]
            kinds.add("claimed")
        else:
            r = routed(frame, routes)
            if r:
                expected.append(r)
                kinds.add(f"routed {kind}")
            else:
                kinds.add("dropped")
    assert kinds == {"claimed", "routed itch", "routed heartbeat", "routed other-itch", "routed ipv4", "dropped"}, kinds
    assert {p for p, _ in expected} == {2, 3}
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path, program_json=program)
    try:
        text = switch.cli((EXAMPLE / "routes.txt").read_text() + (out / "commands.txt").read_text())
        assert "Error" not in text and "Invalid" not in text, text
        got = switch.exchange(send, [2, 3], [pk.ITCH_PORT, 9])
    finally:
        switch.close()
    from collections import Counter

    missing, extra = Counter(expected) - Counter(got), Counter(got) - Counter(expected)
    assert not missing and not extra, (f"{sum(missing.values())} missing, {sum(extra.values())} unexpected; "
                                       f"first missing {list(missing)[:1]}, first extra {list(extra)[:1]}")
