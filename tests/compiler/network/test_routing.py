"""Camus Algorithm 1 on oriented topologies: filter sets per port, MR/TR, the logical up port, per-switch compiles."""

from __future__ import annotations

import json
from decimal import Decimal

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.approximate import Alpha
from compiler.base.errors import P4subError
from compiler.compile import CompileOptions, compile_rules
from compiler.network.compile import compile_network
from compiler.network.routing import (UP_PORT, filter_sets, lower_up_port, orientation, route, send_misses_up,
                                      with_up_rule)
from compiler.network.topology import facebook_fabric, fat_tree, jellyfish, leaf_spine
from compiler.network.topology_file import parse_topology
from compiler.rules.typecheck import check_rules
from runtime.model import Model
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (8, {"match_kind": "range"}), "m.b": (8, {"match_kind": "range"})})
TOPOLOGIES = [fat_tree(2), fat_tree(4), leaf_spine(3, 2, 2), leaf_spine(2, 3, 1), facebook_fabric(2, 2, 1, 2, 2),
              jellyfish(8, 3, 1, seed=2)]


def host_rules(assignments: list[list[str]], topo) -> ast.RuleSet:
    """Rule i is ``m.a == i`` forwarding to the hosts in ``assignments[i]`` (distinct filters)."""
    rules = []
    for i, hosts in enumerate(assignments):
        ids = tuple(sorted({topo.node_id(h) for h in hosts}))
        if ids:
            rules.append(ast.Rule(ast.Comparison(ast.Field("m.a"), "==", ast.Number(i)), (ast.Forward(ids),)))
    return ast.RuleSet(tuple(rules))


def used_graph(topo) -> nx.Graph:
    g = topo.graph.copy()
    g.remove_edges_from(topo.unused_links())
    return g


def expected_sets(topo, rules: ast.RuleSet, policy: str) -> dict[str, dict[int, set]]:
    """The oracle: a host is behind port p of s when p's link lies on a shortest path from s to it."""
    g = used_graph(topo)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    out: dict[str, dict[int, set]] = {}
    for s in topo.switches():
        sets: dict[int, set] = {}
        for rule in rules:
            for hid in rule.ports:
                h = topo.host_by_id(hid)
                downs = [p for p in topo.ports(s) if topo.direction(s, p) == "down"
                         and dist[topo.peer(s, p)[0]][h] == dist[s][h] - 1]
                ups = [p for p in topo.up_ports(s) if dist[topo.peer(s, p)[0]][h] == dist[s][h] - 1]
                if downs:
                    assert len(downs) == 1
                    sets.setdefault(downs[0], set()).add(rule.filter)
                elif ups and policy == "tr":
                    sets.setdefault(UP_PORT, set()).add(rule.filter)
        if policy == "mr" and topo.up_ports(s):
            sets[UP_PORT] = {ast.Const(True)}
        out[s] = sets
    return out


@st.composite
def subscriptions(draw):
    topo = draw(st.sampled_from(TOPOLOGIES))
    hosts = topo.hosts()
    assignments = draw(st.lists(st.lists(st.sampled_from(hosts), max_size=4), min_size=1, max_size=8))
    return topo, host_rules(assignments, topo)


@settings(max_examples=80, deadline=None)
@given(subscriptions(), st.sampled_from(["mr", "tr"]))
def test_filter_sets_are_the_subscriptions_behind_each_port(case, policy):
    topo, rules = case
    got = filter_sets(topo, rules, policy)
    want = expected_sets(topo, rules, policy)
    for s in topo.switches():
        assert {p: set(fs) for p, fs in got[s].items()} == want[s], s


def test_fat_tree_orientation_and_the_up_port():
    topo = fat_tree(4)
    o = orientation(topo)
    assert o.names(o.below["e1_1"]) == ["h1", "h2"]
    assert o.names(o.below["a1_2"]) == ["h1", "h2", "h3", "h4"]
    assert o.names(o.below["c3"]) == [f"h{i}" for i in range(1, 17)]
    assert o.names(o.up_reach["e1_1"]) == [f"h{i}" for i in range(3, 17)]
    assert o.names(o.up_reach["a2_1"]) == [h for h in o.hosts if h not in ("h5", "h6", "h7", "h8")]
    assert o.up_reach["c1"] == 0


