"""Broadcast over one preinstalled spanning tree (dissertation §3.5.4).

Every switch floods a broadcast frame to its spanning-tree ports except the one it came in on:
one flow entry and one multicast group per switch. All hosts get every notification; the ones
that did not subscribe count as false-positive deliveries.
"""

from __future__ import annotations

from typing import Collection

from compiler.delivery import (
    BROADCAST_MAC,
    DeliveryTree,
    Emit,
    Publication,
    Scheme,
    SwitchCost,
    SwitchEntries,
    TableEntry,
)
from compiler.network import Topology, spanning_tree_ports


class Broadcast(Scheme):
    name = "broadcast"
    exact = False
    uses_tree = False

    def __init__(self, topology: Topology, root: str | None = None) -> None:
        super().__init__(topology)
        self.tree_ports = spanning_tree_ports(topology, root)

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None) -> Publication:
        out = BROADCAST_MAC + frame[6:]
        return Publication((out,), {r: out for r in receivers}, header_bytes=0)

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        cost.lookups += 1
        if frame[:6] != BROADCAST_MAC:
            cost.drop("not-broadcast")
            return []
        out = [Emit(p, frame) for p in self.tree_ports[switch] if p != in_port]
        cost.circulations.extend(0 for _ in out)
        return out

    def switch_entries(self, switch: str) -> SwitchEntries:
        entry = TableEntry("flood", (("ethernet.dst", BROADCAST_MAC),), "set_mcast_grp", (("group", 1),))
        return SwitchEntries(switch, self.topology.node_id(switch), (entry,),
                             multicast_groups=((1, self.tree_ports[switch]),), group_count=1)
