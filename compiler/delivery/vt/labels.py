"""Virtual-tree labels and their frames (dissertation §5.3, Listing 5.1).

A label is 16 bits: a 2-bit type, then a 14-bit id ("2^14 = 16,384 edges and an equivalent number
of virtual trees"). The dissertation does not give the type codes; here 1 = tree, 2 = hop, 3 =
stop, and 0 is never a label, so the all-zero words that pad a fixed-width push action can never be
mistaken for one. A tree label names an installed VT; hop and stop labels name a *link* (edge id),
and every switch on that link holds an entry for it: a hop makes the switch send over the link, a
stop keeps it from doing so.

Edge ids number every link of the topology, switch-to-switch and switch-to-host alike, from 1 in
:meth:`compiler.network.topology.Topology.links` order: deterministic, and the same on the publisher and
in every switch.

Frame (all fields big-endian)::

    dst MAC | src MAC | 0x9999 | inner EtherType | count (16) | count x label (16) | payload

0x9999 is the EtherType of the dissertation's program (its comment says "type 9999", its parser
matches 16w0x9999; the code wins). Unlike the dissertation's frame, the publisher's own EtherType
moves behind ours (as in :mod:`compiler.delivery.wire`), so the last switch gives the receiver the
publisher's frame byte for byte. Bytes added to a frame: 4 + 2 per label.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

from compiler.base import P4subError
from compiler.network import Topology

ETHERTYPE_VT = 0x9999
TYPE_BITS = 2
ID_BITS = 14
MAX_ID = (1 << ID_BITS) - 1
LABEL_BYTES = 2
ETH_HEADER = 14
SHIM = 4  # inner EtherType + count
_VT_TYPE = ETHERTYPE_VT.to_bytes(2, "big")


class Kind(IntEnum):
    """The 2-bit label type; 0 is deliberately unused."""

    TREE = 1
    HOP = 2
    STOP = 3


@dataclass(frozen=True, order=True)
class Label:
    """One stack entry: ``kind`` and a 14-bit ``ident`` (a VT id, or an edge id for hop and stop)."""

    kind: Kind
    ident: int

    def __post_init__(self) -> None:
        if not 1 <= self.ident <= MAX_ID:
            raise P4subError(f"{self.kind.name.lower()} label id {self.ident} is outside 1..{MAX_ID}")

    def pack(self) -> int:
        return int(self.kind) << ID_BITS | self.ident

    def __str__(self) -> str:
        return f"{self.kind.name.lower()}:{self.ident}"


def tree(vt_id: int) -> Label:
    return Label(Kind.TREE, vt_id)


def hop(edge_id: int) -> Label:
    return Label(Kind.HOP, edge_id)


def stop(edge_id: int) -> Label:
    return Label(Kind.STOP, edge_id)


def pack_labels(labels: Iterable[Label]) -> bytes:
    return b"".join(lab.pack().to_bytes(LABEL_BYTES, "big") for lab in labels)


def header_bytes(label_count: int) -> int:
    """What a stack of ``label_count`` labels adds to a frame: inner EtherType, count, labels."""
    return SHIM + LABEL_BYTES * label_count


def attach(frame: bytes, labels: Iterable[Label]) -> bytes:
    """The publisher's ``frame`` with a VT stack after its Ethernet addresses."""
    labels = list(labels)
    if len(labels) > 0xFFFF:
        raise P4subError("a VT stack holds at most 65535 labels")
    return frame[:12] + _VT_TYPE + frame[12:14] + len(labels).to_bytes(2, "big") + pack_labels(labels) + frame[14:]


class EdgeIds:
    """The 14-bit id of every link, and each switch's port on it.

    Edges are node pairs in :meth:`Topology.links` order (lower-ordered node first); both
    orientations map to the same id.
    """

    def __init__(self, topology: Topology) -> None:
        links = topology.links()
        if len(links) > MAX_ID:
            raise P4subError(f"{len(links)} links do not fit 14-bit edge ids (at most {MAX_ID})")
        self.topology = topology
        self.edges: list[tuple[str, str]] = [(u, v) for u, _, v, _ in links]
        self._id: dict[tuple[str, str], int] = {}
        for i, (u, v) in enumerate(self.edges, start=1):
            self._id[u, v] = self._id[v, u] = i

    def __len__(self) -> int:
        return len(self.edges)

    def id(self, u: str, v: str) -> int:
        try:
            return self._id[u, v]
        except KeyError:
            raise P4subError(f"{u} and {v} are not linked") from None

    def edge(self, edge_id: int) -> tuple[str, str]:
        if not 1 <= edge_id <= len(self.edges):
            raise P4subError(f"no edge has id {edge_id}")
        return self.edges[edge_id - 1]

    def canonical(self, u: str, v: str) -> tuple[str, str]:
        return self.edges[self.id(u, v) - 1]

    def incident(self, switch: str) -> list[tuple[int, int]]:
        """``(edge id, port)`` for every link of ``switch``, in port order."""
        return [(self._id[switch, v], p) for p, v in self.topology.neighbours(switch)]
