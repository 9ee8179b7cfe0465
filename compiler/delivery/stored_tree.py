"""The chapter-4 hybrid: one stored tree per publisher plus hop labels (dissertation §4.3).

A publisher's stored tree T' reaches its *stable* subscribers and is installed in the switches as
one bitmask rule per tree switch (``check_tree``: tree id -> ports), the dissertation's choice of
bitmasks over multicast groups so that both label kinds fill the same metadata mask. The header
holds T''s tree label and, for the dynamic subscribers, hop labels ``(switch id, port bitmask)``
for the links the delivery tree adds to T' (the dissertation's implementation copies a hop label's
bitmask into the same metadata field, so its hop labels are effectively switch/bitmask labels;
with explicit switch ids no subtree markers are needed).

Layout: a tree label is ``(0, tree id)``; switch id 0 is reserved, so no tag bit is needed. Hop
labels follow the tree label in preorder of the delivery tree.

Switch behaviour: the dissertation's "batch stack scanning" variant (end of §4.3.2), chosen
because it never clones twice to one port and its clones need no pruning of their own. The
original reads every label in turn, one pass each (``check_tree`` / ``check_hop``): a tree label
ORs the stored mask of that tree for this switch into the metadata mask and stays (downstream
switches need it); an own hop label ORs its bitmask in and is removed. Then one pass per set bit
finds the port (``extract_port``) and clones to it, never to the ingress port. Every clone leaves
with the stack as it stands after the scan: this switch's hop labels gone, everything else kept,
so pruning is limited: other switches' hop labels travel the whole tree.

In the evaluation the stored tree is the delivery tree pruned to a share of the receivers (the
stable ones; ``static_share``, 0.7 gives the dissertation's 30:70 dynamic:static mix) and is
installed for that notification only, so its rules are counted per notification.
"""

from __future__ import annotations

import random
from typing import Collection

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import Publication, TableEntry
from compiler.delivery.stack import HeaderStackEncoding, Widths, mask_of, ports_of
from compiler.delivery.tree import DeliveryTree, check_tree, prune
from compiler.delivery.wire import LabelLayout
from compiler.network import Topology, ceil_bytes

TREE_LABEL = 0