def test_routing_refuses_orientations_that_are_not_tree_like():
    text = "\n".join(["switch l1 layer=1", "switch l2 layer=1", "switch l3 layer=1", "switch s1 layer=2",
                      "switch s2 layer=2", "host h1", "host h2", "host h3",
                      "link l1:1 s1:1", "link l1:2 s2:1", "link l2:1 s1:2", "link l2:2 s2:2", "link l3:1 s1:3",
                      "link l1:3 h1:0", "link l2:3 h2:0", "link l3:3 h3:0"])
    with pytest.raises(P4subError, match="up ports reach different hosts"):
        orientation(parse_topology(text))


def test_alpha_applies_to_switch_ports_only():
    topo = fat_tree(4)
    cmp = ast.Comparison(ast.Field("m.a"), ">", ast.Number(53))
    rules = ast.RuleSet((ast.Rule(cmp, (ast.Forward((topo.node_id("h1"), topo.node_id("h5"))),)),))
    fields = check_rules(rules, SPEC, port_bits=32).fields
    per = route(topo, rules, fields, "tr", Alpha(Decimal(10)))
    e11 = {r.ports: str(r.filter) for r in per["e1_1"].rules}
    assert e11 == {(3,): "m.a > 53", (UP_PORT,): "m.a > 50"}
    assert {r.ports: str(r.filter) for r in per["a2_1"].rules} == {(UP_PORT, 3): "m.a > 50"}
    mr = route(topo, rules, fields, "mr", Alpha(Decimal(10)))
    assert {r.ports: str(r.filter) for r in mr["e1_1"].rules} == {(UP_PORT, 3): "m.a > 53"}
    assert mr["e1_1"].miss_up and not mr["c1"].miss_up  # MR's "true -> up" is the default action
    assert {r.ports: str(r.filter) for r in mr["c1"].rules} == {(1, 2): "m.a > 50"}


def test_lower_up_port_replaces_the_marker_by_one_physical_up_port():
    text = "m.a == 1: fwd(0, 3); m.a == 2: fwd(0); m.a == 3: fwd(3); m.a > 10 and m.a < 20: fwd(0, 4); m.a > 15: fwd(4);"
    from compiler.rules.parser import parse_rules

    # A network switch's layout (compile_switch compiles with delivery="groups").
    pipeline = compile_rules(SPEC, parse_rules(text), CompileOptions(delivery="groups")).pipeline
    lowered = lower_up_port(pipeline, (1, 2))
    values = np.arange(256, dtype=np.uint64)
    cols = {"m.a": values, "m.b": np.zeros(256, dtype=np.uint64)}
    before = Model(pipeline).run(cols).port_sets()
    after = Model(lowered).run(cols).port_sets()
    for b, a in zip(before, after):
        assert UP_PORT not in a
        if UP_PORT in b:
            assert a - {1, 2} == b - {UP_PORT} and len(a & {1, 2}) == 1
        else:
            assert a == b
    with pytest.raises(P4subError, match="no up ports"):
        lower_up_port(pipeline, ())


@settings(max_examples=6, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 255), st.integers(1, 255)), min_size=1, max_size=2),
                min_size=16, max_size=16))
