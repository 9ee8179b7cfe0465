"""Mixed labels with a strategy tag, chosen per switch (dissertation §3.3.4, Fig. 3.7).

Every label is ``(switch id, tag | value)``: the top two bits of the value field are the tag
(0 = port, 1 = bitmask, 2 = multicast group), the rest holds the widest of a port number, a port
bitmask and a group id, so all labels have the same size and switches skip them uniformly.

Per switch the encoder picks what needs the fewest labels (bytes), ties going to the fewest
control-flow passes: a single port takes a port label (one pass, no group state); several ports
take a group label when one group of the installed :class:`~compiler.delivery.switch_mcgroup.GroupTable`
covers them (one pass) and a bitmask label otherwise (one pass per port). So every tree switch has
exactly one label, in preorder; pruning is reactive, as for bitmask and group labels.

Switch behaviour: labels above the own one are popped (one pass each); the own label is handled
as its tag says (port: one clone; bitmask: one clone per bit and pass; group: one multicast); each
copy pops the label and leaves with the rest of the stack. A second label of the same switch is
not looked at (the encoder never writes one) and is popped downstream.
"""

from __future__ import annotations

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import TableEntry
from compiler.delivery.stack import HeaderStackEncoding, Widths, mask_of, ports_of
from compiler.delivery.switch_bitmask import bit_ports, clone_per_bit, pop_to_own
from compiler.delivery.switch_mcgroup import GroupTable
from compiler.delivery.tree import DeliveryTree
from compiler.delivery.wire import LabelLayout
from compiler.network import Topology, ceil_bytes

TAG_PORT, TAG_BITMASK, TAG_GROUP = 0, 1, 2


class Mixed(HeaderStackEncoding):
    name = "mixed"

    def __init__(self, topology: Topology, widths: Widths | None = None, split: int = 1) -> None:
        widths = widths or Widths.derive(topology)
        self.groups = GroupTable(topology, split, widths.mask_bits)
        self.value_bits = max(widths.port_bits, widths.mask_bits, self.groups.gid_bits)
        super().__init__(topology, widths)
        self.tag_shift = self.layout.value_bytes * 8 - 2

    def make_layout(self) -> LabelLayout:
        return LabelLayout(ceil_bytes(self.widths.id_bits), ceil_bytes(self.value_bits + 2))

    def choose(self, switch: str, ports: tuple[int, ...]) -> tuple[int, int]:
        """``(tag, value)`` for a switch forwarding to ``ports``."""
        if len(ports) == 1:
            return TAG_PORT, ports[0]
        gids = self.groups.groups_for(switch, ports)
        if len(gids) == 1:
            return TAG_GROUP, gids[0]
        return TAG_BITMASK, mask_of(ports)

    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        out = []
        for s in tree.preorder(self.topology):
            ports = tree.ports(s)
            if ports:
                tag, value = self.choose(s, ports)
                out.append((self.sid[s], tag << self.tag_shift | value))
        return out

    def split_value(self, value: int) -> tuple[int, int]:
        return value >> self.tag_shift, value & ((1 << self.tag_shift) - 1)

    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        if not ids:
            raise P4subError("an empty stack encodes no tree")
        ports: dict[str, list[int]] = {}
        for i, v in zip(ids, values):
            s = self.by_sid[i]
            tag, value = self.split_value(v)
            if tag == TAG_PORT:
                found = [value]
            elif tag == TAG_BITMASK:
                found = ports_of(value)
            elif tag == TAG_GROUP and self.groups.members(s, value) is not None:
                found = self.groups.members(s, value)
            else:
                raise P4subError(f"label for {s} has invalid tag {tag} / value {value}")
            ports.setdefault(s, []).extend(found)
        return DeliveryTree.from_ports(self.by_sid[ids[0]], ports)

    def process(self, switch, in_port, ids, values, cost: SwitchCost):
        j = pop_to_own(ids, self.sid[switch], cost)
        if j is None:
            return []
        n = len(ids)
        tag, value = self.split_value(values[j])
        cost.lookups += 1  # check_dev hit
        if tag == TAG_PORT:
            cost.lookups += 1  # clone_pkt
            if value == in_port:
                cost.drop("ingress-port")
                return []
            cost.lookups += 1  # the clone's pop_header
            return [(value, range(j + 1, n), j)]
        if tag == TAG_BITMASK:
            cost.lookups -= 1  # clone_per_bit counts check_dev per pass itself
            return clone_per_bit(bit_ports(self.port_set[switch], in_port, value, cost), j, n, cost)
        members = self.groups.members(switch, value) if tag == TAG_GROUP else None
        if members is None:
            cost.drop("unknown-group" if tag == TAG_GROUP else "bad-tag")
            return []
        cost.lookups += 1  # multicast_forward
        out = []
        for p in members:
            if p == in_port:
                cost.drop("ingress-port")
            elif p not in self.port_set[switch]:
                cost.drop("bad-port")
            else:
                cost.lookups += 1  # the replica's pop_header
                out.append((p, range(j + 1, n), j))
        return out

    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        sid = self.sid[switch]
        entries = [TableEntry("check_dev", (("entry.id", sid),), "by_tag")]
        entries += [
            TableEntry("check_bitmask", (("entry.bit_mask", (1 << (p - 1), 1 << (p - 1))),), "forward_pkt",
                       (("clone_port", p), ("bit_pos", 1 << (p - 1))))
            for p in sorted(self.port_set[switch])
        ]
        return entries, self.groups.count(switch)
