"""What forwarding costs: table lookups, recirculations, drops, and the dissertation's delay model.

A switch's ``forward`` adds to a :class:`SwitchCost` as it goes, so the same function serves the
simulator (which sums costs) and callers that only want the copies.

Delay model (dissertation §3.5.4, "Worst-case Delay"): the publisher feeds packets into the network
one after another at 0.1 ms each; every switch adds 0.1 ms of queueing and processing; each
control-flow circulation a copy waits for adds 0.01 ms; a broker adds 2 ms. Cables are ignored.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

FEED_IN_MS = 0.1
SWITCH_MS = 0.1
BROKER_MS = 2.0
RECIRCULATION_MS = 0.01


@dataclass
class SwitchCost:
    """Costs one or more switch passes incur.

    ``circulations`` has one entry per emitted copy, in emission order: how many recirculations
    the copy waited for inside the switch (those of the original before the copy was made plus
    its own), which is what the delay model charges.
    """

    lookups: int = 0
    recirculations: int = 0
    drops: Counter = field(default_factory=Counter)
    circulations: list[int] = field(default_factory=list)

    def drop(self, reason: str, n: int = 1) -> None:
        self.drops[reason] += n


def switch_delay_ms(circulations: int) -> float:
    return SWITCH_MS + RECIRCULATION_MS * circulations
