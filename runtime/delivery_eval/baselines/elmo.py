"""Elmo-style per-layer port bitmaps for hierarchical fabrics (Shahbaz et al., SIGCOMM'19).

Elmo encodes a multicast tree in a multi-rooted Clos as *p-rules*: port bitmaps per switch, where
switches of one layer with identical bitmaps share a rule listing their ids. Our version (no
switch state, so no s-rules or default rules, and an unbounded header):

* the tree goes up from the ingress switch along first up ports until one switch's down-reach
  covers every receiver (the *top*), then down along down ports (breadth-first, first discovery
  wins; switches on the way up serve their own down-reach);
* the header lists one bitmap per switch on the way up (``u-rules``, consumed one per hop; the
  last one is the top's), then one section per layer below the top, highest first, holding that
  layer's other tree switches as ``(ids, bitmap)`` p-rules;
* a switch going up uses the first u-rule; copies it sends up keep the rest, copies it sends down
  keep only the sections for layers below it. A switch reached from above finds its id in the
  first section, and its copies drop that section. Host ports strip the header.

Layout (after our EtherType and the inner EtherType): u-rule count (1 byte), section count
(1 byte), u-rule bitmaps, then per section a rule count (1 byte) and per rule an id count
(1 byte), the ids (switch-id bytes each) and the bitmap. Bitmaps are as wide as the largest port
of the layer, in whole bytes; bit i is port i+1. One lookup per switch, no recirculation.
"""

from __future__ import annotations

from collections import deque
from typing import Collection

from compiler.base import P4subError
from compiler.delivery import (
    DeliveryTree,
    Emit,
    Malformed,
    Publication,
    Scheme,
    SwitchCost,
    SwitchEntries,
    attach_baseline,
    mask_of,
    ports_of,
    split_baseline,
)
from compiler.network import DOWN, UP, Topology, bits_for, ceil_bytes


