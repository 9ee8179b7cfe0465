"""The TNA VT program: its BF Runtime entries are the v1model program's entries one for one, an
interpreter of the entries (written here from the program's documented pipeline, sharing no code
with the renderer or runtime.vt_sim) forwards every pushed stack as runtime.vt_sim does, p4test
accepts the edge and transit programs, and ``p4sub route --delivery vt --target tofino`` writes them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.bmv2.vt_program import vt_tables as v1model_tables
from backends.tofino.vt_program import ENTRIES, INFO, PROGRAM, document, render_vt
from compiler.base.errors import P4subError, TargetError
from compiler.delivery.vt.combined import plan_vt
from compiler.network.host_rules import parse_network_rules, read_network_rules
from compiler.network.topology import leaf_spine
from compiler.network.topology_arg import parse_topology_arg
from compiler.spec.reader import read_spec
from p4sub import main
from runtime.vt_sim import VtNetwork
from tests.backends.tofino.test_program import _tna_include
from tests.compiler.delivery.test_combined import SPEC, frame_for, host_rules, networks

ROOT = Path(__file__).resolve().parents[3]
ITCH = ROOT / "apps/itch/itch.p4"
EXAMPLE = [str(ROOT / "examples/fat-tree-4.topo"), str(ROOT / "examples/fat-tree-4.rules"), "--spec", str(ITCH)]


@pytest.fixture(scope="module")
def topo():
    return parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))


@pytest.fixture(scope="module", params=["broadcast", "relation"])
def plan(request, topo):
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    return plan_vt(topo, rules, read_spec(ITCH), request.param, max_rules=6, target="tofino")


def documents(plan) -> dict[str, dict]:
    return {s: json.loads(render_vt(plan, s)[ENTRIES]) for s in plan.switches}


# -- the entries against the v1model program's ---------------------------------------------------

def test_entries_are_the_v1model_entries_at_every_label_position(plan):
    """check_tree_i holds v1model's check_tree entries; check_hop_i / check_stop_i v1model's with the
    port as its bit; the pushes are v1model's action arguments; the group holds every port."""
    for name, doc in documents(plan).items():
        sp = plan.switches[name]
        _, v1 = v1model_tables(plan, sp)
        want: dict[str, set] = {}
        for e in v1:
            if e.table in ("check_hop", "check_stop"):
                want.setdefault(e.table, set()).add((e.matches[0].value, 1 << (e.args[0] - 1)))
            elif e.table == "check_tree":
                want.setdefault(e.table, set()).add((e.matches[0].value, e.args[0]))
            elif e.table == "vt_push":
                want.setdefault(e.table, set()).add((e.matches[0].value, tuple(e.args)))
        got: dict[str, set] = {}
        for rec in doc["entries"]:
            m = re.fullmatch(r"pipe\.SwitchIngress\.(check_(?:hop|tree|stop))_(\d+)", rec["table_name"])
            if m:
                (key, value), = rec["key"].items()
                assert key == f"vt_label${m.group(2)}.ident"  # bf-p4c's spelling of vt_label[i]
                assert rec["action"] == f"SwitchIngress.vt_{m.group(1)[6:]}_{m.group(2)}"
                (arg,) = rec["data"].values()
                got.setdefault((m.group(1), int(m.group(2))), set()).add((value["value"], arg))
            elif rec["table_name"] == "pipe.SwitchIngress.vt_push":
                data = rec["data"]
                args = (data["count"], *(data[f"l{i}"] for i in range(plan.max_labels)))
                got.setdefault("vt_push", set()).add((rec["key"]["meta.p4sub_rset"]["value"], args))
        for i in range(plan.max_labels):
            for t in ("check_hop", "check_tree", "check_stop"):
                assert got.get((t, i), set()) == want.get(t, set()), (name, t, i)
        assert got.get("vt_push", set()) == want.get("vt_push", set())
        assert ("vt_push" in want) == sp.ingress
        nodes = [r for r in doc["pre"] if r["table_name"] == "$pre.node"]
        assert [n["data"]["$DEV_PORT"] for n in nodes] == [sorted(sp.ports)]


def folded(text: str, prefix: str, op: str = "|") -> set[str]:
    """The fields the tree ``prefix`` (backends/tofino/op_tree.py) folds into its first field with ``op``, run in
    the order the program applies its tables (each action is ``dst = dst op src``: bf-p4c refuses a longer
    expression in one action)."""
    body = {m[1]: (m[2], m[4]) for m in re.finditer(
        rf"action ({prefix}_\d+_\d+)\(\) \{{\s*(\S+) = (\S+) {re.escape(op)} (\S+);", text) if m[2] == m[3]}
    held: dict[str, set[str]] = {}
    first = None
    for name in re.findall(rf"({prefix}_\d+_\d+)_t\.apply\(\);", text):
        dst, src = body[name]
        first = first or dst
        held[dst] = held.get(dst, {dst}) | held.get(src, {src})
    return held.get(first, set())


