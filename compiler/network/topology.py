"""Network topologies with explicit, stable port numbers and an up/down orientation.

A :class:`Topology` wraps a networkx ``Graph`` whose nodes and edges carry these attributes:

* node ``kind``: ``"switch"`` or ``"host"``.
* node ``id``: a positive integer, dense per kind (switches 1..n, hosts 1..m by default). Switch ids
  end up in header-stack labels and table entries; id 0 is reserved so that 255 switches fit in
  8 bits (the dissertation's Jellyfish has exactly 255 switches, which is what an 8-bit id with a
  reserved 0 allows).
* node ``layer``: 0 for hosts; for switches 1 = host-facing (edge, ToR, leaf), 2 = aggregation
  (fabric, spine of a leaf-spine), 3 = core (spine planes). Flat graphs (Jellyfish, Topology Zoo)
  get their layers from a rooted shortest-path tree: the root has the highest layer and every tree
  child is one layer below its parent.
* edge ``ports``: ``{u: port_at_u, v: port_at_v}``. Switch ports are 1..n, host ports start at 0.
  Port numbers are part of the topology (they go into table entries), so generators assign them
  deterministically and files state them explicitly.
* edge ``up``: the end whose port on this link points *up* (towards the higher layer), or ``None``
  for a link the orientation leaves unused (non-tree links of flat graphs, links inside a layer).
  The other end's port points *down*. Host links always point up from the host.

Hierarchical generators (:func:`fat_tree`, :func:`leaf_spine`, :func:`facebook_fabric`) orient by
structure. Graphs with no hierarchy are oriented by :func:`orient_by_tree`: a breadth-first
shortest-path tree from a root chosen by closeness centrality (overridable), visiting neighbours in
port order, so the result is deterministic. Up ports come first on hierarchical switches (port 1 is
an up port, as in the Camus paper's Fig. 3); on flat graphs switch-to-switch links come first and
host links last.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Literal

import networkx as nx

from compiler.base import P4subError

SWITCH = "switch"
HOST = "host"
UP = "up"
DOWN = "down"

Direction = Literal["up", "down"]

#: Default Jellyfish degree (switch-to-switch links per switch). The dissertation does not state it.
#: 255 switches need an even degree; 4 is the smallest that gives a well-meshed network and the one
#: that reproduces its 30 % header-size crossover best (docs/delivery.md).
JELLYFISH_DEFAULT_DEGREE = 4

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


@dataclass(frozen=True, eq=False)
class Topology:
    """A network: switches and hosts, links with explicit ports, layers and port orientation.

    The graph is treated as immutable once wrapped; build a new ``Topology`` to change it.
    ``root`` names the root switch of the orientation tree for flat topologies (``None`` for
    hierarchical ones). Equality compares names, attributes, ports and orientation, not object
    identity, so a topology written to a file and read back compares equal.
    """

    graph: nx.Graph
    name: str = ""
    root: str | None = None
    _peer: dict[str, dict[int, tuple[str, int]]] = field(init=False, repr=False, compare=False)
    _switch_by_id: dict[int, str] = field(init=False, repr=False, compare=False)
    _host_by_id: dict[int, str] = field(init=False, repr=False, compare=False)
    #: Derived data other modules compute once per topology (routing tables, adjacency arrays).
    cache: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache", {})
        peer: dict[str, dict[int, tuple[str, int]]] = {n: {} for n in self.graph.nodes}
        for u, v, ports in self.graph.edges(data="ports"):
            peer[u][ports[u]] = (v, ports[v])
            peer[v][ports[v]] = (u, ports[u])
        for n in peer:
            peer[n] = dict(sorted(peer[n].items()))
        object.__setattr__(self, "_peer", peer)
        nodes = self.graph.nodes
        object.__setattr__(
            self, "_switch_by_id", {nodes[n]["id"]: n for n in nodes if nodes[n]["kind"] == SWITCH}
        )
        object.__setattr__(self, "_host_by_id", {nodes[n]["id"]: n for n in nodes if nodes[n]["kind"] == HOST})

    # --- nodes -------------------------------------------------------------------------------
    def switches(self) -> list[str]:
        """Switch names in id order."""
        return [self._switch_by_id[i] for i in sorted(self._switch_by_id)]

    def hosts(self) -> list[str]:
        """Host names in id order."""
        return [self._host_by_id[i] for i in sorted(self._host_by_id)]

    def kind(self, node: str) -> str:
        return self.graph.nodes[node]["kind"]

    def is_switch(self, node: str) -> bool:
        return self.graph.nodes[node]["kind"] == SWITCH

    def node_id(self, node: str) -> int:
        return self.graph.nodes[node]["id"]

    def switch_by_id(self, switch_id: int) -> str | None:
        return self._switch_by_id.get(switch_id)

    def host_by_id(self, host_id: int) -> str | None:
        return self._host_by_id.get(host_id)

    def layer(self, node: str) -> int:
        return self.graph.nodes[node]["layer"]

    def max_switch_id(self) -> int:
        return max(self._switch_by_id, default=0)

    def max_port(self) -> int:
        """Largest port number on any switch (what port fields and bitmasks must hold)."""
        return max((max(self._peer[s], default=0) for s in self._switch_by_id.values()), default=0)

    # --- ports -------------------------------------------------------------------------------
    def ports(self, node: str) -> tuple[int, ...]:
        """The node's connected ports, ascending."""
        return tuple(self._peer[node])

    def peer(self, node: str, port: int) -> tuple[str, int] | None:
        """``(neighbour, neighbour's port)`` on the other end of ``node``'s ``port``, or ``None``."""
        return self._peer[node].get(port)

    def port(self, node: str, neighbour: str) -> int:
        """``node``'s port towards ``neighbour`` (they must be linked)."""
        return self.graph.edges[node, neighbour]["ports"][node]

    def neighbours(self, node: str) -> Iterator[tuple[int, str]]:
        """``(port, neighbour)`` pairs in port order."""
        for p, (v, _) in self._peer[node].items():
            yield p, v

    def direction(self, node: str, port: int) -> Direction | None:
        """``"up"``/``"down"`` for a port the orientation uses; ``None`` for unused or absent ones."""
        other = self._peer[node].get(port)
        if other is None:
            return None
        up_end = self.graph.edges[node, other[0]]["up"]
        if up_end is None:
            return None
        return UP if up_end == node else DOWN

    def up_ports(self, switch: str) -> tuple[int, ...]:
        return tuple(p for p in self._peer[switch] if self.direction(switch, p) == UP)

    def down_ports(self, switch: str) -> tuple[int, ...]:
        return tuple(p for p in self._peer[switch] if self.direction(switch, p) == DOWN)

    def host_ports(self, switch: str) -> tuple[int, ...]:
        return tuple(p for p, (v, _) in self._peer[switch].items() if self.graph.nodes[v]["kind"] == HOST)

    def host_attachment(self, host: str) -> tuple[str, int]:
        """``(switch, switch port)`` the host hangs off."""
        ((_, (switch, switch_port)),) = self._peer[host].items()
        return switch, switch_port

    def hosts_of(self, switch: str) -> list[str]:
        return [v for _, (v, _) in self._peer[switch].items() if self.graph.nodes[v]["kind"] == HOST]

    def links(self) -> list[tuple[str, int, str, int]]:
        """Every link once as ``(u, u_port, v, v_port)``, sorted by (kind, id, port) of ``u``."""
        out = []
        for u, v, ports in self.graph.edges(data="ports"):
            a, b = sorted((u, v), key=self._order_key)
            out.append((a, ports[a], b, ports[b]))
        out.sort(key=lambda link: (self._order_key(link[0]), link[1]))
        return out

    def unused_links(self) -> list[tuple[str, str]]:
        """Switch-to-switch links the up/down orientation leaves out (e.g. non-tree links)."""
        return [(u, v) for u, _, v, _ in self.links() if self.graph.edges[u, v]["up"] is None]

    def switch_graph(self) -> nx.Graph:
        """A view with the switches only."""
        return self.graph.subgraph(self._switch_by_id.values())

    def is_hierarchical(self) -> bool:
        """True when layers come from the structure rather than from an orientation tree."""
        return self.root is None

    def _order_key(self, node: str) -> tuple[int, int]:
        attrs = self.graph.nodes[node]
        return (0 if attrs["kind"] == SWITCH else 1, attrs["id"])

    # --- equality ----------------------------------------------------------------------------
    def signature(self) -> tuple:
        """A canonical, hashable summary: everything equality compares."""
        nodes = tuple(
            sorted((n, a["kind"], a["id"], a["layer"]) for n, a in self.graph.nodes(data=True))
        )
        edges = tuple(
            sorted(
                (tuple(sorted(d["ports"].items())), d["up"]) for _, _, d in self.graph.edges(data=True)
            )
        )
        return (self.name, self.root, nodes, edges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topology) and self.signature() == other.signature()

    def __hash__(self) -> int:
        return hash(self.signature())

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, {len(self._switch_by_id)} switches, {len(self._host_by_id)} hosts, "
            f"{self.graph.number_of_edges()} links)"
        )