def test_mr_filters_are_tr_filters_below_plus_true_up(per_host):
    """Camus's Fig. 13 workload shape: every host subscribes. MR keeps TR's down-port filter sets and stores
    ``true`` upward, so the filters a switch must tell apart under MR are a subset of TR's plus ``true``.
    (Fewer *entries* is not a theorem: when every host wants the same filter, TR's up filter equals the
    down filters and its diagram is the smaller one; the memory comparison is benchmarks/bench_routing.py.)"""
    topo = fat_tree(4)
    rules = ast.RuleSet(tuple(
        ast.Rule(ast.And((ast.Comparison(ast.Field("m.a"), ">", ast.Number(a)),
                          ast.Comparison(ast.Field("m.b"), "<", ast.Number(b)))), (ast.Forward((host,)),))
        for host, subs in enumerate(per_host, start=1) for a, b in subs))
    mr, tr = filter_sets(topo, rules, "mr"), filter_sets(topo, rules, "tr")
    for s in topo.switches():
        down_mr = {p: fs for p, fs in mr[s].items() if p != UP_PORT}
        assert down_mr == {p: fs for p, fs in tr[s].items() if p != UP_PORT}, s
        if UP_PORT in tr[s]:
            assert mr[s][UP_PORT] == [ast.Const(True)]
        mr_filters = {f for fs in mr[s].values() for f in fs} - {ast.Const(True)}
        assert mr_filters <= {f for fs in tr[s].values() for f in fs}, s


@settings(max_examples=8, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 255), st.integers(1, 255)), max_size=2), min_size=16, max_size=16))
def test_mr_never_stores_more_entries_than_tr_at_aggregation_and_core(per_host):
    """For one field order, with delivery groups: MR's diagram is that of the down-port rules (``true -> up``
    is the leaf table's default action), a projection of TR's diagram of the same rules plus the exact up
    filter. (In bitmap lanes the catch-all is a rule, and this is no theorem.)"""
    assume(any(per_host))
    topo = fat_tree(4)
    rules = ast.RuleSet(tuple(
        ast.Rule(ast.And((ast.Comparison(ast.Field("m.a"), ">", ast.Number(a)),
                          ast.Comparison(ast.Field("m.b"), "<", ast.Number(b)))), (ast.Forward((host,)),))
        for host, subs in enumerate(per_host, start=1) for a, b in subs))
    options = CompileOptions(field_order=("m.a", "m.b"), delivery="groups")
    mr = compile_network(topo, rules, SPEC, policy="mr", options=options, jobs=1).stats["switches"]
    tr = compile_network(topo, rules, SPEC, policy="tr", options=options, jobs=1).stats["switches"]
    for s in topo.switches():
        if topo.layer(s) >= 2:
            assert mr[s]["total_entries"] <= tr[s]["total_entries"], s


def test_mr_sends_what_no_rule_matches_up_by_default():
    topo = fat_tree(4)
    rules = host_rules([["h1"], ["h2", "h9"]], topo)
    result = compile_network(topo, rules, SPEC, policy="mr", options=CompileOptions(delivery="groups"), jobs=1,
                             keep_pipelines=True)
    edge = result.pipelines["e1_1"]  # h1's and h2's switch
    leaf = next(t for t in edge.tables if t.role == "leaf")
    assert (leaf.default_action, leaf.default_args) == ("forward", (UP_PORT,))
    values = np.arange(4, dtype=np.uint64)
    ports = Model(edge).run({"m.a": values, "m.b": np.zeros(4, dtype=np.uint64)}).port_sets()
    host_port = {h: topo.host_attachment(h)[1] for h in ("h1", "h2")}
    assert ports == [{host_port["h1"], UP_PORT}, {host_port["h2"], UP_PORT}, {UP_PORT}, {UP_PORT}]
    core = result.pipelines["c1"]
    assert next(t for t in core.tables if t.role == "leaf").default_action == "drop_packet"
    lowered = lower_up_port(edge, topo.up_ports("e1_1"))
    assert next(t for t in lowered.tables if t.role == "leaf").default_args == (topo.up_ports("e1_1")[0],)


