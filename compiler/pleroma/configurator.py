"""PLEROMA's configurator request by request (S1 Alg. 1), with Balogh's local enforcers on every add.

:func:`install` adds one flow ``(dz -> port)`` to one ingress port's table the way Alg. 1's five
cases do: nothing when the events of ``dz`` already all go to the port (case 2); otherwise a flow at
``dz`` with the port added to the ports of the flow it overrides (cases 1 and 4), the port added to
every finer flow inside ``dz`` (case 5), and flows that now send exactly what their nearest covering
flow sends dropped (case 3). :func:`configure` runs the subscriptions in arrival order over every
publisher's route; with a flow limit, Balogh's local enforcer (S2 §5.3: ``baseline`` or ``ms``)
merges at a leaf merge point each time a switch holds more flows than the limit, so later requests
land on merged flows. Without a limit the result is :func:`compiler.pleroma.flows.flow_tables`'
fixed point (a test holds them equal).
"""

from __future__ import annotations

import bisect
import random
from typing import Iterable, Mapping, Sequence

from compiler.network import Topology
from compiler.pleroma.flows import Tables, Tree, lookup, route
from compiler.pleroma.merge import local_enforce

Table = dict[str, frozenset[int]]


def install(table: Table, dz: str, port: int) -> bool:
    """Make every event of ``dz`` reach ``port`` through ``table``; True when the table changed."""
    keys = sorted(table)
    lo = bisect.bisect_left(keys, dz)
    inner = []
    for k in keys[lo:]:
        if not k.startswith(dz):
            break
        if k != dz:
            inner.append(k)
    covering = lookup(table, dz)
    if port in covering and all(port in table[k] for k in inner):
        return False  # case 2: already delivered
    table[dz] = frozenset(covering | {port})  # cases 1 and 4 (or the port added to the flow at dz)
    for k in inner:  # case 5: finer flows override this one and must carry the port too
        table[k] = frozenset(table[k] | {port})
    _drop_redundant(table, [dz, *inner])
    return True


def _drop_redundant(table: Table, keys: Iterable[str]) -> None:
    """Case 3: a flow whose nearest covering flow sends to the same ports is not needed."""
    for k in sorted(keys, key=len, reverse=True):
        if k in table and k:
            parent = next((k[:i] for i in range(len(k) - 1, -1, -1) if k[:i] in table), None)
            if parent is not None and table[parent] == table[k]:
                del table[k]


def configure(topology: Topology, subscriptions: Sequence[tuple[str, Sequence[str]]],
              publisher_trees: Mapping[str, Tree], limit: int | None = None, method: str = "ms",
              seed: int = 0) -> tuple[Tables, int]:
    """Every subscription ``(host, dz's)`` in order, for every publisher; returns the tables and the
    merges the local enforcer made (0 without a limit)."""
    tables: Tables = {s: {} for s in topology.switches()}
    rng = random.Random(seed)
    merges = 0
    routes: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    cache: dict[str, dict] = {s: {} for s in tables}  # sorted keys and leaf points per table
    dirty: dict[str, set[int]] = {s: set() for s in tables}  # tables changed since they were scored
    for host, dzs in subscriptions:
        for p, tree in publisher_trees.items():
            if p == host or not dzs:
                continue
            hops = routes.get((p, host))
            if hops is None:
                hops = routes[(p, host)] = route(topology, tree, p, host)
            for switch, ingress, egress in hops:
                by_ingress = tables[switch]
                table = by_ingress.setdefault(ingress, {})
                changed = False
                for dz in dzs:
                    changed |= install(table, dz, egress)
                if not changed or limit is None:
                    continue
                dirty[switch].add(ingress)
                if sum(len(t) for t in by_ingress.values()) > limit:
                    merges += local_enforce(by_ingress, limit, method, rng, cache[switch], dirty[switch])
                    dirty[switch].clear()
    return tables, merges
