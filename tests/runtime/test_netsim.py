"""The network simulator against an oracle of its own: host subscriptions evaluated in plain numpy.

Filters are drawn as small trees of this module's own (``("cmp", field, op, raw)``, ``("and", ...)``,
``("or", ...)``, ``("not", x)``), printed as network-rule text for p4sub and evaluated here
directly, so the oracle shares no code with the compiler, the reference model or netsim's ground
truth. Who sits behind a link is computed here too, from shortest paths in the graph of the links
the orientation uses (a host is behind ``s -> v`` when ``v`` is one hop closer to it than ``s``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.approximate import Alpha
from compiler.compile import Budget, CompileOptions
from compiler.network.compile import compile_network
from compiler.network.host_rules import parse_network_rules
from compiler.network.topology import Topology, facebook_fabric, fat_tree, jellyfish, leaf_spine
from compiler.network.topology_file import parse_topology
from p4sub import main
from runtime.netsim import Batch, load_network, simulate
from tests.compiler.specs import make_spec

REPO = Path(__file__).resolve().parents[2]

# m.p is fixed point with one implied decimal: raw 125 is 12.5 in the rules.
FIELDS = {"m.a": 8, "m.b": 8, "m.p": 12}
SCALE = {"m.a": 0, "m.b": 0, "m.p": 1}
SPEC = make_spec({"m.a": (8, {"match_kind": "range"}), "m.b": (8, {"match_kind": "ternary"}),
                  "m.p": (12, {"match_kind": "range", "scale": 1})})
OPS = ("==", "!=", "<", "<=", ">", ">=")

FIXED_TOPOLOGIES = [fat_tree(2), fat_tree(4), facebook_fabric(2, 2, 1, 2, 2), jellyfish(8, 3, 1, seed=2)]


# ------------------------------------------------------------------------------------------------
# Strategies
# ------------------------------------------------------------------------------------------------


@st.composite
def random_tree(draw) -> Topology:
    """A hand-written ``.topo`` tree of switches without layers (so the tree orientation applies)."""
    n = draw(st.integers(2, 7))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    hosts_at = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=6))
    lines = [f"switch s{i + 1}" for i in range(n)] + [f"host h{j + 1}" for j in range(len(hosts_at))]
    next_port = [1] * n
    for child, parent in enumerate(parents, start=1):
        lines.append(f"link s{parent + 1}:{next_port[parent]} s{child + 1}:{next_port[child]}")
        next_port[parent] += 1
        next_port[child] += 1
    for j, s in enumerate(hosts_at):
        lines.append(f"link s{s + 1}:{next_port[s]} h{j + 1}:0")
        next_port[s] += 1
    return parse_topology("\n".join(lines) + "\n", "tree.topo")


def topologies() -> st.SearchStrategy[Topology]:
    return st.one_of(
        st.sampled_from(FIXED_TOPOLOGIES),
        st.builds(leaf_spine, st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
        random_tree(),
    )


def atoms(fields: list[str]) -> st.SearchStrategy[tuple]:
    return st.builds(lambda f, op, v: ("cmp", f, op, v % (1 << FIELDS[f])),
                     st.sampled_from(fields), st.sampled_from(OPS), st.integers(0, (1 << 12) - 1))


def filters(fields: list[str]) -> st.SearchStrategy[tuple]:
    return st.recursive(
        atoms(fields),
        lambda inner: st.one_of(
            st.builds(lambda xs: ("and", tuple(xs)), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda xs: ("or", tuple(xs)), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda x: ("not", x), inner),
        ),
        max_leaves=4,
    )


@st.composite
def networks(draw):
    """A topology, 1-6 subscriptions over 1-3 fields, and a publisher host."""
    topo = draw(topologies())
    hosts = topo.hosts()
    fields = draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3, unique=True))
    subs = draw(st.lists(st.tuples(filters(fields), st.lists(st.sampled_from(hosts), min_size=1, max_size=4)),
                         min_size=1, max_size=6))
    publisher = draw(st.sampled_from(hosts))
    return topo, subs, publisher


def constants(node: tuple) -> set[tuple[str, int]]:
    if node[0] == "cmp":
        return {(node[1], node[3])}
    items = node[1] if node[0] in ("and", "or") else (node[1],)
    return set().union(*(constants(i) for i in items))


@st.composite
def traces(draw, subs):
    """1-40 messages; each field near a rule constant half of the time; 1-3 messages per packet."""
    near = sorted(set().union(*(constants(f) for f, _ in subs)))
    n = draw(st.integers(1, 40))
    cols: dict[str, list[int]] = {f: [] for f in FIELDS}
    for _ in range(n):
        for f, width in FIELDS.items():
            mine = [v for g, v in near if g == f]
            if mine and draw(st.booleans()):
                v = draw(st.sampled_from(mine)) + draw(st.integers(-1, 1))
            else:
                v = draw(st.integers(0, (1 << width) - 1))
            cols[f].append(min(max(v, 0), (1 << width) - 1))
    sizes = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    packet = np.repeat(np.arange(n), sizes)[:n].astype(np.int64)
    first = np.ones(n, dtype=bool)
    first[1:] = packet[1:] != packet[:-1]
    return Batch({f: np.array(v, dtype=np.uint64) for f, v in cols.items()}, packet,
                 10 + np.arange(n, dtype=np.int64), np.where(first, 100, 0).astype(np.int64))


# ------------------------------------------------------------------------------------------------
# The oracle
# ------------------------------------------------------------------------------------------------


def text(node: tuple) -> str:
    kind = node[0]
    if kind == "cmp":
        _, f, op, raw = node
        value = str(raw) if not SCALE[f] else f"{raw // 10}.{raw % 10}"
        return f"{f} {op} {value}"
    if kind == "not":
        return f"not ({text(node[1])})"
    return f" {kind} ".join(f"({text(i)})" for i in node[1])


def holds(node: tuple, cols: dict[str, np.ndarray]) -> np.ndarray:
    kind = node[0]
    if kind == "cmp":
        _, f, op, raw = node
        x = cols[f].astype(np.int64)
        return {"==": x == raw, "!=": x != raw, "<": x < raw, "<=": x <= raw, ">": x > raw, ">=": x >= raw}[op]
    if kind == "not":
        return ~holds(node[1], cols)
    parts = [holds(i, cols) for i in node[1]]
    out = parts[0].copy()
    for p in parts[1:]:
        out = out & p if kind == "and" else out | p
    return out


def rules_text(subs) -> str:
    return "".join(f"{text(f)} : fwd({', '.join(sorted(set(hosts)))});\n" for f, hosts in subs)


def wanted_rows(subs, batch: Batch, mode: str, hosts: list[str]) -> dict[str, np.ndarray]:
    """Host -> bool per row: the row is wanted (prune), or its packet holds a wanted row (union)."""
    n = len(batch)
    want = {h: np.zeros(n, dtype=bool) for h in hosts}
    for f, subscribers in subs:
        match = holds(f, batch.columns)
        for h in set(subscribers):
            want[h] |= match
    if mode == "union":
        for h in hosts:
            per_packet = {p for p, w in zip(batch.packet.tolist(), want[h].tolist()) if w}
            want[h] = np.isin(batch.packet, list(per_packet))
    return want


def used_graph(topo: Topology) -> nx.Graph:
    g = topo.graph.copy()
    g.remove_edges_from(topo.unused_links())
    return g


def behind(topo: Topology) -> dict[tuple[str, int], set[str]]:
    """(switch, port) -> the hosts a copy sent out of that port can still reach."""
    dist = dict(nx.all_pairs_shortest_path_length(used_graph(topo)))
    out = {}
    for s in topo.switches():
        for p in topo.ports(s):
            v, _ = topo.peer(s, p)
            if topo.direction(s, p) is None:
                out[(s, p)] = set()
                continue
            out[(s, p)] = {h for h in topo.hosts() if h in dist[s] and dist[v].get(h, -1) == dist[s][h] - 1}
    return out


def simulate_subs(topo: Topology, subs, publisher: str, batch: Batch, mode: str, policy: str,
                  alpha: Alpha = Alpha(), options: CompileOptions = CompileOptions(), stats: dict | None = None):
    with tempfile.TemporaryDirectory() as tmp:
        rules = parse_network_rules(rules_text(subs), topo, "net.rules")
        result = compile_network(topo, rules, SPEC, policy=policy, alpha=alpha, options=options, out_dir=tmp, jobs=1)
        network = load_network(tmp)
    if stats is not None:
        stats.update(result.stats)
    return simulate(network, [batch], publisher, mode, record=True)


def crossings(sim) -> dict[tuple[str, int], np.ndarray]:
    return {link: np.concatenate(rows) for link, rows in sim.link_rows.items()}


def check_hosts_exact(sim, want: dict[str, np.ndarray], topo: Topology, mode: str, batch: Batch) -> None:
    """Every host other than the publisher gets exactly the rows it wants, once each; netsim's per-host
    figures agree. The publisher gets nothing back (no switch sends a packet out of its ingress port),
    and netsim counts what it subscribed to as its false negatives (benchmarks/bench_routing.py
    leaves the publisher out of the receivers' totals for that reason)."""
    for h in topo.hosts():
        got = np.sort(np.concatenate(sim.deliveries.get(h, [np.zeros(0, dtype=np.int64)])))
        units = int((want[h] if mode == "prune" else want[h][_first_rows(batch)]).sum())
        st_ = sim.hosts[h]
        assert (st_.wanted, st_.false_positives, st_.duplicates) == (units, 0, 0), h
        if h == sim.publisher:
            assert got.tolist() == [] and (st_.delivered, st_.false_negatives) == (0, units)
        else:
            assert got.tolist() == np.flatnonzero(want[h]).tolist(), h
            assert (st_.delivered, st_.false_negatives) == (units, 0), h


def _first_rows(batch: Batch) -> np.ndarray:
    first = np.ones(len(batch), dtype=bool)
    first[1:] = batch.packet[1:] != batch.packet[:-1]
    return first


def check_tree_walk(sim, topo: Topology, publisher: str) -> None:
    """Per row: every node gets it at most once, it never returns over the link it came on, a copy that
    came down from an up port never goes up again, and its copies are bounded by the links in use."""
    used = used_graph(topo).number_of_edges()
    arrivals: dict[int, list[tuple[str, str, int]]] = {}  # row -> (from, to, from's port)
    for (s, p), rows in crossings(sim).items():
        v, _ = topo.peer(s, p)
        for r in rows.tolist():
            arrivals.setdefault(r, []).append((s, v, p))
    sw, _ = topo.host_attachment(publisher)
    for r, hops in arrivals.items():
        assert len(hops) <= used, r
        received = Counter(v for _, v, _ in hops)
        received[sw] += 1
        assert max(received.values()) == 1, (r, received)
        pairs = {(u, v) for u, v, _ in hops}
        assert not any((v, u) in pairs for u, v in pairs), r
        came_down = {v for u, v, p in hops if topo.is_switch(v) and topo.direction(u, p) == "down"}
        assert not any(u in came_down and topo.direction(u, p) == "up" for u, _, p in hops), r


def link_figures(sim, subs, batch: Batch, mode: str, topo: Topology) -> dict[tuple[str, int], dict[str, int]]:
    """Per link, the oracle's packets, messages, bytes and their extra part (no host behind wants them)."""
    want = wanted_rows(subs, batch, mode, topo.hosts())
    back = behind(topo)
    out = {}
    for link, rows in crossings(sim).items():
        rows = np.sort(rows)
        useful = np.zeros(len(rows), dtype=bool)
        for h in back[link]:
            useful |= want[h][rows]
        pkt = batch.packet[rows]
        packets = sorted(set(pkt.tolist()))
        pkt_useful = {p for p, u in zip(pkt.tolist(), useful.tolist()) if u}
        base = {p: 100 for p in packets}
        if mode == "prune":
            msg_bytes = batch.message_bytes[rows]
            size = sum(base.values()) + int(msg_bytes.sum())
            extra_bytes = sum(base[p] for p in packets if p not in pkt_useful) + int(msg_bytes[~useful].sum())
        else:
            size = sum(base.values())
            extra_bytes = sum(base[p] for p in packets if p not in pkt_useful)
        out[link] = {"packets": len(packets), "messages": len(rows), "bytes": size,
                     "extra_packets": sum(p not in pkt_useful for p in packets),
                     "extra_messages": int((~useful).sum()), "extra_bytes": extra_bytes}
    return out


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data(), networks(), st.sampled_from(["mr", "tr"]), st.sampled_from(["prune", "union"]))
def test_exact_routing_delivers_to_exactly_the_subscribed_hosts_along_a_tree(data, net, policy, mode):
    topo, subs, publisher = net
    batch = data.draw(traces(subs))
    sim = simulate_subs(topo, subs, publisher, batch, mode, policy)
    want = wanted_rows(subs, batch, mode, topo.hosts())
    check_hosts_exact(sim, want, topo, mode, batch)
    check_tree_walk(sim, topo, publisher)
    assert sim.lost_copies == 0
    figures = link_figures(sim, subs, batch, mode, topo)
    for link, st_ in sim.links.items():
        assert vars(st_) == figures[link], link
        if policy == "tr" or topo.direction(*link) == "down":
            assert st_.extra_messages == 0 and st_.extra_packets == 0, link  # only MR's up ports carry extra


