"""Topology Zoo networks from the PyPI package ``topohub``: what ``zoo:NAME`` reads when no Zoo GraphML is here.

Why this exists: p4sub ships no Zoo data (it is third-party), and the Zoo's GraphML archive is a manual
download into ``$P4SUB_ZOO_DIR`` or ``~/.cache/p4sub/topology-zoo`` (docs/topology.md), so on a fresh
machine - CI among them - ``zoo:Dfn`` had nothing to read and the Zoo tests skipped. ``topohub`` (MIT, a
dependency of p4sub) ships 203 of the Zoo's 276 networks as networkx node-link JSON. Its graphs are not the
Zoo's, though: topohub keeps only the nodes that have coordinates, with the links between them (Dfn 51 of 58
nodes and 80 of 87 links, Litnet 39 of 43); docs/topology.md, "Topology Zoo GraphML", has the measurements.
So the GraphML, when it is on the machine, comes first (:func:`compiler.network.topology_arg.zoo_topology`).

The node-link data becomes the graph :func:`~compiler.network.topology_file.import_zoo_graph` reads - each
node's ``name`` as its ``label``, in topohub's order - so switch names, ids, hosts, ports and orientation
follow the GraphML reader's rules, not a second set. ``topohub`` is imported only when a Zoo name is looked
up, and only through its documented ``topohub.get("topozoo/NAME")``; the list of names is read from the
package's data folder.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
from dataclasses import dataclass

import networkx as nx

from compiler.base import P4subError
from compiler.network.topology import Topology
from compiler.network.topology_file import GraphmlImport, import_zoo_graph

#: topohub's group of Topology Zoo networks (its keys are ``topozoo/NAME``, NAME spelt as the Zoo does).
GROUP = "topozoo"


@dataclass(frozen=True)
class TopohubZoo:
    """The installed topohub: its version and the Zoo networks it ships."""

    version: str
    names: frozenset[str]


def installed() -> TopohubZoo | None:
    """The installed topohub's Zoo networks, or None when topohub is not installed."""
    if importlib.util.find_spec("topohub") is None:
        return None
    import topohub

    folder = importlib.resources.files(topohub) / "data" / GROUP
    names = frozenset(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))
    return TopohubZoo(str(getattr(topohub, "__version__", "?")), names)


def topohub_graph(name: str) -> nx.Graph:
    """topohub's graph of Zoo network ``name``: nodes in topohub's order, each with its ``name`` as ``label``
    (the attribute the Zoo's GraphML names nodes by), and its links. ``name`` must be one of
    :func:`installed`'s names."""
    hub = installed()
    if hub is None or name not in hub.names:
        raise P4subError(f"zoo:{name}: topohub has no Zoo network of that name")
    import topohub

    try:
        data = topohub.get(f"{GROUP}/{name}")
    except (KeyError, OSError, ValueError) as exc:  # ValueError: bad JSON
        raise P4subError(f"zoo:{name}: topohub {hub.version} could not read its data: {exc!r}") from None
    try:
        graph: nx.Graph = nx.MultiGraph() if data.get("multigraph") else nx.Graph()
        for node in data["nodes"]:
            graph.add_node(node["id"], label=node.get("name"))
        for edge in data["edges"]:
            graph.add_edge(edge["source"], edge["target"])
    except (KeyError, TypeError) as exc:
        raise P4subError(f"zoo:{name}: topohub {hub.version}'s data is not node-link JSON: {exc!r}") from None
    return graph


def import_topohub_zoo(name: str, hosts_per_switch: int = 1, root: str | None = None) -> GraphmlImport:
    """Zoo network ``name`` from topohub, made a topology by the GraphML reader's rules (the topology is named
    ``name``: topohub keeps no ``Network`` attribute, which names a GraphML import)."""
    return import_zoo_graph(topohub_graph(name), name, hosts_per_switch, root, source=f"topohub {GROUP}/{name}")


def read_topohub_zoo(name: str, hosts_per_switch: int = 1, root: str | None = None) -> Topology:
    """The topology of :func:`import_topohub_zoo`."""
    return import_topohub_zoo(name, hosts_per_switch, root).topology