def popped_tables(text: str) -> dict[int, dict[int, tuple[set[int], int]]]:
    """The egress's ``vt_popped_c`` tables: chain -> {pop bitmap: (labels set invalid, count added)}."""
    actions = {name: ({int(i) for i in re.findall(r"hdr\.vt_label\[(\d+)\]\.setInvalid\(\);", body)},
                      int(re.search(r"meta\.vt_popn_\d+ = 16w(\d+);", body).group(1)))
               for name, body in re.findall(r"action (vt_popped_\d+_\d+)\(\) \{(.*?)\n    \}", text, re.S)}
    out: dict[int, dict[int, tuple[set[int], int]]] = {}
    for chain, body in re.findall(r"table vt_popped_(\d+) \{(.*?)\n    \}", text, re.S):
        assert f"hdr.vt_bridge.pops_{chain} : exact;" in body
        rows = re.findall(r"\d+w(\d+) : (vt_popped_\d+_\d+)\(\);", body)
        out[int(chain)] = {int(m): actions[a] for m, a in rows}
    return out


def test_program_does_what_the_interpreter_below_assumes(plan):
    """The apply blocks ReadEntries follows: per position hop, else tree, else stop; each position's
    ports ORed into its chain's bitmaps, which OR trees fold; popped hops (marked per chain in the
    ingress, removed and counted by the egress); the ingress port's bit removed; the one group; the
    egress keeps a copy only if its port's bit is set."""
    for switch in ("e1_1", "c1"):
        text = render_vt(plan, switch)[PROGRAM]
        egress = text[text.index("control SwitchEgress("):]
        popped = popped_tables(egress)
        marks: dict[tuple[int, int], int] = {}
        chains = set()
        for i in range(plan.max_labels):
            assert re.search(rf"if \(hdr\.vt_label\[{i}\]\.isValid\(\)\) \{{\s*if \(!check_hop_{i}\.apply\(\)\.hit\) \{{"
                             rf"\s*if \(!check_tree_{i}\.apply\(\)\.hit\) \{{\s*check_stop_{i}\.apply\(\);", text), i
            hop = re.search(rf"action vt_hop_{i}\(bit<{plan.mask_width}> port_bit\) \{{\s*meta\.vt_hop_(\d+) = meta\.vt_hop_\1 \| port_bit;"
                            rf"\s*meta\.vt_pops_\1 = meta\.vt_pops_\1 \| \d+w(\d+);\s*\}}", text)
            chain, bit = int(hop.group(1)), int(hop.group(2))
            assert bit & (bit - 1) == 0 and (chain, bit) not in marks
            marks[(chain, bit)] = i
            chains.add(chain)
            assert re.search(rf"action vt_tree_{i}\(bit<{plan.mask_width}> mask\) \{{\s*meta\.vt_add_{chain} = "
                             rf"meta\.vt_add_{chain} \| mask;\s*\}}", text)
            assert re.search(rf"action vt_stop_{i}\(bit<{plan.mask_width}> port_bit\) \{{\s*meta\.vt_stop_{chain} = "
                             rf"meta\.vt_stop_{chain} \| port_bit;\s*\}}", text)
        # every pop bitmap of a chain removes exactly the labels it marks, and counts them
        assert set(popped) == chains
        for chain, rows in popped.items():
            bits = sorted(b for c, b in marks if c == chain)
            for m in range(1, 2 ** len(bits)):
                labels = {marks[(chain, b)] for k, b in enumerate(bits) if m >> k & 1}
                assert rows[sum(b for k, b in enumerate(bits) if m >> k & 1)] == (labels, len(labels))
            assert len(rows) == 2 ** len(bits) - 1  # no hop popped: a miss
            assert f"hdr.vt_bridge.pops_{chain} = meta.vt_pops_{chain};" in text
        assert folded(text, "vt_add_or") == {f"meta.vt_{k}_{c}" for k in ("add", "hop") for c in chains}
        assert folded(text, "vt_stop_or") == {f"meta.vt_stop_{c}" for c in chains} | {"meta.vt_in_bit"}
        assert "hdr.vt_bridge.send = meta.vt_add_0 & ~meta.vt_stop_0;" in text
        assert folded(egress, "vt_pop_sum", "+") == {f"meta.vt_popn_{c}" for c in chains}
        assert "hdr.vt_shim.count = hdr.vt_shim.count - meta.vt_popn_0;" in egress
        assert "ig_intr_md_for_tm.mcast_grp_a = VT_GROUP;" in text and "const bit<16> VT_GROUP = 1;" in text
        assert re.search(rf"action vt_set_port_bit\(bit<{plan.mask_width}> port_bit\) \{{\s*meta\.vt_port_bit = port_bit;"
                         r"\s*meta\.vt_serve = hdr\.vt_bridge\.send & port_bit;", egress)
        assert re.search(rf"vt_port_bit\.apply\(\);\s*if \(meta\.vt_serve == {plan.mask_width}w0\) \{{"
                         r"[^}]*eg_intr_md_for_dprsr\.drop_ctl = 3w1;\s*\} else if \(!vt_host_port\.apply\(\)\.hit\) \{"
                         r"\s*//[^\n]*\n\s*vt_popped_0\.apply\(\);", egress)
        assert "recirculate" not in text.split("*/", 1)[1]