@FAST
@given(st.data(), networks(), st.sampled_from(["mr", "tr"]), st.sampled_from(["prune", "union"]),
       st.sampled_from([("bitmap", None, "auto"), ("bitmap", 1, "auto"), ("bitmap", 2, "auto"),
                        ("bitmap", 3, "auto"), ("groups", None, "auto"), ("auto", None, "auto"),
                        ("bitmap", None, "hub"), ("bitmap", None, "port"), ("bitmap", 2, "port"),
                        ("bitmap", 3, "port")]))
def test_switches_in_lanes_and_bitmaps_deliver_exactly_to_the_subscribed_hosts(data, net, policy, mode, layout):
    """Every per-switch layout (port bitmaps over 1 to 3 lanes or chosen, lanes split by the
    attributes rules test or by the ports they give, multicast groups, auto), MR's catch-all as a
    rule or as a default action: each host gets exactly what the oracle says."""
    topo, subs, publisher = net
    batch = data.draw(traces(subs))
    delivery, lanes, partition = layout
    stats: dict = {}
    sim = simulate_subs(topo, subs, publisher, batch, mode, policy,
                        options=CompileOptions(delivery=delivery, lanes=lanes, lane_partition=partition),
                        stats=stats)
    check_hosts_exact(sim, wanted_rows(subs, batch, mode, topo.hosts()), topo, mode, batch)
    check_tree_walk(sim, topo, publisher)
    assert sim.lost_copies == 0
    switches = stats["switches"].values()
    assert all(s["exact"] and s["fits"] for s in switches)
    if delivery != "auto":
        assert {s["delivery"] for s in switches} == {delivery}
    if partition == "port":  # every switch in more than one lane has its lanes split by port
        assert {s.get("lane_partition") for s in switches if s["lanes"] > 1} <= {"port"}


