"""LIPSIN zFilters (Jokela et al., SIGCOMM'09): the delivery tree as an in-packet Bloom filter.

Every directed link (switch, out port), host links included, has ``d`` link-id tags (LITs), each
an m-bit word with k bits set, drawn from a seeded generator (LIPSIN assigns link ids locally
and at random). The publisher ORs the tree links' tags separately for each index i = 0..d-1 and
keeps the candidate with the lowest estimated false-positive rate ``fpa = rho^k`` (rho = the
fraction of bits set; the paper's wording says "ratio of 1's to 0's"). Defaults m = 248,
k = 5, d = 8 are the paper's.

Header (after our EtherType and the inner EtherType): index (1 byte), TTL (1 byte), zFilter
(m/8 bytes). A switch forwards a copy on every port except the ingress one whose tag of the
packet's index is contained in the zFilter (``zF & LIT == LIT``, one lookup: the d tag tables
are read in parallel), with TTL - 1; a frame arriving with TTL 0 is dropped. The TTL starts at
the tree's depth (LIPSIN's §3.3.3 remedy 4). With ``loop_cache`` (default) a switch also
remembers the zFilters it has forwarded during the current notification and drops any further copy
of one (remedy 2, a cache of recently seen zFilters): without it, a saturated zFilter in a
meshed network multiplies copies exponentially within the TTL. The first copy a switch sees may be
a false positive from a side link; it is forwarded like the tree copy (except back where it came
from), so every tree switch still forwards once and receivers get exactly one copy.
Host links strip the header. False positives show up as copies over links outside the tree and
as deliveries to hosts that did not ask.
"""

from __future__ import annotations

import random
from typing import Collection

from compiler.base import P4subError
from compiler.delivery import (
    DeliveryTree,
    Emit,
    Publication,
    Scheme,
    SwitchCost,
    SwitchEntries,
    TableEntry,
    attach_baseline,
    read_baseline,
    rebuild_baseline,
    steiner_tree,
)
from compiler.network import Topology


class Lipsin(Scheme):
    name = "lipsin"
    exact = False

    def __init__(
        self, topology: Topology, m: int = 248, k: int = 5, d: int = 8, seed: int = 1, loop_cache: bool = True
    ) -> None:
        if m % 8 or m <= 0 or not 0 < k <= m or not 0 < d <= 256:
            raise P4subError("LIPSIN needs m a positive multiple of 8, 0 < k <= m, 0 < d <= 256")
        super().__init__(topology)
        self.m, self.k, self.d = m, k, d
        self.header_len = 2 + m // 8
        self.lits: dict[tuple[str, int], tuple[int, ...]] = {}
        for s in topology.switches():
            for p in topology.ports(s):
                rng = random.Random(f"lipsin:{seed}:{topology.node_id(s)}:{p}")
                self.lits[s, p] = tuple(sum(1 << b for b in rng.sample(range(m), k)) for _ in range(d))
        self.host_ports = {s: frozenset(topology.host_ports(s)) for s in topology.switches()}
        self.loop_cache = loop_cache
        self.seen: set[tuple[str, bytes]] = set()

    def zfilter(self, tree: DeliveryTree) -> tuple[int, int]:
        """``(index, zFilter)`` with the lowest ``fpa`` among the d candidates (lowest index on ties)."""
        best = None
        for i in range(self.d):
            z = 0
            for link in tree.edges():
                z |= self.lits[link][i]
            rho = bin(z).count("1") / self.m
            key = (rho**self.k, i)
            if best is None or key < best[0]:
                best = (key, i, z)
        return best[1], best[2]

    def publish(self, publisher: str, receivers: Collection[str], frame: bytes, tree: DeliveryTree | None = None) -> Publication:
        if tree is None:
            tree = steiner_tree(self.topology, self.topology.host_attachment(publisher)[0], receivers)
        index, z = self.zfilter(tree)
        ttl = tree.depth(self.topology)
        if ttl > 255:
            raise P4subError("tree deeper than the 8-bit TTL")
        header = bytes((index, ttl)) + z.to_bytes(self.m // 8, "big")
        rho = bin(z).count("1") / self.m
        self.seen.clear()
        return Publication((attach_baseline(frame, header),), {r: frame for r in receivers}, header_bytes=2 + self.header_len,
                           tree_links=tree.edges(), info={"fill": rho, "fpa": rho**self.k, "index": index})

    def forward(self, switch: str, in_port: int, frame: bytes, cost: SwitchCost | None = None) -> list[Emit]:
        cost = cost if cost is not None else SwitchCost()
        split = read_baseline(frame, self.header_len, cost)
        if split is None:
            return []
        header, original = split
        index, ttl = header[0], header[1]
        if index >= self.d:
            cost.drop("bad-index")
            return []
        if ttl == 0:
            cost.drop("ttl")
            return []
        cost.lookups += 1
        if self.loop_cache:
            key = (switch, header[:1] + header[2:])
            if key in self.seen:
                cost.drop("loop-cache")
                return []
            self.seen.add(key)
        z = int.from_bytes(header[2:], "big")
        out = []
        passed = None
        for p in self.topology.ports(switch):
            if p == in_port:
                continue
            lit = self.lits[switch, p][index]
            if z & lit != lit:
                continue
            if p in self.host_ports[switch]:
                out.append(Emit(p, original))
            else:
                if passed is None:
                    passed = rebuild_baseline(frame, self.header_len, bytes((index, ttl - 1)) + header[2:])
                out.append(Emit(p, passed))
        cost.circulations.extend(0 for _ in out)
        return out

    def retract(self, publication: Publication) -> None:
        self.seen.clear()

    def switch_entries(self, switch: str) -> SwitchEntries:
        return SwitchEntries(switch, self.topology.node_id(switch), tuple(
            TableEntry(f"lit_{i}", (("zfilter", (lit[i], lit[i])),), "forward", (("port", p),))
            for p in self.topology.ports(switch) for lit in (self.lits[switch, p],) for i in range(self.d)
        ))
