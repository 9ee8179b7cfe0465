"""Reading and writing topologies: p4sub's own ``.topo`` text format and Topology Zoo GraphML.

``.topo`` is line-based; ``#`` starts a comment::

    name fat-tree-4            # optional, rest of the line
    root s1                    # optional: root switch of the orientation tree
    switch e1_1 layer=1        # optional id=N (default: declaration order, 1..n) and layer=N
    host h1                    # optional id=N
    link e1_1:3 h1:0           # NODE:PORT NODE:PORT, optionally followed by 'unused'

Switch ports are >= 1, host ports >= 0; every host has exactly one link, to a switch. Either every
switch states its ``layer`` (then each link points up from its lower-layer end; links flagged
``unused`` and links inside one layer are left out of the orientation) or none does (then a
shortest-path tree from ``root``, or from the most central switch, orients the graph, see
:func:`compiler.network.topology.orient_by_tree`). :func:`write_topology` always writes layers, so what it
writes reads back equal.

Every mistake is reported as a :class:`~compiler.base.errors.ParseError` at ``FILE:LINE:COLUMN``.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from compiler.base import P4subError, ParseError, SourceLocation, read_bytes, read_text
from compiler.network.topology import (
    HOST,
    SWITCH,
    Topology,
    from_switch_graph,
    orient_by_tree,
    sanitize_name,
    valid_name,
)

#: The highest port a topology file may name (a target's own, narrower limit is checked by its backend).
MAX_PORT = (1 << 32) - 1


@dataclass(frozen=True)
class _Token:
    text: str
    column: int


def _tokens(line: str) -> list[_Token]:
    code = line.split("#", 1)[0]
    out: list[_Token] = []
    i = 0
    while i < len(code):
        if code[i].isspace():
            i += 1
            continue
        j = i
        while j < len(code) and not code[j].isspace():
            j += 1
        out.append(_Token(code[i:j], i + 1))
        i = j
    return out


@dataclass
class _Decl:
    name: str
    kind: str
    line: int
    column: int
    id: int | None = None
    layer: int | None = None


def parse_topology(text: str, filename: str = "<string>") -> Topology:
    """Parse ``.topo`` text; see the module docstring for the format."""

    def err(msg: str, line: int, column: int) -> ParseError:
        return ParseError(msg, SourceLocation(filename, line, column))

    name = Path(filename).stem if filename != "<string>" else ""
    root: tuple[str, int, int] | None = None
    decls: dict[str, _Decl] = {}
    links: list[tuple[str, int, str, int, bool, int, list[_Token]]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        toks = _tokens(line)
        if not toks:
            continue
        head = toks[0]
        word = head.text
        if word == "name":
            rest = line.split("#", 1)[0][head.column - 1 + len("name") :].strip()
            if not rest:
                raise err("'name' needs a topology name", lineno, head.column)
            name = rest
        elif word == "root":
            if len(toks) != 2:
                raise err("expected 'root SWITCH'", lineno, head.column)
            root = (toks[1].text, lineno, toks[1].column)
        elif word in (SWITCH, HOST):
            if len(toks) < 2:
                raise err(f"expected '{word} NAME'", lineno, head.column)
            node = toks[1]
            if not valid_name(node.text):
                raise err(f"invalid node name {node.text!r}", lineno, node.column)
            if node.text in decls:
                prev = decls[node.text]
                raise err(f"node {node.text!r} already declared on line {prev.line}", lineno, node.column)
            decl = _Decl(node.text, word, lineno, node.column)
            allowed = ("id", "layer") if word == SWITCH else ("id",)
            for tok in toks[2:]:
                key, eq, value = tok.text.partition("=")
                if not eq or key not in allowed:
                    raise err(f"unexpected {tok.text!r}; a {word} takes {', '.join(k + '=N' for k in allowed)}", lineno, tok.column)
                if getattr(decl, key) is not None:
                    raise err(f"{key} given twice", lineno, tok.column)
                number = _int(value, lambda m: err(m, lineno, tok.column + len(key) + 1))
                if key == "id" and number < 1:
                    raise err("ids start at 1 (0 is reserved)", lineno, tok.column + 3)
                if key == "layer" and number < 1:
                    raise err("switch layers start at 1 (hosts are layer 0)", lineno, tok.column + 6)
                setattr(decl, key, number)
            decls[node.text] = decl
        elif word == "link":
            if len(toks) not in (3, 4):
                raise err("expected 'link NODE:PORT NODE:PORT [unused]'", lineno, head.column)
            ends = []
            for tok in toks[1:3]:
                node, colon, port = tok.text.rpartition(":")
                if not colon or not node:
                    raise err(f"expected NODE:PORT, got {tok.text!r}", lineno, tok.column)
                ends.append((node, _int(port, lambda m: err(m, lineno, tok.column + len(node) + 1))))
            unused = False
            if len(toks) == 4:
                if toks[3].text != "unused":
                    raise err(f"unexpected {toks[3].text!r}; only 'unused' may follow a link", lineno, toks[3].column)
                unused = True
            links.append((ends[0][0], ends[0][1], ends[1][0], ends[1][1], unused, lineno, toks))
        else:
            raise err(f"unknown statement {word!r}; expected name, root, switch, host or link", lineno, head.column)

    switches = [d for d in decls.values() if d.kind == SWITCH]
    hosts = [d for d in decls.values() if d.kind == HOST]
    if not switches:
        raise err("the topology has no switches", 1, 1)
    for group in (switches, hosts):
        with_id = [d for d in group if d.id is not None]
        if with_id and len(with_id) != len(group):
            missing = next(d for d in group if d.id is None)
            raise err(f"{missing.kind} {missing.name!r} has no id=, but other {missing.kind}es do; give all or none",
                      missing.line, missing.column)
        if not with_id:
            for i, d in enumerate(group, start=1):
                d.id = i
        seen: dict[int, _Decl] = {}
        for d in group:
            if d.id in seen:
                raise err(f"id {d.id} already used by {seen[d.id].name!r}", d.line, d.column)
            seen[d.id] = d
    layered = [d for d in switches if d.layer is not None]
    if layered and len(layered) != len(switches):
        missing = next(d for d in switches if d.layer is None)
        raise err(f"switch {missing.name!r} has no layer=, but other switches do; give all or none",
                  missing.line, missing.column)

    graph = nx.Graph()
    for d in decls.values():
        graph.add_node(d.name, kind=d.kind, id=d.id, layer=(d.layer or 1) if d.kind == SWITCH else 0)
    used_ports: dict[tuple[str, int], int] = {}
    host_link: dict[str, int] = {}
    for u, pu, v, pv, unused, lineno, toks in links:
        for (node, port), tok in ((( u, pu), toks[1]), ((v, pv), toks[2])):
            if node not in decls:
                raise err(f"unknown node {node!r} (declare it with 'switch' or 'host')", lineno, tok.column)
            kind = decls[node].kind
            if kind == SWITCH and port < 1:
                raise err(f"switch ports start at 1, got {port}", lineno, tok.column + len(node) + 1)
            if port < 0:
                raise err(f"ports are non-negative, got {port}", lineno, tok.column + len(node) + 1)
            if port > MAX_PORT:
                raise err(f"port {port} is more than {MAX_PORT:,} (no switch numbers its ports past 32 bits)",
                          lineno, tok.column + len(node) + 1)
            if (node, port) in used_ports:
                raise err(f"port {node}:{port} already used on line {used_ports[node, port]}", lineno, tok.column)
            used_ports[node, port] = lineno
        if u == v:
            raise err(f"link from {u!r} to itself", lineno, toks[2].column)
        if graph.has_edge(u, v):
            raise err(f"second link between {u!r} and {v!r}; parallel links are not supported", lineno, toks[1].column)
        kinds = (decls[u].kind, decls[v].kind)
        if kinds == (HOST, HOST):
            raise err(f"link between hosts {u!r} and {v!r}; hosts attach to switches", lineno, toks[1].column)
        for node, tok in ((u, toks[1]), (v, toks[2])):
            if decls[node].kind == HOST:
                if node in host_link:
                    raise err(f"host {node!r} already linked on line {host_link[node]}; a host has one link",
                              lineno, tok.column)
                host_link[node] = lineno
        if unused:
            if not layered:
                raise err("'unused' needs layer= on every switch (otherwise the orientation tree decides)",
                          lineno, toks[3].column)
            if HOST in kinds:
                raise err("a host link cannot be unused", lineno, toks[3].column)
        graph.add_edge(u, v, ports={u: pu, v: pv}, up=None, unused=unused)

    for d in hosts:
        if d.name not in host_link:
            raise err(f"host {d.name!r} has no link", d.line, d.column)
    sg = graph.subgraph(d.name for d in switches)
    first = switches[0].name
    reach = nx.node_connected_component(sg, first)
    for d in switches:
        if d.name not in reach:
            raise err(f"switch {d.name!r} is not connected to {first!r}", d.line, d.column)
    if root is not None:
        rname, rline, rcol = root
        if rname not in decls or decls[rname].kind != SWITCH:
            raise err(f"root {rname!r} is not a declared switch", rline, rcol)

    if layered:
        for u, v, data in graph.edges(data=True):
            lu, lv = graph.nodes[u]["layer"], graph.nodes[v]["layer"]
            data["up"] = None if data["unused"] or lu == lv else (u if lu < lv else v)
            del data["unused"]
        return Topology(graph, name=name, root=root[0] if root else None)
    for _, _, data in graph.edges(data=True):
        del data["unused"]
    return orient_by_tree(graph, name=name, root=root[0] if root else None)


def _int(text: str, fail) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise fail(f"expected a number, got {text!r}") from None


def read_topology(path: str | Path) -> Topology:
    """Read a ``.topo`` file."""
    return parse_topology(read_text(path, "topology file"), str(path))


def format_topology(topology: Topology) -> str:
    """The ``.topo`` text for a topology; :func:`parse_topology` reads it back equal."""
    lines = ["# p4sub topology: switch ports 1..n, host ports from 0; see docs/topology.md"]
    if topology.name:
        lines.append(f"name {topology.name}")
    if topology.root is not None:
        lines.append(f"root {topology.root}")
    switches, hosts = topology.switches(), topology.hosts()
    dense_s = [topology.node_id(s) for s in switches] == list(range(1, len(switches) + 1))
    dense_h = [topology.node_id(h) for h in hosts] == list(range(1, len(hosts) + 1))
    for s in switches:
        ident = "" if dense_s else f" id={topology.node_id(s)}"
        lines.append(f"switch {s}{ident} layer={topology.layer(s)}")
    for h in hosts:
        ident = "" if dense_h else f" id={topology.node_id(h)}"
        lines.append(f"host {h}{ident}")
    for u, pu, v, pv in topology.links():
        both_switches = topology.is_switch(u) and topology.is_switch(v)
        flag = " unused" if both_switches and topology.graph.edges[u, v]["up"] is None else ""
        lines.append(f"link {u}:{pu} {v}:{pv}{flag}")
    return "\n".join(lines) + "\n"


def write_topology(topology: Topology, path: str | Path) -> None:
    """Write a ``.topo`` file (see :func:`format_topology`)."""
    for n in topology.graph.nodes:
        if not valid_name(n):
            raise P4subError(f"node name {n!r} cannot be written to a .topo file")
    Path(path).write_text(format_topology(topology), encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# Internet Topology Zoo GraphML
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphmlImport:
    """A Zoo import and what had to be changed to make it a topology."""

    topology: Topology
    dropped_nodes: tuple[str, ...]  # outside the largest connected part
    merged_links: int  # parallel links folded into one
    self_loops: int  # links from a node to itself, dropped


def import_graphml(path: str | Path, hosts_per_switch: int = 1, root: str | None = None) -> GraphmlImport:
    """Read a Topology Zoo GraphML file: every node a switch with ``hosts_per_switch`` hosts.

    Choices, since Zoo files are hand-drawn maps:

    * Switch names come from the ``label`` attribute made into identifiers (``New York`` ->
      ``New_York``); nodes without a label use their GraphML id; duplicates get ``_2``, ``_3``...
    * Parallel links (Zoo files draw each physical circuit) become one link: forwarding sees one
      port per neighbour. Self-loops are dropped.
    * A file with several connected parts keeps the largest (the first in file order on ties),
      since a delivery tree cannot cross parts; the dropped nodes are listed in the result.
    * Switch ids follow file order; ports as in :func:`compiler.network.topology.jellyfish`.
    """
    path = Path(path)
    loc = SourceLocation(str(path), 1, 1)
    data = read_bytes(path, "GraphML file")
    try:
        raw = nx.read_graphml(io.BytesIO(data))
    except ET.ParseError as exc:
        line, col = exc.position
        raise ParseError(f"not well-formed GraphML: {exc.msg if hasattr(exc, 'msg') else exc}",
                         SourceLocation(str(path), line, col + 1)) from None
    except (nx.NetworkXError, KeyError, ValueError, TypeError) as exc:
        raise ParseError(f"not a usable GraphML graph: {exc}", loc) from None
    if raw.number_of_nodes() == 0:
        raise ParseError("the GraphML graph has no nodes", loc)
    name = raw.graph.get("Network") or raw.graph.get("label") or path.stem
    return import_zoo_graph(raw, str(name), hosts_per_switch, root, source=str(path))


def import_zoo_graph(raw: nx.Graph, name: str, hosts_per_switch: int = 1, root: str | None = None,
                     source: str = "<graph>") -> GraphmlImport:
    """A Zoo-style networkx graph (any of Graph, DiGraph, MultiGraph; a node's ``label`` attribute is its
    name) made a topology by :func:`import_graphml`'s rules, which this is the body of; other readers of
    Zoo data (:mod:`compiler.network.topohub_zoo`) hand their graph here so the rules stay in one place.
    ``source`` names the graph in errors."""
    names: dict[object, str] = {}
    taken: set[str] = set()
    for n, attrs in raw.nodes(data=True):
        label = attrs.get("label")
        base = sanitize_name(str(label)) if label not in (None, "") else sanitize_name(str(n))
        node_name, i = base, 1
        while node_name in taken:
            i += 1
            node_name = f"{base}_{i}"
        taken.add(node_name)
        names[n] = node_name
    simple = nx.Graph()
    simple.add_nodes_from(names[n] for n in raw.nodes)
    self_loops = merged = 0
    for u, v in raw.edges():
        if u == v:
            self_loops += 1
        elif simple.has_edge(names[u], names[v]):
            merged += 1
        else:
            simple.add_edge(names[u], names[v])
    order = {n: i for i, n in enumerate(simple.nodes)}
    parts = sorted(nx.connected_components(simple), key=lambda c: (-len(c), min(order[x] for x in c)))
    if not parts:
        raise ParseError("the graph has no nodes", SourceLocation(source, 1, 1))
    keep = parts[0]
    dropped = tuple(sorted((n for n in simple.nodes if n not in keep), key=order.__getitem__))
    simple = simple.subgraph([n for n in simple.nodes if n in keep]).copy()
    if root is not None and root not in simple:
        raise P4subError(f"root {root!r} is not a switch of {source}")
    topo = from_switch_graph(simple, name=name, hosts_per_switch=hosts_per_switch, root=root)
    return GraphmlImport(topo, dropped, merged, self_loops)


def read_graphml(path: str | Path, hosts_per_switch: int = 1, root: str | None = None) -> Topology:
    """The topology of :func:`import_graphml`."""
    return import_graphml(path, hosts_per_switch, root).topology
