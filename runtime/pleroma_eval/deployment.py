"""What changing a live PLEROMA network costs: change sets as S2 Alg. 7 plans (:mod:`compiler.pleroma.deploy`).

Per network, at the merge resolution:

* churn: the first ``share`` of the subscriptions leave (S1's unsubscriptions) and as many new ones
  arrive (the last ones of the rule file, held back until then), on the unconstrained flows;
* merging: from the unconstrained flows to each method's under each limit, and from the ``ms`` local
  enforcer's flows to each global optimiser's (S2 runs the optimiser over the enforcers' state).

A row gives the steps (adds, modifies, deletes) and the peak: the most flows a switch holds above the
larger of its flows before and after while the plan runs (S2 keeps one entry free for this). Every
plan keeps each switch forwarding every event as the old or the new flows do (the property tests in
tests/compiler/pleroma/test_deploy.py check it against the rules); the evaluation measures sizes only.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from compiler.network import Topology
from compiler.pleroma import Tables, Tree, flow_tables, plan, subscribe, unsubscribe


def _fixed_point(topology: Topology, subs: Sequence[tuple[str, Sequence[str]]], trees: Mapping[str, Tree]) -> Tables:
    host_dzs: dict[str, set[str]] = {}
    for h, dzs in subs:
        host_dzs.setdefault(h, set()).update(dzs)
    return flow_tables(topology, host_dzs, trees)


def _row(change: str, old: Tables, new: Tables, topology: Topology, seconds: float = 0.0,
         limit: int | None = None) -> dict[str, Any]:
    start = time.perf_counter()
    p = plan(old, new, topology.switches())
    row = {"change": change, "steps": len(p.steps), **p.counts(), "overshoot": p.overshoot(),
           "flows_before": sum(p.before.values()), "flows_after": sum(p.after.values()),
           "max_peak": max(p.peak.values(), default=0), "seconds": round(seconds + time.perf_counter() - start, 3)}
    if limit is not None:
        row["limit"] = limit
    return row


def churn(topology: Topology, subscriptions: Sequence[tuple[str, Sequence[str]]], trees: Mapping[str, Tree],
          share: float) -> dict[str, Any]:
    """``share`` of the subscriptions leave, as many arrive; the configurator's tables, then the plan."""
    n = len(subscriptions)
    k = max(1, int(n * share)) if n > 1 else 0
    k = min(k, n // 2)
    before = list(subscriptions[:n - k])
    start = time.perf_counter()
    old = _fixed_point(topology, before, trees)
    tables, live = old, list(before)
    for host, dzs in before[:k]:
        live.remove((host, dzs))
        tables = unsubscribe(topology, tables, trees, host, live)
    for host, dzs in subscriptions[n - k:]:
        tables = subscribe(topology, tables, trees, host, dzs)
    return _row(f"churn: {k} leave, {k} arrive", old, tables, topology, time.perf_counter() - start)


def merges(topology: Topology, full: Tables, merged: Mapping[tuple[str, int], Tables]) -> list[dict[str, Any]]:
    """Unconstrained -> each (method, limit)'s flows; ``ms``'s -> each global optimiser's."""
    rows = [_row(f"unconstrained -> {m}", full, t, topology, limit=lim) for (m, lim), t in merged.items()]
    for (m, lim), t in merged.items():
        local = merged.get(("ms", lim))
        if m in ("traffic", "history") and local is not None:
            rows.append(_row(f"ms -> {m}", local, t, topology, limit=lim))
    return rows
