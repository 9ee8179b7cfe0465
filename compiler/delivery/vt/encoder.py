"""Algorithm 5.1: cover a receiver set with installed VTs plus hop and stop labels.

The publisher starts from a hop-minimal Steiner tree over the physical links (every link a hop
label) and tries the installed VTs: with the links of the chosen VTs at weight 0 it recomputes the
Steiner tree; the hops are the tree's links outside those VTs, the stops the VT links that are not
in the tree but touch it (so traffic can neither leave the tree nor run round a cycle of
overlapping VTs). Cost = hops + stops + tree labels; a VT is kept only if it lowers the cost.

Two loops, since the dissertation's listing and prose disagree (digest §4.5):

* ``single`` — the listing: one pass over the VTs in a fixed order, accept-if-better. The order
  is not given; here VTs reaching more terminals come first, then smaller ones, then lower ids.
* ``best`` — the prose: each round tries every VT not yet chosen and takes the one with the
  largest gain, until none lowers the cost.

A speed-up the listing does not have (``prefilter``, on by default): VTs that reach hosts but none
of the receivers and not the ingress switch are not tried. Such a VT can only be used with a stop
on every host link it reaches, and in the fabrics evaluated here it never paid off (a path VT of a
non-receiver replaces at most two hops by a tree label and a stop); switch-only VTs (a spine's or
fabric switch's combinations) are always tried. ``prefilter=False`` tries every VT, as listed.

Two refinements the listing leaves open, both of which only ever lower the cost:

* a VT link needs no stop where it touches the tree only at a host (hosts forward nothing), nor
  on the publisher's own link (a switch never sends back out of the port a packet came in on);
* at the end, VTs none of whose links the final tree uses are dropped with their stops.

What the switches do with the result (``switch.py``) floods the part of (VT links ∪ hop links) ∖
stop links that the packet reaches; the stops make that part exactly the Steiner tree, so every
receiver gets one copy and nobody else any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping

from compiler.base import P4subError
from compiler.delivery.vt.labels import Label, hop, stop, tree
from compiler.delivery.vt.steiner import VtGraph, steiner

MODES = ("single", "best")


@dataclass(frozen=True)
class VtEncoding:
    """The labels for one notification: VT ids, hop and stop edge ids, and the delivery tree."""

    trees: tuple[int, ...]
    hops: tuple[int, ...]
    stops: tuple[int, ...]
    tree_edges: tuple[int, ...]

    def labels(self) -> list[Label]:
        """Tree labels first, then hops in the order the tree was grown, then stops."""
        return [tree(t) for t in self.trees] + [hop(e) for e in self.hops] + [stop(e) for e in self.stops]

    @property
    def cost(self) -> int:
        return len(self.trees) + len(self.hops) + len(self.stops)


class _Problem:
    """One notification: root, terminals, and the installed VTs as edge-id sets."""

    def __init__(self, g: VtGraph, view: Mapping[int, Collection[int]], ingress: str, receivers: Collection[str],
                 publisher: str | None) -> None:
        if not g.topology.is_switch(ingress):
            raise P4subError(f"{ingress!r} is not a switch")
        self.g = g
        self.root = g.index[ingress]
        self.terminals = {self.root}
        for r in receivers:
            if r not in g.index or g.is_switch[g.index[r]]:
                raise P4subError(f"receiver {r!r} is not a host")
            self.terminals.add(g.index[r])
        self.skip = g.host_edge(publisher) if publisher is not None else 0
        self.view = {t: frozenset(es) for t, es in view.items()}

    def evaluate(self, chosen: list[int]) -> tuple[int, list[int], list[int], list[int]]:
        """Cost, tree links, hops and stops when the VTs ``chosen`` are at weight 0."""
        zero = bytearray(self.g.edge_count + 1)
        for t in chosen:
            for e in self.view[t]:
                zero[e] = 1
        edges = steiner(self.g, self.root, self.terminals, zero)
        return self.labels_for(chosen, edges)

    def labels_for(self, chosen: list[int], edges: list[int]) -> tuple[int, list[int], list[int], list[int]]:
        """Cost, tree links, hops and stops of the tree ``edges`` with the VTs ``chosen``."""
        g = self.g
        virt: set[int] = set()
        for t in chosen:
            virt.update(self.view[t])
        in_tree = set(edges)
        on_tree = {self.root}
        for e in edges:
            a, b = g.ends[e]
            if g.is_switch[a]:
                on_tree.add(a)
            if g.is_switch[b]:
                on_tree.add(b)
        hops = [e for e in edges if e not in virt]
        stops = sorted(e for e in virt if e not in in_tree and e != self.skip
                       and (g.ends[e][0] in on_tree or g.ends[e][1] in on_tree))
        return len(hops) + len(stops) + len(chosen), edges, hops, stops

    def order(self, prefilter: bool) -> list[int]:
        """The VTs to try, in the single pass's order: VTs reaching more terminals first, then
        smaller, then lower id; with ``prefilter``, without those reaching hosts but no terminal."""
        g = self.g
        keys = {}
        for t, edges in self.view.items():
            nodes = {n for e in edges for n in g.ends[e]}
            reached = len(nodes & self.terminals)
            if prefilter and not reached and any(not g.is_switch[n] for n in nodes):
                continue
            keys[t] = (-reached, len(edges), t)
        return sorted(keys, key=keys.__getitem__)


def encode(
    g: VtGraph,
    view: Mapping[int, Collection[int]],
    ingress: str,
    receivers: Collection[str],
    *,
    publisher: str | None = None,
    mode: str = "single",
    prefilter: bool = True,
) -> VtEncoding:
    """The labels reaching ``receivers`` from switch ``ingress`` with the VTs of ``view`` (VT id ->
    edge ids: what the publisher knows is installed). ``publisher`` is the sending host (its own
    link then needs no stop). ``mode``: ``single`` or ``best``; ``prefilter``: skip VTs reaching
    hosts but no terminal (module docstring)."""
    if mode not in MODES:
        raise P4subError(f"unknown encoder mode {mode!r}; use single or best")
    p = _Problem(g, view, ingress, receivers, publisher)
    chosen: list[int] = []
    best = p.evaluate(chosen)
    if mode == "single":
        for t in p.order(prefilter):
            trial = p.evaluate(chosen + [t])
            if trial[0] < best[0]:
                chosen.append(t)
                best = trial
    else:
        left = p.order(prefilter)
        while left:
            scored = [(p.evaluate(chosen + [t]), t) for t in left]
            (trial, t) = min(scored, key=lambda x: (x[0][0], left.index(x[1])))
            if trial[0] >= best[0]:
                break
            chosen.append(t)
            left.remove(t)
            best = trial
    used = [t for t in chosen if p.view[t] & set(best[1])]
    if len(used) < len(chosen):
        chosen = used
        best = p.labels_for(chosen, best[1])  # the same tree: its links lie in the VTs kept
    _, edges, hops, stops = best
    return VtEncoding(tuple(chosen), tuple(hops), tuple(stops), tuple(edges))
