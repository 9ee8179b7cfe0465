"""What every header-stack encoding shares: label widths, the publisher side, the switch frame.

An encoding turns a :class:`~compiler.delivery.tree.DeliveryTree` into a list of ``(switch id,
value)`` labels in preorder (:meth:`HeaderStackEncoding.labels`) and back
(:meth:`HeaderStackEncoding.tree_from_labels`); it also says what a switch does with the labels
it receives (:meth:`HeaderStackEncoding.process`). This base class does the byte work around that:
packing, parsing, dropping malformed stacks, stripping the stack on host ports, and the egress
fix-up lookup every copy costs.

Widths come from the topology (:meth:`Widths.derive`): switch-id bits from the largest switch id,
port bits from the largest port, bitmask bits = largest port (bit i is port i+1, as in the
dissertation's Ch. 5 program). ``DISSERTATION_WIDTHS`` fixes the Ch. 3 evaluation's 8-bit id,
8-bit port, 16-bit bitmask and group fields instead. Each field is rounded up to whole bytes.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Collection

from compiler.base import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries, TableEntry
from compiler.delivery.tree import DeliveryTree, steiner_tree
from compiler.delivery.wire import LabelLayout, Malformed, attach_stack, make_stack, parse_stack
from compiler.network import Topology, bits_for, ceil_bytes


@dataclass(frozen=True)
class Widths:
    """Field widths in bits for labels; see the module docstring."""

    id_bits: int
    port_bits: int
    mask_bits: int

    @staticmethod
    def derive(topology: Topology) -> "Widths":
        max_port = topology.max_port()
        return Widths(bits_for(topology.max_switch_id()), bits_for(max_port), max(1, max_port))

    def check(self, topology: Topology) -> None:
        if topology.max_switch_id() >= 1 << self.id_bits:
            raise P4subError(f"switch ids up to {topology.max_switch_id()} do not fit in {self.id_bits} bits")
        if topology.max_port() >= 1 << self.port_bits:
            raise P4subError(f"ports up to {topology.max_port()} do not fit in {self.port_bits} bits")
        if topology.max_port() > self.mask_bits:
            raise P4subError(f"ports up to {topology.max_port()} do not fit a {self.mask_bits}-bit mask")

    @property
    def id_bytes(self) -> int:
        return ceil_bytes(self.id_bits)


#: The dissertation's Ch. 3 evaluation: 8-bit switch ids and ports, 16-bit bitmasks and group ids.
DISSERTATION_WIDTHS = Widths(8, 8, 16)


def mask_of(ports: Collection[int]) -> int:
    out = 0
    for p in ports:
        out |= 1 << (p - 1)
    return out


def ports_of(mask: int) -> list[int]:
    """Ports whose bits are set, ascending."""
    out = []
    p = 1
    while mask:
        if mask & 1:
            out.append(p)
        mask >>= 1
        p += 1
    return out


class HeaderStackEncoding(Scheme):
    """Base for encodings that carry a delivery tree as a stack of fixed-width labels."""

    exact: ClassVar[bool] = True
    #: Whether switches must index the stack (a ``read_entry`` table with one entry per position).
    indexed: ClassVar[bool] = False

    def __init__(self, topology: Topology, widths: Widths | None = None) -> None:
        super().__init__(topology)
        self.widths = widths or Widths.derive(topology)
        self.widths.check(topology)
        switches = topology.switches()
        self.sid = {s: topology.node_id(s) for s in switches}
        self.by_sid = {i: s for s, i in self.sid.items()}
        self.host_ports = {s: frozenset(topology.host_ports(s)) for s in switches}
        self.port_set = {s: frozenset(topology.ports(s)) for s in switches}
        ids = sorted(self.by_sid)
        self._dense_ids = ids == list(range(1, len(ids) + 1))
        self.layout = self.make_layout()

    # --- what subclasses provide ---------------------------------------------------------------
    @abstractmethod
    def make_layout(self) -> LabelLayout:
        """The label layout for this encoding and widths."""

    @abstractmethod
    def labels(self, tree: DeliveryTree) -> list[tuple[int, int]]:
        """``(switch id, value)`` labels for ``tree``, in the order they go on the stack."""

    @abstractmethod
    def tree_from_labels(self, ids: list[int], values: list[int]) -> DeliveryTree:
        """The tree a label list encodes (the inverse of :meth:`labels`)."""

    @abstractmethod
    def process(
        self, switch: str, in_port: int, ids: list[int], values: list[int], cost: SwitchCost
    ) -> list[tuple[int, range | list[int], int]]:
        """The switch's behaviour on a parsed stack: ``(port, kept labels, circulations)`` per
        copy, where the kept labels are indices into the received stack (a ``range`` when they are
        contiguous). Adds lookups and recirculations to ``cost``; never returns ``in_port``."""

    @abstractmethod
    def tables(self, switch: str) -> tuple[list[TableEntry], int]:
        """Encoding-specific forwarding entries for ``switch`` and its multicast group count."""

    # --- publisher side ------------------------------------------------------------------------
    def encode_tree(self, tree: DeliveryTree) -> bytes:
        """The stack for ``tree``: 16-bit count, then the packed labels."""
        labels = self.labels(tree)
        return make_stack(self.layout.pack(labels), len(labels))

    def encode(self, ingress: str, receivers: Collection[str], *, method: str = "sph", seed: int = 0) -> bytes:
        """Build the delivery tree from ``ingress`` to ``receivers`` and encode it."""
        return self.encode_tree(steiner_tree(self.topology, ingress, receivers, method=method, seed=seed))

    def decode(self, stack: bytes) -> DeliveryTree:
        """The tree a stack (as returned by :meth:`encode_tree`) encodes."""
        if len(stack) < 2:
            raise P4subError("stack shorter than its count field")
        count = int.from_bytes(stack[:2], "big")
        raw = stack[2:]
        if len(raw) != count * self.layout.size:
            raise P4subError(f"stack holds {len(raw)} label bytes, count says {count} labels")
        ids, values = self.layout.unpack(raw)
        return self.tree_from_labels(ids, values)

    def publish(
        self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None
    ) -> Publication:
        if tree is None:
            tree = steiner_tree(self.topology, self.topology.host_attachment(publisher)[0], receivers)
        stack = self.encode_tree(tree)
        return Publication(
            frames=(attach_stack(frame, stack),),
            expected={r: frame for r in receivers},
            header_bytes=2 + len(stack),
            tree_links=tree.edges(),
            info={"labels": int.from_bytes(stack[:2], "big")},
        )

    # --- switch side ---------------------------------------------------------------------------
    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        try:
            parsed = parse_stack(frame, self.layout)
        except Malformed as exc:
            cost.drop(exc.reason)
            return []
        raw = parsed.labels
        ids, values = self.layout.unpack(raw)
        if not self._ids_valid(ids):
            cost.drop("unknown-switch-id")
            return []
        size = self.layout.size
        out: list[Emit] = []
        ports, hosts = self.port_set[switch], self.host_ports[switch]
        for port, keep, circ in self.process(switch, in_port, ids, values, cost):
            if port not in ports:
                cost.drop("bad-port")
                continue
            cost.lookups += 1  # egress fix-up: strip the stack on host ports
            if port in hosts:
                out.append(Emit(port, parsed.strip()))
            elif isinstance(keep, range):
                out.append(Emit(port, parsed.rebuild(raw[keep.start * size : keep.stop * size], len(keep))))
            else:
                kept = b"".join(raw[i * size : (i + 1) * size] for i in keep)
                out.append(Emit(port, parsed.rebuild(kept, len(keep))))
            cost.circulations.append(circ)
        return out

    def _ids_valid(self, ids: list[int]) -> bool:
        if self._dense_ids:
            return min(ids) >= 1 and max(ids) <= len(self.by_sid)
        return all(i in self.by_sid for i in ids)

    def switch_entries(self, switch: str) -> SwitchEntries:
        entries, groups = self.tables(switch)
        config = [TableEntry("egress_fixup", (("egress_port", p),), "strip_stack") for p in sorted(self.host_ports[switch])]
        config += [TableEntry("clone_session", (("session", p),), "mirror_to", (("port", p),))
                   for p in sorted(self.port_set[switch])]
        if self.indexed:
            config += [TableEntry("read_entry", (("index", i),), f"read_index_{i}") for i in range(self.max_labels())]
        return SwitchEntries(switch, self.sid[switch], tuple(entries), tuple(config), group_count=groups)

    def max_labels(self) -> int:
        """The longest stack any tree needs: one label per tree link (switch/port is the worst)."""
        return len(self.sid) - 1 + len(self.topology.hosts())

    def describe(self) -> dict:
        return {"label_bytes": self.layout.size, "id_bytes": self.layout.id_bytes, "value_bytes": self.layout.value_bytes}
