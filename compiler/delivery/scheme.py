"""The interface every delivery scheme offers the simulator: publish, then forward hop by hop.

A scheme is what one network runs: header-stack encodings (switch/port, switch/bitmask, ...) and
the baselines (unicast, broadcast, OpenFlow multicast, LIPSIN, BIER-style, Elmo-style, in
:mod:`runtime.delivery_eval.baselines`, beside the simulator that drives this interface). The
publisher side (:meth:`Scheme.publish`) turns one notification into the frames the publisher sends;
the switch side (:meth:`Scheme.forward`) is what one switch's data plane does with one frame.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Collection, Mapping, NamedTuple

from compiler.delivery.cost import SwitchCost
from compiler.delivery.tree import DeliveryTree
from compiler.network import Topology


class Emit(NamedTuple):
    """One copy leaving a switch: unpacks as ``(out_port, frame)``."""

    port: int
    frame: bytes


@dataclass(frozen=True)
class TableEntry:
    """One entry a control plane installs: ``table``, match fields, ``action`` and its parameters.

    A ternary match value is a ``(value, mask)`` pair. The transit P4 program that consumes these
    is written elsewhere; the names follow the dissertation's listings.
    """

    table: str
    match: tuple[tuple[str, object], ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SwitchEntries:
    """Everything one switch needs installed for a scheme.

    ``entries`` are forwarding rules (what the comparison counts as rules installed);
    ``config`` are fixed program settings every switch of the scheme has whatever the topology's
    traffic: stack-index readers (one per position, Listing 3.5), clone sessions, the egress
    fix-up that strips stacks on host ports. ``multicast_groups`` lists ``(group id, ports)`` when
    there are few enough to list; ``group_count`` always holds the number (all-subset groups grow
    as 2^ports) and counts as rules.
    """

    switch: str
    switch_id: int
    entries: tuple[TableEntry, ...]
    config: tuple[TableEntry, ...] = ()
    multicast_groups: tuple[tuple[int, tuple[int, ...]], ...] = ()
    group_count: int = 0

    def rule_count(self) -> int:
        return len(self.entries) + self.group_count


@dataclass(frozen=True)
class Publication:
    """What a publisher sends for one notification, and what each receiver must get.

    ``header_bytes`` is what the scheme adds to the first frame (the initial header size).
    ``run_rules`` counts rules installed for this notification alone (OpenFlow trees, stored
    trees). ``tree_links`` is the intended set of ``(switch, out_port)`` links when the scheme
    follows a given tree, so copies elsewhere can be counted as false positives.
    """

    frames: tuple[bytes, ...]
    expected: Mapping[str, bytes]
    header_bytes: int
    run_rules: int = 0
    tree_links: frozenset[tuple[str, int]] | None = None
    info: dict = field(default_factory=dict)


class Scheme(ABC):
    """A delivery scheme installed on a topology."""

    name: ClassVar[str]
    #: True when the scheme delivers exactly one copy to each receiver and none elsewhere.
    exact: ClassVar[bool] = True
    #: True when the scheme follows the delivery tree it is given (rather than its own routing).
    uses_tree: ClassVar[bool] = True

    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    @abstractmethod
    def publish(
        self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None
    ) -> Publication:
        """The frames ``publisher`` sends so that ``receivers`` get ``frame``."""

    @abstractmethod
    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        """What ``switch`` does with ``frame`` arriving on ``in_port``: the copies it sends."""

    @abstractmethod
    def switch_entries(self, switch: str) -> SwitchEntries:
        """The static entries the switch needs for this scheme."""

    def static_rules(self) -> int:
        """Rules installed network-wide before any notification."""
        return sum(self.switch_entries(s).rule_count() for s in self.topology.switches())

    def retract(self, publication: Publication) -> None:
        """Remove whatever :meth:`publish` installed for this notification (default: nothing)."""
