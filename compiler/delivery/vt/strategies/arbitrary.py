"""Chapter 6's strategies for arbitrary topologies (§6.1 to §6.3).

Terminals are hosts (clients sit at nodes; a VT that reaches a node's clients includes their host
links). Every strategy yields proposals in priority order and :func:`.base.install_strategy`
installs what the budget allows.

* ``random`` — a random number of random hosts, their Steiner tree; repeated until ``patience``
  trees in a row no longer fit (§6.2; which variant the dissertation evaluated is not given).
* ``random-variant`` — a tree over all hosts, then each step halves the terminals per VT and
  doubles the VTs (a fresh random split each step), until a VT would connect fewer than two
  terminals or have fewer than two links.
* ``cycles`` — one VT per cycle of a cycle basis of the switch graph (networkx ``cycle_basis``;
  the dissertation does not say how it enumerates), then connected unions of two, three, ...
  cycles while memory lasts. Nodes outside cycles are reached by hops; cycle VTs always need a
  stop to break the ring.
* ``partitions`` — Clauset-Newman-Moore communities (networkx ``greedy_modularity_communities``,
  the dendrogram cut at maximum modularity, which the dissertation leaves open); hub = highest
  degree in the partition; partition VTs from the hub to all of the partition's nodes, then to
  halves, quarters, ... of them (in breadth-first order from the hub); backbone VTs over all hubs,
  then halves, ...; partitions and backbone take turns.
* ``clusters`` — the same, on the dense client regions only: the workload's predefined regions
  when it has them (chapter 6's evaluation, Fig. 6.8), else the switches whose clients' subscription
  weight (subscriptions x frequency, plus publications) is at least the mean of the switches that
  have any (§6.3: "only in dense client regions found from statistics").
* ``relation`` / ``freq-relation:T`` — per publisher, a Steiner tree over it and its subscribers
  (those receiving at least T of its messages; T = 30 % in the dissertation).
* ``hybrid`` — freq-relation and clusters VTs installed alternately (round robin, §6.4).
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterator

import networkx as nx

from compiler.base import P4subError
from compiler.delivery.vt.strategies.base import Context, Proposal, Strategy, round_robin, steiner_edges


def hosts_tree(ctx: Context, hosts: list[str]) -> frozenset[int]:
    """The Steiner tree from the first host's switch to ``hosts``."""
    root = ctx.topology.host_attachment(hosts[0])[0]
    return steiner_edges(ctx.graph, root, hosts)


class RandomTrees(Strategy):
    name = "random"
    endless = True

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        hosts = ctx.topology.hosts()
        if len(hosts) < 2:
            return
        while True:
            chosen = ctx.rng.sample(hosts, ctx.rng.randint(2, len(hosts)))
            yield hosts_tree(ctx, chosen), f"random {len(chosen)} hosts"


class RandomVariant(Strategy):
    name = "random-variant"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        hosts = list(ctx.topology.hosts())
        groups = 1
        while len(hosts) // groups >= 2:
            ctx.rng.shuffle(hosts)
            size = len(hosts) / groups
            for i in range(groups):
                part = hosts[round(i * size):round((i + 1) * size)]
                if len(part) >= 2:
                    yield hosts_tree(ctx, part), f"random-variant 1/{groups}"
            groups *= 2


class Cycles(Strategy):
    name = "cycles"
    endless = True

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        topo, ids = ctx.topology, ctx.table.edge_ids
        sg = nx.Graph(topo.switch_graph())
        cycles = []
        for cyc in nx.cycle_basis(sg, root=topo.switches()[0]):
            cycles.append(frozenset(ids.id(a, b) for a, b in zip(cyc, cyc[1:] + cyc[:1])))
        for i, c in enumerate(cycles):
            yield c, f"cycle {i + 1}"
        for k in range(2, len(cycles) + 1):
            for combo in combinations(range(len(cycles)), k):
                union = frozenset().union(*(cycles[i] for i in combo))
                g = nx.Graph(ids.edge(e) for e in union)
                if nx.is_connected(g):
                    yield union, f"cycles {'+'.join(str(i + 1) for i in combo)}"


def _chunks(nodes: list[str]) -> Iterator[tuple[int, list[str]]]:
    """All of ``nodes``, then halves, quarters, ... (contiguous), with the split count."""
    parts = 1
    while len(nodes) / parts >= 1:
        size = len(nodes) / parts
        for i in range(parts):
            yield parts, nodes[round(i * size):round((i + 1) * size)]
        if parts >= len(nodes):
            return
        parts *= 2


