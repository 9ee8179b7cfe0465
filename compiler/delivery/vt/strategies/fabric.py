"""Chapter 5's strategies, tailored to a hierarchical data-center fabric (§5.4; Facebook 2014).

* ``broadcast`` — one broadcast tree per top-layer switch (spine): from the spine down every down
  link, so it reaches one fabric switch per pod, every ToR and every machine (Fig. 5.5). A
  publisher uses the tree of its group (publisher id modulo the installed trees). On a flat
  topology (no hierarchy): one breadth-first spanning tree from the orientation root (§6.1).
* ``topo`` — hierarchical, publisher-independent: on every switch, VTs of the switch and two or
  more of its down links (Fig. 5.6), "power of two" combinations first: for n = 1, 2, ... the
  aligned blocks of 2^n down links in port order, bottom layer first at each n; then, memory
  permitting, the remaining combinations of two or more down links, largest first. The
  dissertation leaves the enumeration open; this one spreads VTs uniformly (client locations
  unknown) and puts the small VTs every assembly case needs first.
* ``tree`` — per publisher, its group's broadcast tree pruned (Algorithm 5.2) to the publisher and
  all its subscribers (permanent and potential matches; ``shared``: one tree per broadcast tree
  for all of its publishers). ε, the smallest tree kept, is 2 links.
* ``threshold:T`` — per publisher, the tree pruned to the subscribers receiving at least T of its
  messages; then publisher-independent *virtual paths* (a machine up to a spine) while memory
  remains (``addBaseTrees`` + ``addPaths``, Fig. 5.10; :func:`virtual_paths`). T = 0 is the tree strategy plus paths,
  T = 100 % the ``path`` strategy (only subscribers that get every message are in trees).
  ``threshold:T:hops`` leaves the paths out (the "Hops/tree" variant of Fig. 5.13).

Publishers of the tree strategies encode with their own tree and the paths (and nothing of other
publishers' trees), as the dissertation's ``ThresholdTreeStrategy`` does.
"""

from __future__ import annotations

from itertools import combinations, zip_longest
from typing import Iterator

from compiler.base import P4subError
from compiler.delivery.vt.strategies.base import (
    Context,
    Proposal,
    Strategy,
    View,
    down_tree,
    path_edges,
    prune_tree,
    spanning_tree,
    top_switches,
)

EPSILON_EDGES = 2


def broadcast_trees(ctx: Context) -> list[frozenset[int]]:
    """One broadcast tree per spine (hierarchical) or one spanning tree (flat)."""
    topo, g = ctx.topology, ctx.graph
    if not topo.is_hierarchical():
        return [spanning_tree(topo, g, topo.root or topo.switches()[0])]
    return [down_tree(topo, g, s) for s in top_switches(topo)]


def group_of(ctx: Context, publisher: str, groups: int) -> int:
    """The dissertation's "modulo operation to a publisher's numeric ID"."""
    return ctx.topology.node_id(publisher) % groups


class Broadcast(Strategy):
    name = "broadcast"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        for i, edges in enumerate(broadcast_trees(ctx)):
            yield edges, f"broadcast {i + 1}"

    def view(self, ctx: Context, publisher: str) -> View:
        if not ctx.installed:
            return {}
        vt = ctx.installed[group_of(ctx, publisher, len(ctx.installed))]
        return {vt.vt_id: vt.edges}