# ------------------------------------------------------------------------------------------------
# Building blocks
# ------------------------------------------------------------------------------------------------
class _Builder:
    """Accumulates nodes and links with per-node port counters; ids follow insertion order."""

    def __init__(self) -> None:
        self.graph = nx.Graph()
        self._next_port: dict[str, int] = {}
        self._counts = {SWITCH: 0, HOST: 0}

    def switch(self, name: str, layer: int = 0) -> str:
        self._counts[SWITCH] += 1
        self.graph.add_node(name, kind=SWITCH, id=self._counts[SWITCH], layer=layer)
        self._next_port[name] = 1
        return name

    def host(self, name: str) -> str:
        self._counts[HOST] += 1
        self.graph.add_node(name, kind=HOST, id=self._counts[HOST], layer=0)
        self._next_port[name] = 0
        return name

    def link(self, u: str, v: str) -> None:
        pu, pv = self._next_port[u], self._next_port[v]
        self._next_port[u] += 1
        self._next_port[v] += 1
        self.graph.add_edge(u, v, ports={u: pu, v: pv}, up=None)


def orient_by_layers(graph: nx.Graph) -> None:
    """Set each edge's ``up`` end from the layers: the lower-layer end points up; equal layers: unused."""
    for u, v, data in graph.edges(data=True):
        lu, lv = graph.nodes[u]["layer"], graph.nodes[v]["layer"]
        data["up"] = u if lu < lv else v if lv < lu else None