def _ordered(ctx: Context, groups) -> list[list[str]]:
    """Switch sets as id-sorted lists, largest first, then by lowest id: independent of set
    iteration order (which follows string hashes and so changes between interpreter runs)."""
    node_id = ctx.topology.node_id
    lists = [sorted(g, key=node_id) for g in groups if g]
    return sorted(lists, key=lambda g: (-len(g), node_id(g[0])))


class Partitions(Strategy):
    name = "partitions"

    def regions(self, ctx: Context) -> list[list[str]]:
        """Switch sets to build VTs in (here: the CNM communities of the switch graph)."""
        sg = nx.Graph(ctx.topology.switch_graph())
        if sg.number_of_edges() == 0:
            return [list(sg.nodes)]
        comms = nx.community.greedy_modularity_communities(sg)
        return _ordered(ctx, comms)

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        topo = ctx.topology
        sg = topo.switch_graph()
        regions = [r for r in self.regions(ctx) if r]
        hubs = [max(r, key=lambda s: (sg.degree(s), -topo.node_id(s))) for r in regions]
        streams = [self._region(ctx, r, hub, i) for i, (r, hub) in enumerate(zip(regions, hubs))]
        streams.append(self._backbone(ctx, hubs))
        return round_robin(*streams)

    def _region(self, ctx: Context, region: list[str], hub: str, i: int) -> Iterator[Proposal]:
        topo = ctx.topology
        sub = topo.switch_graph().subgraph(region)
        order = list(nx.bfs_tree(sub, hub)) if hub in sub else [hub]
        order += [s for s in region if s not in order]
        for parts, chunk in _chunks(order):
            hosts = [h for s in chunk for h in topo.hosts_of(s)]
            targets = set(chunk) | set(hosts) | {hub}
            yield steiner_edges(ctx.graph, hub, targets), f"{self.name} {i + 1} hub {hub} 1/{parts}"

    def _backbone(self, ctx: Context, hubs: list[str]) -> Iterator[Proposal]:
        if len(hubs) < 2:
            return
        for parts, chunk in _chunks(hubs):
            if len(chunk) >= 2:
                yield steiner_edges(ctx.graph, chunk[0], chunk), f"{self.name} backbone 1/{parts}"


class Clusters(Partitions):
    name = "clusters"
    uses_workload = True

    def regions(self, ctx: Context) -> list[list[str]]:
        w = ctx.need_workload(self.name)
        topo = ctx.topology
        if w.regions is not None:
            return [r for region in w.regions
                    for r in _ordered(ctx, nx.connected_components(topo.switch_graph().subgraph(region)))]
        weight = {s: 0.0 for s in topo.switches()}
        for p in w.publishers:
            weight[topo.host_attachment(p)[0]] += 1
            for s in w.subscribers[p]:
                weight[topo.host_attachment(s)[0]] += w.frequency[s]
        busy = [v for v in weight.values() if v > 0]
        if not busy:
            return []
        mean = sum(busy) / len(busy)
        dense = {s for s, v in weight.items() if v >= mean}
        out = []
        for region in super().regions(ctx):
            part = [s for s in region if s in dense]
            sub = topo.switch_graph().subgraph(part)
            out += _ordered(ctx, nx.connected_components(sub))
        return out


class Relation(Strategy):
    uses_workload = True

    def __init__(self, threshold: float | None = None) -> None:
        if threshold is not None and not 0 <= threshold <= 1:
            raise P4subError("a threshold must be between 0 and 100 %")
        self.threshold = threshold
        self.name = "relation" if threshold is None else f"freq-relation:{round(threshold * 100)}"  # type: ignore[misc]

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        w = ctx.need_workload(self.name)
        for p in w.publishers:
            subs = w.subscribers[p] if self.threshold is None else w.frequent(p, self.threshold)
            if subs:
                yield hosts_tree(ctx, [p, *subs]), f"relation {p}"


class Hybrid(Strategy):
    uses_workload = True

    def __init__(self, threshold: float = 0.3) -> None:
        self.freq = Relation(threshold)
        self.clusters = Clusters()
        self.name = f"hybrid:{round(threshold * 100)}"  # type: ignore[misc]

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        return round_robin(self.freq.proposals(ctx), self.clusters.proposals(ctx))
