"""The TNA header-stack program of a combined compile: entries against the program text and the plan,
the const tables against the pruning rules they implement, p4test on the program, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.stack_network import render_target
from backends.tofino.stack_program import ENTRIES, INFO, PROGRAM, render_stack
from compiler.base.errors import TargetError
from compiler.delivery.combined import DROP_REASONS, LIMITS, plan_combined, push_args
from compiler.network.host_rules import read_network_rules
from compiler.network.topology_arg import parse_topology_arg
from compiler.spec.reader import read_spec
from p4sub import main
from tests.backends.tofino.test_program import _tna_include
from tests.compiler.delivery.mixed_frames import mixed_tag_frames

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = [str(ROOT / "examples/fat-tree-4.topo"), str(ROOT / "examples/fat-tree-4.rules"),
           "--spec", str(ROOT / "apps/itch/itch.p4")]
# Small enough that some trees fall back to stored trees (so p4sub_stored gets entries).
FALLBACK_LABELS = {"port": 12, "bitmask": 8, "mcgroup": 8, "mixed": 8}
ENCODINGS = tuple(FALLBACK_LABELS)


@pytest.fixture(scope="module")
def topo():
    return parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo"))


@pytest.fixture(scope="module", params=ENCODINGS)
def plan(request, topo):
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    return plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), request.param, target="tofino",
                         max_labels=FALLBACK_LABELS[request.param])


# -- reading the program text (regular expressions; no code shared with the renderer) ----------------

def control(text: str, name: str) -> str:
    start = text.index(f"control {name}(")
    nxt = text.find("\ncontrol ", start + 1)
    return text[start:nxt if nxt > 0 else len(text)]


def declared_tables(body: str) -> dict[str, dict]:
    """``@name("n") table t { key = {...} actions = {...} }``: keys as (name, width-expression), actions."""
    out = {}
    for m in re.finditer(r"@name\(\"([^\"]+)\"\) table (\w+) \{(.*?)\n    \}\n", body, re.S):
        inner = m.group(3)
        keys = re.findall(r"^\s*(\S+) : (\w+) @name\(\"([^\"]+)\"\);", inner, re.M)
        actions = [a.strip() for a in re.search(r"actions = \{(.*?)\}", inner, re.S).group(1).split(";") if a.strip()]
        out[m.group(1)] = {"keys": keys, "actions": actions}
    return out


def declared_actions(body: str) -> dict[str, dict[str, int]]:
    """``@name("n") action a(bit<W> p, ...)`` -> {n: {p: W}}."""
    out = {}
    for m in re.finditer(r"@name\(\"([^\"]+)\"\) action \w+\(([^)]*)\)", body):
        out[m.group(1)] = {p: int(w) for w, p in re.findall(r"bit<(\d+)> (\w+)", m.group(2))}
    return out


def widths_of(text: str, struct: str) -> dict[str, int]:
    body = re.search(rf"(?:struct|header) {struct} \{{(.*?)\n\}}", text, re.S).group(1)
    return {n: int(w) for w, n in re.findall(r"bit<(\d+)> (\w+);", body)}


def key_width(text: str, expr: str) -> int:
    """Width of a key expression of the generated program: ``hdr.h[0].f``, ``hdr.h.f``, ``meta.x``, ``eg_intr_md.egress_port``."""
    if expr == "eg_intr_md.egress_port":
        return 9
    if expr.startswith("meta."):
        return widths_of(text, "p4sub_metadata_t")[expr[5:]]
    header, fld, msb, lsb = re.fullmatch(r"hdr\.(\w+)(?:\[\d+\])?\.(\w+)(?:\[(\d+):(\d+)\])?", expr).groups()
    htype = re.search(rf"^\s+(\w+)(?:\[\d+\])? {header};", text, re.M).group(1)
    return widths_of(text, htype)[fld] if msb is None else int(msb) - int(lsb) + 1


def fits(value, width: int) -> bool:
    return isinstance(value, int) and 0 <= value < (1 << width)


# -- entries against the program ------------------------------------------------------------------

@pytest.mark.parametrize("switch", ["e1_1", "a1_1", "c1"])
def test_every_table_action_param_and_key_of_the_entries_exists_in_the_program_with_its_width(plan, switch):
    files = render_stack(plan, switch)
    text, doc = files[PROGRAM], json.loads(files[ENTRIES])
    controls = {c: control(text, c) for c in ("SwitchIngress", "SwitchEgress")}
    tables = {c: declared_tables(b) for c, b in controls.items()}
    actions = {c: declared_actions(b) for c, b in controls.items()}
    assert doc["entries"] and doc["target"] == "tofino"
    for e in doc["entries"]:
        pipe, ctl, name = e["table_name"].split(".")
        assert pipe == "pipe" and name in tables[ctl], e["table_name"]
        decl = tables[ctl][name]
        act_ctl, act = e["action"].split(".")
        assert act_ctl == ctl and act in decl["actions"], e["action"]
        params = actions[ctl][act]
        assert set(e["data"]) == set(params)
        assert all(fits(v, params[p]) for p, v in e["data"].items()), e
        keys = {n: expr for expr, _, n in decl["keys"]}
        fields = {k for k in e["key"] if k != "$MATCH_PRIORITY"}
        assert fields == set(keys) and (not e.get("default_entry") or not keys)
        for f in fields:
            w = key_width(text, keys[f])
            assert all(fits(v, w) for k, v in e["key"][f].items() if k in ("value", "mask", "low", "high")), (f, e)
    summary = {t["table_name"] for t in doc["tables"]}
    assert {e["table_name"] for e in doc["entries"]} <= summary


def test_entries_carry_exactly_the_plan_state(plan, topo):
    assert plan.fallbacks > 0
    for sp in plan.switches.values():
        doc = json.loads(render_stack(plan, sp.name)[ENTRIES])
        rows: dict[str, list] = {}
        for e in doc["entries"]:
            rows.setdefault(e["table_name"].split(".")[-1], []).append(e)
        own = rows.pop("p4sub_self")
        assert own == [{"table_name": "pipe.SwitchIngress.p4sub_self", "default_entry": True,
                        "action": "SwitchIngress.p4sub_set_own", "key": {}, "data": {"id": sp.switch_id}}]
        host = sorted(e["key"]["eg_intr_md.egress_port"]["value"] for e in rows.pop("p4sub_host_port", []))
        assert host == sorted(sp.host_ports)
        stored = sorted((e["key"]["p4sub_label$0.value"]["value"], e["data"]["mask"]) for e in rows.pop("p4sub_stored", []))
        assert stored == sorted(sp.stored)
        pushes = rows.pop("p4sub_push", [])
        expected = {p.rsid: push_args(plan, p) for p in sp.pushes}
        got = {e["key"]["meta.p4sub_rset"]["value"]:
               tuple([e["data"]["count"]] + [e["data"][f"l{i}"] for i in range(plan.max_labels)]) for e in pushes}
        assert got == expected and len(pushes) == len(sp.pushes)
        assert len(pushes) == (len(plan.receiver_sets) if sp.ingress else 0)
        # What is left is the subscription pipeline, on ingress switches only, once per IR entry or more
        # (a range split into prefixes).
        if sp.ingress:
            assert sum(map(len, rows.values())) >= len(plan.pipeline.entries)
            assert set(rows) == {e.table for e in plan.pipeline.entries}
        else:
            assert rows == {}


def test_groups_are_the_port_bitmaps_of_the_plan(plan, topo):
    for sp in plan.switches.values():
        pre = json.loads(render_stack(plan, sp.name)[ENTRIES])["pre"]
        nodes = {r["key"]["$MULTICAST_NODE_ID"]["value"]: r["data"] for r in pre if r["table_name"] == "$pre.node"}
        mgids = {r["key"]["$MGID"]["value"]: r["data"] for r in pre if r["table_name"] == "$pre.mgid"}
        for node, data in nodes.items():
            assert node == data["$MULTICAST_RID"] == sum(1 << (p - 1) for p in data["$DEV_PORT"])
        assert set(mgids) == set(nodes) == {g for g, _ in sp.groups}
        assert all(d["$MULTICAST_NODE_ID"] == [g] for g, d in mgids.items())
        ports = topo.ports(sp.name)
        assert len(mgids) == 2 ** len(ports) - 1  # at most 8 ports: every non-empty subset
        assert [r["table_name"] for r in pre] == ["$pre.node"] * len(nodes) + ["$pre.mgid"] * len(mgids)


def test_program_facts_match_the_plan(plan):
    for switch in ("e1_1", "c1"):
        files = render_stack(plan, switch)
        info, text = json.loads(files[INFO]), files[PROGRAM]
        sp = plan.switches[switch]
        assert info["edge"] == sp.ingress and info["switch_id"] == sp.switch_id
        assert info["max_labels"] == plan.max_labels <= LIMITS["tofino"].max_labels
        assert info["egress_parse_bytes"] <= 160
        assert f"p4sub_label_t[{plan.max_labels}] p4sub_label;" in text
        assert ("p4sub_push_stack" in text) == sp.ingress
        # The edge evaluates the first message: it parses that one and leaves the rest as payload
        # (twelve parsed ITCH messages left bf-p4c no PHV for the label metadata).
        if sp.ingress:
            assert "add_order_t[1] add_order;" in text and "mold_msg_t[1] mold_msg;" in text
        assert not re.search(r"hdr\.add_order\[[1-9]", text)
        assert "recirculate" not in text and "resubmit" not in text
        assert "#include <core.p4>" in text and "#include <tna.p4>" in text
        assert re.search(r"state start \{\s*pkt\.extract\(ig_intr_md\);\s*pkt\.advance\(PORT_METADATA_SIZE\);", text)
        assert "ig_intr_md_for_tm.mcast_grp_a = meta.p4sub_mask;" in text
        assert "ig_intr_md_for_dprsr.drop_ctl = 3w1;" in text
        # The egress parser takes the bridged header first; the egress deparser does not emit it.
        assert re.search(r"pkt\.extract\(eg_intr_md\);.*?pkt\.extract\(hdr\.p4sub_bridge\);", text, re.S)
        egress_deparser = text[text.index("control SwitchEgressDeparser("):text.index("Pipeline(")]
        assert "p4sub_bridge" not in egress_deparser
        assert text.count("{") == text.count("}")


# -- the const tables against the rules they implement ----------------------------------------------

def const_rows(text: str, table: str) -> list[tuple[list[str], str]]:
    body = re.search(rf"table {table} \{{.*?const entries = \{{(.*?)\n        \}}", text, re.S).group(1)
    rows = []
    for line in body.strip().splitlines():
        keys, action = re.fullmatch(r"\s*\((.*)\) : (.*);", line).groups()
        rows.append(([k.strip() for k in keys.split(",")], action))
    return rows


def first_match(rows, bits: list[int]) -> str | None:
    for keys, action in rows:
        if all(k == "_" or int(k.split("w")[1]) == b for k, b in zip(keys, bits)):
            return action
    return None


def literal_value(lit: str) -> int:
    return int(lit.split("w", 1)[1], 0)


@pytest.fixture(scope="module")
def port_text(topo):
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    p = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), "port", target="tofino")
    return p, render_stack(p, "c1")[PROGRAM]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_prune_table_keeps_exactly_the_labels_between_the_port_label_and_the_next_own_label(port_text, data):
    """Oracle: predictive pruning as docs/delivery.md states it (k = first own label naming the port,
    keep the labels after it up to the next own label, or to the stack's end)."""
    p, text = port_text
    n = p.max_labels
    count = data.draw(st.integers(1, n))
    own = [data.draw(st.booleans()) if i < count else False for i in range(n)]
    at = [o and data.draw(st.booleans()) for o in own]
    action = first_match(const_rows(text, "p4sub_prune"), [int(b) for b in own + at])
    if not any(at):
        assert action is None  # the default action drops the copy
        return
    k = at.index(True)
    nxt = next((j for j in range(k + 1, n) if own[j]), count)
    kind, args = re.fullmatch(r"(\w+)\((.*)\)", action).groups()
    keep_lit, num = [a.strip() for a in args.split(",")]
    kept = {j for j in range(n) if literal_value(keep_lit) >> j & 1 and j < count}
    # keep_tail adds the 16-bit two's complement of the pop (Tofino subtracts no action data)
    new_count = literal_value(num) if kind == "p4sub_keep_span" else (count + literal_value(num)) & 0xFFFF
    assert kept == set(range(k + 1, nxt)) and new_count == nxt - k - 1


@settings(max_examples=100, deadline=None)
@given(own=st.lists(st.booleans(), min_size=16, max_size=16))
def test_first_own_table_finds_the_lowest_own_label(port_text, own):
    _, text = port_text
    action = first_match(const_rows(text, "p4sub_first_own"), [int(b) for b in own])
    assert action == (f"p4sub_own_at_{own.index(True)}()" if any(own) else None)


def v1model_port_bit(value: int) -> int:
    """v1model: ``16w1 << (bit<8>)(value - 1)``; 8-bit values on the example."""
    return (1 << ((value - 1) % 256)) & 0xFFFF


def test_port_tables_map_every_single_own_label_value_p_to_bit_p_minus_1_as_the_v1model_shift_does(port_text):
    p, text = port_text
    tables = port_tables(text)
    assert sorted(i for positions, _ in tables for i in positions) == list(range(p.max_labels))
    for positions, rows in tables:
        for k in range(len(positions)):
            for v in range(256):
                own = [int(j == k) for j in range(len(positions))]
                action = first_match(rows, own + [v if j == k else 0 for j in range(len(positions))])
                got = int(action.split("16w")[1].rstrip(")")) if action else 0
                assert got == v1model_port_bit(v), (positions, k, v)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_port_tables_or_the_bits_of_every_own_label_they_read(port_text, data):
    """Oracle: the OR of v1model's shift over the own labels among a table's positions (any values)."""
    _, text = port_text
    positions, rows = data.draw(st.sampled_from(port_tables(text)))
    own = [data.draw(st.integers(0, 1)) for _ in positions]
    values = [data.draw(st.one_of(st.integers(0, 20), st.integers(0, 255))) for _ in positions]
    action = first_match(rows, own + values)
    got = int(action.split("16w")[1].rstrip(")")) if action else 0
    expected = 0
    for o, v in zip(own, values):
        expected |= v1model_port_bit(v) if o else 0
    assert got == expected


def test_cut_tables_drop_exactly_the_labels_outside_every_kept_range(port_text):
    """Every keep mask the program writes is a range [a, b) (bitmask/own-label actions, pruning rows):
    the two cut tables set invalid exactly the labels whose keep bit is clear."""
    p, text = port_text
    n = p.max_labels
    reader = ReadProgram(p, p.switches["c1"], text)
    for a in range(n + 1):
        for b in range(a, n + 1):
            keep = sum(1 << i for i in range(a, b))
            assert reader.kept(keep, n) == list(range(a, b)), (a, b)
    keeps = {keep for _, keep in reader.own_at.values()}  # the own-label actions' masks
    for _, action in const_rows(text, "p4sub_prune"):
        keeps.add(literal_value(action.split("(")[1].split(",")[0]))
    for keep in keeps:
        assert reader.kept(keep, n) == [i for i in range(n) if keep >> i & 1]


def test_trim_table_keeps_the_first_count_labels_of_a_push(plan):
    sp = next(s for s in plan.switches.values() if s.ingress)
    text = render_stack(plan, sp.name)[PROGRAM]
    actions = invalidating_actions(text)
    rows = dict(re.findall(r"16w(\d+) : (p4sub_trim_\d+)\(\);", text))
    assert sorted(int(c) for c in rows) == list(range(plan.max_labels))
    for c, action in rows.items():
        assert actions[action] == set(range(int(c), plan.max_labels))
    assert re.search(r"if \(p4sub_push\.apply\(\)\.hit\) \{\s*p4sub_trim\.apply\(\);", text)


def test_push_entries_carry_what_the_label_processing_decides_for_the_pushed_stack(plan):
    """The edge's exclusive path: each push entry's last parameters are what the program's own label
    processing (read from its text) decides for the stack the entry pushes, drop reason included."""
    from runtime.stack_sim import StackNetwork

    net = StackNetwork(parse_topology_arg(str(ROOT / "examples/fat-tree-4.topo")), plan)
    frame = bytes(range(12)) + b"\x08\x00" + b"payload"
    checked = 0
    for sp in plan.switches.values():
        if not sp.ingress:
            continue
        doc = json.loads(render_stack(plan, sp.name)[ENTRIES])
        reader = ReadProgram(plan, sp, render_stack(plan, sp.name)[PROGRAM])
        pushes = {e["key"][next(iter(e["key"]))]["value"]: e["data"] for e in doc["entries"]
                  if e["table_name"].endswith("p4sub_push")}
        for push in sp.pushes:
            data = pushes[push.rsid]
            decision = reader.decide(net.push_frame(sp.name, frame, push.rsid))
            reason = decision["reason"]
            assert data["drop"] == int(reason is not None)
            assert data["reason"] == (DROP_REASONS.index(reason) if reason else 0)
            if reason is None:
                assert {k: data[k] for k in ("mask", "own", "stored", "pop", "keep")} == \
                       {k: decision[k] for k in ("mask", "own", "stored", "pop", "keep")}
            checked += 1
    assert checked == sum(len(s.pushes) for s in plan.switches.values())


# -- what cannot be rendered ------------------------------------------------------------------------

def test_unknown_encodings_and_too_deep_egress_parses_are_target_errors(plan):
    with pytest.raises(TargetError, match="no header-stack program for the tree encoding"):
        render_target(dataclasses.replace(plan, encoding="tree"), "tofino")
    wide = dataclasses.replace(plan, id_bytes=5, value_bytes=5, max_labels=14, max_bytes=4 + 14 * 10)
    with pytest.raises(TargetError, match="egress would parse"):
        render_stack(wide, "c1")


# -- p4test on the program --------------------------------------------------------------------------

@pytest.mark.p4c
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("switch", ["e1_1", "a1_1"])
def test_p4test_accepts_the_edge_and_transit_programs(topo, encoding, switch, tmp_path):
    include = _tna_include()
    if shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4test on PATH and tna.p4 (set P4SUB_TNA_INCLUDE to p4c's "
                    "backends/tofino/bf-p4c/p4include or to $SDE_INSTALL/share/p4c/p4include)")
    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    p = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), encoding, target="tofino",
                      max_labels=FALLBACK_LABELS[encoding])
    (tmp_path / PROGRAM).write_text(render_stack(p, switch)[PROGRAM])
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(tmp_path / PROGRAM)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