@pytest.mark.parametrize("lanes", [1, 2, None])
def test_mr_in_bitmap_lanes_sends_everything_up(lanes):
    """MR's catch-all as a rule: every packet goes up, matched or not, in any number of lanes;
    lowered, the up bit names the first physical up port and nothing else changes."""
    topo = fat_tree(4)
    rules = host_rules([["h1"], ["h2", "h9"]], topo)
    options = CompileOptions(delivery="bitmap", lanes=lanes)
    result = compile_network(topo, rules, SPEC, policy="mr", options=options, jobs=1, keep_pipelines=True)
    edge = result.pipelines["e1_1"]
    assert edge.delivery.is_bitmap and UP_PORT in edge.delivery.ports
    values = np.arange(4, dtype=np.uint64)
    cols = {"m.a": values, "m.b": np.zeros(4, dtype=np.uint64)}
    host_port = {h: topo.host_attachment(h)[1] for h in ("h1", "h2")}
    assert Model(edge).run(cols).port_sets() == [{host_port["h1"], UP_PORT}, {host_port["h2"], UP_PORT}, {UP_PORT},
                                                 {UP_PORT}]
    up = topo.up_ports("e1_1")
    assert Model(lower_up_port(edge, up)).run(cols).port_sets() == [{host_port["h1"], up[0]}, {host_port["h2"], up[0]},
                                                                    {up[0]}, {up[0]}]
    core = result.pipelines["c1"]  # no up port: nothing for a packet no rule matches
    assert UP_PORT not in core.delivery.ports
    assert Model(core).run(cols).port_sets()[2:] == [set(), set()]
    with pytest.raises(P4subError, match="no up ports"):
        lower_up_port(edge, ())