def central_switch(graph: nx.Graph) -> str:
    """The switch with the highest closeness centrality in the switch graph (lowest id on ties).

    Closeness as networkx defines it (Wasserman-Faust scaling for disconnected graphs), computed
    with one breadth-first search per switch over plain adjacency lists, which is much faster than
    ``nx.closeness_centrality`` on a few hundred switches.
    """
    switches = [n for n, k in graph.nodes(data="kind") if k == SWITCH]
    index = {s: i for i, s in enumerate(switches)}
    adj = [[index[v] for v in graph.neighbors(s) if v in index] for s in switches]
    n = len(switches)

    def closeness(src: int) -> float:
        dist = [-1] * n
        dist[src] = 0
        frontier, total, reached = [src], 0, 1
        while frontier:
            nxt = []
            for u in frontier:
                for w in adj[u]:
                    if dist[w] < 0:
                        dist[w] = dist[u] + 1
                        total += dist[w]
                        reached += 1
                        nxt.append(w)
            frontier = nxt
        if total == 0 or n < 2:
            return 0.0
        return (reached - 1) / total * (reached - 1) / (n - 1)

    scores = [closeness(i) for i in range(n)]
    return min(switches, key=lambda s: (-round(scores[index[s]], 12), graph.nodes[s]["id"]))


