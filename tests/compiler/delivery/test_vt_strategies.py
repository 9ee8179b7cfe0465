"""VT installation strategies: what they install, within budget, delivering exactly; and migration."""

from __future__ import annotations

import random

import pytest

from compiler.base.errors import P4subError
from compiler.delivery.vt import VirtualTrees, VtTable
from compiler.delivery.vt.migration import Step, Views, migrate
from compiler.delivery.vt.steiner import VtGraph
from compiler.delivery.vt.strategies import install_strategy, make_strategy
from compiler.delivery.vt.strategies.base import down_tree, prune_tree
from compiler.delivery.vt.workload import table_5_1
from compiler.network.topology import facebook_fabric, fat_tree, jellyfish
from runtime.delivery_eval.simulator import simulate
from tests.compiler.delivery.helpers import PAYLOAD_FRAME

FABRIC_STRATEGIES = ["hops", "broadcast", "topo", "tree", "tree-shared", "path", "threshold:30", "threshold:70:hops"]
ANY_STRATEGIES = ["broadcast", "random", "random-variant", "cycles", "partitions", "clusters", "relation",
                  "freq-relation", "hybrid"]


def run(topo, name: str, rules: int | None, density: float = 0.3, messages: int = 6, seed: int = 1):
    w = table_5_1(topo, density, random.Random(seed))
    strategy = make_strategy(name)
    table = VtTable(topo, max_rules=rules)
    ctx = install_strategy(strategy, table, w, seed=seed)
    scheme = VirtualTrees(table, view=lambda p: strategy.view(ctx, p))
    out = [simulate(scheme, p, r, PAYLOAD_FRAME) for p, r in w.messages(messages, random.Random(seed + 1))]
    return table, ctx, out


@pytest.mark.parametrize("name", FABRIC_STRATEGIES)
@pytest.mark.parametrize("rules", [0, 3, 12])
def test_fabric_strategies_stay_within_budget_and_deliver_exactly(name, rules):
    table, _, metrics = run(facebook_fabric(), name, rules)
    assert table.max_used() <= rules
    assert all(m.exact and not m.dropped for m in metrics)
    if rules == 0 or name == "hops":
        assert not table.trees


@pytest.mark.parametrize("name", ANY_STRATEGIES)
def test_arbitrary_topology_strategies_deliver_exactly(name):
    topo = jellyfish(24, 3, 1, seed=3)
    table, ctx, metrics = run(topo, name, 6, density=0.5)
    assert table.trees, "every strategy installs something on a meshed network"
    assert table.max_used() <= 6
    assert all(m.exact and not m.dropped for m in metrics)
    assert all(len(vt.edges) >= 2 for vt in table.trees.values())


def test_vts_shorten_headers_on_the_fabric():
    """Publisher trees pruned with stops beat pure hop labels clearly at 70 % density."""
    topo = facebook_fabric()
    hops = sum(m.header_bytes for m in run(topo, "hops", 20, 0.7)[2])
    tree = sum(m.header_bytes for m in run(topo, "threshold:30", 20, 0.7)[2])
    assert tree < 0.6 * hops


def test_broadcast_trees_follow_down_links_and_topo_prefers_power_of_two_blocks():
    topo = facebook_fabric()
    g = VtGraph.of(topo)
    t = down_tree(topo, g, "s1_1")
    # spine -> 8 fabric switches, -> 32 ToRs, -> 64 hosts
    assert len(t) == 8 + 32 + 64
    table = VtTable(topo, max_rules=50)
    ctx = install_strategy(make_strategy("topo"), table)
    first = [vt.origin for vt in ctx.installed[:3]]
    assert first[0].startswith("topo t1_1") and first[0].endswith("[5, 6]")  # a ToR's two hosts
    spine = [vt for vt in ctx.installed if vt.origin.startswith("topo s1_1")]
    assert [len(vt.edges) for vt in spine[:7]] == [2, 2, 2, 2, 4, 4, 8]


