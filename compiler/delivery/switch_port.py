"""Switch/port pairs with predictive pruning (dissertation §3.3.1, Listings 3.2 to 3.5).

One label ``(switch id, out port)`` per tree link, in preorder: each label of a switch is followed
by the whole subtree behind that port, so a switch's labels start its section of the stack.

Switch behaviour, pass by pass as Listing 3.3 runs it (one label per control-flow pass):

* The original reads the top label each pass (``read_entry``, ``check_entry``); on its own id it
  clones to the label's port (``clone_pkt``); egress removes the label (``rmv_stack_entry``,
  ``dec_num_valid``) and recirculates while labels remain (``recirculate_pkt``). After the last
  label the original is dropped.
* A clone made on label j first removes that label in egress (``store_egress_port``,
  ``rmv_stack_entry``, ``dec_num_valid``), then recirculates once per remaining label: it skips
  labels (``restore_egress_port``, ``read_entry``, ``check_entry``, ``inc_seen_labels``) until it
  meets this switch's next label, the root of another subtree (``set_delete_flag``), and deletes
  that label and every later one (``rmv_stack_entry``, ``dec_num_valid``). It leaves carrying
  exactly its own subtree: that is predictive pruning.

Every applied table counts as one lookup (the dissertation counted executed match-action rules
in BMv2's logs). A clone's delay counts the original's recirculations before it was made plus its
own. Clones to the ingress port are refused (counted as ``ingress-port`` drops).
"""

from __future__ import annotations

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import TableEntry
from compiler.delivery.stack import HeaderStackEncoding
from compiler.delivery.tree import DeliveryTree
from compiler.delivery.wire import LabelLayout
from compiler.network import ceil_bytes


class SwitchPort(HeaderStackEncoding):
    name = "port"
    indexed = True

    def make_layout(self) -> LabelLayout:
        return LabelLayout(ceil_bytes(self.widths.id_bits), ceil_bytes(self.widths.port_bits))

    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        topo, sid = self.topology, self.sid
        out: list[tuple[int, int]] = []
        stack = [(tree.root, iter(tree.ports(tree.root)))]
        while stack:
            s, ports = stack[-1]
            p = next(ports, None)
            if p is None:
                stack.pop()
                continue
            out.append((sid[s], p))
            v = topo.peer(s, p)[0]
            if topo.is_switch(v):
                stack.append((v, iter(tree.ports(v))))
        return out

    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        if not ids:
            raise P4subError("an empty stack encodes no tree")
        ports: dict[str, list[int]] = {}
        for i, v in zip(ids, values):
            ports.setdefault(self.by_sid[i], []).append(v)
        return DeliveryTree.from_ports(self.by_sid[ids[0]], ports)

    def process(self, switch, in_port, ids, values, cost: SwitchCost):
        sid = self.sid[switch]
        n = len(ids)
        own = [j for j, i in enumerate(ids) if i == sid]
        # The original: one pass per label, recirculating between passes.
        cost.lookups += 4 * n + len(own) + (n - 1)
        cost.recirculations += n - 1
        out = []
        for k, j in enumerate(own):
            nxt = own[k + 1] if k + 1 < len(own) else n
            rest = n - j - 1  # labels the clone still has to look at, one pass each
            skipped, deleted = nxt - j - 1, n - nxt
            cost.lookups += 3 + rest + 3 * rest + skipped + 2 * deleted + (len(own) - k - 1)
            cost.recirculations += rest
            port = values[j]
            if port == in_port:
                cost.drop("ingress-port")
                continue
            out.append((port, range(j + 1, nxt), j + rest))
        return out

    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        sid = self.sid[switch]
        return [TableEntry("check_entry", (("entry.id", sid),), "clone_or_delete")], 0
