"""Run a VT combined-compile network (:class:`compiler.delivery.vt.combined.VtPlan`) packet by packet.

Each switch does what its rendered VT program (``backends/bmv2/templates/vt.p4.j2``) does with its
installed state, pass by pass, and nothing else: the ingress switch runs the subscription pipeline
(:class:`runtime.model.Model`) to get a receiver-set id and writes that set's push arguments into
the frame; then every switch reads one label per pass (``stack_index``), looks it up in
``check_hop`` (hit: the link's port joins ``remaining_ports``, the label is popped), ``check_tree``
(the VT's ports join) and ``check_stop`` (the link's port is stopped), and recirculates until the
last label; then one more pass per copy: ``extract_port`` takes the lowest port of
``remaining_ports`` minus the stopped ports and the ingress port, the packet (the stack as the
scan left it) is cloned to it, stripped on host ports. The encoder and
the VT table are not consulted: only the plan's entries (keys are the 16-bit labels the program
matches: type 1 tree, 2 hop, 3 stop in the top two bits).

Drops are counted by reason (:data:`compiler.delivery.vt.combined.VT_DROP_REASONS`).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from compiler.delivery import RSET_META
from compiler.delivery.vt import VtPlan, push_words
from compiler.network import Topology
from runtime.model import Model

ETHERTYPE = b"\x99\x99"
ETH, SHIM = 14, 4


@dataclass
class VtDelivery:
    """What a publication did: frames per host, drops per reason, copies, passes."""

    frames: dict[str, list[bytes]] = field(default_factory=dict)
    drops: Counter = field(default_factory=Counter)
    copies: int = 0
    recirculations: int = 0
    switch_visits: Counter = field(default_factory=Counter)


class VtNetwork:
    """The switches of a VT plan on their topology."""

    def __init__(self, topology: Topology, plan: VtPlan) -> None:
        self.topology = topology
        self.plan = plan
        self.model = Model(plan.pipeline)
        self.push = {s.name: {p.rsid: p for p in s.pushes} for s in plan.switches.values()}
        self.check_tree = {s.name: {0x4000 | t: m for t, m in s.trees} for s in plan.switches.values()}
        self.check_hop = {s.name: {0x8000 | e: p for e, p in s.links} for s in plan.switches.values()}
        self.check_stop = {s.name: {0xC000 | e: p for e, p in s.links} for s in plan.switches.values()}
        self.ports = {s.name: frozenset(s.ports) for s in plan.switches.values()}

    def rset_of(self, values: Mapping[str, int]) -> int:
        cols = {f: np.array([v], dtype=np.uint64) for f, v in values.items()}
        return int(self.model.run(cols).metadata[RSET_META][0])

    def push_frame(self, switch: str, frame: bytes, rsid: int) -> bytes | None:
        entry = self.push[switch].get(rsid)
        if entry is None:
            return None
        count, *words = push_words(self.plan, entry)
        labels = b"".join(w.to_bytes(2, "big") for w in words[:count])
        return frame[:12] + ETHERTYPE + frame[12:14] + count.to_bytes(2, "big") + labels + frame[14:]

    def process(self, switch: str, in_port: int, frame: bytes, values: Mapping[str, int] | None,
                drops: Counter, passes: list[int] | None = None) -> list[tuple[int, bytes]]:
        """One switch, all its passes, for one frame: the copies it sends."""
        sp = self.plan.switches[switch]
        if frame[12:14] != ETHERTYPE:
            if not sp.ingress or values is None:
                drops["not-a-stack"] += 1
                return []
            pushed = self.push_frame(switch, frame, self.rset_of(values))
            if pushed is None:
                drops["no-subscriber"] += 1
                return []
            frame = pushed
        if len(frame) < ETH + SHIM:
            drops["parser-error"] += 1
            return []
        count = int.from_bytes(frame[16:18], "big")
        if count > self.plan.max_labels or len(frame) < ETH + SHIM + 2 * count:
            drops["parser-error"] += 1
            return []
        if count == 0:
            drops["empty-stack"] += 1
            return []
        labels = [int.from_bytes(frame[ETH + SHIM + 2 * i: ETH + SHIM + 2 * i + 2], "big") for i in range(count)]
        body = frame[ETH + SHIM + 2 * count:]
        hop, tree, stop = self.check_hop[switch], self.check_tree[switch], self.check_stop[switch]
        index = remaining = stopped = 0
        n_passes = 0
        while True:
            n_passes += 1
            cur = labels[index]
            remove = False
            if cur in hop:
                remaining |= 1 << (hop[cur] - 1)
                remove = True
            elif cur in tree:
                remaining |= tree[cur]
            elif cur in stop:
                stopped |= 1 << (stop[cur] - 1)
            final = index + 1 >= len(labels)
            if remove:
                del labels[index]
            elif not final:
                index += 1
            if final:
                break
        send = remaining & ~stopped & ((1 << self.plan.mask_width) - 1)
        if in_port >= 1:
            send &= ~(1 << (in_port - 1))
        if send == 0:
            drops["no-port"] += 1
            if passes is not None:
                passes.append(n_passes)
            return []
        kept = frame[:16] + len(labels).to_bytes(2, "big") + b"".join(w.to_bytes(2, "big") for w in labels) + body
        stripped = frame[:12] + frame[14:16] + body
        out = []
        while send:  # one clone per pass, lowest port first
            n_passes += 1
            port = (send & -send).bit_length()
            send &= send - 1
            if port in self.ports[switch]:  # a session for a port the switch lacks clones nowhere
                out.append((port, stripped if port in sp.host_ports else kept))
        if passes is not None:
            passes.append(n_passes)
        return out

    def publish(self, publisher: str, frame: bytes, values: Mapping[str, int], *, max_hops: int = 64) -> VtDelivery:
        switch, port = self.topology.host_attachment(publisher)
        return self._walk(switch, port, frame, values, max_hops)

    def inject(self, switch: str, in_port: int, frame: bytes, *, max_hops: int = 64) -> VtDelivery:
        return self._walk(switch, in_port, frame, None, max_hops)

    def _walk(self, switch: str, port: int, frame: bytes, values, max_hops: int) -> VtDelivery:
        out = VtDelivery()
        queue = deque([(switch, port, frame, 1)])
        while queue:
            s, p, f, hops = queue.popleft()
            if hops > max_hops:
                out.drops["hop-limit"] += 1
                continue
            out.switch_visits[s] += 1
            passes: list[int] = []
            for out_port, copy in self.process(s, p, f, values if hops == 1 else None, out.drops, passes):
                out.copies += 1
                node, node_port = self.topology.peer(s, out_port)
                if self.topology.is_switch(node):
                    queue.append((node, node_port, copy, hops + 1))
                else:
                    out.frames.setdefault(node, []).append(copy)
            out.recirculations += sum(n - 1 for n in passes)
        return out
