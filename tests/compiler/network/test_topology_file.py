"""The .topo format and the Topology Zoo GraphML reader."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.base.errors import ParseError
from compiler.network.topology import facebook_fabric, fat_tree, from_switch_graph, jellyfish, leaf_spine
from compiler.network.topology_file import (
    format_topology,
    import_graphml,
    parse_topology,
    read_graphml,
    read_topology,
    write_topology,
)

DATA = Path(__file__).parents[2] / "data"
EXAMPLES = Path(__file__).parents[3] / "examples"


@pytest.mark.parametrize(
    "topo",
    [fat_tree(4), fat_tree(8), leaf_spine(3, 2, 2), facebook_fabric(), jellyfish(255, 4, seed=3)],
    ids=["fat-tree-4", "fat-tree-8", "leaf-spine", "facebook", "jellyfish"],
)
def test_generated_topologies_round_trip_through_files(topo, tmp_path):
    path = tmp_path / "t.topo"
    write_topology(topo, path)
    assert read_topology(path) == topo


def test_shipped_fat_tree_example_is_what_the_generator_writes():
    assert read_topology(EXAMPLES / "fat-tree-4.topo") == fat_tree(4)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.data())
def test_random_topologies_round_trip(n, data):
    g = nx.Graph()
    g.add_nodes_from(f"x{i}" for i in range(n))
    for i in range(1, n):
        g.add_edge(f"x{i}", f"x{data.draw(st.integers(0, i - 1))}")
    for a, b in data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n)):
        if a != b:
            g.add_edge(f"x{a}", f"x{b}")
    topo = from_switch_graph(g, "rand", hosts_per_switch=data.draw(st.integers(0, 2)))
    assert parse_topology(format_topology(topo)) == topo


def test_hand_written_file_without_layers_is_tree_oriented():
    text = """
    # a triangle with one host per switch
    switch a
    switch b
    switch c
    host ha
    host hb
    host hc
    link a:1 b:1
    link b:2 c:1
    link c:2 a:2
    link a:3 ha:0
    link b:3 hb:0
    link c:3 hc:0
    root b
    """
    t = parse_topology(text, "tri.topo")
    assert t.root == "b" and t.name == "tri"
    assert t.up_ports("b") == () and set(t.down_ports("b")) == {1, 2, 3}
    assert t.unused_links() == [("a", "c")]


def test_explicit_ids_are_kept():
    t = parse_topology("switch a id=7\nswitch b id=3\nlink a:1 b:1\n")
    assert t.node_id("a") == 7 and t.switch_by_id(3) == "b"
    assert parse_topology(format_topology(t)) == t


BAD = [
    ("switch a\nlink a:1 b:1\n", 2, 10, "unknown node 'b'"),
    ("switch a\nswitch b\nswitch c\nlink a:1 b:1\nlink a:1 c:1\n", 5, 6, "port a:1 already used on line 4"),
    ("switch a\nhost h\n", 2, 6, "host 'h' has no link"),
    ("switch a\nswitch b\n", 2, 8, "not connected"),
    ("switch a\nlink a:1\n", 2, 1, "expected 'link NODE:PORT"),
    ("switch a\nswitch a\n", 2, 8, "already declared on line 1"),
    ("switch a\nswtch b\n", 2, 1, "unknown statement 'swtch'"),
    ("switch a colour=3\n", 1, 10, "unexpected 'colour=3'"),
    ("switch a layer=x\n", 1, 16, "expected a number"),
    ("switch a\nhost h\nlink a:0 h:0\n", 3, 8, "switch ports start at 1"),
    ("switch a\nswitch b\nlink a:1 b:x\n", 3, 12, "expected a number"),
    ("switch a\nswitch b\nlink a:1 b:1\nlink b:2 a:2\n", 4, 6, "parallel links"),
    ("switch a\nhost h\nhost g\nlink h:0 g:0\nlink a:1 h:1\n", 4, 6, "link between hosts"),
    ("switch a\nswitch b\nhost h\nlink a:1 h:0\nlink b:1 h:1\nlink a:2 b:2\n", 5, 10, "already linked on line 4"),
    ("switch a layer=1\nswitch b\nlink a:1 b:1\n", 2, 8, "has no layer="),
    ("switch a\nswitch b\nlink a:1 b:1 unused\n", 3, 14, "'unused' needs layer="),
    ("switch a\nroot h\nhost h\nlink a:1 h:0\n", 2, 6, "root 'h' is not a declared switch"),
    ("host h\n", 1, 1, "no switches"),
    ("switch a id=0\n", 1, 13, "ids start at 1"),
    ("switch a id=2\nswitch b\nlink a:1 b:1\n", 2, 8, "has no id="),
    ("switch a\nlink a:1 a:2\n", 2, 10, "to itself"),
    ("switch a\nswitch b\nlink a:1 b:99999999999999999999999\n", 3, 12, "is more than 4,294,967,295"),
]


@pytest.mark.parametrize("text, line, column, message", BAD, ids=[b[3] for b in BAD])
def test_bad_files_report_file_line_and_column(tmp_path, text, line, column, message):
    path = tmp_path / "bad.topo"
    path.write_text(text)
    with pytest.raises(ParseError) as info:
        read_topology(path)
    err = info.value
    assert (err.location.file, err.location.line, err.location.column) == (str(path), line, column)
    assert message in err.message
    assert str(err).startswith(f"{path}:{line}:{column}: ")


def test_zoo_style_graphml_import_choices():
    result = import_graphml(DATA / "zoo-style-small.graphml")
    t = result.topology
    assert t.name == "Testnet"
    assert t.switches() == ["North_Gate", "Harbour", "Harbour_2", "Mill_Town_East", "n_4", "n_7_Bridges"]
    assert result.dropped_nodes == ("Island_A", "Island_B")
    assert result.merged_links == 1 and result.self_loops == 1
    assert len(t.hosts()) == 6 and all(len(t.hosts_of(s)) == 1 for s in t.switches())
    assert t.switch_graph().number_of_edges() == 7
    assert parse_topology(format_topology(t)) == t


def test_graphml_root_override():
    t = read_graphml(DATA / "zoo-style-small.graphml", root="n_7_Bridges")
    assert t.root == "n_7_Bridges" and t.up_ports("n_7_Bridges") == ()


def test_malformed_graphml_reports_position(tmp_path):
    path = tmp_path / "broken.graphml"
    path.write_text('<?xml version="1.0"?>\n<graphml>\n  <graph>\n    <node id="a">\n</graphml>\n')
    with pytest.raises(ParseError) as info:
        read_graphml(path)
    assert info.value.location.file == str(path) and info.value.location.line == 5
