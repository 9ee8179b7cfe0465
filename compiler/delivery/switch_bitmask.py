"""Switch/bitmask pairs with reactive pruning (dissertation §3.3.2, Listing 3.6).

One label ``(switch id, port bitmask)`` per tree switch, in preorder of the switches; bit i stands
for port i+1 and the ingress port's bit is never set.

Switch behaviour, pass by pass:

* Labels above the switch's own one belong to other subtrees (reactive pruning): each costs a
  pass that misses ``check_dev``, pops the label and recirculates.
* On its own label, each pass finds the lowest set bit (``check_dev``, ``check_bitmask``: one
  ternary rule per port), clones to that port and clears the bit; the original recirculates while
  bits remain (m bits: m passes, m - 1 recirculations, as §3.3.3 says), then is dropped.
* Each clone pops the switch's label (``pop_header``) and leaves with everything that followed it,
  other subtrees included: downstream switches pop those.

Bits for ports the switch does not have match no ternary rule and are ignored (counted as
``bad-port`` drops); the ingress port's bit is ignored too (``ingress-port``).
"""

from __future__ import annotations

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import TableEntry
from compiler.delivery.stack import HeaderStackEncoding, mask_of, ports_of
from compiler.delivery.tree import DeliveryTree
from compiler.delivery.wire import LabelLayout
from compiler.network import ceil_bytes


def pop_to_own(ids: list[int], sid: int, cost: SwitchCost) -> int | None:
    """Reactive pruning: the passes that pop labels above the switch's own one. Returns the own
    label's index, or ``None`` (after counting a ``no-own-label`` drop) when there is none."""
    for j, i in enumerate(ids):
        if i == sid:
            cost.lookups += 3 * j  # check_dev miss, pop_header, recirculate_pkt
            cost.recirculations += j
            return j
    cost.lookups += 2 * len(ids) + len(ids) - 1
    cost.recirculations += len(ids) - 1
    cost.drop("no-own-label")
    return None


def switch_preorder_labels(encoding: HeaderStackEncoding, tree: DeliveryTree, value_of) -> list[tuple[int, int]]:
    """One label per tree switch in preorder, ``value_of(switch, ports)`` giving its value."""
    return [(encoding.sid[s], value_of(s, tree.ports(s))) for s in tree.preorder(encoding.topology) if tree.ports(s)]


def bit_ports(have: frozenset[int], in_port: int, mask: int, cost: SwitchCost) -> list[int]:
    """The ports a bitmask selects, minus the ingress port and ports the switch lacks (counted)."""
    out = []
    for p in ports_of(mask):
        if p == in_port:
            cost.drop("ingress-port")
        elif p not in have:
            cost.drop("bad-port")
        else:
            out.append(p)
    return out


def clone_per_bit(ports: list[int], j: int, n: int, cost: SwitchCost):
    """One pass per set bit of label ``j`` (``check_dev`` + ``check_bitmask``), recirculating
    between passes; each clone pops the label and keeps the labels after it."""
    m = len(ports)
    if m == 0:
        cost.lookups += 2  # check_dev hit, check_bitmask finds no bit: _drop
        return []
    cost.lookups += 2 * m + (m - 1) + m
    cost.recirculations += m - 1
    return [(p, range(j + 1, n), j + t) for t, p in enumerate(ports)]


class SwitchBitmask(HeaderStackEncoding):
    name = "bitmask"

    def make_layout(self) -> LabelLayout:
        return LabelLayout(ceil_bytes(self.widths.id_bits), ceil_bytes(self.widths.mask_bits))

    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        return switch_preorder_labels(self, tree, lambda s, ports: mask_of(ports))

    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        if not ids:
            raise P4subError("an empty stack encodes no tree")
        return DeliveryTree.from_ports(self.by_sid[ids[0]], {self.by_sid[i]: ports_of(v) for i, v in zip(ids, values)})

    def process(self, switch, in_port, ids, values, cost: SwitchCost):
        j = pop_to_own(ids, self.sid[switch], cost)
        if j is None:
            return []
        ports = bit_ports(self.port_set[switch], in_port, values[j], cost)
        return clone_per_bit(ports, j, len(ids), cost)

    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        sid = self.sid[switch]
        entries = [TableEntry("check_dev", (("entry.id", sid),), "hit")]
        entries += [
            TableEntry("check_bitmask", (("entry.bit_mask", (1 << (p - 1), 1 << (p - 1))),), "forward_pkt",
                       (("clone_port", p), ("bit_pos", 1 << (p - 1))))
            for p in sorted(self.port_set[switch])
        ]
        return entries, 0
