"""Fuzz the topology readers (compiler/network/topology_file.py): ``.topo`` text and Topology Zoo GraphML
give a Topology or a P4subError, within the deadline; and ``p4sub route`` on a damaged topology
exits 0 or 2 and leaves its output directory alone when it fails (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compiler.network.topology_file import import_graphml, read_topology
from tests.fuzz.helpers import SETTINGS, only_p4sub_errors, output_dir, run_cli, snapshot
from tests.fuzz.mutations import mutated_bytes, mutated_text

REPO = Path(__file__).resolve().parents[2]
TOPO = (REPO / "examples/fat-tree-4.topo").read_text()
GRAPHML = (REPO / "tests/data/zoo-style-small.graphml").read_bytes()
XML_BOMBS = [
    b'<?xml version="1.0"?><!DOCTYPE g [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
    b'<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault="undirected"><node id="&d;"/></graph></graphml>',
    b'<?xml version="1.0"?><!DOCTYPE g [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    b'<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault="undirected"><node id="&x;"/></graph></graphml>',
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_topology")


@SETTINGS
@given(text=mutated_text(TOPO))
def test_topo_reader_on_damaged_files(workdir, text):
    path = workdir / "t.topo"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    only_p4sub_errors(lambda: read_topology(path))


@pytest.mark.filterwarnings("ignore::UserWarning")  # networkx on keys without a type: "Using string"
@SETTINGS
@given(blob=st.one_of(mutated_bytes(GRAPHML), mutated_text(GRAPHML.decode()).map(str.encode),
                      st.sampled_from(XML_BOMBS)))
def test_graphml_reader_on_damaged_files(workdir, blob):
    path = workdir / "t.graphml"
    path.write_bytes(blob)
    only_p4sub_errors(lambda: import_graphml(path))


@SETTINGS
@given(text=mutated_text(TOPO, 2))
def test_route_on_a_damaged_topology_changes_nothing_when_it_fails(workdir, text):
    path = workdir / "r.topo"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out = output_dir(workdir)
    before = snapshot(out)
    code, _ = run_cli("route", str(path), str(REPO / "examples/fat-tree-4.rules"), "--spec",
                      str(REPO / "apps/itch/itch.p4"), "--jobs", "1", "--quiet", "-o", str(out / "net"))
    if code != 0:
        assert snapshot(out) == before
