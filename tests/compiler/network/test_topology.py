"""Topology generators: sizes, port numbering, layers and up/down orientation."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.network.topology import (
    DOWN,
    UP,
    central_switch,
    check_topology,
    facebook_fabric,
    fat_tree,
    from_switch_graph,
    jellyfish,
    leaf_spine,
    spanning_tree_ports,
)
from compiler.network.topology_arg import parse_topology_arg


def _kinds(t):
    return Counter(t.kind(n) for n in t.graph.nodes)


@pytest.mark.parametrize(
    "topo, switches, hosts",
    [
        (fat_tree(4), 20, 16),
        (fat_tree(8), 80, 128),
        (leaf_spine(4, 2, 3), 6, 12),
        (facebook_fabric(), 80, 64),
        (jellyfish(255, 4), 255, 255),
    ],
    ids=["fat-tree-4", "fat-tree-8", "leaf-spine", "facebook", "jellyfish-255"],
)
def test_generator_sizes(topo, switches, hosts):
    assert _kinds(topo) == {"switch": switches, "host": hosts}
    check_topology(topo)


def test_fat_tree_ports_follow_the_documented_layout():
    t = fat_tree(4)
    assert [(p, v) for p, v in t.neighbours("e1_1")] == [(1, "a1_1"), (2, "a1_2"), (3, "h1"), (4, "h2")]
    assert [(p, v) for p, v in t.neighbours("a2_2")] == [(1, "c3"), (2, "c4"), (3, "e2_1"), (4, "e2_2")]
    assert [(p, v) for p, v in t.neighbours("c3")] == [(1, "a1_2"), (2, "a2_2"), (3, "a3_2"), (4, "a4_2")]
    assert t.up_ports("e1_1") == (1, 2) and t.down_ports("e1_1") == (3, 4)
    assert t.up_ports("c1") == () and t.down_ports("c1") == (1, 2, 3, 4)
    assert {t.layer(s) for s in ("e3_2", "a3_2", "c2")} == {1, 2, 3}


def test_facebook_fabric_matches_the_dissertation_shape():
    t = facebook_fabric()
    layers = Counter(t.layer(s) for s in t.switches())
    assert layers == {1: 32, 2: 32, 3: 16}
    # A ToR reaches the 4 fabric switches of its pod; a fabric switch the 4 spines of its plane.
    assert [v for _, v in t.neighbours("t3_2")][:4] == ["f3_1", "f3_2", "f3_3", "f3_4"]
    assert [v for _, v in t.neighbours("f5_2")][:4] == ["s2_1", "s2_2", "s2_3", "s2_4"]
    assert len(t.hosts_of("t1_1")) == 2
    assert t.down_ports("s4_4") == tuple(range(1, 9))


def test_jellyfish_is_regular_connected_and_seeded():
    a, b, c = jellyfish(40, 4, seed=7), jellyfish(40, 4, seed=7), jellyfish(40, 4, seed=8)
    assert a == b
    assert a != c
    sg = a.switch_graph()
    assert nx.is_connected(sg)
    assert {d for _, d in sg.degree} == {4}


def test_jellyfish_rejects_odd_degree_sum():
    with pytest.raises(P4subError, match="even"):
        jellyfish(255, 3)


def _check_orientation(t):
    """Every used link has exactly one up end and one down end; the up end is one layer lower for
    tree-oriented topologies; the used switch links form a spanning tree for flat ones."""
    for u, pu, v, pv in t.links():
        du, dv = t.direction(u, pu), t.direction(v, pv)
        if t.graph.edges[u, v]["up"] is None:
            assert du is None and dv is None
            continue
        assert {du, dv} == {UP, DOWN}
        low, high = (u, v) if du == UP else (v, u)
        assert t.layer(low) < t.layer(high)
    if not t.is_hierarchical():
        used = [(u, v) for u, _, v, _ in t.links() if t.is_switch(u) and t.is_switch(v)
                and t.graph.edges[u, v]["up"] is not None]
        tree = nx.Graph(used)
        tree.add_nodes_from(t.switches())
        assert nx.is_tree(tree)
        assert t.up_ports(t.root) == ()
        assert len(t.unused_links()) == t.switch_graph().number_of_edges() - (len(t.switches()) - 1)


@pytest.mark.parametrize("topo", [fat_tree(4), leaf_spine(3, 2, 1), facebook_fabric(2, 2, 1, 2, 2), jellyfish(30, 4)],
                         ids=["fat-tree", "leaf-spine", "facebook", "jellyfish"])
def test_orientation_is_consistent(topo):
    _check_orientation(topo)


@st.composite
def connected_graphs(draw, max_nodes=14):
    n = draw(st.integers(1, max_nodes))
    g = nx.Graph()
    g.add_nodes_from(f"s{i}" for i in range(n))
    for i in range(1, n):  # a random spanning tree keeps it connected
        g.add_edge(f"s{i}", f"s{draw(st.integers(0, i - 1))}")
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    g.add_edges_from((f"s{a}", f"s{b}") for a, b in extra if a != b)
    return g


@settings(max_examples=40, deadline=None)
@given(connected_graphs(), st.integers(0, 2))
def test_tree_orientation_of_random_graphs_is_a_spanning_tree(g, hosts):
    t = from_switch_graph(g, "random", hosts_per_switch=hosts)
    check_topology(t)
    _check_orientation(t)
    for s in t.switches():  # ports are 1..n, no gaps
        assert t.ports(s) == tuple(range(1, len(t.ports(s)) + 1))


@settings(max_examples=25, deadline=None)
@given(connected_graphs())
def test_spanning_tree_ports_reach_every_node_once(g):
    t = from_switch_graph(g, "random", hosts_per_switch=1)
    tree = spanning_tree_ports(t)
    edges = {frozenset((s, t.peer(s, p)[0])) for s, ps in tree.items() for p in ps}
    covered = nx.Graph(tuple(e) for e in edges)
    assert set(covered.nodes) == set(t.graph.nodes) or len(t.graph) == 1
    assert nx.is_tree(covered) or len(t.graph) == 1


@pytest.mark.parametrize(
    "spec, switches",
    [("fat-tree:4", 20), ("leaf-spine:4,2,2", 6), ("jellyfish:20", 20), ("jellyfish:20,6,2", 20),
     ("facebook", 80), ("facebook:2,2,1,2,2", 12)],
)
def test_parse_topology_arg(spec, switches):
    assert len(parse_topology_arg(spec).switches()) == switches


def test_parse_topology_arg_seed_changes_jellyfish():
    assert parse_topology_arg("jellyfish:30", seed=1) != parse_topology_arg("jellyfish:30", seed=2)


@pytest.mark.parametrize("spec", ["fat-tree:3", "fat-tree", "leaf-spine:1,2", "jellyfish:x", "torus:4", "nope.txt"])
def test_parse_topology_arg_rejects_bad_specs(spec):
    with pytest.raises(P4subError):
        parse_topology_arg(spec)


@settings(max_examples=30, deadline=None)
@given(connected_graphs(max_nodes=20))
def test_central_switch_is_networkx_closeness_maximum(g):
    t = from_switch_graph(g, "random", hosts_per_switch=1)
    closeness = nx.closeness_centrality(t.switch_graph())
    best = max(closeness.values())
    expected = min((s for s in t.switches() if abs(closeness[s] - best) < 1e-9), key=t.node_id)
    assert central_switch(t.graph) == expected
