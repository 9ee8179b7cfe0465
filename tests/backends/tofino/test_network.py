"""The network stage of routed Tofino switches: hairpin and up-to-up copies are dropped in the egress.

The programs are read with regular expressions (no code shared with the renderer) and checked
against the topology's own up ports: for every pair of a switch's ports, the egress drops a copy
exactly when it goes back out of its ingress port or from an up port up again.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import backends.tofino as tofino
from backends import switch_emitter
from backends.tofino.layout import TofinoOptions
from compiler import ir
from compiler.base.errors import P4subError
from compiler.network.compile import compile_network
from compiler.network.host_rules import parse_network_rules
from compiler.network.routing import lower_up_port
from compiler.network.topology_file import read_topology
from p4sub import main
from tests.backends.tofino.helpers import ITCH_SPEC, SCALAR_RULES, compile_text, control_body, scalar_spec
from tests.backends.tofino.test_program import _tna_include

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGY = ROOT / "examples/fat-tree-4.topo"
RULES = ROOT / "examples/fat-tree-4.rules"
SWITCHES = {"edge": "e1_1", "aggregation": "a2_1", "core": "c3"}
POLICIES = ("mr", "tr")

# Scalar subscriptions over the same fat tree (host names instead of ports).
SCALAR_NETWORK_RULES = """
order.stock == "GOOG" and order.price > 10 : fwd(h2, h12);
order.stock == "AAPL" and order.price < 20 : fwd(h5);
order.price > 5 and order.qty <= 300 : fwd(h3, h4, h16);
order.qty == 7 : fwd(h9);
"""


@pytest.fixture(scope="module")
def topology():
    return read_topology(TOPOLOGY)


@pytest.fixture(scope="module")
def routed_itch(tmp_path_factory) -> dict[str, Path]:
    """``p4sub route`` on the shipped example, for Tofino, under both policies."""
    out = {}
    for policy in POLICIES:
        d = tmp_path_factory.mktemp(f"itch-{policy}") / "net"
        assert main(["route", str(TOPOLOGY), str(RULES), "--spec", str(ITCH_SPEC), "--policy", policy,
                     "--target", "tofino", "--jobs", "2", "-o", str(d)]) == 0
        out[policy] = d
    return out


@pytest.fixture(scope="module")
def routed_scalar(tmp_path_factory, topology) -> dict[str, Path]:
    """The same fat tree with one scalar message per packet."""
    rules = parse_network_rules(SCALAR_NETWORK_RULES, topology, "scalar.rules")
    out = {}
    for policy in POLICIES:
        d = tmp_path_factory.mktemp(f"scalar-{policy}")
        compile_network(topology, rules, scalar_spec(), policy=policy, out_dir=d, target="tofino", emit=switch_emitter("tofino"), jobs=1)
        out[policy] = d
    return out


# -- reading a program ------------------------------------------------------------------------------


def _const_ports(text: str, table: str, key: str, action: str) -> set[int] | None:
    """The ports a const table lists (None when the program has no such table)."""
    m = re.search(rf"table {table} \{{\s*key = \{{\s*{re.escape(key)} : exact;\s*\}}(.*?)\n    \}}\n", text, re.S)
    if m is None:
        return None
    body = m.group(1)
    assert re.search(r"const default_action = NoAction\(\);", body)
    entries = re.findall(r"^\s*9w(\d+) : (\w+)\(\);$", body, re.M)
    assert {a for _, a in entries} <= {action}
    return {int(p) for p, _ in entries}


def _bridge_members(text: str) -> list[tuple[int, str]]:
    m = re.search(r"header p4sub_bridge_h \{(.*?)\}", text, re.S)
    return [] if m is None else [(int(w), n) for w, n in re.findall(r"bit<(\d+)> (\w+);", m.group(1))]


def _egress_drops(text: str, in_port: int, out_port: int) -> bool:
    """Whether the rendered egress drops a copy from ``in_port`` to ``out_port``, read off the program."""
    egress = control_body(text, "SwitchEgress")
    from_up = _const_ports(control_body(text, "SwitchIngress"), "p4sub_from_up_port", "ig_intr_md.ingress_port",
                           "p4sub_came_from_up") or set()
    to_up = _const_ports(egress, "p4sub_to_up_port", "eg_intr_md.egress_port", "p4sub_drop_going_up") or set()
    hairpin = re.search(r"if \(eg_intr_md\.egress_port == hdr\.p4sub_bridge\.p4sub_in_port\) \{\s*"
                        r"eg_intr_md_for_dprsr\.drop_ctl = 3w1;\s*\}", egress)
    assert hairpin, "no hairpin check in the egress"
    if to_up:
        assert re.search(r"\} else if \(hdr\.p4sub_bridge\.p4sub_from_up == 1w1\) \{\s*p4sub_to_up_port\.apply\(\);",
                         egress)
        assert re.search(r"action p4sub_drop_going_up\(\) \{\s*eg_intr_md_for_dprsr\.drop_ctl = 3w1;\s*\}", egress)
    return in_port == out_port or (in_port in from_up and out_port in to_up)


def _check_stage(text: str, up_ports: set[int], all_ports: tuple[int, ...]) -> None:
    """The program has the network stage for exactly ``up_ports``, bridged and parsed as TNA needs."""
    members = _bridge_members(text)
    assert (9, "p4sub_in_port") in members
    assert ((1, "p4sub_from_up") in members) == bool(up_ports)
    assert sum(w for w, _ in members) % 8 == 0
    ingress = control_body(text, "SwitchIngress")
    apply = ingress[ingress.index("    apply {"):]
    # The port is bridged before any p4sub table runs, for every packet the ingress lets through.
    head = re.match(r"\s*apply \{\s*(?://[^\n]*\n\s*)?hdr\.p4sub_bridge\.setValid\(\);\s*"
                    r"hdr\.p4sub_bridge\.p4sub_in_port = ig_intr_md\.ingress_port;", apply)
    assert head, apply[:300]
    from_up = _const_ports(ingress, "p4sub_from_up_port", "ig_intr_md.ingress_port", "p4sub_came_from_up")
    to_up = _const_ports(control_body(text, "SwitchEgress"), "p4sub_to_up_port", "eg_intr_md.egress_port",
                         "p4sub_drop_going_up")
    assert from_up == (up_ports or None) and to_up == (up_ports or None)
    if up_ports:
        assert apply.index("hdr.p4sub_bridge.p4sub_from_up = 1w0;") < apply.index("p4sub_from_up_port.apply();")
    # Ingress deparser: the bridged header goes first; egress parser takes it off; egress deparser emits nothing.
    deparser = control_body(text, "SwitchIngressDeparser")
    assert re.findall(r"pkt\.emit\(hdr\.(\w+)\);", deparser)[0] == "p4sub_bridge"
    parser = text[text.index("parser SwitchEgressParser("):text.index("control SwitchEgress(")]
    assert re.search(r"pkt\.extract\(eg_intr_md\);.*pkt\.extract\(hdr\.p4sub_bridge\);\s*transition accept;",
                     parser, re.S)
    assert not re.search(r"\bemit\(", control_body(text, "SwitchEgressDeparser").split("apply {")[1])
    assert "p4sub_bridge_h p4sub_bridge;" in text.split("struct p4sub_egress_headers_t {")[1].split("}")[0]
    for a in all_ports:
        for b in all_ports:
            expected = a == b or (a in up_ports and b in up_ports)
            assert _egress_drops(text, a, b) == expected, (a, b)


def _check_no_stage(text: str) -> None:
    assert "p4sub_in_port" not in text and "p4sub_from_up" not in text
    assert "p4sub_to_up_port" not in text and "eg_intr_md.egress_port ==" not in text


# -- (a) a routed switch has the stage with exactly its up ports; a lone compile has none ------------


@pytest.mark.parametrize("layer", list(SWITCHES))
@pytest.mark.parametrize("policy", POLICIES)
def test_routed_itch_switch_has_the_network_stage_for_exactly_its_up_ports(routed_itch, topology, policy, layer):
    switch = SWITCHES[layer]
    up = set(topology.up_ports(switch))
    assert (layer == "core") == (not up)
    out = routed_itch[policy] / switch
    text = (out / "program.p4").read_text()
    _check_stage(text, up, topology.ports(switch))
    notes = json.loads((out / "resources.json").read_text())["notes"]
    assert notes["network_stage"]["up_ports"] == sorted(up)
    assert notes["batch_mode"] == "union"  # the bridged header also carries the 12 slots' leaf states
    assert notes["bridged_bits"] == sum(w for w, _ in _bridge_members(text))


@pytest.mark.parametrize("switch", list(SWITCHES.values()))
def test_the_same_pipeline_compiled_alone_has_no_network_stage(routed_itch, topology, switch):
    pipeline = ir.load(routed_itch["tr"] / switch / "pipeline.json")
    lone = tofino.build(lower_up_port(pipeline, topology.up_ports(switch)))
    _check_no_stage(lone.program.text)
    assert lone.resources["notes"]["network_stage"] is None
    assert not any(t.name.startswith("p4sub_") and t.name.endswith("_up_port") for t in lone.estimate.tables)


def test_scalar_routed_switches_bridge_only_the_network_stage(routed_scalar, topology):
    for switch in SWITCHES.values():
        text = (routed_scalar["tr"] / switch / "program.p4").read_text()
        _check_stage(text, set(topology.up_ports(switch)), topology.ports(switch))
        assert not any(n.startswith("p4sub_state") for _, n in _bridge_members(text))


# -- the stage's cost in the estimate; recirculation keeps the port; bad ports ------------------------
# A switch of a routed network is compiled with delivery groups (compiler.network.compile).


def test_estimate_counts_the_stage_tables_once_each():
    pipeline = compile_text(scalar_spec(), SCALAR_RULES, delivery="groups")
    lone = tofino.build(pipeline)
    routed = tofino.build(pipeline, tofino.network_options((3, 1, 3)))
    tables = {t.name: t for t in routed.estimate.tables}
    for name, gress in (("p4sub_from_up_port", "ingress"), ("p4sub_to_up_port", "egress")):
        t = tables[name]
        assert (t.gress, t.memory, t.entries, t.tcam_blocks) == (gress, "sram", 2, 0)
        assert t.first_stage == 0  # depends on nothing
        # 9-bit key (under the 10 ghost bits: nothing stored) + 4 version bits + 1 instruction bit; one RAM.
        assert (t.entry_bits, t.sram_blocks) == (5, 1)
    assert routed.estimate.sram_blocks == lone.estimate.sram_blocks + 2
    assert routed.estimate.tcam_blocks == lone.estimate.tcam_blocks
    assert set(tables) - {t.name for t in lone.estimate.tables} == {"p4sub_from_up_port", "p4sub_to_up_port"}
    # The const tables are part of the program: the control plane installs nothing for them.
    assert routed.entries == lone.entries
    assert routed.resources["notes"]["network_stage"] == {"up_ports": [1, 3],
                                                          "tables": ["p4sub_from_up_port", "p4sub_to_up_port"]}
    # the ingress port and the up bit, each ending on a byte boundary (7 + 9 and 7 + 1 bits)
    assert routed.resources["notes"]["bridged_bits"] == 24 and lone.resources["notes"]["bridged_bits"] == 0


def test_a_core_switch_has_only_the_hairpin_check():
    pipeline = compile_text(scalar_spec(), SCALAR_RULES, delivery="groups")
    core = tofino.build(pipeline, tofino.network_options(()))
    assert not any(t.name.endswith("_up_port") for t in core.estimate.tables)
    _check_stage(core.program.text, set(), (1, 2, 3, 4, 5))
    assert core.estimate.sram_blocks == tofino.build(pipeline).estimate.sram_blocks


def _recirculating(up_ports):
    small = tofino.Target(name="small", stages=2)
    options = TofinoOptions(target=small, allow_recirculation=True, network_up_ports=up_ports)
    return tofino.build(compile_text(scalar_spec(), SCALAR_RULES, delivery="groups"), options)


def test_recirculated_pass_keeps_the_original_ingress_port():
    r = _recirculating((1, 2))
    assert r.program.recirculates
    text = r.program.text
    recirc = re.search(r"header p4sub_recirc_h \{(.*?)\}", text, re.S).group(1)
    assert "bit<9> p4sub_in_port;" in recirc and "bit<1> p4sub_from_up;" in recirc
    ingress = control_body(text, "SwitchIngress")
    split = ingress.index("} else if (hdr.order.isValid())")
    second, first = ingress[ingress.index("if (hdr.p4sub_recirc.isValid()) {"):split], ingress[split:]
    for f in ("p4sub_in_port", "p4sub_from_up"):
        # pass 2 comes in on the recirculation port: the bridged port is the one pass 1 saved
        assert f"hdr.p4sub_bridge.{f} = hdr.p4sub_recirc.{f};" in second
        assert f"hdr.p4sub_recirc.{f} = hdr.p4sub_bridge.{f};" in first
    assert first.index("hdr.p4sub_recirc.p4sub_in_port") < first.index("ucast_egress_port = 9w68;")
    _check_stage(text, {1, 2}, (1, 2, 3, 4, 5))


@pytest.mark.parametrize("ports", [(512,), (68,)])
def test_up_ports_that_cannot_be_an_up_port_are_refused(ports):
    with pytest.raises(P4subError, match="up port"):
        tofino.build(compile_text(scalar_spec(), SCALAR_RULES, delivery="groups"), tofino.network_options(ports))


# -- (b) p4test accepts the routed programs --------------------------------------------------------


def _p4test(path: Path) -> None:
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE to p4c's "
                    "backends/tofino/bf-p4c/p4include or to $SDE_INSTALL/share/p4c/p4include)")
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


@pytest.mark.p4c
@pytest.mark.parametrize("layer", list(SWITCHES))
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("spec", ["itch", "scalar"])
def test_p4test_accepts_routed_programs(request, spec, policy, layer):
    out = request.getfixturevalue("routed_itch" if spec == "itch" else "routed_scalar")
    _p4test(out[policy] / SWITCHES[layer] / "program.p4")


@pytest.mark.p4c
def test_p4test_accepts_a_recirculating_routed_program(tmp_path):
    (tmp_path / "program.p4").write_text(_recirculating((1, 2)).program.text)
    _p4test(tmp_path / "program.p4")


# -- (c) p4sub route --target tofino writes every switch with its stage -----------------------------


def test_route_cli_writes_every_switch_with_its_network_stage(routed_itch, topology):
    out = routed_itch["tr"]
    assert json.loads((out / "network.json").read_text())["target"] == "tofino"
    for switch in topology.switches():
        d = out / switch
        assert {"program.p4", "entries.bfrt.json", "resources.json"} <= {p.name for p in d.iterdir()}
        up = set(topology.up_ports(switch))
        text = (d / "program.p4").read_text()
        assert _const_ports(control_body(text, "SwitchIngress"), "p4sub_from_up_port", "ig_intr_md.ingress_port",
                            "p4sub_came_from_up") == (up or None)
        assert _const_ports(control_body(text, "SwitchEgress"), "p4sub_to_up_port", "eg_intr_md.egress_port",
                            "p4sub_drop_going_up") == (up or None)
        assert "if (eg_intr_md.egress_port == hdr.p4sub_bridge.p4sub_in_port) {" in text
        assert json.loads((d / "resources.json").read_text())["notes"]["network_stage"]["up_ports"] == sorted(up)