# -- the CLI ---------------------------------------------------------------------------------------

def test_route_cli_writes_a_tna_program_and_bfrt_entries_per_switch(tmp_path, topo):
    out = tmp_path / "out"
    assert main(["route", *EXAMPLE, "--delivery", "header-stack:port", "--target", "tofino", "-o", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["target"] == "tofino" and stats["max_labels"] == LIMITS["tofino"].max_labels
    for switch in topo.switches():
        assert {PROGRAM, ENTRIES, INFO} == {f.name for f in (out / switch).iterdir()}
    assert "p4sub_push_stack" in (out / "e1_1" / PROGRAM).read_text()
    assert "p4sub_push_stack" not in (out / "c1" / PROGRAM).read_text()


# -- the program's decisions against the reference interpreter -------------------------------------

OWN_AT = re.compile(r"action p4sub_own_at_(\d+)\(\) \{\s*meta\.p4sub_index = 8w\d+;\s*hdr\.p4sub_bridge\.pop = 8w(\d+);"
                    r"\s*hdr\.p4sub_bridge\.keep = (\d+w\w+);\s*([^\n]*)")


def mixed_table(text: str) -> tuple[list[tuple[int, int, str, str]], int]:
    """``p4sub_mixed``'s const entries as (value, mask, action, argument), in order, and the top bit of
    the value slice ``p4sub_mixed_bitmap`` takes as the bitmap."""
    body = re.search(r"table p4sub_mixed \{.*?const entries = \{(.*?)\n        \}", text, re.S).group(1)
    rows = []
    for line in body.strip().splitlines():
        key, mask, action, arg = re.fullmatch(r"\s*\d+w(\d+) &&& \d+w(\d+) : (\w+)\((.*)\);", line).groups()
        rows.append((int(key), int(mask), action, arg))
    hi = re.search(r"action p4sub_mixed_bitmap\(\) \{\s*meta\.p4sub_mask = \(bit<16>\)meta\.p4sub_own_value\[(\d+):0\];",
                   text).group(1)
    return rows, int(hi)


def port_tables(text: str) -> list[tuple[list[int], list[tuple[list[str], str]]]]:
    """The port encoding's ``p4sub_port_g`` tables: the label positions each reads, and its const rows."""
    out = []
    for g in sorted(int(x) for x in re.findall(r"table p4sub_port_(\d+) \{", text)):
        body = re.search(rf"table p4sub_port_{g} \{{(.*?)\n    \}}", text, re.S).group(1)
        positions = [int(i) for i in re.findall(r"hdr\.p4sub_label\[(\d+)\]\.value : ternary", body)]
        assert re.findall(r"own_(\d+) : ternary", body) == [str(i) for i in positions]
        out.append((positions, const_rows(text, f"p4sub_port_{g}")))
    return out


def cut_rows(text: str, table: str) -> list[tuple[int, int, str]]:
    """A cut table's const rows (value, mask, action), in priority order."""
    body = re.search(rf"table {table} \{{.*?const entries = \{{(.*?)\n        \}}", text, re.S).group(1)
    return [(int(v), int(m), a) for v, m, a in re.findall(r"\d+w(\d+) &&& \d+w(\d+) : (\w+)\(\);", body)]


def invalidating_actions(text: str) -> dict[str, set[int]]:
    """Every parameterless action of the program that only sets labels invalid -> those labels."""
    out = {}
    for name, body in re.findall(r"action (\w+)\(\) \{(.*?)\n    \}", text, re.S):
        lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
        labels = [re.fullmatch(r"hdr\.p4sub_label\[(\d+)\]\.setInvalid\(\);", ln) for ln in lines]
        if all(labels):
            out[name] = {int(m.group(1)) for m in labels}
    return out


class ReadProgram:
    """What one switch's TNA program does with a stack frame, read from its text: the const tables,
    the own-label actions' keep/pop constants, and the plan's installed state (stored trees, groups,
    host ports). Follows the template's apply blocks; shares no code with runtime.stack_sim."""

    def __init__(self, plan, sp, text: str) -> None:
        self.plan, self.sp = plan, sp
        self.first_own = const_rows(text, "p4sub_first_own")
        self.prune = const_rows(text, "p4sub_prune") if plan.encoding == "port" else []
        self.port_tables = port_tables(text) if plan.encoding == "port" else []
        self.cut_front = cut_rows(text, "p4sub_cut_front")
        self.cut_back = cut_rows(text, "p4sub_cut_back")
        self.invalidated = invalidating_actions(text)
        self.own_at = {int(i): (int(pop), literal_value(keep)) for i, pop, keep, _ in OWN_AT.findall(text)}
        # What the own-label action does with the label's value: the bitmap (bitmask, mcgroup), the
        # value for the tag dispatch (mixed), nothing (port: the per-position tables).
        takes = {re.sub(r"\[\d+\]", "[i]", t) for *_, t in OWN_AT.findall(text)}
        assert len(takes) == 1 and len(self.own_at) == plan.max_labels
        self.takes = takes.pop()
        self.mixed = mixed_table(text) if self.takes == "meta.p4sub_own_value = hdr.p4sub_label[i].value;" else None
        if self.mixed is not None:
            assert "p4sub_mixed.apply();" in text

    def label_mask(self, value: int) -> int:
        """The bitmap the ingress takes from the first own label's value."""
        if self.takes == "meta.p4sub_mask = (bit<16>)hdr.p4sub_label[i].value;":
            return value & 0xFFFF
        assert self.mixed is not None, self.takes
        rows, slice_hi = self.mixed
        for key, mask, action, arg in rows:
            if value & mask == key & mask:
                return int(arg.split("w")[1]) if action == "p4sub_mixed_port" else value & ((2 << slice_hi) - 1) & 0xFFFF
        return 0

    def decide(self, frame: bytes) -> dict[str, int] | None:
        """The ingress's label processing of a stack frame: the bitmap, the bridged fields, and a
        drop reason (None for a frame the parser refuses)."""
        plan, sp, n = self.plan, self.sp, self.plan.max_labels
        size, vb = plan.label_bytes, 8 * plan.value_bytes
        count = int.from_bytes(frame[16:18], "big")
        if count > n:
            return None
        labels = [int.from_bytes(frame[18 + i * size:18 + (i + 1) * size], "big") for i in range(count)]
        ids, vals = [x >> vb for x in labels], [x & ((1 << vb) - 1) for x in labels]
        stored = count > 0 and ids[0] == 0
        own = [int(i < count and not stored and ids[i] == sp.switch_id) for i in range(n)]
        out = {"stored": int(stored), "own": sum(b << i for i, b in enumerate(own)), "pop": 0, "keep": 0,
               "mask": 0, "reason": None}
        if stored:
            if vals[0] not in dict(sp.stored):
                return {**out, "reason": "unknown-tree"}
            out["mask"] = dict(sp.stored)[vals[0]]
        else:
            action = first_match(self.first_own, own)
            if action is None:
                return {**out, "reason": "no-own-label"}
            index = int(re.fullmatch(r"p4sub_own_at_(\d+)\(\)", action).group(1))
            out["pop"], out["keep"] = self.own_at[index]
            if plan.encoding == "port":
                for positions, rows in self.port_tables:
                    bitmap = first_match(rows, [own[i] for i in positions] + [vals[i] if i < count else -1
                                                                             for i in positions])
                    out["mask"] |= int(bitmap.split("16w")[1].rstrip(");")) if bitmap else 0
            else:
                out["mask"] = self.label_mask(vals[index])
        return out if out["mask"] else {**out, "reason": "no-port"}

    def kept(self, keep: int, count: int) -> list[int]:
        """The labels the egress keeps: those neither cut table's matching action sets invalid."""
        cut = set()
        for rows, default in ((self.cut_front, "p4sub_cut_front_0"), (self.cut_back, "NoAction")):
            action = next((a for v, m, a in rows if keep & m == v & m), default)
            cut |= self.invalidated.get(action, set())
        return [i for i in range(count) if i not in cut]

    def process(self, in_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        plan, sp, n = self.plan, self.sp, self.plan.max_labels
        size, vb = plan.label_bytes, 8 * plan.value_bytes
        decision = self.decide(frame)
        if decision is None or decision["reason"] is not None:
            return []
        count = int.from_bytes(frame[16:18], "big")
        labels = [int.from_bytes(frame[18 + i * size:18 + (i + 1) * size], "big") for i in range(count)]
        vals = [x & ((1 << vb) - 1) for x in labels]
        body = frame[18 + count * size:]
        stored, mask, pop, keep = (decision[k] for k in ("stored", "mask", "pop", "keep"))
        own = [decision["own"] >> i & 1 for i in range(n)]
        ports = dict(sp.groups).get(mask, ())
        out = []
        for port in ports:
            if port == in_port:
                continue
            if port in sp.host_ports:
                out.append((port, frame[:12] + frame[14:16] + body))
                continue
            new_count, kept = count, range(count)
            if not stored:
                if plan.encoding == "port":
                    at = [int(own[i] and vals[i] == port) for i in range(n)]
                    action = first_match(self.prune, own + at)
                    if action is None:
                        continue
                    kind, args = re.fullmatch(r"(\w+)\((.*)\)", action).groups()
                    keep_lit, num = [a.strip() for a in args.split(",")]
                    keep = literal_value(keep_lit)
                    new_count = (literal_value(num) if kind == "p4sub_keep_span"
                                 else (count + literal_value(num)) & 0xFFFF)
                else:
                    new_count = count - pop
                kept = self.kept(keep, count)
            assert len(kept) == new_count  # the count the egress writes matches the labels it keeps
            out.append((port, frame[:16] + new_count.to_bytes(2, "big")
                        + b"".join(labels[i].to_bytes(size, "big") for i in kept) + body))
        return out


def test_every_pushed_stack_is_forwarded_as_the_reference_interpreter_forwards_it(plan, topo):
    """Each ingress switch's every push, followed hop by hop: the copies the TNA programs send (read
    from their text) are the copies runtime.stack_sim sends, byte for byte."""
    from collections import Counter

    from runtime.stack_sim import StackNetwork

    net = StackNetwork(topo, plan)
    programs = {s: ReadProgram(plan, sp, render_stack(plan, s)[PROGRAM]) for s, sp in plan.switches.items()}
    frame = bytes(range(12)) + b"\x08\x00" + b"payload"
    hops = 0
    for sp in plan.switches.values():
        for push in sp.pushes:
            pushed = net.push_frame(sp.name, frame, push.rsid)
            host_port = sp.host_ports[0]
            queue = [(sp.name, host_port, pushed)]
            while queue:
                switch, port, f = queue.pop()
                mine = programs[switch].process(port, f)
                assert sorted(mine) == sorted(net.process(switch, port, f, None, Counter())), (switch, push)
                hops += 1
                for out_port, copy in mine:
                    node, node_port = topo.peer(switch, out_port)
                    if topo.is_switch(node):
                        queue.append((node, node_port, copy))
    assert hops > sum(len(s.pushes) for s in plan.switches.values())


@pytest.mark.parametrize("encoding", ["mcgroup", "mixed"])
def test_route_cli_writes_tna_programs_for_the_group_and_mixed_encodings(tmp_path, topo, encoding):
    out = tmp_path / "out"
    assert main(["route", *EXAMPLE, "--delivery", f"header-stack:{encoding}", "--target", "tofino", "-o", str(out)]) == 0
    for switch in topo.switches():
        info = json.loads((out / switch / INFO).read_text())
        assert info["encoding"] == encoding and info["tag_bits"] == (2 if encoding == "mixed" else 0)
    text = (out / "a1_1" / PROGRAM).read_text()
    assert f"{encoding} labels" in text and ("table p4sub_mixed" in text) == (encoding == "mixed")


@pytest.fixture(scope="module")
def mixed_network(topo):
    from runtime.stack_sim import StackNetwork

    rules = read_network_rules(ROOT / "examples/fat-tree-4.rules", topo)
    p = plan_combined(topo, rules, read_spec(ROOT / "apps/itch/itch.p4"), "mixed", target="tofino")
    return p, StackNetwork(topo, p)


def test_program_dispatches_every_mixed_tag_as_the_reference_interpreter(mixed_network):
    """As tests/backends/bmv2/test_stack_switch.py does on simple_switch: own labels of every tag (the
    encoder writes port and group labels only), the unused tag 3 and ports 0 and 17, behind a foreign
    label that reactive pruning must pop, on an aggregation switch."""
    from collections import Counter

    plan, sim = mixed_network
    switch = "a1_1"
    program = ReadProgram(plan, plan.switches[switch], render_stack(plan, switch)[PROGRAM])
    in_port, cases = mixed_tag_frames(plan, switch)
    for tag, value, copies, frame in cases:
        drops: Counter = Counter()
        expected = sim.process(switch, in_port, frame, None, drops)
        assert len(expected) == copies, (tag, value)
        assert all(int.from_bytes(f[16:18], "big") == 1 for _, f in expected)  # only (c1, 9) is left
        if copies == 0 and tag == 3:
            assert drops == Counter({"no-port": 1})  # the unused tag: no port, counted as such
        assert sorted(program.process(in_port, frame)) == sorted(expected), (tag, value)


def test_mixed_table_gives_every_label_value_the_bitmap_the_reference_interpreter_gives(mixed_network):
    """Every value of the label's value field, through p4sub_mixed as read from the program text."""
    plan, sim = mixed_network
    program = ReadProgram(plan, plan.switches["c1"], render_stack(plan, "c1")[PROGRAM])
    for value in range(1 << (8 * plan.value_bytes)):
        assert program.label_mask(value) == sim._label_mask(value), value
