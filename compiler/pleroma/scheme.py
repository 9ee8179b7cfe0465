"""PLEROMA over one network: host subscriptions in, the dz of every subscription and the flows of
every switch out (what the configurator would have installed once every request is in)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from compiler import rules as ast
from compiler.network import Topology
from compiler.pleroma.decompose import Decomposition, decompose, minimise
from compiler.pleroma.dz import MAX_RESOLUTION, EventSpace, event_space
from compiler.pleroma.flows import Tables, Tree, flow_count, flow_tables, trees
from compiler.rules import TypedRules


@dataclass
class PleromaNetwork:
    """The result of :func:`build`; ``exact`` when every subscription's dz's cover exactly its events."""

    space: EventSpace
    resolution: int
    host_dzs: dict[str, list[str]]
    tables: Tables
    trees: dict[str, Tree]
    publishers: list[str]
    exact: bool
    seconds: float
    dz_per_subscription: list[int] = field(default_factory=list)
    #: The resolution each subscription got (coarser than asked when its dz's would pass ``max_dz``).
    subscription_bits: list[int] = field(default_factory=list)
    #: ``(host, its dz's)`` per subscription, in rule order: the requests as the configurator gets them.
    subscriptions: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    #: The tree kind (``single``: one tree, whatever publisher; ``publisher``: a tree per publisher).
    tree: str = "single"

    def flows_per_switch(self) -> dict[str, int]:
        return flow_count(self.tables)


def build(topology: Topology, typed: TypedRules, publishers: Sequence[str], resolution: int,
          indexing: str = "value", tree: str = "single", max_dz: int | None = 64,
          space: EventSpace | None = None) -> PleromaNetwork:
    """Index the subscriptions' fields, decompose every host's subscriptions, install the flows.

    ``typed``: network rules checked against the spec (fwd names host ids). ``max_dz`` caps the dz's
    of one subscription (coarser when it needs more).
    """
    start = time.perf_counter()
    resolution = min(resolution, MAX_RESOLUTION)  # events carry their dz in a uint64
    per_host: dict[str, list[ast.Filter]] = {h: [] for h in topology.hosts()}
    for rule in typed.rules:  # a network rule's fwd ports are host ids
        for host_id in rule.ports:
            host = topology.host_by_id(host_id)
            if host is not None:
                per_host[host].append(rule.filter)
    if space is None:
        space = event_space(typed.fields, [r.filter for r in typed.rules], indexing)
    host_dzs: dict[str, list[str]] = {}
    requests: list[tuple[str, tuple[str, ...]]] = []
    exact = True
    counts: list[int] = []
    bits: list[int] = []
    cache: dict[int, Decomposition] = {}
    for host, filters in per_host.items():
        dzs: set[str] = set()
        for f in filters:
            d = cache.get(id(f))
            if d is None:
                d = cache[id(f)] = decompose(space, f, typed.fields, resolution, max_dz)
                counts.append(len(d.dzs))
                bits.append(d.resolution)
            exact &= d.exact
            dzs.update(d.dzs)
        host_dzs[host] = minimise(dzs)
    for rule in typed.rules:  # arrival order: the rule file's
        for host_id in rule.ports:
            host = topology.host_by_id(host_id)
            if host is not None:
                requests.append((host, cache[id(rule.filter)].dzs))
    t = trees(topology, publishers, tree)
    tables = flow_tables(topology, host_dzs, t)
    return PleromaNetwork(space, min(resolution, space.max_length), host_dzs, tables, t, list(publishers), exact,
                          time.perf_counter() - start, counts, bits, requests, tree)
