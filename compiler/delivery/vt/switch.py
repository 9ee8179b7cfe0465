"""What one VT-aware switch does with a frame (dissertation §5.3, Listings 5.4 and 5.5).

This is the data plane only: it reads the frame's labels and the switch's installed entries and
knows nothing of the encoder, so a test that follows its copies checks the encoder's labels.

Entries of a switch (:class:`SwitchTables`):

* ``check_tree``: VT id -> the switch's ports on that VT (one entry per installed VT);
* ``check_hop`` / ``check_stop``: edge id -> the switch's port on that link (one each per link of
  the switch, fixed by the topology).

Per frame (the dissertation's "batch stack scanning" order, §4.3.2, one label per pass):
every tree label of an installed VT ORs the VT's ports into ``remaining_ports``; every hop label of
one of the switch's links ORs that port in and is marked for removal (``remove_entry``); every stop
label of one of its links ORs that port into the stopped ports. Labels of other switches, VTs it
does not hold and the unused type 0 are skipped. Then one copy goes out of every port in
``remaining_ports`` that is neither stopped nor the ingress port (the original is dropped): host
ports get the publisher's frame (stack stripped), the others the stack without the removed hops.
Tree and stop labels stay: a tree is needed downstream, and a stop on a link may be needed at its
other end too (a cycle of two overlapping VTs is cut by one stop that both ends must obey).

Costs (for the evaluation), as the v1model program runs: one pass per label, in each pass
``check_hop``, then on a miss ``check_tree``, then on a miss ``check_stop`` (1 to 3 lookups),
plus ``remove_entry`` per removed hop; then one pass per copy (``extract_port``, clone); so
``labels + copies - 1`` recirculations.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.delivery.cost import SwitchCost
from compiler.delivery.vt.labels import ETH_HEADER, ETHERTYPE_VT, ID_BITS, LABEL_BYTES, SHIM

HOP, TREE, STOP = 2, 1, 3
_ID_MASK = (1 << ID_BITS) - 1
_VT_TYPE = ETHERTYPE_VT.to_bytes(2, "big")


@dataclass(frozen=True)
class SwitchTables:
    """One switch's VT entries: ``trees`` (VT id -> port bitmap), ``links`` (edge id -> port),
    and its host ports (where the stack is stripped)."""

    trees: dict[int, int]
    links: dict[int, int]
    host_ports: frozenset[int]
    ports: frozenset[int]


def forward(tables: SwitchTables, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[tuple[int, bytes]]:
    """The copies the switch sends for ``frame`` arriving on ``in_port``: ``(port, frame)`` pairs."""
    cost = cost if cost is not None else SwitchCost()
    if len(frame) < ETH_HEADER + SHIM or frame[12:14] != _VT_TYPE:
        cost.drop("not-a-stack")
        return []
    count = int.from_bytes(frame[16:18], "big")
    start = ETH_HEADER + SHIM
    end = start + LABEL_BYTES * count
    if count == 0:
        cost.drop("empty-stack")
        return []
    if len(frame) < end:
        cost.drop("truncated")
        return []
    words = [int.from_bytes(frame[i:i + LABEL_BYTES], "big") for i in range(start, end, LABEL_BYTES)]
    remaining = stopped = 0
    keep = []
    for w in words:
        kind, ident = w >> ID_BITS, w & _ID_MASK
        port = tables.links.get(ident)
        if kind == HOP and port is not None:
            remaining |= 1 << (port - 1)
            cost.lookups += 2  # check_hop hit, remove_entry
            continue
        keep.append(w)
        if kind == TREE and ident in tables.trees:
            remaining |= tables.trees[ident]
            cost.lookups += 2
        elif kind == STOP and port is not None:
            stopped |= 1 << (port - 1)
            cost.lookups += 3
        else:
            cost.lookups += 3
    send = remaining & ~stopped
    if in_port >= 1:
        send &= ~(1 << (in_port - 1))  # VTs are bidirectional: never back where it came from
    body = frame[end:]
    stripped = frame[:12] + frame[14:16] + body
    kept = frame[:16] + len(keep).to_bytes(2, "big") + b"".join(w.to_bytes(LABEL_BYTES, "big") for w in keep) + body
    out = []
    port = 1
    passes = count
    while send:
        if send & 1:
            passes += 1
            cost.lookups += 2  # extract_port; egress: host port or not
            if port not in tables.ports:
                cost.drop("bad-port")
            else:
                out.append((port, stripped if port in tables.host_ports else kept))
                cost.circulations.append(passes - 1)
        send >>= 1
        port += 1
    cost.recirculations += passes - 1
    return out