def orient_by_tree(graph: nx.Graph, name: str = "", root: str | None = None) -> Topology:
    """Orient a flat graph with a breadth-first shortest-path tree rooted at ``root``.

    The root defaults to :func:`central_switch`. Neighbours are visited in port order and the first
    discovery wins, so the tree is deterministic. Tree links point up towards the root; the other
    switch-to-switch links are left unused (``Topology.unused_links`` lists them). Layers count
    down from the root: ``layer = height - depth + 1``; hosts are layer 0.
    """
    graph = graph.copy()
    if root is None:
        root = central_switch(graph)
    elif root not in graph or graph.nodes[root]["kind"] != SWITCH:
        raise P4subError(f"orientation root {root!r} is not a switch of the topology")
    ports_of = {n: {} for n in graph.nodes}
    for u, v, ports in graph.edges(data="ports"):
        ports_of[u][ports[u]] = v
        ports_of[v][ports[v]] = u
    depth = {root: 0}
    parent: dict[str, str] = {}
    frontier = [root]
    while frontier:
        nxt = []
        for s in frontier:
            for p in sorted(ports_of[s]):
                v = ports_of[s][p]
                if graph.nodes[v]["kind"] == SWITCH and v not in depth:
                    depth[v] = depth[s] + 1
                    parent[v] = s
                    nxt.append(v)
        frontier = nxt
    height = max(depth.values())
    for n, attrs in graph.nodes(data=True):
        attrs["layer"] = 0 if attrs["kind"] == HOST else height - depth[n] + 1
    for u, v, data in graph.edges(data=True):
        if graph.nodes[u]["kind"] == HOST:
            data["up"] = u
        elif graph.nodes[v]["kind"] == HOST:
            data["up"] = v
        elif parent.get(u) == v:
            data["up"] = u
        elif parent.get(v) == u:
            data["up"] = v
        else:
            data["up"] = None
    return Topology(graph, name=name, root=root)


def spanning_tree_ports(topology: Topology, root: str | None = None) -> dict[str, tuple[int, ...]]:
    """A breadth-first spanning tree of all nodes: ``switch -> tree ports`` (both directions).

    Used for broadcast trees. Rooted at the topology's orientation root, or for hierarchical
    topologies at the first switch of the highest layer, unless ``root`` is given.
    """
    if root is None:
        root = topology.root or max(topology.switches(), key=lambda s: (topology.layer(s), -topology.node_id(s)))
    seen = {root}
    tree: dict[str, set[int]] = {s: set() for s in topology.switches()}
    frontier = [root]
    while frontier:
        nxt = []
        for s in frontier:
            for p, v in topology.neighbours(s):
                if v in seen:
                    continue
                seen.add(v)
                tree[s].add(p)
                if topology.is_switch(v):
                    tree[v].add(topology.port(v, s))
                    nxt.append(v)
        frontier = nxt
    return {s: tuple(sorted(ps)) for s, ps in tree.items()}


def check_topology(topology: Topology) -> None:
    """Raise :class:`P4subError` unless every host has one switch link and the switches are connected."""
    for h in topology.hosts():
        links = topology.ports(h)
        if len(links) != 1:
            raise P4subError(f"host {h!r} must have exactly one link (has {len(links)})")
        peer, _ = topology.peer(h, links[0])
        if not topology.is_switch(peer):
            raise P4subError(f"host {h!r} is linked to host {peer!r}; hosts attach to switches")
    sg = topology.switch_graph()
    if sg.number_of_nodes() and not nx.is_connected(sg):
        raise P4subError(f"the switches of {topology.name or 'the topology'} are not connected")