@FAST
@given(st.data(), networks(), st.sampled_from(["mr", "tr"]), st.integers(1, 12))
def test_a_switch_widened_to_its_budget_never_loses_a_packet(data, net, policy, entries):
    """A budget too small for the exact rules widens them (compiler.budget): hosts may get more than
    they asked for, never less, and every switch that was widened says so."""
    topo, subs, publisher = net
    batch = data.draw(traces(subs))
    stats: dict = {}
    options = CompileOptions(delivery="bitmap", budget=Budget(entries=entries))
    sim = simulate_subs(topo, subs, publisher, batch, "prune", policy, options=options, stats=stats)
    want = wanted_rows(subs, batch, "prune", topo.hosts())
    for h in topo.hosts():
        if h != publisher:
            got = set(np.concatenate(sim.deliveries.get(h, [np.zeros(0, dtype=np.int64)])).tolist())
            assert set(np.flatnonzero(want[h]).tolist()) <= got, h
            assert sim.hosts[h].false_negatives == 0, h
    check_tree_walk(sim, topo, publisher)
    assert sim.lost_copies == 0
    for name, s in stats["switches"].items():
        assert s["fits"] == (not s["budget_misses"]), name
        assert not s["fits"] or s["total_entries"] <= entries, name
    assert stats["totals"]["all_fit"] == all(s["fits"] for s in stats["switches"].values())


