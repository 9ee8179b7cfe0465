"""Who publishes, who subscribes to whom, and how often a subscriber wants a message (Table 5.1).

The dissertation's chapter-5 model: every host may publish and subscribe; ``subscriber_share`` of
the other hosts subscribe to a publisher; every host has a fixed ``notification_frequency`` drawn
uniformly from 1 % to 100 %, the share of its publishers' messages it receives ("on average, a
publisher's message reaches half of its subscribers"). The share of hosts that publish is not
given; ``publisher_share`` defaults to 30 %, chapter 6's setting (docs/delivery.md explains why it
matters for the tree strategies).

The strategies that use statistics (tree, path, threshold, relation, frequency-relation, clusters)
read the subscriptions and frequencies from here; messages are drawn from the same model.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from compiler.base import P4subError
from compiler.network import Topology


@dataclass(frozen=True)
class Workload:
    """Publishers, each publisher's subscribers (potential matches), each host's frequency, and the
    dense client regions (switch sets) where they are known in advance (chapter 6's predefined
    clusters, Fig. 6.8; the clusters strategy then uses them instead of its own statistics)."""

    publishers: tuple[str, ...]
    subscribers: dict[str, tuple[str, ...]]
    frequency: dict[str, float]
    regions: tuple[frozenset[str], ...] | None = None

    def frequent(self, publisher: str, threshold: float) -> tuple[str, ...]:
        """The publisher's subscribers that receive at least ``threshold`` of its messages."""
        return tuple(s for s in self.subscribers[publisher] if self.frequency[s] >= threshold - 1e-12)

    def message(self, publisher: str, rng: random.Random) -> list[str]:
        """One notification's receivers: each subscriber with probability its frequency."""
        return [s for s in self.subscribers[publisher] if rng.random() < self.frequency[s]]

    def messages(self, count: int, rng: random.Random) -> list[tuple[str, list[str]]]:
        """``count`` notifications from publishers in turn (random start), none with no receiver."""
        out = []
        offset = rng.randrange(len(self.publishers))
        tries = 0
        while len(out) < count:
            tries += 1
            if tries > 100 * count + 100:
                raise P4subError("the workload produces notifications nobody receives")
            pub = self.publishers[(offset + tries) % len(self.publishers)]
            receivers = self.message(pub, rng)
            if receivers:
                out.append((pub, receivers))
        return out


def table_5_1(topology: Topology, subscriber_share: float, rng: random.Random, *,
              publisher_share: float = 0.3, min_frequency: float = 0.01) -> Workload:
    """A workload of the dissertation's Table 5.1 model (module docstring)."""
    if not 0 < subscriber_share <= 1 or not 0 < publisher_share <= 1:
        raise P4subError("subscriber and publisher shares must be in (0, 1]")
    hosts = topology.hosts()
    if len(hosts) < 2:
        raise P4subError("the workload needs at least two hosts")
    n_pub = max(1, math.floor(publisher_share * len(hosts) + 0.5))
    publishers = tuple(sorted(rng.sample(hosts, n_pub), key=topology.node_id))
    n_sub = max(1, math.floor(subscriber_share * (len(hosts) - 1) + 0.5))
    subscribers = {p: tuple(sorted(rng.sample([h for h in hosts if h != p], n_sub), key=topology.node_id))
                   for p in publishers}
    frequency = {h: rng.uniform(min_frequency, 1.0) for h in hosts}
    return Workload(publishers, subscribers, frequency)