class TopoBased(Strategy):
    name = "topo"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        topo, g = ctx.topology, ctx.graph
        if not topo.is_hierarchical():
            raise P4subError("the topo strategy needs a hierarchical topology (fat tree, leaf-spine, facebook)")
        by_layer = sorted(topo.switches(), key=lambda s: (topo.layer(s), topo.node_id(s)))
        down = {s: list(topo.down_ports(s)) for s in by_layer}
        done: dict[str, set[tuple[int, ...]]] = {s: set() for s in by_layer}

        def vt(s: str, ports: tuple[int, ...]) -> Proposal:
            done[s].add(ports)
            return frozenset(g.edge_ids.id(s, topo.peer(s, p)[0]) for p in ports), f"topo {s} {list(ports)}"

        widest = max((len(d) for d in down.values()), default=0)
        size = 2
        while size <= widest:
            for s in by_layer:
                d = down[s]
                for k in range(0, len(d) - size + 1, size):
                    yield vt(s, tuple(d[k:k + size]))
            size *= 2
        for size in range(widest, 1, -1):
            for s in by_layer:
                for combo in combinations(down[s], size):
                    if combo not in done[s]:
                        yield vt(s, combo)


class PublisherTrees(Strategy):
    """``tree`` (threshold None, no paths), ``threshold:T`` and ``path`` (T = 1.0)."""

    uses_workload = True

    def __init__(self, threshold: float | None = None, paths: bool = True, shared: bool = False) -> None:
        if threshold is not None and not 0 <= threshold <= 1:
            raise P4subError("a threshold must be between 0 and 100 %")
        self.threshold = threshold
        self.paths = paths and threshold is not None
        self.shared = shared
        self.name = self.label()  # type: ignore[misc]

    def label(self) -> str:
        if self.threshold is None:
            return "tree-shared" if self.shared else "tree"
        if self.threshold >= 1 and self.paths:
            return "path"
        pct = round(self.threshold * 100)
        return f"threshold:{pct}" + ("" if self.paths else ":hops")

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        w = ctx.need_workload(self.label())
        g = ctx.graph
        trees = broadcast_trees(ctx)

        def members(p: str) -> list[str]:
            subs = w.subscribers[p] if self.threshold is None else w.frequent(p, self.threshold)
            return [p, *subs]

        if self.shared:
            for i, t in enumerate(trees):
                pubs = [p for p in w.publishers if group_of(ctx, p, len(trees)) == i]
                keep = {n for p in pubs for n in members(p)}
                edges = prune_tree(g, t, keep) if pubs else frozenset()
                if len(edges) >= EPSILON_EDGES:
                    yield edges, f"shared tree {i + 1}"
        else:
            for p in w.publishers:
                edges = prune_tree(g, trees[group_of(ctx, p, len(trees))], members(p))
                if len(edges) >= EPSILON_EDGES:
                    yield edges, f"tree {p}"
        if self.paths:
            yield from virtual_paths(ctx)

    def view(self, ctx: Context, publisher: str) -> View:
        out = {}
        for vt in ctx.installed:
            if vt.origin.startswith("path ") or vt.origin == f"tree {publisher}":
                out[vt.vt_id] = vt.edges
            elif vt.origin.startswith("shared tree ") and self.shared:
                out[vt.vt_id] = vt.edges
        return out


def virtual_paths(ctx: Context) -> Iterator[Proposal]:
    """Bidirectional paths from a machine up to a top-layer switch (Fig. 5.8b), spread evenly:
    round k gives machine i a path to top switch (i + k) mod #tops. A spine holds one entry per path
    through it, so it can serve at most ``max_rules`` machines: the rotation shares the spines out
    instead of filling the first ones with the first machines. Consecutive top switches come from
    different planes (groups of tops with the same neighbours), which spreads the paths over the
    fabric switches too. Which spines the dissertation's paths lead to is not given."""
    topo, g = ctx.topology, ctx.graph
    tops = top_switches(topo) if topo.is_hierarchical() else [topo.root or topo.switches()[0]]
    planes: dict[frozenset[str], list[str]] = {}
    for s in tops:
        planes.setdefault(frozenset(v for _, v in topo.neighbours(s)), []).append(s)
    ordered = [s for group in zip_longest(*planes.values()) for s in group if s is not None]
    hosts = topo.hosts()
    for k in range(len(ordered)):
        for i, h in enumerate(hosts):
            s = ordered[(i + k) % len(ordered)]
            yield path_edges(g, s, h), f"path {h} {s}"
