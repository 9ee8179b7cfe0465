"""The chapter-6 evaluation (dissertation §6.5 and §6.6, Figs. 6.9 and 6.14) on the packet-level simulator.

Per run and migration scenario (:mod:`.churn`): the clustered workload at every churn level. Per
strategy and rules-per-switch value: the VTs installed once on the 0 % workload, then every
level's notifications encoded (Algorithm 5.1) with those VTs and followed hop by hop
(:func:`.evaluation.deliver`). A data point averages runs x messages notifications. The static
sweep of Fig. 6.9 (header entries over 5 to 40 rules, four client clusters) is the ``nearby``
scenario at 0 % churn; Fig. 6.14 is every scenario over churn at 40 rules.

Metrics per notification as in :mod:`.evaluation` (labels by type are the dissertation's
"entries"; header bytes, bytes and packets on all links); per installation the VTs, the entries in
all switches and in the fullest one.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Callable

import networkx as nx

from compiler.base import P4subError
from compiler.network import Topology
from runtime.delivery_eval.vt.churn import SCENARIOS, churned_workloads, scenario
from runtime.delivery_eval.vt.evaluation import Accumulator, VtEvalConfig, deliver, install

CHAPTER_6_STRATEGIES = ("hops", "random", "cycles", "freq-relation:30", "clusters", "partitions", "hybrid:30")


@dataclass(frozen=True)
class ChurnConfig:
    """What to evaluate; see ``p4sub eval vt --help`` (``--scenarios``)."""

    scenarios: tuple[str, ...] = SCENARIOS
    churn: tuple[float, ...] = tuple(i / 10 for i in range(11))
    rules: tuple[int, ...] = (40,)
    strategies: tuple[str, ...] = CHAPTER_6_STRATEGIES
    subscriber_share: float = 0.3
    publisher_share: float = 0.3
    runs: int = 3
    messages: int = 20
    seed: int = 1
    payload: int = 50
    mode: str = "single"
    prefilter: bool = True

    def __post_init__(self) -> None:
        self.delivery()  # runs, messages, rules and strategies are checked as chapter 5's
        bad = [s for s in self.scenarios if s not in SCENARIOS]
        if bad or not self.scenarios:
            raise P4subError(f"--scenarios: expected some of {', '.join(SCENARIOS)}, got {', '.join(bad) or 'none'}")
        if not self.churn or any(not 0 <= c <= 1 for c in self.churn):
            raise P4subError("--churn percentages must be between 0 and 100")

    def delivery(self) -> VtEvalConfig:
        return VtEvalConfig(rules=self.rules, strategies=self.strategies, runs=self.runs, messages=self.messages,
                            seed=self.seed, payload=self.payload, publisher_share=self.publisher_share,
                            mode=self.mode, prefilter=self.prefilter)


def topology_stats(topology: Topology) -> dict:
    """Table 6.1's columns from the switch graph: |V|, |E|, mean degree 2|E|/|V|, degree variance, diameter."""
    sg = topology.switch_graph()
    degrees = [d for _, d in sg.degree()]
    n = len(degrees)
    mean = sum(degrees) / n if n else 0.0
    return {"nodes": n, "edges": sg.number_of_edges(), "mean_degree": round(mean, 3),
            "degree_variance": round(sum((d - mean) ** 2 for d in degrees) / n, 3) if n else 0.0,
            "diameter": nx.diameter(sg) if n and nx.is_connected(sg) else None}


def evaluate_churn(topology: Topology, config: ChurnConfig,
                   progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Run the sweep; returns a JSON-ready dict (docs/delivery.md, "Topology Zoo and churn")."""
    delivery = config.delivery()
    acc: dict[tuple[str, str, int, float], Accumulator] = {}
    total = config.runs * len(config.scenarios) * len(config.strategies)
    done = 0
    for run in range(config.runs):
        for name in config.scenarios:
            rng = random.Random(f"vt-churn:{config.seed}:{name}:{run}")
            sc = scenario(topology, name, rng)
            # VTs are installed on the 0 % workload whether or not 0 % is a reported level.
            workloads = churned_workloads(topology, sc, tuple({0.0, *config.churn}), rng,
                                          publisher_share=config.publisher_share,
                                          subscriber_share=config.subscriber_share)
            initial = workloads[0.0]
            messages = {c: workloads[c].messages(config.messages,
                                                 random.Random(f"vt-churn-msg:{config.seed}:{name}:{run}:{c}"))
                        for c in sorted(set(config.churn))}
            for strategy in config.strategies:
                budgets = config.rules if strategy != "hops" else (config.rules[0],)
                for rules in budgets:
                    scheme, installed = install(topology, strategy, rules, initial, delivery, seed=run)
                    targets = config.rules if strategy == "hops" else (rules,)
                    for level, msgs in messages.items():
                        rows = deliver(topology, scheme, msgs, delivery)
                        for r in targets:
                            a = acc.setdefault((name, strategy, r, level), Accumulator())
                            a.add_install(installed)
                            for values, exact in rows:
                                a.add(values, exact)
                done += 1
                if progress:
                    progress(done, total, f"run {run + 1}/{config.runs}, {name}, {strategy}")
    results = []
    for (name, strategy, rules, level), a in acc.items():
        results.append({"scenario": name, "strategy": strategy, "rules": rules, "churn": level, **a.summary()})
    results.sort(key=lambda r: (config.scenarios.index(r["scenario"]), config.strategies.index(r["strategy"]),
                                r["rules"], r["churn"]))
    return {
        "topology": {"name": topology.name, "switches": len(topology.switches()), "hosts": len(topology.hosts()),
                     "links": topology.graph.number_of_edges(), **topology_stats(topology)},
        "config": asdict(config),
        "results": results,
    }