def test_compile_network_writes_the_network_directory(tmp_path):
    topo = fat_tree(4)
    rules = host_rules([["h1", "h16"], ["h2"], [], ["h9", "h10", "h11"]], topo)
    result = compile_network(topo, rules, SPEC, policy="tr", out_dir=tmp_path, jobs=2)
    net = json.loads((tmp_path / "network.json").read_text())
    assert net["policy"] == "tr" and net["up_port"]["marker"] == UP_PORT
    assert [h["name"] for h in net["hosts"]][:2] == ["h1", "h2"]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert set(stats["layers"]) == {"edge", "aggregation", "core"}
    assert stats["totals"]["entries"] == sum(s["total_entries"] for s in stats["switches"].values())
    assert stats == result.stats
    for s in topo.switches():
        assert (tmp_path / s / "pipeline.json").exists() and (tmp_path / s / "rules.sub").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_route_reports_each_switch_compile_on_stderr_unless_quiet(tmp_path, capsys, jobs) -> None:
    from pathlib import Path

    from p4sub import main

    repo = Path(__file__).resolve().parents[3]
    args = ["route", str(repo / "examples/fat-tree-4.topo"), str(repo / "examples/fat-tree-4.rules"),
            "--spec", str(repo / "apps/itch/itch.p4"), "--jobs", jobs]
    assert main([*args, "-o", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "20/20 switches compiled" in err and "[100%]" in err
    assert main([*args, "--quiet", "-o", str(tmp_path / "b")]) == 0
    assert "switches compiled" not in capsys.readouterr().err


@st.composite
def ranged_subscriptions(draw):
    """Two-field range filters (some repeated for other hosts, so that switches share rules) on any topology."""
    topo = draw(st.sampled_from(TOPOLOGIES))
    hosts = topo.hosts()
    filters = draw(st.lists(st.tuples(st.integers(0, 255), st.integers(1, 255)), min_size=1, max_size=6))
    rules = []
    for a, b in filters:
        for hs in draw(st.lists(st.lists(st.sampled_from(hosts), min_size=1, max_size=3), min_size=1, max_size=2)):
            filt = ast.And((ast.Comparison(ast.Field("m.a"), ">", ast.Number(a)),
                            ast.Comparison(ast.Field("m.b"), "<", ast.Number(b))))
            rules.append(ast.Rule(filt, (ast.Forward(tuple(sorted({topo.node_id(h) for h in hs}))),)))
    return topo, ast.RuleSet(tuple(rules))


@settings(max_examples=30, deadline=None)
@given(ranged_subscriptions(), st.sampled_from(["mr", "tr"]), st.sampled_from([1, 50]),
       st.sampled_from(["groups", "bitmap"]))
def test_each_switch_pipeline_equals_a_compile_of_its_own_rules(case, policy, alpha, delivery):
    """compile_network compiles equal rule sets once and shares per-filter work between switches
    (compiler.rules.memo); every switch's pipeline must still be exactly what compiling that
    switch's routed rules alone gives (MR's catch-all: the default action with groups, a rule in
    bitmap lanes), and the model must run it as the rules say."""
    topo, rules = case
    result = compile_network(topo, rules, SPEC, policy=policy, alpha=Alpha(Decimal(alpha)), jobs=1,
                             options=CompileOptions(delivery=delivery), keep_pipelines=True)
    per_switch = route(topo, rules, check_rules(rules, SPEC, port_bits=32).fields, policy, Alpha(Decimal(alpha)))
    values = np.arange(256, dtype=np.uint64)
    for s, sr in per_switch.items():
        if delivery == "groups":
            direct = compile_rules(SPEC, sr.rules, CompileOptions(delivery="groups", lanes=None)).pipeline
            if sr.miss_up:
                direct = send_misses_up(direct)
        else:
            own = with_up_rule(sr.rules) if sr.miss_up else sr.rules
            direct = compile_rules(SPEC, own, CompileOptions(delivery="bitmap")).pipeline
        assert result.pipelines[s] == direct, s
        shared = result.stats["switches"][s].get("compiled_as")
        if shared is not None:
            assert per_switch[shared].rules == sr.rules and per_switch[shared].miss_up == sr.miss_up
    # The grouping: switches with equal rules (and miss_up) share one compile, others do not.
    groups = {}
    for s, sr in per_switch.items():
        groups.setdefault((sr.miss_up, sr.rules.rules), []).append(s)
    assert result.stats["totals"]["compiles"] == len(groups)
    # And the pipelines forward what the rules say (an oracle that shares no code with the compiler).
    for s, sr in per_switch.items():
        b = np.array([int(x) for x in (values * 7) % 256], dtype=np.uint64)
        got = Model(result.pipelines[s]).run({"m.a": values, "m.b": b}).port_sets()
        for a_val, b_val, ports in zip(values.tolist(), b.tolist(), got):
            want = {p for r in sr.rules for p in r.ports if _matches(r.filter, {"m.a": a_val, "m.b": b_val})}
            if sr.miss_up and not want:
                want = {UP_PORT}
            assert ports == want, (s, a_val, b_val)


def _matches(f: ast.Filter, packet: dict[str, int]) -> bool:
    if isinstance(f, ast.And):
        return all(_matches(x, packet) for x in f.items)
    if isinstance(f, ast.Const):
        return f.value
    value, bound = packet[f.attribute.name], f.value.value
    return {">": value > bound, "<": value < bound, "==": value == bound}[f.op]


def test_the_forked_pool_writes_what_one_process_writes(tmp_path):
    """Workers forked with the tasks in memory (nothing pickled) and shared compiles give the same files."""
    topo = fat_tree(4)
    rules = host_rules([["h1", "h16"], ["h2"], ["h5"], ["h9", "h10", "h11"], ["h3", "h4"]], topo)
    for policy in ("mr", "tr"):
        one = compile_network(topo, rules, SPEC, policy=policy, out_dir=tmp_path / f"{policy}1", jobs=1)
        two = compile_network(topo, rules, SPEC, policy=policy, out_dir=tmp_path / f"{policy}2", jobs=2)
        assert one.stats["totals"]["compiles"] < len(topo.switches())  # the core switches share one
        for s in topo.switches():
            for name in ("pipeline.json", "rules.sub"):
                assert (tmp_path / f"{policy}1" / s / name).read_text() == (tmp_path / f"{policy}2" / s / name).read_text()
        for s, row in one.stats["switches"].items():
            assert {k: v for k, v in row.items() if k != "compile_seconds"} == \
                   {k: v for k, v in two.stats["switches"][s].items() if k != "compile_seconds"}