# ------------------------------------------------------------------------------------------------
# Generators
# ------------------------------------------------------------------------------------------------
def fat_tree(k: int) -> Topology:
    """A k-ary fat tree (Al-Fares et al.): (k/2)^2 core, k pods of k/2 aggregation + k/2 edge switches,
    k^3/4 hosts. k=4 gives the 20 switches and 16 hosts of the Camus paper's Fig. 3.

    Names: edge ``e{pod}_{i}``, aggregation ``a{pod}_{i}``, core ``c{i}``, hosts ``h{n}`` (all 1-based).
    Edge switch ports 1..k/2 go up to the pod's aggregation switches, k/2+1..k down to hosts.
    Aggregation switch ``a{p}_{i}`` ports 1..k/2 go up to cores ``c{(i-1)k/2+1}``..``c{i k/2}``,
    the rest down to the pod's edge switches. Core port p goes down to pod p.
    """
    if k < 2 or k % 2:
        raise P4subError(f"fat-tree arity must be an even number >= 2, got {k}")
    half = k // 2
    b = _Builder()
    edges = [[b.switch(f"e{p + 1}_{i + 1}", 1) for i in range(half)] for p in range(k)]
    aggs = [[b.switch(f"a{p + 1}_{i + 1}", 2) for i in range(half)] for p in range(k)]
    cores = [b.switch(f"c{i + 1}", 3) for i in range(half * half)]
    hosts = [b.host(f"h{n + 1}") for n in range(k * half * half)]
    # Up ports first: edge -> aggregation, aggregation -> core (in core order).
    for p in range(k):
        for e in edges[p]:
            for a in aggs[p]:
                b.link(e, a)
    for p in range(k):
        for i, a in enumerate(aggs[p]):
            for j in range(half):
                b.link(a, cores[i * half + j])
    # Then host ports on the edge switches (the aggregation down ports were numbered above).
    n = 0
    for p in range(k):
        for e in edges[p]:
            for _ in range(half):
                b.link(e, hosts[n])
                n += 1
    _renumber_up_first(b.graph)
    orient_by_layers(b.graph)
    return Topology(b.graph, name=f"fat-tree-{k}")


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int) -> Topology:
    """A two-tier leaf-spine fabric: every leaf ``l{i}`` links to every spine ``s{j}``.

    Leaf ports 1..spines go up (spine order), then ``hosts_per_leaf`` host ports; spine port i goes
    down to leaf i.
    """
    if leaves < 1 or spines < 1 or hosts_per_leaf < 0:
        raise P4subError(f"leaf-spine needs leaves >= 1, spines >= 1, hosts >= 0 (got {leaves},{spines},{hosts_per_leaf})")
    b = _Builder()
    ls = [b.switch(f"l{i + 1}", 1) for i in range(leaves)]
    ss = [b.switch(f"s{j + 1}", 2) for j in range(spines)]
    n = 0
    for leaf in ls:
        for spine in ss:
            b.link(leaf, spine)
    for leaf in ls:
        for _ in range(hosts_per_leaf):
            n += 1
            b.link(leaf, b.host(f"h{n}"))
    orient_by_layers(b.graph)
    return Topology(b.graph, name=f"leaf-spine-{leaves}-{spines}-{hosts_per_leaf}")


def facebook_fabric(
    pods: int = 8, racks_per_pod: int = 4, hosts_per_rack: int = 2, planes: int = 4, spines_per_plane: int = 4
) -> Topology:
    """Facebook's 2014 data-center fabric as the dissertation's §5.4 configures it.

    Each pod has ``racks_per_pod`` ToR switches and one fabric switch per plane; every ToR links to
    all fabric switches of its pod; the fabric switch of plane j links to all ``spines_per_plane``
    spines of plane j ("4 × k spine switches, organized into four planes of k switches each").
    Defaults (8 pods, 4 racks, 2 hosts per rack, 4 planes of 4) give the dissertation's 64 hosts and
    80 switches (32 ToR + 32 fabric + 16 spine).

    Names: ToR ``t{pod}_{rack}``, fabric ``f{pod}_{plane}``, spine ``s{plane}_{i}``, hosts ``h{n}``.
    ToR ports 1..planes go up; fabric ports 1..spines_per_plane go up, then one per rack down;
    spine port p goes down to pod p.
    """
    if min(pods, racks_per_pod, planes, spines_per_plane) < 1 or hosts_per_rack < 0:
        raise P4subError("facebook fabric sizes must be positive")
    b = _Builder()
    tors = [[b.switch(f"t{p + 1}_{r + 1}", 1) for r in range(racks_per_pod)] for p in range(pods)]
    fabric = [[b.switch(f"f{p + 1}_{j + 1}", 2) for j in range(planes)] for p in range(pods)]
    spines = [[b.switch(f"s{j + 1}_{i + 1}", 3) for i in range(spines_per_plane)] for j in range(planes)]
    for p in range(pods):
        for t in tors[p]:
            for f in fabric[p]:
                b.link(t, f)
    for p in range(pods):
        for j, f in enumerate(fabric[p]):
            for s in spines[j]:
                b.link(f, s)
    n = 0
    for p in range(pods):
        for t in tors[p]:
            for _ in range(hosts_per_rack):
                n += 1
                b.link(t, b.host(f"h{n}"))
    _renumber_up_first(b.graph)
    orient_by_layers(b.graph)
    return Topology(b.graph, name="facebook-fabric")


def _renumber_up_first(graph: nx.Graph) -> None:
    """Renumber switch ports so that up links (to higher layers) come first, keeping link order.

    Generators add links grouped by tier; this puts each switch's up ports at 1..u and its down
    ports after, in the order the links were added.
    """
    order: dict[str, list[tuple[int, int, str]]] = {}
    for u, v, ports in graph.edges(data="ports"):
        for a, b in ((u, v), (v, u)):
            if graph.nodes[a]["kind"] == SWITCH:
                going_up = graph.nodes[b]["layer"] > graph.nodes[a]["layer"]
                order.setdefault(a, []).append((0 if going_up else 1, ports[a], b))
    for a, items in order.items():
        for new_port, (_, _, b) in enumerate(sorted(items), start=1):
            graph.edges[a, b]["ports"][a] = new_port


