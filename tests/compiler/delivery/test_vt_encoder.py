"""Virtual trees: labels, the installed table, and Algorithm 5.1 against the switches' behaviour.

The property tests install random VTs (trees, and subgraphs with cycles, host links included) on
random topologies, encode random receiver sets with both loops of Algorithm 5.1, and follow every
copy with a walker of their own that only calls the switches' ``forward``: the receivers must get
the publisher's frame exactly once, nobody else anything, and no switch may see the packet twice.
"""

from __future__ import annotations

import random
from collections import Counter, deque

import networkx as nx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.vt import EdgeIds, Kind, Label, VirtualTrees, VtGraph, VtTable, encode
from compiler.delivery.vt.labels import attach, header_bytes
from compiler.network.topology import Topology, facebook_fabric, fat_tree, from_switch_graph, leaf_spine
from tests.compiler.delivery.helpers import PAYLOAD_FRAME, topologies


def random_vt_edges(topo: Topology, ids: EdgeIds, rng: random.Random, cyclic: bool) -> set[int]:
    """A connected set of links grown from a random switch; with ``cyclic``, links between nodes
    already reached are taken too, so the VT may contain cycles."""
    start = rng.choice(topo.switches())
    reached, edges = {start}, set()
    frontier = [start]
    target = rng.randint(1, max(1, len(ids)))
    while frontier and len(edges) < target:
        u = rng.choice(frontier)
        options = [v for _, v in topo.neighbours(u) if ids.id(u, v) not in edges and (cyclic or v not in reached)]
        if not options:
            frontier.remove(u)
            continue
        v = rng.choice(options)
        edges.add(ids.id(u, v))
        if v not in reached:
            reached.add(v)
            if topo.is_switch(v):
                frontier.append(v)
    return edges


def walk(scheme: VirtualTrees, publisher: str, frame: bytes) -> tuple[Counter, Counter, set[bytes]]:
    """Copies per host, visits per switch, and the frames hosts got; stops at 10,000 copies."""
    topo = scheme.topology
    s, p = topo.host_attachment(publisher)
    queue = deque([(s, p, frame)])
    hosts, switches, frames = Counter(), Counter(), set()
    copies = 0
    while queue:
        s, p, f = queue.popleft()
        switches[s] += 1
        if switches[s] > 1:
            continue  # a second visit is already a failure; do not follow a loop forever
        for out_port, out in scheme.forward(s, p, f, SwitchCost()):
            copies += 1
            assert copies < 10_000
            node, node_port = topo.peer(s, out_port)
            if topo.is_switch(node):
                queue.append((node, node_port, out))
            else:
                hosts[node] += 1
                frames.add(out)
    return hosts, switches, frames


def random_host_tree(topo: Topology, ids: EdgeIds, rng: random.Random, most: int | None = None) -> set[int]:
    """Shortest paths from a random switch to a few random hosts: the kind of VT that covers receivers."""
    g = topo.graph
    root = rng.choice(topo.switches())
    edges = set()
    for h in rng.sample(topo.hosts(), rng.randint(1, most or len(topo.hosts()))):
        path = nx.shortest_path(g, root, h)
        edges.update(ids.id(a, b) for a, b in zip(path, path[1:]))
    return edges


@st.composite
def installed_network(draw, max_switches: int = 12):
    topo = draw(topologies(max_switches=max_switches))
    ids = EdgeIds(topo)
    rng = random.Random(draw(st.integers(0, 2**32)))
    table = VtTable(topo, max_rules=draw(st.sampled_from([None, None, 1, 2, 4])), edge_ids=ids)
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["tree", "cyclic", "hosts"]))
        table.install(random_host_tree(topo, ids, rng) if kind == "hosts"
                      else random_vt_edges(topo, ids, rng, cyclic=kind == "cyclic"))
    hosts = topo.hosts()
    publisher = draw(st.sampled_from(hosts))
    others = [h for h in hosts if h != publisher]
    receivers = draw(st.lists(st.sampled_from(others), min_size=1, max_size=len(others), unique=True))
    return table, publisher, sorted(receivers)