@FAST
@given(st.data(), networks(), st.sampled_from(["mr", "tr"]), st.sampled_from(["prune", "union"]))
def test_any_alpha_never_loses_a_packet_and_netsim_counts_the_extra_traffic(data, net, policy, mode):
    topo, subs, publisher = net
    batch = data.draw(traces(subs))
    per_field = {}
    for f in sorted(FIELDS):
        unit = Decimal(1).scaleb(-SCALE[f])
        multiple = data.draw(st.none() | st.sampled_from([1, 2, 3, 5, 10, 16, 64, 500]), label=f"alpha {f}")
        if multiple is not None:
            per_field[f] = unit * multiple
    used = {c[0] for sub, _ in subs for c in constants(sub)}
    alpha = Alpha(None, {f: a for f, a in per_field.items() if f in used})
    sim = simulate_subs(topo, subs, publisher, batch, mode, policy, alpha)
    want = wanted_rows(subs, batch, mode, topo.hosts())
    check_hosts_exact(sim, want, topo, mode, batch)  # host ports stay exact: no FN and no FP at hosts
    check_tree_walk(sim, topo, publisher)
    figures = link_figures(sim, subs, batch, mode, topo)
    for link, st_ in sim.links.items():
        assert vars(st_) == figures[link], link
    report = sim.report()
    assert sum(row["false_negatives"] for h, row in report["hosts"].items() if h != publisher) == 0
    tiers = Counter()
    for link in report["links"]:
        tiers[link["tier"]] += link["extra_messages"]
    assert {k: v["extra_messages"] for k, v in report["tiers"].items()} == dict(tiers)


