"""OpenFlow-style multicast: one stored tree per publisher and receiver set (dissertation §3.5.4).

Source-based trees as the dissertation ran them: the tree is named by the destination MAC, each
tree switch holds one flow entry (MAC -> group of the tree's ports) for it, installed for the
receiver combination actually in use. Frames carry no extra header, so this is the byte-count
lower bound; the price is one rule per tree switch per notification's receiver set, counted as
per-notification rules.
"""

from __future__ import annotations

from typing import Collection

from compiler.delivery import (
    DeliveryTree,
    Emit,
    Publication,
    Scheme,
    SwitchCost,
    SwitchEntries,
    group_mac,
    steiner_tree,
)
from compiler.network import Topology


class OpenFlowMulticast(Scheme):
    name = "openflow"

    def __init__(self, topology: Topology) -> None:
        super().__init__(topology)
        self.flows: dict[tuple[str, bytes], tuple[int, ...]] = {}
        self._next = 1

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None) -> Publication:
        if tree is None:
            tree = steiner_tree(self.topology, self.topology.host_attachment(publisher)[0], receivers)
        mac = group_mac(self._next)
        self._next = self._next % 0xFFFFFF + 1
        for s, ps in tree.branches:
            self.flows[s, mac] = ps
        out = mac + frame[6:]
        return Publication((out,), {r: out for r in receivers}, header_bytes=0, run_rules=len(tree.branches),
                           tree_links=tree.edges(), info={"mac": mac, "switches": [s for s, _ in tree.branches]})

    def retract(self, publication: Publication) -> None:
        for s in publication.info["switches"]:
            self.flows.pop((s, publication.info["mac"]), None)

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        cost.lookups += 1
        ports = self.flows.get((switch, frame[:6]))
        if ports is None:
            cost.drop("no-flow")
            return []
        out = [Emit(p, frame) for p in ports if p != in_port]
        cost.circulations.extend(0 for _ in out)
        return out

    def switch_entries(self, switch: str) -> SwitchEntries:
        return SwitchEntries(switch, self.topology.node_id(switch), ())