# -- an interpreter of the entries -----------------------------------------------------------------

class ReadEntries:
    """One switch as its TNA program runs with the entries of its ``entries.bfrt.json``: every label
    position's check_hop, else check_tree, else check_stop; ports to serve = adds minus stops minus the
    ingress port's bit; hops that hit are popped; the group's copies whose port's bit is set leave, the
    stack stripped on vt_host_port ports."""

    def __init__(self, doc: dict, max_labels: int) -> None:
        self.n = max_labels
        self.tables: dict[str, dict[int, tuple[str, dict]]] = {}
        for rec in doc["entries"]:
            if "key" in rec and rec.get("default_entry") is not True and len(rec["key"]) == 1:
                (field, key), = rec["key"].items()
                if "value" in key:
                    self.tables.setdefault(rec["table_name"].split(".")[-1], {})[key["value"]] = (rec["action"],
                                                                                                 rec["data"])
        nodes = {r["key"]["$MULTICAST_NODE_ID"]["value"]: r["data"]["$DEV_PORT"] for r in doc["pre"]
                 if r["table_name"] == "$pre.node"}
        self.group = {r["key"]["$MGID"]["value"]: [p for n in r["data"]["$MULTICAST_NODE_ID"] for p in nodes[n]]
                      for r in doc["pre"] if r["table_name"] == "$pre.mgid"}

    def bit(self, table: str, port: int) -> int:
        hit = self.tables.get(table, {}).get(port)
        return hit[1]["port_bit"] if hit else 0

    def scan(self, labels: list[int]) -> tuple[int, list[int]]:
        """Every position's hop, else tree, else stop: the ports added minus those stopped (before the
        ingress port's bit), and the positions of the hops popped."""
        add = stop = 0
        popped = []
        for i, word in enumerate(labels):
            for kind in ("hop", "tree", "stop"):
                hit = self.tables.get(f"check_{kind}_{i}", {}).get(word)
                if hit is not None:
                    action, data = hit
                    value = data["port_bit"] if kind != "tree" else data["mask"]
                    if kind == "stop":
                        stop |= value
                    else:
                        add |= value
                    if kind == "hop":
                        popped.append(i)
                    break
        return add & ~stop, popped

    def process(self, in_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        if frame[12:14] != b"\x99\x99":
            return []
        count = int.from_bytes(frame[16:18], "big")
        if count == 0 or count > self.n or len(frame) < 18 + 2 * count:
            return []
        labels = [int.from_bytes(frame[18 + 2 * i:20 + 2 * i], "big") for i in range(count)]
        body = frame[18 + 2 * count:]
        add = stop = 0
        kept = []
        for i, word in enumerate(labels):
            for kind in ("hop", "tree", "stop"):
                hit = self.tables.get(f"check_{kind}_{i}", {}).get(word)
                if hit is not None:
                    break
            if hit is None:
                kept.append(word)
                continue
            action, data = hit
            (value,) = data.values()
            if action.endswith(f"vt_hop_{i}"):
                add |= value
                continue  # popped
            kept.append(word)
            if action.endswith(f"vt_tree_{i}"):
                add |= value
            else:
                assert action.endswith(f"vt_stop_{i}"), action
                stop |= value
        send = add & ~stop & ~self.bit("vt_in_bit", in_port)
        if send == 0:
            return []
        out = []
        for port in self.group[1]:
            if send & self.bit("vt_port_bit", port):
                if port in self.tables.get("vt_host_port", {}):
                    out.append((port, frame[:12] + frame[14:16] + body))
                else:
                    out.append((port, frame[:16] + len(kept).to_bytes(2, "big")
                                + b"".join(w.to_bytes(2, "big") for w in kept) + body))
        return out

    def push(self, frame: bytes, rsid: int) -> bytes | None:
        hit = self.tables.get("vt_push", {}).get(rsid)
        if hit is None:
            return None
        data = hit[1]
        words = [data[f"l{i}"] for i in range(data["count"])]
        return (frame[:12] + b"\x99\x99" + frame[12:14] + data["count"].to_bytes(2, "big")
                + b"".join(w.to_bytes(2, "big") for w in words) + frame[14:])


def follow(plan, topo, programs: dict[str, ReadEntries], sim: VtNetwork) -> int:
    """Every push of every ingress switch, hop by hop: the entries' copies are vt_sim's, byte for byte."""
    frame = bytes(range(12)) + b"\x08\x00" + b"payload"
    hops = 0
    for sp in plan.switches.values():
        for push in sp.pushes:
            pushed = programs[sp.name].push(frame, push.rsid)
            assert pushed == sim.push_frame(sp.name, frame, push.rsid)
            queue = [(sp.name, sp.host_ports[0], pushed)]
            while queue:
                switch, port, f = queue.pop()
                mine = programs[switch].process(port, f)
                assert sorted(mine) == sorted(sim.process(switch, port, f, None, Counter())), (switch, push)
                hops += 1
                for out_port, copy in mine:
                    node, node_port = topo.peer(switch, out_port)
                    if topo.is_switch(node):
                        queue.append((node, node_port, copy))
    return hops


def test_push_entries_carry_what_the_label_scan_decides_for_the_pushed_stack(plan):
    """The edge's exclusive path: each push entry's last parameters are the scan of the switch's own
    entries over the labels the entry pushes (ports to serve before the ingress port's bit, the hops
    to pop per chain)."""
    checked = 0
    for switch, doc in documents(plan).items():
        reader = ReadEntries(doc, plan.max_labels)
        for rsid, (action, data) in reader.tables.get("vt_push", {}).items():
            labels = [data[f"l{i}"] for i in range(data["count"])]
            send, popped = reader.scan(labels)
            if labels:
                assert data["send"] == send and (data["drop"], data["reason"]) == (0, 0)
            else:  # an empty stack: dropped as such (send all ones keeps the no-port test off it)
                assert (data["send"], data["drop"], data["reason"]) == ((1 << plan.mask_width) - 1, 1, 3)
            chains = len([k for k in data if k.startswith("pops_")])
            assert {c + chains * k for c in range(chains) for k in range(8) if data[f"pops_{c}"] >> k & 1} == set(popped)
            checked += 1
    assert checked == sum(len(s.pushes) for s in plan.switches.values())


def test_every_pushed_stack_is_forwarded_by_the_entries_as_vt_sim_forwards_it(plan, topo):
    programs = {s: ReadEntries(d, plan.max_labels) for s, d in documents(plan).items()}
    assert follow(plan, topo, programs, VtNetwork(topo, plan)) > sum(len(s.pushes) for s in plan.switches.values())


@settings(max_examples=25, deadline=None)
@given(networks(), st.sampled_from(["broadcast", "hops", "relation", "random", "partitions"]),
       st.sampled_from([None, 4, 1]), st.sampled_from([None, 5, 2]))
def test_random_receiver_sets_are_forwarded_by_the_entries_as_vt_sim_forwards_them(net, strategy, max_rules, labels):
    topo, rules = net
    if not rules.rules:
        return
    try:
        plan = plan_vt(topo, rules, SPEC, strategy, max_rules=max_rules,
                       target="tofino", max_labels=labels)
    except P4subError as exc:
        assert "raise --max-labels or --max-rules" in exc.message
        return
    programs = {s: ReadEntries(document(plan, sp), plan.max_labels) for s, sp in plan.switches.items()}
    follow(plan, topo, programs, VtNetwork(topo, plan))


# -- more than 64 ports ------------------------------------------------------------------------------

def wide_plan(hosts_per_leaf: int, target: str, spec=SPEC):
    """Two leaves of ``hosts_per_leaf`` hosts; ``spec``: the test spec (no Ethernet: plans and entries
    only) or ITCH (the edge program can be rendered)."""
    topo = leaf_spine(2, 2, hosts_per_leaf)
    hosts = topo.hosts()
    if spec is SPEC:
        rules = host_rules([(1, hosts[1:80]), (2, hosts[::3]), (3, hosts[-2:])], topo)
    else:
        rules = parse_network_rules(f"add_order.shares > 100 : fwd({', '.join(hosts[1:80])});\n"
                                    f"add_order.stock == \"GOOGL\" : fwd({', '.join(hosts[::3])});\n", topo)
    return topo, plan_vt(topo, rules, spec, "broadcast", target=target)


def test_switches_with_more_than_64_ports_get_wider_bitmaps():
    topo, plan = wide_plan(70, "tofino")
    assert max(len(s.ports) for s in plan.switches.values()) == 72 and plan.mask_width == 128
    sim = VtNetwork(topo, plan)
    hosts = topo.hosts()
    for values, wanted in (({"m.a": 1, "m.b": 0}, set(hosts[1:80])), ({"m.a": 0, "m.b": 2}, set(hosts[::3]))):
        got = sim.publish(hosts[0], frame_for(values), values)
        assert set(got.frames) == wanted - {hosts[0]}
    programs = {s: ReadEntries(document(plan, sp), plan.max_labels) for s, sp in plan.switches.items()}
    follow(plan, topo, programs, sim)


@pytest.fixture(scope="module")
def wide_itch():
    return wide_plan(70, "tofino", read_spec(ITCH))[1]


def test_both_programs_take_128_bit_bitmaps(wide_itch):
    assert wide_itch.mask_width == 128
    text = render_vt(wide_itch, "l1")[PROGRAM]
    assert "bit<128> send;" in text and "vt_tree_0(bit<128> mask)" in text
    from backends.bmv2.vt_program import render_vt as render_v1model

    v1 = render_v1model(wide_itch, "l1")["program.p4"]
    assert "action vt_tree(bit<128> mask)" in v1 and v1.count(": vt_set_port(") == 128


def test_bmv2_refuses_ports_above_256_and_says_why():
    _, plan = wide_plan(260, "bmv2", read_spec(ITCH))
    from backends.bmv2.vt_program import render_vt as render_v1model

    with pytest.raises(TargetError, match="shift amounts to 8 bits"):
        render_v1model(plan, "l1")
    assert plan.mask_width == 320
    assert "bit<320> send;" in render_vt(plan, "l1")[PROGRAM]


# -- p4test and the CLI ----------------------------------------------------------------------------

def p4test(text: str, tmp_path: Path) -> None:
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE to p4c's "
                    "backends/tofino/bf-p4c/p4include or to $SDE_INSTALL/share/p4c/p4include)")
    (tmp_path / PROGRAM).write_text(text)
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(tmp_path / PROGRAM)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr and "warning" not in done.stderr, done.stderr


