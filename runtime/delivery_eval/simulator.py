"""A packet-level simulator: follows every copy of a notification hop by hop.

The publisher's frames enter its switch one after another (0.1 ms feed-in each); every switch runs
the scheme's :meth:`~compiler.delivery.scheme.Scheme.forward`; every copy that leaves a port
crosses the link to the node behind it. The simulator counts what crosses links (packets, and bytes
of whole frames, header included, Ethernet FCS and preamble not), what switches spend (lookups,
recirculations), what arrives where (receivers served, duplicates, copies to hosts that did not
ask, frames that differ from what the receiver should get), and what goes wrong (drops by reason,
copies sent back out of the port they came in on, copies that come back to a switch they already
passed, which is a loop and is stopped there).

Times follow the dissertation's worst-case delay model (:mod:`compiler.delivery.cost`): a copy's
arrival time is its frame's feed-in time plus, per switch, 0.1 ms and 0.01 ms per circulation it
waited for. The worst-case delay is the latest first arrival at a receiver.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Collection

from compiler.delivery import FEED_IN_MS, DeliveryTree, Publication, Scheme, SwitchCost, switch_delay_ms


@dataclass
class RunMetrics:
    """What one notification cost and how it was delivered."""

    scheme: str
    header_bytes: int = 0
    frames_sent: int = 0
    packets: int = 0
    bytes: int = 0
    lookups: int = 0
    recirculations: int = 0
    rules: int = 0
    delay_ms: float = 0.0
    receivers: int = 0
    served: int = 0
    missing: int = 0
    duplicates: int = 0
    false_positive_deliveries: int = 0
    false_positive_links: int = 0
    corrupted: int = 0
    loops: int = 0
    reflections: int = 0
    dropped: int = 0
    drops: Counter = field(default_factory=Counter)

    @property
    def exact(self) -> bool:
        """Every receiver got its frame exactly once and nothing else arrived anywhere."""
        return (
            self.served == self.receivers
            and not (self.duplicates or self.false_positive_deliveries or self.corrupted or self.loops or self.reflections)
        )

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "drops"}
        out["drops"] = dict(self.drops)
        return out


class SimulationLimit(RuntimeError):
    """A notification produced more copies than the simulator allows (a runaway scheme)."""


def simulate(
    scheme: Scheme,
    publisher: str,
    receivers: Collection[str],
    frame: bytes,
    tree: DeliveryTree | None = None,
    *,
    max_copies: int | None = None,
) -> RunMetrics:
    """Publish ``frame`` from host ``publisher`` to ``receivers`` with ``scheme`` and follow it.

    ``tree`` is the delivery tree handed to schemes that follow one. Per-notification state the
    scheme installs is removed again before returning.
    """
    pub = scheme.publish(publisher, receivers, frame, tree)
    try:
        return run_publication(scheme, publisher, pub, max_copies=max_copies)
    finally:
        scheme.retract(pub)


def run_publication(scheme: Scheme, publisher: str, pub: Publication, *, max_copies: int | None = None) -> RunMetrics:
    """Follow the frames of an already built publication through the network."""
    topo = scheme.topology
    m = RunMetrics(scheme.name, header_bytes=pub.header_bytes, frames_sent=len(pub.frames),
                   rules=scheme_static_rules(scheme) + pub.run_rules, receivers=len(pub.expected))
    if max_copies is None:
        max_copies = 50 * (topo.graph.number_of_edges() + 1) * max(1, len(pub.frames))
    ingress, ingress_port = topo.host_attachment(publisher)
    first_arrival: dict[str, float] = {}
    arrivals: Counter = Counter()
    queue: deque = deque()
    for k, f in enumerate(pub.frames):
        m.packets += 1
        m.bytes += len(f)
        queue.append((ingress, ingress_port, f, (k + 1) * FEED_IN_MS, frozenset((ingress,))))
    tree_links = pub.tree_links
    handled = 0
    while queue:
        switch, in_port, f, t, path = queue.popleft()
        handled += 1
        if handled > max_copies:
            raise SimulationLimit(f"{scheme.name}: more than {max_copies} copies for one notification")
        cost = SwitchCost()
        emits = scheme.forward(switch, in_port, f, cost)
        m.lookups += cost.lookups
        m.recirculations += cost.recirculations
        if cost.drops:
            m.drops.update(cost.drops)
            m.dropped += sum(cost.drops.values())
        for (port, out), circ in zip(emits, cost.circulations):
            if port == in_port:
                m.reflections += 1
            peer = topo.peer(switch, port)
            if peer is None:
                m.drops["unlinked-port"] += 1
                m.dropped += 1
                continue
            m.packets += 1
            m.bytes += len(out)
            if tree_links is not None and (switch, port) not in tree_links:
                m.false_positive_links += 1
            node, node_port = peer
            arrive = t + switch_delay_ms(circ)
            if topo.is_switch(node):
                if node in path:
                    m.loops += 1
                    continue
                queue.append((node, node_port, out, arrive, path | {node}))
                continue
            expected = pub.expected.get(node)
            if expected is None:
                m.false_positive_deliveries += 1
                continue
            arrivals[node] += 1
            if out != expected:
                m.corrupted += 1
            elif node not in first_arrival:
                first_arrival[node] = arrive
    m.served = len(first_arrival)
    m.missing = m.receivers - m.served
    m.duplicates = sum(n - 1 for n in arrivals.values() if n > 1)
    m.delay_ms = max(first_arrival.values(), default=0.0)
    return m


def scheme_static_rules(scheme: Scheme) -> int:
    """Static rules, computed once per scheme object (they do not change between notifications)."""
    cached = getattr(scheme, "_static_rules_cache", None)
    if cached is None:
        cached = scheme.static_rules()
        scheme._static_rules_cache = cached  # type: ignore[attr-defined]
    return cached
