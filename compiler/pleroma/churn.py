"""Subscriptions arriving and leaving: PLEROMA's configurator on a live network (S1 §IV-B).

* :func:`subscribe` is S1 Alg. 1 for one subscription: its dz's installed on every switch of the route
  from each publisher to the subscriber (:func:`compiler.pleroma.configurator.install`'s five cases).
* :func:`unsubscribe` is S1's "exact reverse": the paths between the subscriber and every publisher are
  removed, and a flow on them is "deleted or downgraded depending upon other subscribers reachable"
  through that switch. The flows a table keeps are a function of the requests that cross it (the fixed
  point :func:`compiler.pleroma.flows.canonical`, whatever their order, S1 §IV-C), so the tables on the
  removed paths are rebuilt from the requests that remain; no other table changes.

Both return new tables and leave the old ones alone: :func:`compiler.pleroma.deploy.plan` orders the
difference into steps that lose no event on the way. Both work on the unconstrained flows (the ones the
fixed point describes); a flow limit is applied afterwards (:mod:`.limit`) and its merges deployed the
same way. The event space must stay the same across the change (publishers keep writing the same dz's).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from compiler.network import Topology
from compiler.pleroma.configurator import install
from compiler.pleroma.flows import Tables, Tree, canonical, requests, route


def _copy(tables: Tables) -> Tables:
    return {s: {i: dict(t) for i, t in by_in.items()} for s, by_in in tables.items()}


def _hops(topology: Topology, publisher_trees: Mapping[str, Tree], host: str) -> list[tuple[str, int, int]]:
    return [hop for p, tree in publisher_trees.items() if p != host for hop in route(topology, tree, p, host)]


def subscribe(topology: Topology, tables: Tables, publisher_trees: Mapping[str, Tree], host: str,
              dzs: Sequence[str]) -> Tables:
    """``tables`` with ``host``'s subscription ``dzs`` installed along every publisher's route to it."""
    out = _copy(tables)
    for switch, ingress, egress in _hops(topology, publisher_trees, host):
        table = out.setdefault(switch, {}).setdefault(ingress, {})
        for dz in dzs:
            install(table, dz, egress)
    return out


def unsubscribe(topology: Topology, tables: Tables, publisher_trees: Mapping[str, Tree], host: str,
                remaining: Sequence[tuple[str, Sequence[str]]]) -> Tables:
    """``tables`` without a subscription of ``host``: ``remaining`` are the subscriptions ``(host, dz's)``
    still in force (the network's, the leaving one taken out); the tables on the routes from every
    publisher to ``host`` are rebuilt from the requests of those that cross them."""
    host_dzs: dict[str, set[str]] = {}
    for h, dzs in remaining:
        host_dzs.setdefault(h, set()).update(dzs)
    wanted = requests(topology, host_dzs, publisher_trees)
    out = _copy(tables)
    for switch, ingress, _ in _hops(topology, publisher_trees, host):
        table = canonical(wanted.get(switch, {}).get(ingress, {}))
        by_in = out.setdefault(switch, {})
        if table:
            by_in[ingress] = table
        else:
            by_in.pop(ingress, None)
    return out
