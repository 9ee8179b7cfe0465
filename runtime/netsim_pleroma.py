"""PLEROMA networks in netsim: switches that forward by longest prefix of the dz the publisher wrote.

netsim (:mod:`runtime.netsim`) walks copies hop by hop, takes its ground truth from the host
subscriptions and counts copies per link; what decides a switch's ports is the switch's business
(:class:`runtime.netsim.Switch`). This module supplies the PLEROMA kind, so that one simulator, with
one ground truth and one way of counting, judges both systems:

* the publisher computes each event's dz from its field values (:meth:`EventSpace.event_dz`, as the
  publisher writes it into the IPv6 destination, docs/pleroma.md) once per batch, into the column
  :data:`DZ_COLUMN` (:func:`pleroma_network`'s ``prepare`` hook);
* a switch matches that column against the flows of the port each copy came in on, longest prefix
  first (:class:`compiler.pleroma.LpmTable`, one numpy lookup per ingress port and wave), and sends
  the copy to the flow's ports, never back out of its ingress port;
* a copy is *extra* when no host that wants it lies beyond the link in the publisher's
  dissemination tree, along which PLEROMA's copies travel (the ``behind`` hook; p4sub's networks
  use the up/down orientation they are routed by).

A packet carries one IPv6 destination, so one dz: a PLEROMA network forwards each message on its
own (netsim's ``prune`` mode) and refuses ``union`` mode for packets of several messages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from compiler.base import P4subError
from compiler.network import Topology
from compiler.pleroma import EventSpace, LpmTable, Tables, Tree
from compiler.rules import TypedRules
from runtime.netsim import Batch, BehindMasks, Network, Simulation
from runtime.replay_ports import PortSpace

#: The column the publisher writes: each message's dz, ``resolution`` bits, the first dz bit highest
#: (the IPv6 destination's bits after ``ff0e::/16``). Not a field name of any spec (no ``.``).
DZ_COLUMN = "pleroma:dz"


@dataclass
class PleromaSwitch:
    """One PLEROMA switch: a prefix table per ingress port (:class:`runtime.netsim.Switch`)."""

    name: str
    ports: tuple[int, ...]
    peers: list[tuple[str, int]]
    tables: dict[int, LpmTable]
    resolution: int

    def egress(self, batch: Batch, rows: np.ndarray, ingress: np.ndarray, mode: str,
               sim: Simulation) -> np.ndarray:
        dz = batch.columns[DZ_COLUMN][rows]
        out = np.zeros((len(rows), len(self.ports)), dtype=bool)
        own = np.uint64(sum(1 << p for p in self.ports if p <= 63))
        for port in np.unique(ingress).tolist():
            table = self.tables.get(port)
            if table is None:  # no flow on this port: the switch drops the copy
                continue
            idx = np.flatnonzero(ingress == port)
            mask = table.lookup(dz[idx], self.resolution)
            sim.lost_copies += int(np.count_nonzero(mask & ~own))  # flows naming ports the switch lacks
            for c, p in enumerate(self.ports):
                if p != port and p <= 63:
                    out[idx, c] = ((mask >> np.uint64(p)) & np.uint64(1)).astype(bool)
        return out


def pleroma_network(topology: Topology, typed: TypedRules, spec: Any, space: EventSpace, resolution: int,
                    tables: Tables, publisher_trees: Mapping[str, Tree], tree: str = "single",
                    info: dict[str, Any] | None = None) -> Network:
    """A PLEROMA network as netsim runs one: ``tables`` (``switch -> ingress -> dz -> ports``, the
    configurator's or a merge method's) on ``topology``, events indexed by ``space`` at
    ``resolution`` bits, copies judged along ``publisher_trees`` (publisher host -> its tree). With
    ``tree`` ``single`` the one tree serves any publisher; with ``publisher`` only those given have one."""
    resolution = min(resolution, space.max_length)
    switches = {}
    for name in topology.switches():
        ports = tuple(topology.ports(name))
        by_in = {ingress: LpmTable.of(flows) for ingress, flows in tables.get(name, {}).items()}
        switches[name] = PleromaSwitch(name, ports, [topology.peer(name, p) for p in ports], by_in, resolution)
    inputs = sorted(set(typed.fields) | {d.field for d in space.dimensions})

    def prepare(batch: Batch, mode: str) -> Batch:
        if mode == "union" and len(batch) and len(np.unique(batch.packet)) != len(batch):
            raise P4subError("a PLEROMA packet carries one dz in its IPv6 destination: union mode needs one "
                             "message per packet (use prune mode: each message travels on its own)")
        missing = [d.field for d in space.dimensions if d.field not in batch.columns]
        if missing:
            raise P4subError(f"the trace gives no {missing[0]}, which the publisher needs for an event's dz")
        dz = space.event_dz({d.field: batch.columns[d.field] for d in space.dimensions}, resolution)
        return replace(batch, columns={**batch.columns, DZ_COLUMN: dz})

    behind_cache: dict[int, dict[str, frozenset[str]]] = {}
    single = tree == "single" and len({id(t) for t in publisher_trees.values()}) == 1

    def behind(publisher: str, port_space: PortSpace) -> BehindMasks:
        tree = publisher_trees.get(publisher)
        if tree is None and single and publisher_trees:
            tree = next(iter(publisher_trees.values()))  # one tree for every publisher
        if tree is None:
            raise P4subError(f"{publisher} is not one of this PLEROMA network's publishers "
                             f"({', '.join(sorted(publisher_trees)) or 'none'}): its events have no tree")
        hosts = behind_cache.get(id(tree))
        if hosts is None:
            hosts = behind_cache[id(tree)] = tree_hosts_behind(topology, tree)
        return {link: port_space.mask(topology.node_id(h) for h in hs) for link, hs in hosts.items()}

    return Network(topology, dict(switches), typed, spec, inputs, {"policy": "pleroma", "tree": tree, **(info or {})},
                   kind="pleroma", prepare=prepare, behind=behind)


def tree_hosts_behind(topology: Topology, tree: Tree) -> dict[tuple[str, int], frozenset[str]]:
    """Per directed link (switch, port): the hosts beyond it in ``tree`` (a host port: that host; a
    link off the tree: none), which are all a copy sent there can reach when copies follow the tree."""
    nbrs: dict[str, list[str]] = {s: [] for s in topology.switches()}
    for child, parent in tree.edges():
        nbrs[child].append(parent)
        nbrs[parent].append(child)
    out: dict[tuple[str, int], frozenset[str]] = {}
    for s in topology.switches():
        for q in topology.ports(s):
            peer, _ = topology.peer(s, q)
            if not topology.is_switch(peer):
                out[(s, q)] = frozenset({peer})
                continue
            found: set[str] = set()
            if peer in nbrs[s]:
                stack, seen = [peer], {s, peer}
                while stack:
                    x = stack.pop()
                    found.update(topology.hosts_of(x))
                    for y in nbrs[x]:
                        if y not in seen:
                            seen.add(y)
                            stack.append(y)
            out[(s, q)] = frozenset(found)
    return out
