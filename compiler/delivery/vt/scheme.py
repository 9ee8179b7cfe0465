"""Virtual-tree delivery as a :class:`~compiler.delivery.scheme.Scheme`, so the packet-level
simulator of chapter 3 (:func:`runtime.delivery_eval.simulator.simulate`) can follow it hop by hop.

The publisher side encodes with Algorithm 5.1 (:mod:`.encoder`) over the VTs it knows of (by
default every installed one; a strategy may hand a publisher fewer, e.g. while a migration has
not informed it yet); the switch side is :func:`.switch.forward` on the entries the
:class:`~compiler.delivery.vt.installed.VtTable` gives each switch.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping

from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries, TableEntry
from compiler.delivery.tree import DeliveryTree
from compiler.delivery.vt.encoder import VtEncoding, encode
from compiler.delivery.vt.installed import VtTable, port_mask
from compiler.delivery.vt.labels import Kind, Label, attach, header_bytes
from compiler.delivery.vt.steiner import VtGraph
from compiler.delivery.vt.switch import SwitchTables, forward

View = Mapping[int, Collection[int]]


def switch_tables(table: VtTable, switch: str) -> SwitchTables:
    """The entries ``switch`` holds: its VTs (from ``table``) and its links (from the topology)."""
    topo = table.topology
    return SwitchTables(
        trees=table.masks(switch),
        links=dict(table.edge_ids.incident(switch)),
        host_ports=frozenset(topo.host_ports(switch)),
        ports=frozenset(topo.ports(switch)),
    )


class VirtualTrees(Scheme):
    """VT delivery over the VTs installed in ``table``."""

    name = "vt"

    def __init__(self, table: VtTable, *, mode: str = "single", name: str | None = None,
                 view: Callable[[str], View] | None = None, prefilter: bool = True) -> None:
        super().__init__(table.topology)
        self.table = table
        self.mode = mode
        self.prefilter = prefilter
        self.graph = VtGraph.of(table.topology)
        self._view = view
        self._tables: dict[str, SwitchTables] = {}
        self._version = -1
        if name:
            self.name = name

    def view(self, publisher: str) -> View:
        """The VTs ``publisher`` encodes with."""
        return self._view(publisher) if self._view else self.table.view()

    def encoding(self, publisher: str, receivers: Collection[str]) -> VtEncoding:
        ingress = self.topology.host_attachment(publisher)[0]
        return encode(self.graph, self.view(publisher), ingress, receivers, publisher=publisher, mode=self.mode,
                      prefilter=self.prefilter)

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes,
                tree: DeliveryTree | None = None) -> Publication:
        enc = self.encoding(publisher, receivers)
        labels = enc.labels()
        return Publication(
            frames=(attach(frame, labels),),
            expected={r: frame for r in receivers},
            header_bytes=header_bytes(len(labels)),
            info={"labels": len(labels), "trees": len(enc.trees), "hops": len(enc.hops), "stops": len(enc.stops),
                  "tree_links": len(enc.tree_edges)},
        )

    def tables(self, switch: str) -> SwitchTables:
        if self._version != self.table.version:
            self._tables = {}
            self._version = self.table.version
        t = self._tables.get(switch)
        if t is None:
            t = self._tables[switch] = switch_tables(self.table, switch)
        return t

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        return [Emit(p, f) for p, f in forward(self.tables(switch), in_port, frame, cost)]

    def switch_entries(self, switch: str) -> SwitchEntries:
        """``check_tree`` entries are the rules (what ``max_rules`` bounds); ``check_hop`` and
        ``check_stop`` (one per link, fixed by the topology) and the host-port strip are config."""
        def ident(kind: Kind, i: int) -> int:
            return Label(kind, i).pack()

        entries = tuple(
            TableEntry("check_tree", (("label.ident", ident(Kind.TREE, t)),), "vt_tree", (("mask", port_mask(ps)),))
            for t, ps in sorted(self.table.entries(switch).items())
        )
        config = []
        for e, p in self.table.edge_ids.incident(switch):
            config.append(TableEntry("check_hop", (("label.ident", ident(Kind.HOP, e)),), "vt_hop", (("port", p),)))
            config.append(TableEntry("check_stop", (("label.ident", ident(Kind.STOP, e)),), "vt_stop", (("port", p),)))
        config += [TableEntry("host_port", (("egress_port", p),), "strip") for p in self.topology.host_ports(switch)]
        return SwitchEntries(switch, self.topology.node_id(switch), entries, tuple(config))
