"""What every VT installation strategy shares: proposals in priority order, installed under budget.

A strategy proposes VTs (link sets) in the order it wants them; :func:`install_strategy` installs
each one whose switches all have room (``max_rules``) and skips the rest, so a strategy never has
to know the budget. Infinite proposers (random trees) stop after ``patience`` refusals in a row or
``limit`` installs. VTs of fewer than two links are never installed (one tree label never beats one
hop label: the dissertation's "minimum installation requirement", §6.2), nor a VT with the same
links as one already installed.

Helpers: hop-minimal Steiner trees over node names (:func:`steiner_edges`), Algorithm 5.2's leaf
pruning (:func:`prune_tree`), broadcast trees down a hierarchy (:func:`down_tree`).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Collection, Iterable, Iterator, Mapping

from compiler.base import P4subError
from compiler.delivery.vt.installed import VirtualTree, VtTable
from compiler.delivery.vt.steiner import VtGraph, steiner
from compiler.delivery.vt.workload import Workload
from compiler.network import Topology

Proposal = tuple[frozenset[int], str]
#: VTs an endless strategy installs when no budget stops it.
ENDLESS_LIMIT = 64
View = Mapping[int, Collection[int]]


@dataclass
class Context:
    """What a strategy may look at: the network, the installed table, statistics, a seeded rng."""

    table: VtTable
    workload: Workload | None
    rng: random.Random
    installed: list[VirtualTree] = field(default_factory=list)

    @property
    def topology(self) -> Topology:
        return self.table.topology

    @property
    def graph(self) -> VtGraph:
        return VtGraph.of(self.table.topology)

    def need_workload(self, strategy: str) -> Workload:
        if self.workload is None:
            raise P4subError(f"the {strategy} strategy needs publishers and subscribers (a workload)")
        return self.workload


class Strategy(ABC):
    """A VT installation strategy."""

    name: ClassVar[str]
    #: Whether the proposals come from subscriptions and frequencies rather than the topology alone.
    uses_workload: ClassVar[bool] = False
    #: Whether :meth:`proposals` may never end (then ``patience``/``limit`` stop it).
    endless: ClassVar[bool] = False

    @abstractmethod
    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        """VTs to install, most wanted first, as ``(edge ids, origin)``."""

    def view(self, ctx: Context, publisher: str) -> View:
        """The VTs ``publisher`` encodes with (default: every installed one)."""
        return ctx.table.view()

    def label(self) -> str:
        return self.name


def install_strategy(strategy: Strategy, table: VtTable, workload: Workload | None = None, *, seed: int = 0,
                     patience: int = 200, limit: int | None = None) -> Context:
    """Install ``strategy``'s proposals into ``table``; returns the context (installed VTs, rng)."""
    ctx = Context(table, workload, random.Random(f"vt-install:{strategy.label()}:{seed}"))
    if limit is None and strategy.endless and table.max_rules is None:
        limit = ENDLESS_LIMIT
    seen: set[frozenset[int]] = {vt.edges for vt in table.trees.values()}
    refused = 0
    for edges, origin in strategy.proposals(ctx):
        if limit is not None and len(ctx.installed) >= limit:
            break
        if len(edges) < 2 or edges in seen:
            continue
        vt = table.install(edges, origin)
        if vt is None:
            refused += 1
            if strategy.endless and refused >= patience:
                break
            continue
        refused = 0
        seen.add(edges)
        ctx.installed.append(vt)
    return ctx


# --- helpers --------------------------------------------------------------------------------------
def steiner_edges(g: VtGraph, root: str, nodes: Iterable[str]) -> frozenset[int]:
    """A hop-minimal tree (edge ids) from ``root`` to ``nodes`` (switches or hosts)."""
    return frozenset(steiner(g, g.index[root], [g.index[n] for n in nodes]))


def path_edges(g: VtGraph, a: str, b: str) -> frozenset[int]:
    return steiner_edges(g, a, [b])


def tree_nodes(g: VtGraph, edges: Iterable[int]) -> set[str]:
    return {g.names[n] for e in edges for n in g.ends[e]}


def prune_tree(g: VtGraph, edges: Iterable[int], keep: Collection[str]) -> frozenset[int]:
    """Algorithm 5.2: remove leaves not in ``keep`` until every leaf is in ``keep``."""
    edges = set(edges)
    incident: dict[int, set[int]] = {}
    for e in edges:
        for n in g.ends[e]:
            incident.setdefault(n, set()).add(e)
    keep_idx = {g.index[k] for k in keep}
    leaves = [n for n, es in incident.items() if len(es) == 1 and n not in keep_idx]
    while leaves:
        n = leaves.pop()
        es = incident.get(n)
        if not es or len(es) != 1 or n in keep_idx:
            continue
        (e,) = es
        edges.discard(e)
        del incident[n]
        other = g.ends[e][0] if g.ends[e][1] == n else g.ends[e][1]
        incident[other].discard(e)
        if len(incident[other]) == 1 and other not in keep_idx:
            leaves.append(other)
        elif not incident[other]:
            del incident[other]
    return frozenset(edges)


def down_tree(topology: Topology, g: VtGraph, root: str) -> frozenset[int]:
    """The broadcast tree from ``root`` following down links only (§5.4, Fig. 5.5): each node is
    entered once, by the first down link that reaches it in breadth-first, port order."""
    seen = {root}
    edges = set()
    frontier = [root]
    while frontier:
        nxt = []
        for u in frontier:
            if not topology.is_switch(u):
                continue
            for p in topology.down_ports(u):
                v = topology.peer(u, p)[0]
                if v not in seen:
                    seen.add(v)
                    edges.add(g.edge_ids.id(u, v))
                    nxt.append(v)
        frontier = nxt
    return frozenset(edges)


def spanning_tree(topology: Topology, g: VtGraph, root: str) -> frozenset[int]:
    """A breadth-first spanning tree over every node (hosts included) from ``root``, port order."""
    seen = {root}
    edges = set()
    frontier = [root]
    while frontier:
        nxt = []
        for u in frontier:
            if not topology.is_switch(u):
                continue
            for _, v in topology.neighbours(u):
                if v not in seen:
                    seen.add(v)
                    edges.add(g.edge_ids.id(u, v))
                    nxt.append(v)
        frontier = nxt
    return frozenset(edges)


def top_switches(topology: Topology) -> list[str]:
    """Switches of the highest layer (spines / cores), in id order."""
    top = max(topology.layer(s) for s in topology.switches())
    return [s for s in topology.switches() if topology.layer(s) == top]


def round_robin(*streams: Iterator[Proposal]) -> Iterator[Proposal]:
    """One proposal of each stream in turn until all are exhausted."""
    live = list(streams)
    while live:
        for s in list(live):
            try:
                yield next(s)
            except StopIteration:
                live.remove(s)
