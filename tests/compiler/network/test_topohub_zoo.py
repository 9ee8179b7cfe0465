"""``zoo:NAME`` through topohub (compiler/network/topohub_zoo.py) when no Zoo GraphML is on the machine.

Every test here hides the Zoo dirs (an empty ``$P4SUB_ZOO_DIR`` and cache), so it reads topohub whatever the
machine holds. Oracles read topohub's JSON files directly, not through the module under test.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from decimal import Decimal
from pathlib import Path

import networkx as nx
import pytest

from compiler.base.errors import P4subError
from compiler.network import topology_arg
from compiler.network.topology_arg import parse_topology_arg
from compiler.network.topology_file import read_graphml
from p4sub import main

REPO = Path(__file__).resolve().parents[3]

@pytest.fixture
def no_zoo_files(tmp_path, monkeypatch):
    (tmp_path / "zoo").mkdir()
    monkeypatch.setenv("P4SUB_ZOO_DIR", str(tmp_path / "zoo"))
    monkeypatch.setattr(topology_arg, "ZOO_CACHE", tmp_path / "cache")
    return tmp_path / "zoo"


def topohub_json(name: str) -> dict:
    import topohub

    return json.loads((importlib.resources.files(topohub) / "data" / "topozoo" / f"{name}.json").read_text())


def ident(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")


# switches, switch links, diameter of topohub 1.5.1's graphs; the Zoo's GraphML has Dfn 58 / 87 / 6,
# Litnet 43 / 43 / 4, VtlWavenet2008 88 / 92 / 31 (docs/topology.md, "Topology Zoo GraphML": topohub keeps
# only the nodes with coordinates)
TOPOHUB_FIGURES = {"Dfn": (51, 80, 6), "Litnet": (39, 39, 4), "VtlWavenet2008": (87, 89, 42)}


@pytest.mark.parametrize("name", sorted(TOPOHUB_FIGURES))
def test_zoo_names_load_through_topohub_with_its_nodes_and_links(no_zoo_files, name):
    topo = parse_topology_arg(f"zoo:{name}")
    switches = topo.switch_graph()
    assert (switches.number_of_nodes(), switches.number_of_edges(), nx.diameter(switches)) == TOPOHUB_FIGURES[name]
    data = topohub_json(name)
    label = {n["id"]: ident(n["name"]) for n in data["nodes"]}
    assert set(switches.nodes) == set(label.values())
    assert {frozenset(e) for e in switches.edges} == {frozenset((label[e["source"]], label[e["target"]]))
                                                       for e in data["edges"]}
    assert [topo.node_id(s) for s in [label[n["id"]] for n in data["nodes"]]] == list(range(1, len(label) + 1))
    assert all(len(topo.hosts_of(s)) == 1 for s in switches.nodes) and len(topo.hosts()) == len(label)
    assert topo.name == name


def test_topohub_network_is_the_graphml_network_of_the_same_graph(no_zoo_files, tmp_path):
    """A GraphML file written from topohub's Litnet (labels, node order, links) reads as zoo:Litnet does:
    same names, ids, ports and orientation."""
    data = topohub_json("Litnet")
    g = nx.Graph()
    for n in data["nodes"]:
        g.add_node(f"n{n['id']}", label=n["name"])
    g.add_edges_from((f"n{e['source']}", f"n{e['target']}") for e in data["edges"])
    nx.write_graphml(g, tmp_path / "Litnet.graphml")
    assert read_graphml(tmp_path / "Litnet.graphml") == parse_topology_arg("zoo:Litnet")


def test_a_zoo_graphml_file_comes_before_topohub(no_zoo_files):
    g = nx.cycle_graph(5)
    nx.relabel_nodes(g, {i: f"n{i}" for i in g}, copy=False)
    nx.set_node_attributes(g, {f"n{i}": f"City {i}" for i in range(5)}, "label")
    nx.write_graphml(g, no_zoo_files / "Dfn.graphml")
    assert sorted(parse_topology_arg("zoo:Dfn").switches()) == [f"City_{i}" for i in range(5)]


def test_an_unknown_zoo_name_names_close_ones_and_exits_2(no_zoo_files, monkeypatch, capsys):
    with pytest.raises(P4subError, match=r"zoo:dfn: no dfn.graphml in .*topohub [0-9.]+ has no Zoo network 'dfn' "
                                         r"either; did you mean zoo:Dfn\b"):
        parse_topology_arg("zoo:dfn")
    with pytest.raises(P4subError, match=r"did you mean .*zoo:VtlWavenet2008"):
        parse_topology_arg("zoo:VtlWavenet2009")
    with pytest.raises(P4subError, match=r"has no Zoo network 'Qqqqqqqq' either \("):
        parse_topology_arg("zoo:Qqqqqqqq")
    assert main(["eval", "vt", "--topology", "zoo:Litnett", "--scenarios", "uniform", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "zoo:Litnett" in err and "did you mean zoo:Litnet" in err and "Traceback" not in err
    monkeypatch.setattr(topology_arg, "topohub_installed", lambda: None)
    with pytest.raises(P4subError, match=r"topohub, which ships most Zoo networks, is not installed \(pip install"):
        parse_topology_arg("zoo:Dfn")


# -- route and eval over a small Zoo network from topohub --------------------------------------------

ABILENE_RULES = """\
add_order.stock == GOOGL : fwd(h2, h9);
add_order.stock == AAPL and add_order.price > 150 : fwd(h5);
add_order.shares > 1000 : fwd(h11, h9);
"""


def abilene_wants(msg: dict) -> set[str]:
    """The hosts the three rules above send ``msg`` to, evaluated here by hand."""
    out = set()
    if msg["add_order.stock"] == "GOOGL":
        out |= {"h2", "h9"}
    if msg["add_order.stock"] == "AAPL" and Decimal(msg["add_order.price"]) > 150:
        out.add("h5")
    if msg["add_order.shares"] > 1000:
        out |= {"h11", "h9"}
    return out


def test_route_and_netsim_over_zoo_abilene_from_topohub_deliver_exactly(no_zoo_files, tmp_path):
    rules, trace, out, report = tmp_path / "a.rules", tmp_path / "feed.jsonl", tmp_path / "net", tmp_path / "rep"
    rules.write_text(ABILENE_RULES)
    messages = [{"add_order.stock": stock, "add_order.price": price, "add_order.shares": shares,
                 "add_order.buy_sell_indicator": "B", "packet": i, "bytes": 38}
                for i, (stock, price, shares) in enumerate(
                    [("GOOGL", "100.5", 10), ("AAPL", "150", 2000), ("AAPL", "150.0001", 5), ("MSFT", "99", 1001),
                     ("MSFT", "500", 1000), ("GOOGL", "1", 5000)])]
    trace.write_text("".join(json.dumps(m) + "\n" for m in messages))
    assert main(["route", "zoo:Abilene", str(rules), "--spec", str(REPO / "apps/itch/itch.p4"), "--policy", "tr", "--jobs", "1",
                 "--quiet", "-o", str(out)]) == 0
    assert main(["netsim", str(out), "--trace", str(trace), "--publisher", "h1", "--report", str(report)]) == 0
    result = json.loads((report / "netsim.json").read_text())
    assert set(result["hosts"]) == {f"h{i}" for i in range(1, 12)}
    for host, row in result["hosts"].items():
        wanted = sum(host in abilene_wants(m) for m in messages)
        assert (row["wanted"], row["delivered"]) == (wanted, wanted), host
        assert row["false_positives"] == row["false_negatives"] == row["duplicates"] == 0, host
    assert result["lost_copies"] == 0


def test_eval_vt_over_zoo_abilene_from_topohub(no_zoo_files, tmp_path, capsys):
    out = tmp_path / "vt"
    assert main(["eval", "vt", "--topology", "zoo:Abilene", "--scenarios", "nearby", "--churn", "0,100",
                 "--rules", "10", "--strategies", "hops,freq-relation:30", "--runs", "1", "--messages", "2",
                 "--quiet", "--report", str(out)]) == 0
    data = json.loads((out / "vt-churn.json").read_text())
    abilene = topohub_json("Abilene")
    assert (data["topology"]["nodes"], data["topology"]["edges"]) == (len(abilene["nodes"]), len(abilene["edges"]))
    rows = data["results"]
    assert rows and all(r["exact"] == r["notifications"] for r in rows)