@st.composite
def rich_network(draw):
    """Bigger networks with many overlapping VTs (so that encodings combine several and cut cycles)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    kind = draw(st.sampled_from(["fat-tree", "leaf-spine", "random"]))
    if kind == "fat-tree":
        topo = fat_tree(4)
    elif kind == "leaf-spine":
        topo = leaf_spine(4, 3, 2)
    else:
        n = rng.randint(6, 14)
        g = nx.connected_watts_strogatz_graph(n, 4 if n > 6 else 2, 0.3, seed=rng.randint(0, 1000))
        topo = from_switch_graph(nx.relabel_nodes(g, {i: f"s{i}" for i in g}), "ws", hosts_per_switch=rng.randint(1, 2))
    ids = EdgeIds(topo)
    table = VtTable(topo, max_rules=rng.choice([None, 3, 6]), edge_ids=ids)
    for _ in range(rng.randint(6, 20)):
        kind = rng.choice(["tree", "cyclic", "hosts", "hosts"])
        table.install(random_host_tree(topo, ids, rng, most=4) if kind == "hosts"
                      else random_vt_edges(topo, ids, rng, cyclic=kind == "cyclic"))
    hosts = topo.hosts()
    publisher = rng.choice(hosts)
    # Receivers: the hosts of a few installed VTs, give or take some, so that VTs pay off together.
    receivers = {h for t in rng.sample(sorted(table.trees), min(3, len(table.trees)))
                 for e in table.trees[t].edges for h in ids.edge(e) if not topo.is_switch(h)}
    receivers ^= set(rng.sample(hosts, 2))
    receivers.discard(publisher)
    receivers = receivers or {rng.choice([h for h in hosts if h != publisher])}
    return table, publisher, sorted(receivers)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=installed_network(), mode=st.sampled_from(["single", "best"]))
def test_delivery_is_exactly_the_receiver_set(case, mode):
    check_exact(*case, mode)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rich_network(), mode=st.sampled_from(["single", "best"]))
def test_delivery_with_many_overlapping_vts_is_exactly_the_receiver_set(case, mode):
    check_exact(*case, mode)


def check_exact(table: VtTable, publisher: str, receivers: list[str], mode: str) -> None:
    scheme = VirtualTrees(table, mode=mode)
    pub = scheme.publish(publisher, receivers, PAYLOAD_FRAME)
    event(f"trees {min(pub.info['trees'], 2)}+, stops {min(pub.info['stops'], 2)}+")
    hosts, switches, frames = walk(scheme, publisher, pub.frames[0])
    assert hosts == Counter({r: 1 for r in receivers})
    assert max(switches.values()) == 1, "a switch saw the notification twice"
    assert frames == {PAYLOAD_FRAME}, "receivers get the publisher's frame byte for byte"
    assert pub.header_bytes == header_bytes(pub.info["labels"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=installed_network(max_switches=9))
def test_vts_never_cost_more_than_hops_and_best_gain_never_loses_to_nothing(case):
    """Both loops start from the all-hop tree and accept only improvements."""
    table, publisher, receivers = case
    g = VtGraph.of(table.topology)
    ingress = table.topology.host_attachment(publisher)[0]
    hops_only = encode(g, {}, ingress, receivers, publisher=publisher)
    assert hops_only.trees == () and hops_only.stops == ()
    for mode in ("single", "best"):
        enc = encode(g, table.view(), ingress, receivers, publisher=publisher, mode=mode)
        assert enc.cost <= hops_only.cost
        assert set(enc.trees) <= set(table.trees)


def test_label_format():
    assert Label(Kind.TREE, 5).pack() == 0x4005
    assert Label(Kind.HOP, 0x3FFF).pack() == 0xBFFF
    assert Label(Kind.STOP, 1).pack() == 0xC001
    with pytest.raises(P4subError):
        Label(Kind.TREE, 0)
    with pytest.raises(P4subError):
        Label(Kind.HOP, 1 << 14)
    frame = attach(PAYLOAD_FRAME, [Label(Kind.TREE, 1), Label(Kind.STOP, 2)])
    assert frame[12:14] == b"\x99\x99" and frame[14:16] == PAYLOAD_FRAME[12:14]
    assert frame[16:18] == b"\x00\x02" and frame[18:22] == b"\x40\x01\xc0\x02" and frame[22:] == PAYLOAD_FRAME[14:]
    assert len(frame) - len(PAYLOAD_FRAME) == header_bytes(2) == 8


def test_edge_ids_cover_every_link_once():
    topo = facebook_fabric()
    ids = EdgeIds(topo)
    assert len(ids) == 320  # 128 ToR-fabric + 128 fabric-spine + 64 host links
    assert sorted(ids.id(u, v) for u, v in ids.edges) == list(range(1, 321))
    for s in topo.switches():
        assert [p for _, p in ids.incident(s)] == list(topo.ports(s))


def test_vt_ids_are_never_reused_and_budgets_hold():
    topo = fat_tree(4)
    table = VtTable(topo, max_rules=1)
    ids = table.edge_ids
    a = table.install({ids.id("e1_1", "a1_1"), ids.id("e1_2", "a1_1")})
    assert a.vt_id == 1
    assert table.install({ids.id("e1_1", "a1_2")}) is None  # e1_1 is full
    table.delete(a.vt_id)
    b = table.install({ids.id("e1_1", "a1_2")})
    assert b.vt_id == 2 and 1 not in table.trees
    with pytest.raises(P4subError):
        table.install({ids.id("e1_1", "a1_1"), ids.id("e2_1", "a2_1")})  # not connected
    with pytest.raises(P4subError):
        table.delete(1)


def test_broadcast_tree_with_stops_on_the_facebook_fabric():
    """One broadcast VT from a spine reaches everything; the encoder prunes it with stops."""
    topo = facebook_fabric()
    table = VtTable(topo)
    ids = table.edge_ids
    edges = set()
    for _, f in topo.neighbours("s1_1"):
        edges.add(ids.id("s1_1", f))
        for _, t in topo.neighbours(f):
            if t.startswith("t"):
                edges.add(ids.id(f, t))
                edges.update(ids.id(t, h) for h in topo.hosts_of(t))
    table.install(edges)
    scheme = VirtualTrees(table)
    receivers = [h for h in topo.hosts() if h != "h1"]
    pub = scheme.publish("h1", receivers, PAYLOAD_FRAME)
    # Everybody but the publisher: the VT alone (it is bidirectional and passes the publisher's ToR).
    assert (pub.info["trees"], pub.info["hops"], pub.info["stops"]) == (1, 0, 0)
    hosts, switches, _ = walk(scheme, "h1", pub.frames[0])
    assert hosts == Counter(receivers) and max(switches.values()) == 1
    # All but pod 8 (hosts h57..h64): one stop on the spine's link to pod 8's fabric switch.
    receivers = [h for h in topo.hosts() if h != "h1" and topo.node_id(h) <= 56]
    pub = scheme.publish("h1", receivers, PAYLOAD_FRAME)
    assert (pub.info["trees"], pub.info["hops"], pub.info["stops"]) == (1, 0, 1)
    hosts, switches, _ = walk(scheme, "h1", pub.frames[0])
    assert hosts == Counter(receivers) and max(switches.values()) == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rich_network())
def test_the_chapter3_simulator_counts_vt_delivery_exact(case):
    """The packet-level simulator (loops, duplicates, false positives, corrupted frames) agrees."""
    from runtime.delivery_eval.simulator import simulate

    table, publisher, receivers = case
    m = simulate(VirtualTrees(table, mode="best"), publisher, receivers, PAYLOAD_FRAME)
    assert m.exact and m.served == len(receivers) and not m.dropped
    assert m.packets == len(VirtualTrees(table, mode="best").encoding(publisher, receivers).tree_edges) + 1
