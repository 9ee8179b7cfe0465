"""The chapter-5 evaluation (dissertation §5.5, Figs. 5.11 to 5.13) on the packet-level simulator.

Per density and run: a Table 5.1 workload (publishers, subscriptions, frequencies; seeded from
seed, density and run) and ``messages`` notifications drawn from it. Per strategy and rules-per-
switch value: a fresh network, the strategy's VTs installed under that budget, every notification
encoded (Algorithm 5.1) and followed hop by hop (:func:`runtime.delivery_eval.simulator.simulate`).
A data point averages runs x messages notifications; the same workload and notifications serve
every strategy and every budget, so curves differ by strategy and budget only.

Metrics per notification: initial header bytes (ours: inner EtherType + count + 2 per label; the
dissertation's reading is open, see :data:`HEADER_READINGS`), labels by type, bytes and packets on
all links (network load; frames with Ethernet header, stack and payload), lookups and
recirculations, exactness. Per installation: VTs installed, entries, the fullest switch.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Callable

from compiler.base import P4subError
from compiler.delivery import ETHERTYPE_IPV4, ethernet_frame, host_mac
from compiler.delivery.vt import LABEL_BYTES, VirtualTrees, VtTable, Workload, table_5_1
from compiler.delivery.vt.strategies import install_strategy, make_strategy
from compiler.network import Topology
from runtime.delivery_eval.simulator import run_publication

#: Per-notification metrics, averaged per data point.
METRICS = ("header_bytes", "labels", "trees", "hops", "stops", "bytes", "packets", "lookups", "recirculations")
#: Per-installation metrics.
INSTALL_METRICS = ("vts", "entries", "max_entries")
#: How the dissertation may have counted "initial header size" (not stated): label bytes plus what.
HEADER_READINGS = {
    "size+labels": 2,       # its Size field (16 bit) and the labels
    "ethernet+size+labels": 16,  # plus the 14-byte Ethernet header its frame keeps
}
PUBLISHER_DST = b"\x01\x00\x5e\x00\x00\x02"


@dataclass(frozen=True)
class VtEvalConfig:
    """What to evaluate; see ``p4sub eval vt --help``."""

    densities: tuple[float, ...] = (0.3, 0.7)
    rules: tuple[int, ...] = (0, 5, 10, 15, 20, 30, 40, 50)
    strategies: tuple[str, ...] = ("hops", "broadcast", "topo", "tree", "path", "threshold:30", "threshold:70")
    runs: int = 5
    messages: int = 10
    seed: int = 1
    payload: int = 50
    publisher_share: float = 0.3
    mode: str = "single"
    prefilter: bool = True

    def __post_init__(self) -> None:
        if self.runs < 1 or self.messages < 1:
            raise P4subError("--runs and --messages must be at least 1")
        if not self.densities or any(not 0 < d <= 1 for d in self.densities):
            raise P4subError("densities must be in (0, 100] %")
        if not self.rules or any(r < 0 for r in self.rules):
            raise P4subError("rules per switch must be >= 0")
        if self.payload < 0:
            raise P4subError(f"--payload {self.payload}: payload bytes after the Ethernet header must be >= 0")
        for s in self.strategies:
            make_strategy(s)


@dataclass
class Accumulator:
    n: int = 0
    sums: dict = field(default_factory=dict)
    squares: dict = field(default_factory=dict)
    installs: int = 0
    install_sums: dict = field(default_factory=dict)
    exact: int = 0

    def add(self, values: dict, exact: bool) -> None:
        self.n += 1
        self.exact += exact
        for k, v in values.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
            self.squares[k] = self.squares.get(k, 0.0) + v * v

    def add_install(self, values: dict) -> None:
        self.installs += 1
        for k, v in values.items():
            self.install_sums[k] = self.install_sums.get(k, 0.0) + v

    def summary(self) -> dict:
        mean = {k: self.sums[k] / self.n for k in METRICS}
        std = {k: math.sqrt(max(0.0, self.squares[k] / self.n - mean[k] ** 2)) for k in METRICS}
        inst = {k: self.install_sums[k] / self.installs for k in INSTALL_METRICS}
        return {"mean": mean, "std": std, "install": inst, "notifications": self.n, "exact": self.exact}


def run_workload(topology: Topology, density: float, run: int, config: VtEvalConfig) -> tuple[Workload, list]:
    rng = random.Random(f"vt-eval:{config.seed}:{density:.6f}:{run}")
    w = table_5_1(topology, density, rng, publisher_share=config.publisher_share)
    return w, w.messages(config.messages, rng)


def install(topology: Topology, strategy_name: str, rules: int, workload: Workload, config: VtEvalConfig,
            seed: int) -> tuple[VirtualTrees, dict]:
    """One strategy's VTs under one budget: the scheme that encodes with them, and what was installed."""
    strategy = make_strategy(strategy_name)
    table = VtTable(topology, max_rules=rules)
    ctx = install_strategy(strategy, table, workload, seed=seed)
    scheme = VirtualTrees(table, mode=config.mode, prefilter=config.prefilter,
                          view=lambda p: strategy.view(ctx, p))
    return scheme, {"vts": len(table.trees), "entries": table.total_rules(), "max_entries": table.max_used()}


