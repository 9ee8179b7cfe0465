"""Delivering one notification to many receivers: delivery trees in header stacks and baselines.

The dissertation's chapter 3 (switch/port, switch/bitmask, switch/multicast-group and mixed label
stacks) and the chapter-4 stored-tree hybrid, plus the schemes they are compared with, all behind
one interface (:class:`~compiler.delivery.scheme.Scheme`) so that :func:`simulate` can follow any
of them hop by hop. A later compile step calls :func:`encode` for the stack a publisher sends and
:func:`table_entries` for what each switch's transit program needs installed.
"""

from __future__ import annotations

from typing import Callable, Collection

from compiler.delivery.baselines.bier import BierStyle
from compiler.delivery.baselines.broadcast import Broadcast
from compiler.delivery.baselines.elmo import ElmoStyle
from compiler.delivery.baselines.lipsin import Lipsin
from compiler.delivery.baselines.openflow import OpenFlowMulticast
from compiler.delivery.baselines.unicast import Unicast
from compiler.delivery.mixed import Mixed
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries, TableEntry
from compiler.delivery.simulator import RunMetrics, simulate
from compiler.delivery.stack import DISSERTATION_WIDTHS, HeaderStackEncoding, Widths
from compiler.delivery.stored_tree import StoredTreeHybrid
from compiler.delivery.switch_bitmask import SwitchBitmask
from compiler.delivery.switch_mcgroup import GroupTable, SwitchMcGroup
from compiler.delivery.switch_port import SwitchPort
from compiler.delivery.tree import DeliveryTree, steiner_tree
from compiler.errors import P4subError
from compiler.topology import Topology

#: Scheme names accepted by :func:`make_scheme` and ``p4sub eval delivery --schemes``.
ENCODINGS = ("port", "bitmask", "mcgroup", "mcgroup-split", "mixed", "hybrid")
BASELINES = ("unicast", "broadcast", "openflow", "lipsin", "bier", "elmo")
SCHEMES = ENCODINGS + BASELINES


def make_scheme(
    name: str,
    topology: Topology,
    *,
    widths: Widths | None = None,
    split: int = 2,
    static_share: float = 0.7,
    seed: int = 1,
) -> Scheme:
    """Build a scheme by name. ``split`` is the port-block count of ``mcgroup-split``;
    ``static_share`` the share of receivers a hybrid's stored tree serves; ``seed`` LIPSIN's."""
    factories: dict[str, Callable[[], Scheme]] = {
        "port": lambda: SwitchPort(topology, widths),
        "bitmask": lambda: SwitchBitmask(topology, widths),
        "mcgroup": lambda: SwitchMcGroup(topology, widths),
        "mcgroup-split": lambda: SwitchMcGroup(topology, widths, split=split),
        "mixed": lambda: Mixed(topology, widths, split=split),
        "hybrid": lambda: StoredTreeHybrid(topology, widths, static_share=static_share),
        "unicast": lambda: Unicast(topology),
        "broadcast": lambda: Broadcast(topology),
        "openflow": lambda: OpenFlowMulticast(topology),
        "lipsin": lambda: Lipsin(topology, seed=seed),
        "bier": lambda: BierStyle(topology),
        "elmo": lambda: ElmoStyle(topology),
    }
    if name not in factories:
        raise P4subError(f"unknown delivery scheme {name!r}; choose from {', '.join(SCHEMES)}")
    return factories[name]()


def encode(
    topology: Topology,
    ingress_switch: str,
    receiver_hosts: Collection[str],
    encoding: str = "port",
    *,
    method: str = "sph",
    seed: int = 0,
    widths: Widths | None = None,
) -> bytes:
    """The stack (16-bit count + labels) a publisher at ``ingress_switch`` puts after the Ethernet
    addresses (behind EtherType 0x88B5 and its own EtherType) to reach ``receiver_hosts``."""
    scheme = make_scheme(encoding, topology, widths=widths)
    if not isinstance(scheme, HeaderStackEncoding) or isinstance(scheme, StoredTreeHybrid):
        raise P4subError(f"{encoding!r} is not a stateless header-stack encoding")
    return scheme.encode(ingress_switch, receiver_hosts, method=method, seed=seed)


def table_entries(topology: Topology, encoding: str = "port", **options) -> dict[str, SwitchEntries]:
    """Per switch, the entries the transit program of ``encoding`` needs."""
    scheme = make_scheme(encoding, topology, **options)
    return {s: scheme.switch_entries(s) for s in topology.switches()}


__all__ = [
    "BASELINES", "DISSERTATION_WIDTHS", "ENCODINGS", "SCHEMES", "BierStyle", "Broadcast", "DeliveryTree", "ElmoStyle", "Emit",
    "GroupTable", "HeaderStackEncoding", "Lipsin", "Mixed", "OpenFlowMulticast", "Publication", "RunMetrics",
    "Scheme", "StoredTreeHybrid", "SwitchBitmask", "SwitchEntries", "SwitchMcGroup", "SwitchPort", "TableEntry",
    "Unicast", "Widths", "encode", "make_scheme", "simulate", "steiner_tree", "table_entries",
]