@pytest.mark.parametrize("policy", ["mr", "tr"])
@pytest.mark.parametrize("rules", ["m.a == 0 : fwd(h1, h2);\nnot (m.a == 0) : fwd(h1);\n", "true : fwd(h2);\n"])
def test_a_switch_whose_rules_test_no_field_still_forwards(tmp_path, rules, policy):
    """MR folds ``f or not f`` into ``true``, leaving pipelines with no field table; netsim once ran
    them on zero rows and dropped every packet there."""
    topo = fat_tree(2)
    compile_network(topo, parse_network_rules(rules, topo, "net.rules"), SPEC, policy=policy, out_dir=tmp_path,
                    jobs=1)
    cols = {f: np.zeros(3, dtype=np.uint64) for f in FIELDS}
    batch = Batch(cols, np.arange(3), np.full(3, 10), np.full(3, 100))
    sim = simulate(load_network(tmp_path), [batch], "h1", "prune", record=True)
    assert np.concatenate(sim.deliveries["h2"]).tolist() == [0, 1, 2]
    assert sim.hosts["h2"].false_negatives == 0


@settings(max_examples=15, deadline=None)
@given(st.data(), networks())
def test_tr_with_alpha_carries_a_superset_of_the_exact_links(data, net):
    """Approximating only widens what a link carries: every copy exact TR routing sends still goes
    (the publisher's packets take one path per host, so TR's crossings are fixed by the wants)."""
    topo, subs, publisher = net
    batch = data.draw(traces(subs))
    exact = crossings(simulate_subs(topo, subs, publisher, batch, "prune", "tr"))
    wide = crossings(simulate_subs(topo, subs, publisher, batch, "prune", "tr",
                                   Alpha(Decimal(data.draw(st.sampled_from([2, 10, 100]))))))
    for link, rows in exact.items():
        assert set(rows.tolist()) <= set(wide.get(link, np.zeros(0)).tolist()), link