def jellyfish(
    switches: int,
    degree: int = JELLYFISH_DEFAULT_DEGREE,
    hosts_per_switch: int = 1,
    seed: int | None = 1,
) -> Topology:
    """A Jellyfish network (Singla et al., NSDI'12): a random ``degree``-regular switch graph.

    Uses networkx's ``random_regular_graph``; draws again with the next seed until the graph is
    connected, so a given seed always gives the same network. Switch ``s{i}`` has its switch links
    on ports 1..degree (neighbours in id order), then its hosts. Oriented by :func:`orient_by_tree`.
    """
    if switches < 2 or degree < 1 or degree >= switches or (switches * degree) % 2:
        raise P4subError(
            f"jellyfish needs 1 <= degree < switches and switches*degree even (got {switches} switches, degree {degree})"
        )
    if hosts_per_switch < 0:
        raise P4subError("hosts per switch must be >= 0")
    rng = random.Random(seed)
    for _ in range(1000):
        g = nx.random_regular_graph(degree, switches, seed=rng.randrange(2**32))
        if nx.is_connected(g):
            break
    else:
        raise P4subError(f"no connected {degree}-regular graph on {switches} switches found")
    b = _Builder()
    names = [b.switch(f"s{i + 1}") for i in range(switches)]
    for i in range(switches):
        for j in sorted(g.neighbors(i)):
            if i < j:
                b.link(names[i], names[j])
    _renumber_by_neighbour(b.graph)
    n = 0
    for s in names:
        for _ in range(hosts_per_switch):
            n += 1
            b.link(s, b.host(f"h{n}"))
    return orient_by_tree(b.graph, name=f"jellyfish-{switches}-{degree}")


def _renumber_by_neighbour(graph: nx.Graph) -> None:
    """Number each switch's switch links 1..d in the order of the neighbours' ids."""
    for s in graph.nodes:
        nbrs = sorted(graph.neighbors(s), key=lambda v: graph.nodes[v]["id"])
        for port, v in enumerate(nbrs, start=1):
            graph.edges[s, v]["ports"][s] = port


def from_switch_graph(g: nx.Graph, name: str, hosts_per_switch: int = 1, root: str | None = None) -> Topology:
    """Build an oriented topology from a plain graph of switches (node order = switch id order).

    Node names must already be valid identifiers. Each switch gets ``hosts_per_switch`` hosts named
    ``h{n}``; ports as in :func:`jellyfish`.
    """
    b = _Builder()
    for n in g.nodes:
        b.switch(str(n))
    index = {n: i for i, n in enumerate(g.nodes)}
    for u, v in sorted(g.edges, key=lambda e: tuple(sorted((index[e[0]], index[e[1]])))):
        b.link(str(u), str(v))
    _renumber_by_neighbour(b.graph)
    count = 0
    for n in g.nodes:
        for _ in range(hosts_per_switch):
            count += 1
            host = f"h{count}"
            while host in b.graph:
                host += "_"
            b.link(str(n), b.host(host))
    return orient_by_tree(b.graph, name=name, root=root)


def bits_for(value: int) -> int:
    """Bits needed to hold ``value`` (at least 1)."""
    return max(1, int(value).bit_length())


def ceil_bytes(bits: int) -> int:
    return math.ceil(bits / 8)


def valid_name(name: str) -> bool:
    return bool(_NAME_RE.match(name))


def sanitize_name(text: str) -> str:
    """Turn a free-form label into an identifier usable in ``.topo`` files."""
    out = re.sub(r"[^A-Za-z0-9_]+", "_", text.strip()).strip("_")
    if not out:
        return "n"
    return out if _NAME_RE.match(out) else f"n_{out}"


def iter_switch_links(topology: Topology) -> Iterable[tuple[str, int, str, int]]:
    """Switch-to-switch links only."""
    return (lk for lk in topology.links() if topology.is_switch(lk[0]) and topology.is_switch(lk[2]))
