"""BIER-style bitstrings (RFC 8279 ideas): one bit per egress host, forwarded along unicast routes.

Hosts are numbered by id; host h is bit (h-1) mod 256 of set (h-1) div 256. The publisher sends
one frame per set that holds a receiver (``copies when more sets are needed``). A switch's bit
index forwarding table (BIFT) gives, per bit, the port towards that host (the lowest-port shortest
path, or the host port) and the forwarding bitmask of all bits behind that port. As Merling et
al.'s P4 BIER does, a switch handles one neighbour per pass: find the lowest remaining bit, look
it up, send a copy carrying the bits behind that port, clear them, recirculate while bits remain.

Header (after our EtherType and the inner EtherType): set index (1 byte), bitstring (32 bytes).
Host ports strip it. Bits with no BIFT entry are dropped and counted.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Collection

from compiler.delivery import (
    DeliveryTree,
    Emit,
    Publication,
    Scheme,
    SwitchCost,
    SwitchEntries,
    TableEntry,
    attach_baseline,
    next_hop_ports,
    read_baseline,
    rebuild_baseline,
    switch_index,
)
from compiler.network import Topology

SET_BITS = 256


class BierStyle(Scheme):
    name = "bier"
    uses_tree = False

    def __init__(self, topology: Topology, set_bits: int = SET_BITS) -> None:
        super().__init__(topology)
        self.set_bits = set_bits
        self.header_len = 1 + set_bits // 8
        names, index, _ = switch_index(topology)
        nh = next_hop_ports(topology)
        self.bift: dict[str, dict[tuple[int, int], int]] = {}
        self.fbm: dict[str, dict[tuple[int, int], int]] = {}
        for s in names:
            bift, fbm = {}, defaultdict(int)
            for h in topology.hosts():
                si, bit = divmod(topology.node_id(h) - 1, set_bits)
                hs, hp = topology.host_attachment(h)
                port = hp if hs == s else nh[index[s]][index[hs]]
                bift[si, bit] = port
                fbm[si, port] |= 1 << bit
            self.bift[s], self.fbm[s] = bift, dict(fbm)
        self.host_ports = {s: frozenset(topology.host_ports(s)) for s in names}

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None) -> Publication:
        sets: dict[int, int] = defaultdict(int)
        for r in receivers:
            si, bit = divmod(self.topology.node_id(r) - 1, self.set_bits)
            sets[si] |= 1 << bit
        frames = tuple(attach_baseline(frame, bytes((si,)) + bs.to_bytes(self.set_bits // 8, "big"))
                       for si, bs in sorted(sets.items()))
        return Publication(frames, {r: frame for r in receivers}, header_bytes=2 + self.header_len,
                           info={"sets": len(sets)})

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        split = read_baseline(frame, self.header_len, cost)
        if split is None:
            return []
        header, original = split
        si = header[0]
        remaining = int.from_bytes(header[1:], "big")
        if remaining == 0:
            cost.drop("empty-bitstring")
            return []
        bift, fbm = self.bift[switch], self.fbm[switch]
        out = []
        passes = 0
        while remaining:
            bit = (remaining & -remaining).bit_length() - 1
            cost.lookups += 1
            passes += 1
            port = bift.get((si, bit))
            if port is None:
                cost.drop("unknown-bit")
                remaining &= ~(1 << bit)
                continue
            bits = remaining & fbm[si, port]
            remaining &= ~bits
            if port == in_port:
                cost.drop("ingress-port", bin(bits).count("1"))
                continue
            if port in self.host_ports[switch]:
                out.append(Emit(port, original))
            else:
                out.append(Emit(port, rebuild_baseline(frame, self.header_len,
                                                       bytes((si,)) + bits.to_bytes(self.set_bits // 8, "big"))))
            cost.circulations.append(passes - 1)
        cost.recirculations += passes - 1
        cost.lookups += passes - 1  # recirculate between passes
        return out

    def switch_entries(self, switch: str) -> SwitchEntries:
        return SwitchEntries(switch, self.topology.node_id(switch), tuple(
            TableEntry("bift", (("si", si), ("bit", bit)), "forward", (("port", port), ("fbm", self.fbm[switch][si, port])))
            for (si, bit), port in sorted(self.bift[switch].items())
        ))
