"""A network held to a per-switch flow limit by one of Balogh's methods (:mod:`.merge`).

The local enforcers (``baseline``, ``ms``) run on every flow add while the configurator installs the
subscriptions one by one (:mod:`.configurator`) when the requests are given, else on the finished
tables; the global optimiser (``traffic``, ``history``) runs on the unconstrained tables.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from compiler.base import P4subError
from compiler.network import Topology
from compiler.pleroma.configurator import configure
from compiler.pleroma.flows import Tables, Tree
from compiler.pleroma.merge import METHODS, Samples, count_flows, global_optimise, local_enforce


@dataclass
class MergeStats:
    method: str
    limit: int
    merges: int
    flows_before: int
    flows_after: int
    max_flows: int
    fits: bool
    seconds: float

    @property
    def merge_ratio(self) -> float:
        """S2's merge ratio: the share of flows merged away, over the network."""
        return (self.flows_before - self.flows_after) / self.flows_before if self.flows_before else 0.0



def enforce(topology: Topology, tables: Tables, limit: int, method: str, trees: Mapping[str, Tree],
            resolution: int, samples: Samples | None = None, seed: int = 0, progress=None,
            requests: Sequence[tuple[str, Sequence[str]]] | None = None) -> tuple[Tables, MergeStats]:
    """A copy of ``tables`` in which every switch holds at most ``limit`` flows (when it can: one per
    ingress port is the least), by ``method`` (module docstring).

    With ``requests`` (``(host, dz's)`` per subscription in arrival order) the local enforcers run as
    S2 runs them, on every flow add while the configurator installs the requests one by one
    (:func:`compiler.pleroma.configurator.configure`); without, on the finished ``tables``."""
    if method not in METHODS:
        raise P4subError(f"unknown merge method {method!r}; expected one of {', '.join(METHODS)}")
    if limit < 1:
        raise P4subError("the flow limit must be at least 1")
    start = time.perf_counter()
    out: Tables = {s: {i: dict(t) for i, t in by_in.items()} for s, by_in in tables.items()}
    before = sum(count_flows(b) for b in out.values())
    merges = 0
    if method in ("baseline", "ms") and requests is not None:
        out, merges = configure(topology, requests, trees, limit, method, seed)
    elif method in ("baseline", "ms"):
        rng = random.Random(seed)
        for s in topology.switches():
            merges += local_enforce(out.get(s, {}), limit, method, rng)
    else:
        if samples is None:
            raise P4subError(f"--merge {method} needs sample events")
        merges = global_optimise(topology, out, limit, samples, resolution, trees, method, progress)
    counts = [count_flows(b) for b in out.values()]
    after = sum(counts)
    return out, MergeStats(method, limit, merges, before, after, max(counts, default=0),
                           max(counts, default=0) <= limit, time.perf_counter() - start)
