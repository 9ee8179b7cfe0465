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

from compiler.base import P4subError
from compiler.delivery.combined import (
    DROP_REASONS,
    MIXED_TAGS,
    RENDERED_ENCODINGS,
    RSET_META,
    STORED_ID,
    CombinedPlan,
    Push,
    SwitchPlan,
    plan_combined,
    plan_json,
    push_args,
)
from compiler.delivery.cost import FEED_IN_MS, SwitchCost, switch_delay_ms
from compiler.delivery.mixed import Mixed
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries, TableEntry
from compiler.delivery.stack import DISSERTATION_WIDTHS, HeaderStackEncoding, Widths, mask_of, ports_of
from compiler.delivery.stored_tree import StoredTreeHybrid
from compiler.delivery.switch_bitmask import SwitchBitmask
from compiler.delivery.switch_mcgroup import GroupTable, SwitchMcGroup
from compiler.delivery.switch_port import SwitchPort
from compiler.delivery.tree import DeliveryTree, hops, next_hop_ports, steiner_tree, switch_index
from compiler.delivery.wire import (
    BROADCAST_MAC,
    ETH_HEADER,
    ETHERTYPE_IPV4,
    ETHERTYPE_STACK,
    STACK_SHIM,
    Malformed,
    attach_baseline,
    ethernet_frame,
    group_mac,
    host_mac,
    read_baseline,
    rebuild_baseline,
    split_baseline,
)
from compiler.network import Topology

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
    "BROADCAST_MAC", "DISSERTATION_WIDTHS", "DROP_REASONS", "ENCODINGS", "ETHERTYPE_IPV4", "ETHERTYPE_STACK",
    "ETH_HEADER", "FEED_IN_MS", "MIXED_TAGS", "RENDERED_ENCODINGS", "RSET_META", "STACK_SHIM", "STORED_ID",
    "CombinedPlan", "DeliveryTree", "Emit", "GroupTable", "HeaderStackEncoding", "Malformed", "Mixed", "Publication",
    "Push", "Scheme", "StoredTreeHybrid", "SwitchBitmask", "SwitchCost", "SwitchEntries", "SwitchMcGroup", "SwitchPlan",
    "SwitchPort", "TableEntry", "Widths", "attach_baseline", "encode", "encoding_factories", "ethernet_frame",
    "group_mac", "hops", "host_mac", "make_encoding", "mask_of", "next_hop_ports", "plan_combined", "plan_json",
    "ports_of", "push_args", "read_baseline", "rebuild_baseline", "split_baseline", "steiner_tree",
    "switch_delay_ms", "switch_index", "table_entries",
]
