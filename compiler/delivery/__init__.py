"""Delivering one notification to many receivers: delivery trees in header stacks.

The dissertation's chapter 3 (switch/port, switch/bitmask, switch/multicast-group and mixed label
stacks) and the chapter-4 stored-tree hybrid, all behind one interface
(:class:`~compiler.delivery.scheme.Scheme`). A compile step calls :func:`encode` for the stack a
publisher sends and :func:`table_entries` for what each switch's transit program needs installed.
The schemes they are compared with, the hop-by-hop simulator and the evaluation live beside the
runtime, in :mod:`runtime.delivery_eval`: evaluation code reads the compiler, never the reverse.
"""

from __future__ import annotations

from typing import Callable, Collection

from compiler.delivery.mixed import Mixed
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries, TableEntry
from compiler.delivery.stack import DISSERTATION_WIDTHS, HeaderStackEncoding, Widths
from compiler.delivery.stored_tree import StoredTreeHybrid
from compiler.delivery.switch_bitmask import SwitchBitmask
from compiler.delivery.switch_mcgroup import GroupTable, SwitchMcGroup
from compiler.delivery.switch_port import SwitchPort
from compiler.delivery.tree import DeliveryTree, steiner_tree
from compiler.errors import P4subError
from compiler.topology import Topology

#: Encoding names accepted by :func:`make_encoding` (and, with the baselines, by
#: :func:`runtime.delivery_eval.make_scheme` and ``p4sub eval delivery --schemes``).
ENCODINGS = ("port", "bitmask", "mcgroup", "mcgroup-split", "mixed", "hybrid")


def encoding_factories(
    topology: Topology,
    *,
    widths: Widths | None = None,
    split: int = 2,
    static_share: float = 0.7,
) -> dict[str, Callable[[], Scheme]]:
    """Per encoding name, a builder of it on ``topology``. ``split`` is the port-block count of
    ``mcgroup-split``; ``static_share`` the share of receivers a hybrid's stored tree serves."""
    return {
        "port": lambda: SwitchPort(topology, widths),
        "bitmask": lambda: SwitchBitmask(topology, widths),
        "mcgroup": lambda: SwitchMcGroup(topology, widths),
        "mcgroup-split": lambda: SwitchMcGroup(topology, widths, split=split),
        "mixed": lambda: Mixed(topology, widths, split=split),
        "hybrid": lambda: StoredTreeHybrid(topology, widths, static_share=static_share),
    }


def make_encoding(name: str, topology: Topology, **options) -> Scheme:
    """Build an encoding by name; ``options`` as :func:`encoding_factories`."""
    factories = encoding_factories(topology, **options)
    if name not in factories:
        raise P4subError(f"unknown delivery encoding {name!r}; choose from {', '.join(ENCODINGS)}")
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
    scheme = make_encoding(encoding, topology, widths=widths)
    if not isinstance(scheme, HeaderStackEncoding) or isinstance(scheme, StoredTreeHybrid):
        raise P4subError(f"{encoding!r} is not a stateless header-stack encoding")
    return scheme.encode(ingress_switch, receiver_hosts, method=method, seed=seed)


def table_entries(topology: Topology, encoding: str = "port", **options) -> dict[str, SwitchEntries]:
    """Per switch, the entries the transit program of ``encoding`` needs."""
    scheme = make_encoding(encoding, topology, **options)
    return {s: scheme.switch_entries(s) for s in topology.switches()}


__all__ = [
    "DISSERTATION_WIDTHS", "ENCODINGS", "DeliveryTree", "Emit", "GroupTable", "HeaderStackEncoding", "Mixed",
    "Publication", "Scheme", "StoredTreeHybrid", "SwitchBitmask", "SwitchEntries", "SwitchMcGroup", "SwitchPort",
    "TableEntry", "Widths", "encode", "encoding_factories", "make_encoding", "steiner_tree", "table_entries",
]