# ------------------------------------------------------------------------------------------------
# The command line on the shipped example
# ------------------------------------------------------------------------------------------------

STOCKS = ["GOOGL", "AAPL", "MSFT", "AMZN", "NFLX", "TSLA", "NVDA", "META", "IBM"]


def p4sub(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "p4sub", *args], capture_output=True, text=True, cwd=REPO)


def p4sub_here(capsys, *args: str) -> tuple[int, str]:
    """``p4sub ARGS`` in this process (an uncaught exception fails the test, as a traceback would)."""
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def write_itch_trace(path: Path, messages: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(messages):
            f.write(json.dumps({
                "add_order.stock": STOCKS[rng.integers(len(STOCKS))],
                # decimal strings in whole units (docs/packets.md): "120.5001" is the raw 1205001
                "add_order.price": str(Decimal(int(rng.choice([500000, 1205000, 1205001, 1500000, 1800000, 2500001,
                                                               4000001, 9000000, 10000001]))).scaleb(-4)),
                "add_order.shares": int(rng.choice([10, 11, 99, 100, 499, 500, 1001, 50001])),
                "add_order.buy_sell_indicator": "B" if rng.integers(2) else "S",
                "packet": i // 3, "bytes": 38,
            }) + "\n")


@pytest.fixture(scope="module")
def example_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("netsim") / "feed.jsonl"
    write_itch_trace(path, 600, seed=5)
    return path


@pytest.mark.parametrize("policy", ["mr", "tr"])
def test_route_and_netsim_cli_on_the_shipped_fat_tree(tmp_path, example_trace, policy):
    out, report_dir = tmp_path / "net", tmp_path / "report"
    routed = p4sub("route", "examples/fat-tree-4.topo", "examples/fat-tree-4.rules", "--spec", "apps/itch/itch.p4",
                   "--policy", policy, "--jobs", "1", "-o", str(out))
    assert routed.returncode == 0, routed.stderr
    ran = p4sub("netsim", str(out), "--trace", str(example_trace), "--publisher", "h1", "--report", str(report_dir))
    assert ran.returncode == 0, ran.stderr
    report = json.loads((report_dir / "netsim.json").read_text())
    assert (report_dir / "netsim.png").stat().st_size > 0
    assert {"publisher", "mode", "unit", "policy", "alpha", "messages", "packets", "hosts", "host_totals", "tiers",
            "links", "lost_copies"} <= set(report)
    assert (report["publisher"], report["mode"], report["policy"], report["messages"], report["packets"]) == (
        "h1", "prune", policy, 600, 200)
    assert set(report["hosts"]) == {f"h{i}" for i in range(1, 17)}
    for h, row in report["hosts"].items():
        assert {"delivered", "wanted", "false_positives", "false_negatives", "duplicates"} <= set(row), h
        assert row["false_negatives"] == 0 and row["false_positives"] == 0 and row["duplicates"] == 0, h
    assert report["host_totals"]["wanted"] > 0
    assert set(report["tiers"]) == {"host-edge", "edge-aggregation", "aggregation-core"}
    for tier in report["tiers"].values():
        assert {"packets", "bytes", "extra_packets", "extra_bytes"} <= set(tier)
    assert report["lost_copies"] == 0
    if policy == "tr":
        assert sum(t["extra_packets"] for t in report["tiers"].values()) == 0


# ------------------------------------------------------------------------------------------------
# Bad inputs
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def routed_example(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("routed") / "net"
    assert main(["route", str(REPO / "examples/fat-tree-4.topo"), str(REPO / "examples/fat-tree-4.rules"),
                 "--spec", str(REPO / "apps/itch/itch.p4"), "--jobs", "1", "-o", str(out)]) == 0
    return out


def damaged_copy(src: Path, dst: Path, damage: str) -> Path:
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    if damage == "missing":
        subprocess.run(["rm", "-rf", str(dst)], check=True)
    elif damage == "not JSON":
        (dst / "network.json").write_text('{"switches": [')
    elif damage == "no switches":
        (dst / "network.json").write_text("{}")
    elif damage == "a list":
        (dst / "network.json").write_text("[1, 2]")
    elif damage == "unknown switch":
        info = json.loads((dst / "network.json").read_text())
        info["switches"][0]["name"] = "nosuch"
        (dst / "network.json").write_text(json.dumps(info))
    elif damage == "switch left out":
        info = json.loads((dst / "network.json").read_text())
        del info["switches"][3]
        (dst / "network.json").write_text(json.dumps(info))
    elif damage == "no pipeline":
        (dst / "c1" / "pipeline.json").unlink()
    elif damage == "garbled pipeline":
        (dst / "c1" / "pipeline.json").write_text("{\"tables\": ")
    elif damage == "garbled topology":
        (dst / "topology.topo").write_text("switch a\nlink a:1 b:1\n")
    return dst


@pytest.mark.parametrize("damage", ["missing", "not JSON", "no switches", "a list", "unknown switch",
                                    "switch left out", "no pipeline", "garbled pipeline", "garbled topology"])
def test_netsim_on_a_damaged_network_directory_exits_2_with_a_message(tmp_path, capsys, routed_example, example_trace,
                                                                       damage):
    out = damaged_copy(routed_example, tmp_path / "net", damage)
    code, err = p4sub_here(capsys, "netsim", str(out), "--trace", str(example_trace), "--publisher", "h1")
    assert code == 2 and str(tmp_path / "net") in err, err


@pytest.mark.parametrize("publisher", ["h99", "c1", ""])
def test_netsim_refuses_a_publisher_that_is_not_a_host(capsys, routed_example, example_trace, publisher):
    code, err = p4sub_here(capsys, "netsim", str(routed_example), "--trace", str(example_trace), "--publisher",
                           publisher)
    assert code == 2 and f"publisher {publisher!r} is not a host" in err


def test_netsim_names_the_line_of_a_bad_trace(tmp_path, capsys, routed_example):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"add_order.stock": "GOOGL", "add_order.price": 1, "add_order.shares": 1, '
                     '"add_order.buy_sell_indicator": "B"}\n{"add_order.stock": "AAPL"}\n')
    code, err = p4sub_here(capsys, "netsim", str(routed_example), "--trace", str(trace), "--publisher", "h1")
    assert code == 2 and f"{trace}:2:" in err and "lacks field" in err


def _empty_pcap(path: Path) -> Path:
    import struct

    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # a header and no record
    return path


@pytest.mark.parametrize("trace, message", [("empty.pcap", "holds no packets"), ("empty.jsonl", "holds no messages"),
                                            ("blank.jsonl", "holds no messages"),
                                            ("version.pcap", "pcap version 9.9; p4sub reads version 2")])
def test_netsim_refuses_an_empty_trace_naming_it(tmp_path, capsys, routed_example, trace, message):
    import struct

    path = tmp_path / trace
    if trace == "empty.pcap":
        _empty_pcap(path)
    elif trace == "version.pcap":
        path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 9, 9, 0, 0, 65535, 1) + bytes(40))
    else:
        path.write_text("" if trace == "empty.jsonl" else "\n  \n")
    code, err = p4sub_here(capsys, "netsim", str(routed_example), "--trace", str(path), "--publisher", "h1")
    assert code == 2 and f"{path}: {message}" in err, err