class StoredTreeHybrid(HeaderStackEncoding):
    name = "hybrid"
    indexed = True

    def __init__(
        self, topology: Topology, widths: Widths | None = None, static_share: float = 0.7, tree_id_bits: int = 16
    ) -> None:
        if not 0.0 <= static_share <= 1.0:
            raise P4subError("the static share of a hybrid must be between 0 and 1")
        self.tree_id_bits = tree_id_bits
        self.static_share = static_share
        super().__init__(topology, widths)
        self.trees: dict[int, DeliveryTree] = {}
        self.by_root: dict[str, int] = {}
        self.stored: dict[tuple[int, str], int] = {}
        self._next_id = 1
        dynamic = round(100 * (1 - static_share))
        self.name = f"hybrid-{dynamic}:{100 - dynamic}"

    def make_layout(self) -> LabelLayout:
        return LabelLayout(ceil_bytes(self.widths.id_bits), max(ceil_bytes(self.widths.mask_bits), ceil_bytes(self.tree_id_bits)))

    # --- stored trees --------------------------------------------------------------------------
    def install(self, tree_id: int, tree: DeliveryTree) -> int:
        """Store ``tree`` under ``tree_id`` as the tree of its root's publisher; returns the rules."""
        if not 1 <= tree_id < 1 << (8 * self.layout.value_bytes):
            raise P4subError(f"tree id {tree_id} does not fit the label")
        check_tree(tree, self.topology)
        self.trees[tree_id] = tree
        self.by_root[tree.root] = tree_id
        for s, ps in tree.branches:
            self.stored[tree_id, s] = mask_of(ps)
        return len(tree.branches)

    def uninstall(self, tree_id: int) -> None:
        tree = self.trees.pop(tree_id)
        if self.by_root.get(tree.root) == tree_id:
            del self.by_root[tree.root]
        for s, _ in tree.branches:
            del self.stored[tree_id, s]

    # --- encoding ------------------------------------------------------------------------------
    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        tid = self.by_root.get(tree.root)
        stored = self.trees.get(tid) if tid is not None else None
        out: list[tuple[int, int]] = []
        if stored is not None and stored.edges() <= tree.edges() and stored.branches:
            out.append((TREE_LABEL, tid))
        else:
            stored = None
        for s in tree.preorder(self.topology):
            extra = set(tree.ports(s)) - set(stored.ports(s) if stored else ())
            if extra:
                out.append((self.sid[s], mask_of(extra)))
        return out

    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        if not ids:
            raise P4subError("an empty stack encodes no tree")
        ports: dict[str, list[int]] = {}
        root = None
        for i, v in zip(ids, values):
            if i == TREE_LABEL:
                if v not in self.trees:
                    raise P4subError(f"tree label {v} names no stored tree")
                root = self.trees[v].root
                for s, ps in self.trees[v].branches:
                    ports.setdefault(s, []).extend(ps)
            else:
                ports.setdefault(self.by_sid[i], []).extend(ports_of(v))
        if root is None:
            root = self.by_sid[ids[0]]
        return DeliveryTree.from_ports(root, ports)

    def _ids_valid(self, ids: list[int]) -> bool:
        return all(i == TREE_LABEL or i in self.by_sid for i in ids)

    def publish(
        self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None
    ) -> Publication:
        if tree is None:
            return super().publish(publisher, receivers, frame, tree)
        ordered = sorted(receivers)
        random.Random(",".join(ordered)).shuffle(ordered)
        stable = ordered[: round(self.static_share * len(ordered))]
        tid = self._next_id
        self._next_id = self._next_id % ((1 << (8 * self.layout.value_bytes)) - 1) + 1
        rules = self.install(tid, prune(tree, self.topology, stable)) if stable else 0
        pub = super().publish(publisher, receivers, frame, tree)
        return Publication(pub.frames, pub.expected, pub.header_bytes, rules, pub.tree_links,
                           {**pub.info, "tree_id": tid if stable else None})

    def retract(self, publication: Publication) -> None:
        tid = publication.info.get("tree_id")
        if tid is not None and tid in self.trees:
            self.uninstall(tid)

    # --- switch --------------------------------------------------------------------------------
    def process(self, switch, in_port, ids, values, cost: SwitchCost):
        sid = self.sid[switch]
        n = len(ids)
        mask = 0
        for i in range(n):  # the scan: one pass per label
            if ids[i] == TREE_LABEL:
                mask |= self.stored.get((values[i], switch), 0)
            elif ids[i] == sid:
                mask |= values[i]
        cost.lookups += n
        if in_port >= 1:
            mask &= ~(1 << (in_port - 1))
        ports = []
        for p in ports_of(mask):
            if p in self.port_set[switch]:
                ports.append(p)
            else:
                cost.drop("bad-port")
        keep = [k for k in range(n) if ids[k] != sid]
        passes = n + len(ports)
        cost.lookups += len(ports) + (passes - 1)  # extract_port per clone, recirculate between passes
        cost.recirculations += passes - 1
        return [(p, keep, n + t) for t, p in enumerate(ports)]

    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        sid = self.sid[switch]
        entries = [TableEntry("check_hop", (("entry.ident", sid),), "load_hop_mask")]
        entries += [
            TableEntry("extract_port", (("meta.remaining_ports", (1 << (p - 1), 1 << (p - 1))),), "set_port", (("port", p),))
            for p in sorted(self.port_set[switch])
        ]
        return entries, 0

    def tree_entries(self, tree_id: int) -> dict[str, TableEntry]:
        """The per-switch ``check_tree`` entries a stored tree needs (installed per notification)."""
        return {
            s: TableEntry("check_tree", (("entry.ident", tree_id),), "load_tree_mask", (("mask", mask_of(ps)),))
            for s, ps in self.trees[tree_id].branches
        }