class ElmoStyle(Scheme):
    name = "elmo"
    uses_tree = False

    def __init__(self, topology: Topology) -> None:
        if not topology.is_hierarchical():
            raise P4subError("Elmo-style bitmaps need a hierarchical topology (fat tree, leaf-spine, Facebook fabric)")
        for h in topology.hosts():
            if topology.layer(topology.host_attachment(h)[0]) != 1:
                raise P4subError("Elmo-style bitmaps need every host on a layer-1 switch")
        for s in topology.switches():
            for p in topology.up_ports(s):
                if topology.layer(topology.peer(s, p)[0]) != topology.layer(s) + 1:
                    raise P4subError("Elmo-style bitmaps need every up link to climb exactly one layer")
        super().__init__(topology)
        self.id_bytes = ceil_bytes(bits_for(topology.max_switch_id()))
        self.width: dict[int, int] = {}
        for s in topology.switches():
            layer = topology.layer(s)
            self.width[layer] = max(self.width.get(layer, 1), ceil_bytes(max(topology.ports(s), default=1)))
        self.sid = {s: topology.node_id(s) for s in topology.switches()}
        self.by_sid = {i: s for s, i in self.sid.items()}
        self.host_ports = {s: frozenset(topology.host_ports(s)) for s in topology.switches()}
        self.reach: dict[str, frozenset[str]] = {}
        for s in sorted(topology.switches(), key=topology.layer):
            below = {s}
            for p in topology.down_ports(s):
                v = topology.peer(s, p)[0]
                if topology.is_switch(v):
                    below |= self.reach[v]
            self.reach[s] = frozenset(below)

    # --- tree and header -----------------------------------------------------------------------
    def tree(self, ingress: str, receivers: Collection[str]) -> tuple[DeliveryTree, list[str]]:
        """Elmo's tree (see the module docstring) and its way up, ingress first."""
        topo = self.topology
        targets = {topo.host_attachment(r)[0] for r in receivers}
        path = [ingress]
        while not targets <= self.reach[path[-1]]:
            ups = topo.up_ports(path[-1])
            if not ups:
                raise P4subError(f"no up port above {path[-1]} reaches every receiver")
            path.append(topo.peer(path[-1], ups[0])[0])
        parent: dict[str, tuple[str, int]] = {}
        seen = set(path)
        queue = deque(reversed(path))
        while queue:
            s = queue.popleft()
            for p in topo.down_ports(s):
                v = topo.peer(s, p)[0]
                if topo.is_switch(v) and v not in seen:
                    seen.add(v)
                    parent[v] = (s, p)
                    queue.append(v)
        ports: dict[str, set[int]] = {}
        for a, b in zip(path, path[1:]):
            ports.setdefault(a, set()).add(topo.port(a, b))
        for r in receivers:
            s, p = topo.host_attachment(r)
            ports.setdefault(s, set()).add(p)
            while s in parent:
                up, up_port = parent[s]
                if up_port in ports.setdefault(up, set()):
                    break
                ports[up].add(up_port)
                s = up
        return DeliveryTree.from_ports(ingress, ports), path

    def header(self, tree: DeliveryTree, path: list[str]) -> bytes:
        topo = self.topology
        top_layer = topo.layer(path[-1])
        out = bytearray((len(path), top_layer - 1))
        for s in path:
            out += mask_of(tree.ports(s)).to_bytes(self.width[topo.layer(s)], "big")
        on_path = set(path)
        for layer in range(top_layer - 1, 0, -1):
            rules: dict[int, list[int]] = {}
            for s, ps in tree.branches:
                if topo.layer(s) == layer and s not in on_path:
                    rules.setdefault(mask_of(ps), []).append(self.sid[s])
            if len(rules) > 255:
                raise P4subError("more than 255 p-rules in one layer")
            out.append(len(rules))
            for mask, ids in sorted(rules.items(), key=lambda kv: min(kv[1])):
                for chunk in range(0, len(ids), 255):
                    part = sorted(ids)[chunk : chunk + 255]
                    out.append(len(part))
                    for i in part:
                        out += i.to_bytes(self.id_bytes, "big")
                    out += mask.to_bytes(self.width[layer], "big")
            if len(rules) and any(len(v) > 255 for v in rules.values()):
                raise P4subError("more than 255 switches share one p-rule")
        return bytes(out)

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None) -> Publication:
        own, path = self.tree(self.topology.host_attachment(publisher)[0], receivers)
        header = self.header(own, path)
        return Publication((attach_baseline(frame, header),), {r: frame for r in receivers}, header_bytes=2 + len(header),
                           tree_links=own.edges(), info={"tree": own})

    # --- switch --------------------------------------------------------------------------------
    def _sections(self, h: bytes, at: int, count: int) -> list[tuple[int, int]]:
        """``(start, end)`` byte offsets of ``count`` sections from ``at``; raises Malformed."""
        out = []
        for k in range(count):
            if at >= len(h):
                raise Malformed("truncated")
            rules = h[at]
            end = at + 1
            for _ in range(rules):
                if end >= len(h):
                    raise Malformed("truncated")
                end += 1 + h[end] * self.id_bytes
                end += self._section_width(count - k)
            if end > len(h):
                raise Malformed("truncated")
            out.append((at, end))
            at = end
        return out

    def _section_width(self, layer: int) -> int:
        width = self.width.get(layer)
        if width is None:
            raise Malformed("bad-layer")
        return width

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        topo = self.topology
        layer = topo.layer(switch)
        try:
            if len(frame) < 18 or frame[12:14] != b"\x88\xb6":
                raise Malformed("not-a-baseline-frame")
            n_up, n_sec = frame[16], frame[17]
            body = frame[16:]
            # Header length: walk it to find where the payload starts.
            at = 2
            up_widths = []
            for k in range(n_up):
                w = self.width.get(layer + k)
                if w is None:
                    raise Malformed("bad-layer")
                up_widths.append((at, w))
                at += w
            sections = self._sections(body, at, n_sec)
            header_len = (sections[-1][1] if sections else at)
            header, original = split_baseline(frame, header_len)
        except Malformed as exc:
            cost.drop(exc.reason)
            return []
        cost.lookups += 1
        tail = header[up_widths[-1][0] + up_widths[-1][1]:] if up_widths else header[2:]
        if n_up:
            first, w = up_widths[0]
            mask = int.from_bytes(header[first : first + w], "big")
            rest_up = header[first + w : at]
            keep_down = sections[max(0, n_sec - (layer - 1)):]
            down_header = bytes((0, len(keep_down))) + b"".join(header[a:b] for a, b in keep_down)
            up_header = bytes((n_up - 1, n_sec)) + rest_up + tail
        else:
            if not sections:
                cost.drop("no-section")
                return []
            a, b = sections[0]
            mask = self._find(header[a:b], self.sid[switch], self._section_width(layer))
            if mask is None:
                cost.drop("no-rule")
                return []
            up_header = None
            down_header = bytes((0, n_sec - 1)) + b"".join(header[x:y] for x, y in sections[1:])
        out = []
        for p in ports_of(mask):
            if p == in_port:
                cost.drop("ingress-port")
                continue
            peer = topo.peer(switch, p)
            if peer is None:
                cost.drop("bad-port")
                continue
            if p in self.host_ports[switch]:
                out.append(Emit(p, original))
            elif topo.direction(switch, p) == UP and up_header is not None:
                out.append(Emit(p, attach_baseline(original, up_header)))
            elif topo.direction(switch, p) == DOWN:
                out.append(Emit(p, attach_baseline(original, down_header)))
            else:
                cost.drop("bad-direction")
        cost.circulations.extend(0 for _ in out)
        return out

    def _find(self, section: bytes, sid: int, width: int) -> int | None:
        at = 1
        for _ in range(section[0]):
            n = section[at]
            ids = section[at + 1 : at + 1 + n * self.id_bytes]
            at += 1 + n * self.id_bytes
            mask = int.from_bytes(section[at : at + width], "big")
            at += width
            for k in range(n):
                if int.from_bytes(ids[k * self.id_bytes : (k + 1) * self.id_bytes], "big") == sid:
                    return mask
        return None

    def switch_entries(self, switch: str) -> SwitchEntries:
        return SwitchEntries(switch, self.sid[switch], ())