def deliver(topology: Topology, scheme: VirtualTrees, messages: list, config: VtEvalConfig) -> list[tuple[dict, bool]]:
    """Every notification encoded and followed hop by hop: its metrics and whether it was exact."""
    out = []
    for publisher, receivers in messages:
        frame = ethernet_frame(PUBLISHER_DST, host_mac(topology.node_id(publisher)), ETHERTYPE_IPV4,
                               bytes(config.payload))
        pub = scheme.publish(publisher, receivers, frame)
        m = run_publication(scheme, publisher, pub)
        info = pub.info
        out.append(({"header_bytes": m.header_bytes, "labels": info["labels"], "trees": info["trees"],
                     "hops": info["hops"], "stops": info["stops"], "bytes": m.bytes, "packets": m.packets,
                     "lookups": m.lookups, "recirculations": m.recirculations}, m.exact))
    return out


def measure(topology: Topology, strategy_name: str, rules: int, workload: Workload, messages: list,
            config: VtEvalConfig, seed: int) -> tuple[list[tuple[dict, bool]], dict]:
    """Install one strategy under one budget and deliver the notifications."""
    scheme, installed = install(topology, strategy_name, rules, workload, config, seed)
    return deliver(topology, scheme, messages, config), installed


def evaluate(topology: Topology, config: VtEvalConfig,
             progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Run the sweep; returns a JSON-ready dict (docs/delivery.md, "Virtual trees")."""
    acc: dict[tuple[str, float, int], Accumulator] = {}
    total = len(config.densities) * config.runs * len(config.strategies)
    done = 0
    for density in config.densities:
        for run in range(config.runs):
            workload, messages = run_workload(topology, density, run, config)
            for name in config.strategies:
                budgets = config.rules if name != "hops" else (config.rules[0],)
                for rules in budgets:
                    rows, install = measure(topology, name, rules, workload, messages, config, seed=run)
                    targets = config.rules if name == "hops" else (rules,)  # hops: the same at every budget
                    for r in targets:
                        a = acc.setdefault((name, density, r), Accumulator())
                        a.add_install(install)
                        for values, exact in rows:
                            a.add(values, exact)
                done += 1
                if progress:
                    progress(done, total, f"{round(density * 100)}% density, run {run + 1}/{config.runs}, {name}")
    results = []
    publishers = max(1, math.floor(config.publisher_share * len(topology.hosts()) + 0.5))
    for (name, density, rules), a in acc.items():
        s = a.summary()
        labels = s["mean"]["labels"]
        s["readings"] = {k: extra + LABEL_BYTES * labels for k, extra in HEADER_READINGS.items()}
        s["load_per_round_kb"] = s["mean"]["bytes"] * publishers / 1000
        results.append({"strategy": name, "density": density, "rules": rules, **s})
    results.sort(key=lambda r: (r["density"], config.strategies.index(r["strategy"]), r["rules"]))
    report = {
        "topology": {"name": topology.name, "switches": len(topology.switches()), "hosts": len(topology.hosts()),
                     "links": topology.graph.number_of_edges()},
        "config": asdict(config),
        "publishers_per_round": publishers,
        "results": results,
    }
    from runtime.delivery_eval.vt.checks import dissertation_checks

    report["checks"] = dissertation_checks(report)
    return report