def test_algorithm_5_2_prunes_leaves_outside_the_members():
    topo = facebook_fabric()
    g = VtGraph.of(topo)
    pruned = prune_tree(g, down_tree(topo, g, "s1_1"), ["h1", "h64"])
    ids = g.edge_ids
    names = {tuple(sorted(ids.edge(e))) for e in pruned}
    assert names == {tuple(sorted(x)) for x in [("h1", "t1_1"), ("t1_1", "f1_1"), ("f1_1", "s1_1"),
                                                ("s1_1", "f8_1"), ("f8_1", "t8_4"), ("t8_4", "h64")]}


def test_unknown_strategy_is_an_error():
    for bad in ["nope", "threshold", "threshold:200", "threshold:x", "topo:1"]:
        with pytest.raises(P4subError):
            make_strategy(bad)
    table = VtTable(facebook_fabric(), max_rules=4)
    with pytest.raises(P4subError, match="workload"):
        install_strategy(make_strategy("tree"), table, None)


def test_migration_installs_new_informs_then_deletes_old_and_never_misroutes():
    """freq-relation trees trimmed after the frequencies change: each step keeps every publisher's
    encoding exact, with one spare entry per switch, and ids are never reused."""
    topo = fat_tree(4)
    w = table_5_1(topo, 0.5, random.Random(4))
    table = VtTable(topo)
    ctx = install_strategy(make_strategy("relation"), table, w)
    table.max_rules = table.max_used() + 1
    views = Views()
    views.inform(w.publishers, add=table.trees)
    msgs = w.messages(4, random.Random(5))

    def check(phase: str) -> None:
        for p, receivers in msgs:
            scheme = VirtualTrees(table, view=lambda pub: views.of(table, pub))
            m = simulate(scheme, p, receivers, PAYLOAD_FRAME)
            assert m.exact, phase

    old_ids = set(table.trees)
    trimmed = {vt.origin: vt.edges for vt in install_strategy(make_strategy("freq-relation:50"), VtTable(topo), w).installed}
    steps = [Step(vt.vt_id, trimmed.get(vt.origin), "trimmed") for vt in ctx.installed]  # None: retired
    assert any(s.new is None for s in steps) or any(s.new != vt.edges for s, vt in zip(steps, ctx.installed))
    new = migrate(table, views, steps, w.publishers, check=check)
    assert {vt.vt_id for vt in new}.isdisjoint(old_ids)
    assert set(table.trees) == {vt.vt_id for vt in new}
    assert all(views.known[p] == set(table.trees) for p in w.publishers)


def test_a_stale_header_after_migration_reaches_no_wrong_host():
    """A header naming a deleted VT (ids are never reused) loses receivers but reaches nobody else."""
    topo = fat_tree(4)
    table = VtTable(topo)
    ctx = install_strategy(make_strategy("broadcast"), table)
    scheme = VirtualTrees(table)
    receivers = ["h3", "h9", "h16"]
    pub = scheme.publish("h1", receivers, PAYLOAD_FRAME)
    assert pub.info["trees"] == 1
    views = Views()
    migrate(table, views, [Step(ctx.installed[0].vt_id, ctx.installed[0].edges, "again")], ["h1"])
    from runtime.delivery_eval.simulator import run_publication
    m = run_publication(scheme, "h1", pub)
    assert m.served < len(receivers) and not m.false_positive_deliveries and not m.loops and not m.duplicates


def test_installs_do_not_depend_on_string_hashing():
    """Set iteration follows string hashes, which change between interpreter runs; CNM communities
    come as sets: the partitions / clusters / hybrid installs must not change with PYTHONHASHSEED."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import random\n"
        "from compiler.network.topology import jellyfish\n"
        "from compiler.delivery.vt import VtTable\n"
        "from compiler.delivery.vt.strategies import make_strategy, install_strategy\n"
        "from compiler.delivery.vt.workload import table_5_1\n"
        "topo = jellyfish(40, 3, 1, seed=1)\n"
        "w = table_5_1(topo, 0.3, random.Random(1))\n"
        "for name in ('partitions', 'clusters', 'hybrid', 'cycles'):\n"
        "    t = VtTable(topo, max_rules=10)\n"
        "    install_strategy(make_strategy(name), t, w)\n"
        "    print(name, sorted((v.vt_id, sorted(v.edges), v.origin) for v in t.trees.values()))\n"
    )
    root = Path(__file__).resolve().parents[3]
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1
