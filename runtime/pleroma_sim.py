"""PLEROMA's data plane, simulated on its own: the independent check of netsim's PLEROMA switches.

The evaluation judges PLEROMA with netsim (:mod:`runtime.netsim_pleroma`), the same code that judges
p4sub. This second implementation (its own walk, :func:`compiler.pleroma.walk`, and its own link
counting) stays as the cross-check: tests/runtime/test_netsim_pleroma.py holds the two equal per
host and per link on random networks, and tests/runtime/test_pleroma_bmv2.py holds BMv2's copies
equal to it.

Each event carries its dz (``resolution`` bits, as the publisher wrote it into the IPv6 destination);
each switch matches it against the flows of the port it came in on, longest prefix first, and
copies it to the flow's egress ports (never back out of the ingress port). Copies travel in waves,
a numpy lookup per (switch, ingress port) and wave, as netsim does for compiled pipelines.

Ground truth comes from the host subscriptions evaluated on the event's fields
(:class:`runtime.groundtruth.GroundTruth`, which reads the rules' AST and shares no code with the
dz's, the flows or their merging). Reported, as netsim reports a p4sub network: per host, events
delivered, wanted, false positives, false negatives, duplicates; per directed link, copies and
*extra* copies (sent where no host behind the link wanted the event); S2's network false-positive
rate (extra copies over all copies) and S1's subscriber false-positive rate (unwanted deliveries
over all deliveries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from compiler.pleroma import Tree, compile_tables, walk
from compiler.network import Topology
from compiler.rules import TypedRules
from runtime.groundtruth import GroundTruth
from runtime.replay_ports import PortSpace


@dataclass
class PleromaResult:
    """Counts over a trace (all publishers)."""

    hosts: list[str]
    delivered: np.ndarray  # per host
    wanted: np.ndarray
    false_positives: np.ndarray
    false_negatives: np.ndarray
    duplicates: np.ndarray
    links: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # (switch, port) -> [copies, extra]
    events: int = 0

    def summary(self) -> dict:
        copies = sum(v[0] for v in self.links.values())
        extra = sum(v[1] for v in self.links.values())
        delivered = int(self.delivered.sum())
        fp = int(self.false_positives.sum())
        return {
            "events": self.events, "delivered": delivered, "wanted": int(self.wanted.sum()),
            "false_positives": fp, "false_negatives": int(self.false_negatives.sum()),
            "duplicates": int(self.duplicates.sum()), "link_copies": copies, "extra_link_copies": extra,
            "network_fpr": round(extra / copies, 6) if copies else 0.0,
            "subscriber_fpr": round(fp / delivered, 6) if delivered else 0.0,
        }


def tree_behind_masks(topology: Topology, publisher_trees: Mapping[str, Tree]
                      ) -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """Per publisher, per directed link (switch, port) of its tree: the hosts beyond that link in the
    tree (links off the tree: none). PLEROMA's copies follow trees, so a copy is extra when no host
    that wants it lies beyond it in the publisher's tree (on a flat network, a Zoo graph, netsim's
    up/down orientation would say otherwise)."""
    index = {h: i for i, h in enumerate(topology.hosts())}
    out: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    done: dict[int, dict[tuple[str, int], np.ndarray]] = {}
    for p, tree in publisher_trees.items():
        if id(tree) in done:
            out[p] = done[id(tree)]
            continue
        nbrs: dict[str, list[str]] = {s: [] for s in topology.switches()}
        for c, parent in tree.edges():
            nbrs[c].append(parent)
            nbrs[parent].append(c)
        masks: dict[tuple[str, int], np.ndarray] = {}
        for s in topology.switches():
            for q in topology.ports(s):
                peer, _ = topology.peer(s, q)
                row = np.zeros(len(index), dtype=bool)
                if not topology.is_switch(peer):
                    row[index[peer]] = True
                elif peer in nbrs[s]:
                    stack, seen = [peer], {s, peer}
                    while stack:
                        x = stack.pop()
                        for h in topology.hosts_of(x):
                            row[index[h]] = True
                        for y in nbrs[x]:
                            if y not in seen:
                                seen.add(y)
                                stack.append(y)
                masks[(s, q)] = row
        out[p] = done[id(tree)] = masks
    return out


def wanted_matrix(typed: TypedRules, topology: Topology, columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """``(events, hosts)`` booleans: the host subscriptions (rules whose fwd names host ids) that hold."""
    hosts = topology.hosts()
    space = PortSpace.of(topology.node_id(h) for h in hosts)
    masks = GroundTruth.build(typed, space).wanted(columns, n)
    bits = space.bits(masks)
    order = [space.bit(topology.node_id(h)) for h in hosts]
    return bits[:, order]


def simulate(topology: Topology, tables: Mapping[str, Mapping[int, Mapping[str, frozenset[int]]]],
             event_dz: np.ndarray, resolution: int, publishers: np.ndarray, publisher_names: list[str],
             wanted: np.ndarray, behind_by_publisher: Mapping[str, Mapping[tuple[str, int], np.ndarray]]
             ) -> PleromaResult:
    """Publish event ``i`` at host ``publisher_names[publishers[i]]`` and follow every copy.

    ``wanted[i, h]`` is the ground truth for host ``topology.hosts()[h]``; a publisher is never
    counted as wanting (or missing) its own event. Extra copies are judged by ``behind_by_publisher``
    (:func:`tree_behind_masks`).
    """
    hosts = topology.hosts()
    col = {h: i for i, h in enumerate(hosts)}
    n = len(event_dz)
    wanted = wanted.copy()
    for k, p in enumerate(publisher_names):
        wanted[publishers == k, col[p]] = False
    arrivals = np.zeros((n, len(hosts)), dtype=np.int64)
    links: dict[tuple[str, int], list[int]] = {}
    for s, _, q, sel in walk(topology, compile_tables(tables), event_dz, resolution, publishers, publisher_names):
        # walk yields one publisher's rows at a time
        mask = behind_by_publisher[publisher_names[publishers[sel[0]]]][(s, q)]
        extra = int((~wanted[sel][:, mask].any(axis=1)).sum())
        st = links.setdefault((s, q), [0, 0])
        st[0] += len(sel)
        st[1] += extra
        peer, _ = topology.peer(s, q)
        if not topology.is_switch(peer):
            np.add.at(arrivals[:, col[peer]], sel, 1)
    got = arrivals > 0
    for k, p in enumerate(publisher_names):
        got[publishers == k, col[p]] = False
    return PleromaResult(
        hosts, arrivals.sum(axis=0), wanted.sum(axis=0), (got & ~wanted).sum(axis=0), (wanted & ~got).sum(axis=0),
        np.maximum(arrivals - 1, 0).sum(axis=0), links, n)
