"""Run a combined-compile network (:class:`compiler.delivery.combined.CombinedPlan`) packet by packet.

Each switch does what its rendered stack program does with its installed state, byte by byte,
and nothing else: the ingress switch runs the subscription pipeline (:class:`runtime.model.Model`
on the rewritten IR) to get a receiver-set id, looks the id up in its push entries and writes the
push action's *arguments* (:func:`compiler.delivery.combined.push_args`: count and packed labels)
into the frame; every switch then parses at most ``max_labels`` labels, finds its own label(s) or
its stored tree, turns them into a port bitmap, replicates to the bitmap's multicast group and, per
copy, strips the stack on host ports or prunes it (predictive pruning for switch/port, pop up to
the own label for switch/bitmask, switch/multicast-group and mixed). The bitmap of a label: the
OR of ``1 << (port - 1)`` over all own labels (port); the value (bitmask; mcgroup, whose group id
is the bitmap); by the strategy tag at the top of the value (mixed: port, bitmask or group; any
other tag gives no port). Values are cut to the program's 16-bit bitmap as the program's casts
do. The trees and the encoders are not consulted: a test that compares deliveries with the
subscriptions therefore checks the installed state.

Drops are counted by reason (:data:`compiler.delivery.combined.DROP_REASONS`), as the programs'
drop counters do.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from compiler.delivery import (
    ETH_HEADER,
    ETHERTYPE_STACK,
    MIXED_TAGS,
    RSET_META,
    STACK_SHIM,
    STORED_ID,
    CombinedPlan,
    SwitchPlan,
    push_args,
)
from compiler.network import Topology
from runtime.model import Model


@dataclass
class Delivery:
    """What a publication did: frames per host, drops per reason, hops of the longest path."""

    frames: dict[str, list[bytes]] = field(default_factory=dict)
    drops: Counter = field(default_factory=Counter)
    copies: int = 0
    max_hops: int = 0


class StackNetwork:
    """The switches of a plan on their topology."""

    def __init__(self, topology: Topology, plan: CombinedPlan) -> None:
        self.topology = topology
        self.plan = plan
        self.model = Model(plan.pipeline)
        self.push = {s.name: {p.rsid: p for p in s.pushes} for s in plan.switches.values()}
        self.groups = {s.name: dict(s.groups) for s in plan.switches.values()}
        self.stored = {s.name: dict(s.stored) for s in plan.switches.values()}

    # --- one switch --------------------------------------------------------------------------
    def rset_of(self, values: Mapping[str, int]) -> int:
        cols = {f: np.array([v], dtype=np.uint64) for f, v in values.items()}  # all: the row count comes from them
        return int(self.model.run(cols).metadata[RSET_META][0])

    def push_frame(self, switch: str, frame: bytes, rsid: int) -> bytes | None:
        """The frame after the push table (None on a miss: nobody subscribed)."""
        entry = self.push[switch].get(rsid)
        if entry is None:
            return None
        count, *packed = push_args(self.plan, entry)
        size = self.plan.label_bytes
        labels = b"".join(v.to_bytes(size, "big") for v in packed[:count])
        return frame[:12] + ETHERTYPE_STACK.to_bytes(2, "big") + frame[12:14] + count.to_bytes(2, "big") + labels + frame[14:]

    def process(self, switch: str, in_port: int, frame: bytes, values: Mapping[str, int] | None,
                drops: Counter) -> list[tuple[int, bytes]]:
        """One switch's ingress and egress for one frame: the copies it sends."""
        sp = self.plan.switches[switch]
        if frame[12:14] != ETHERTYPE_STACK.to_bytes(2, "big"):
            if not sp.ingress or values is None:
                drops["not-a-stack"] += 1
                return []
            pushed = self.push_frame(switch, frame, self.rset_of(values))
            if pushed is None:
                drops["no-subscriber"] += 1
                return []
            frame = pushed
        size, n_max = self.plan.label_bytes, self.plan.max_labels
        if len(frame) < ETH_HEADER + STACK_SHIM:
            drops["parser-error"] += 1
            return []
        count = int.from_bytes(frame[16:18], "big")
        if count > n_max or len(frame) < ETH_HEADER + STACK_SHIM + count * size:
            drops["parser-error"] += 1
            return []
        start = ETH_HEADER + STACK_SHIM
        vb = 8 * self.plan.value_bytes
        raw = [int.from_bytes(frame[start + i * size: start + (i + 1) * size], "big") for i in range(count)]
        ids = [r >> vb for r in raw]
        vals = [r & ((1 << vb) - 1) for r in raw]
        own = [i for i, x in enumerate(ids) if x == sp.switch_id]
        stored = count > 0 and ids[0] == STORED_ID
        if stored:
            mask = self.stored[switch].get(vals[0])
            if mask is None:
                drops["unknown-tree"] += 1
                return []
        elif not own:
            drops["no-own-label"] += 1
            return []
        elif self.plan.encoding == "port":
            mask = 0
            for i in own:
                mask |= self._port_bit(vals[i])
        else:
            mask = self._label_mask(vals[own[0]])
        ports = self.groups[switch].get(mask)
        if ports is None:
            drops["no-port"] += 1
            return []
        out = []
        body = frame[start + count * size:]
        for port in ports:
            if port == in_port:
                drops["ingress-port"] += 1
                continue
            if port in sp.host_ports:
                out.append((port, frame[:12] + frame[14:16] + body))
                continue
            out.append((port, self._egress(sp, port, frame, raw, ids, vals, stored, own, body)))
        return out

    def _port_bit(self, port: int) -> int:
        """``1 << (port - 1)`` in the 16-bit bitmap; 0 for port 0 and ports past it (the shift runs out)."""
        return 1 << (port - 1) if 1 <= port <= self.plan.mask_width else 0

    def _label_mask(self, value: int) -> int:
        """The port bitmap of one own label of a bitmask, mcgroup or mixed stack."""
        cut = (1 << self.plan.mask_width) - 1
        if not self.plan.tag_bits:
            return value & cut
        tag, rest = value >> self.plan.tag_shift, value & ((1 << self.plan.tag_shift) - 1)
        if tag == MIXED_TAGS["port"]:
            return self._port_bit(rest)
        if tag in (MIXED_TAGS["bitmask"], MIXED_TAGS["group"]):
            return rest & cut
        return 0

    def _egress(self, sp: SwitchPlan, port: int, frame: bytes, raw: list[int], ids: list[int], vals: list[int],
                stored: bool, own: list[int], body: bytes) -> bytes:
        n = len(raw)
        if stored:
            keep = range(n)
        elif self.plan.encoding != "port":
            keep = range(own[0] + 1, n)
        else:
            k = next((i for i in own if vals[i] == port), n)
            nxt = next((i for i in own if i > k), n)
            keep = range(k + 1, nxt) if k < n else range(0)
        size = self.plan.label_bytes
        labels = b"".join(raw[i].to_bytes(size, "big") for i in keep)
        return frame[:16] + len(keep).to_bytes(2, "big") + labels + body

    # --- the network ---------------------------------------------------------------------------
    def publish(self, publisher: str, frame: bytes, values: Mapping[str, int], *, max_hops: int = 256) -> Delivery:
        """Send ``frame`` (whose message has field ``values``) from host ``publisher``; follow every copy."""
        switch, port = self.topology.host_attachment(publisher)
        return self._walk(switch, port, frame, values, max_hops)

    def inject(self, switch: str, in_port: int, frame: bytes, *, max_hops: int = 256) -> Delivery:
        """A frame (carrying a stack, or not) arriving at ``switch`` on ``in_port`` from another switch."""
        return self._walk(switch, in_port, frame, None, max_hops)

    def _walk(self, switch: str, port: int, frame: bytes, values: Mapping[str, int] | None, max_hops: int) -> Delivery:
        result = Delivery()
        queue = deque([(switch, port, frame, 1)])
        while queue:
            s, p, f, hops = queue.popleft()
            result.max_hops = max(result.max_hops, hops)
            if hops > max_hops:
                result.drops["hop-limit"] += 1
                continue
            for out_port, copy in self.process(s, p, f, values if hops == 1 else None, result.drops):
                result.copies += 1
                node, node_port = self.topology.peer(s, out_port)
                if self.topology.is_switch(node):
                    queue.append((node, node_port, copy, hops + 1))
                else:
                    result.frames.setdefault(node, []).append(copy)
        return result