@pytest.mark.p4c
@pytest.mark.parametrize("switch", ["e1_1", "a1_1", "c1"])
def test_p4test_accepts_the_edge_and_transit_programs(plan, switch, tmp_path):
    p4test(render_vt(plan, switch)[PROGRAM], tmp_path)


@pytest.mark.p4c
def test_p4test_accepts_a_128_bit_program(wide_itch, tmp_path):
    p4test(render_vt(wide_itch, "l1")[PROGRAM], tmp_path)


@pytest.mark.p4c
def test_p4c_bm2_ss_accepts_a_128_bit_v1model_program(wide_itch, tmp_path):
    from backends.bmv2.vt_program import render_vt as render_v1model
    from tests.backends.bmv2.switch import tool

    if tool("p4c-bm2-ss") is None:
        pytest.skip("p4c-bm2-ss is not installed")
    (tmp_path / "v1.p4").write_text(render_v1model(wide_itch, "l1")["program.p4"])
    done = subprocess.run([tool("p4c-bm2-ss"), "-o", str(tmp_path / "v1.json"), str(tmp_path / "v1.p4")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "warning" not in done.stderr.lower(), done.stderr


def test_route_cli_writes_a_tna_vt_program_per_switch(tmp_path, topo):
    out = tmp_path / "out"
    assert main(["route", *EXAMPLE, "--delivery", "vt:relation", "--max-rules", "4", "--target", "tofino",
                 "-o", str(out)]) == 0
    for switch in topo.switches():
        assert {PROGRAM, ENTRIES, INFO} == {f.name for f in (out / switch).iterdir()}
        info = json.loads((out / switch / INFO).read_text())
        assert info["mode"] == "virtual-trees" and info["recirculations_per_packet"] == 0
        assert info["max_labels"] == 16 and info["mask_bits"] == 8  # the narrowest container holding port 4
    assert "vt_push_stack" in (out / "e1_1" / PROGRAM).read_text()
    assert "vt_push_stack" not in (out / "c1" / PROGRAM).read_text()
