"""Switch/multicast-group pairs with reactive pruning (dissertation §3.3.3, Listing 3.7).

One label ``(switch id, group id)`` per tree switch, in preorder; the group is a switch-local
multicast group whose ports the traffic manager copies to in one go.

Groups (:class:`GroupTable`): with ``split=1`` every port subset of a switch has a group and the
group id *is* the port bitmask (a fixed global mapping, which the dissertation allows), so an
n-port switch holds 2^n - 1 groups. With ``split=c`` the ports are cut into c consecutive blocks of
``ceil(max_port / c)`` ports and only subsets within a block have groups: c x (2^(n/c) - 1) groups
(16 ports, c = 2: 510 instead of 65,535). A switch using ports of several blocks gets one label
per block, consecutively; groups of every block but the last include a recirculation member, so
the switch spends one extra circulation per block (the dissertation's "c - 1 additional
circulations per involved switch") to reach its next label; if that label is not its own, the
recirculated copy is dropped.

Switch behaviour: labels above the own one are popped, one pass each (``multicast_forward`` miss,
``pop_header``, ``recirculate_pkt``). On the own label, ``multicast_forward`` sets the group; each
replica pops this switch's labels (``pop_header``; at most c consecutive ones, a compile-time
bound) and leaves with the rest of the stack.
"""

from __future__ import annotations

import math

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import SwitchEntries, TableEntry
from compiler.delivery.stack import HeaderStackEncoding, Widths, ports_of
from compiler.delivery.switch_bitmask import pop_to_own
from compiler.delivery.tree import DeliveryTree
from compiler.delivery.wire import LabelLayout
from compiler.network import Topology, ceil_bytes


class GroupTable:
    """Per-switch multicast groups for port subsets, optionally split into ``split`` port blocks."""

    def __init__(self, topology: Topology, split: int = 1, mask_bits: int | None = None) -> None:
        if split < 1:
            raise P4subError("the group split must be at least 1")
        width = mask_bits or max(1, topology.max_port())
        self.split = split
        self.block = math.ceil(width / split)
        self.index_bits = (split - 1).bit_length()
        self.ports = {s: frozenset(topology.ports(s)) for s in topology.switches()}

    @property
    def gid_bits(self) -> int:
        return self.index_bits + self.block

    def groups_for(self, switch: str, ports) -> list[int]:
        """Group ids covering ``ports``, one per block touched, in block order."""
        blocks: dict[int, int] = {}
        for p in ports:
            b, bit = divmod(p - 1, self.block)
            blocks[b] = blocks.get(b, 0) | (1 << bit)
        return [(b << self.block) | m for b, m in sorted(blocks.items())]

    def members(self, switch: str, gid: int) -> list[int] | None:
        """The group's ports (all of them, existing or not), or ``None`` for an invalid id."""
        b, m = gid >> self.block, gid & ((1 << self.block) - 1)
        if m == 0 or b >= self.split:
            return None
        return [b * self.block + p for p in ports_of(m)]

    def continues(self, gid: int) -> bool:
        """Whether the group carries a recirculation member (every block but the last)."""
        return (gid >> self.block) < self.split - 1

    def count(self, switch: str) -> int:
        """Groups installed on the switch: all non-empty subsets of each block's existing ports."""
        per_block: dict[int, int] = {}
        for p in self.ports[switch]:
            b = (p - 1) // self.block
            per_block[b] = per_block.get(b, 0) + 1
        return sum((1 << n) - 1 for n in per_block.values())

    def listing(self, switch: str, limit: int = 4096) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Every group of the switch as ``(id, ports)`` when there are at most ``limit``."""
        if self.count(switch) > limit:
            return ()
        out = []
        for b in range(self.split):
            have = [p for p in sorted(self.ports[switch]) if (p - 1) // self.block == b]
            for subset in range(1, 1 << len(have)):
                chosen = [p for k, p in enumerate(have) if subset >> k & 1]
                (gid,) = self.groups_for(switch, chosen)
                out.append((gid, tuple(chosen)))
        return tuple(sorted(out))


class SwitchMcGroup(HeaderStackEncoding):
    name = "mcgroup"

    def __init__(self, topology: Topology, widths: Widths | None = None, split: int = 1) -> None:
        widths = widths or Widths.derive(topology)
        self.groups = GroupTable(topology, split, widths.mask_bits)
        super().__init__(topology, widths)
        if split > 1:
            self.name = f"mcgroup-split{split}"

    def make_layout(self) -> LabelLayout:
        return LabelLayout(ceil_bytes(self.widths.id_bits), ceil_bytes(self.groups.gid_bits))

    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        out = []
        for s in tree.preorder(self.topology):
            ports = tree.ports(s)
            if ports:
                out.extend((self.sid[s], g) for g in self.groups.groups_for(s, ports))
        return out

    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        if not ids:
            raise P4subError("an empty stack encodes no tree")
        ports: dict[str, list[int]] = {}
        for i, g in zip(ids, values):
            s = self.by_sid[i]
            members = self.groups.members(s, g)
            if members is None:
                raise P4subError(f"group id {g} is not a group of {s}")
            ports.setdefault(s, []).extend(members)
        return DeliveryTree.from_ports(self.by_sid[ids[0]], ports)

    def process(self, switch, in_port, ids, values, cost: SwitchCost):
        sid = self.sid[switch]
        j = pop_to_own(ids, sid, cost)
        if j is None:
            return []
        n = len(ids)
        run_end = j + 1
        while run_end < n and ids[run_end] == sid and run_end - j < self.groups.split:
            run_end += 1
        have = self.port_set[switch]
        out = []
        k, circ = j, j
        while True:
            cost.lookups += 1  # multicast_forward hit
            members = self.groups.members(switch, values[k])
            if members is None:
                cost.drop("unknown-group")
                break
            for p in members:
                if p == in_port:
                    cost.drop("ingress-port")
                elif p not in have:
                    cost.drop("bad-port")
                else:
                    cost.lookups += 1  # the replica's pop_header
                    out.append((p, range(run_end, n), circ))
            if not self.groups.continues(values[k]):
                break
            cost.lookups += 1  # the recirculation member's recirculate_pkt
            cost.recirculations += 1
            circ += 1
            if k + 1 < n and ids[k + 1] == sid:
                k += 1
                continue
            cost.lookups += 1  # multicast_forward misses: the recirculated copy is dropped
            break
        return out

    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        return [TableEntry("multicast_forward", (("entry.device", self.sid[switch]),), "do_multicast")], self.groups.count(switch)

    def switch_entries(self, switch: str) -> SwitchEntries:
        entries = super().switch_entries(switch)
        return SwitchEntries(entries.switch, entries.switch_id, entries.entries, entries.config,
                             self.groups.listing(switch), entries.group_count)
