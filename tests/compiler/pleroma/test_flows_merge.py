"""Flows as Alg. 1 leaves them, and Balogh's merges (S2 §5.1-5.3 worked examples)."""

from __future__ import annotations

import random

import pytest

from compiler.base import P4subError
from compiler.network import fat_tree
from compiler.pleroma import canonical, enforce, flow_count, flow_tables, lookup, merge_at, merge_points, ms_cost, trees
from compiler.pleroma.merge import leaf_points


def test_finer_flow_takes_the_coarser_ports_and_covered_requests_vanish():
    # S1 Fig. 3 (R_3): dz 1 -> R_2 and dz 100 -> R_4 give 100 -> {R_2, R_4} (case 4).
    assert canonical({"1": {2}, "100": {4}}) == {"1": frozenset({2}), "100": frozenset({2, 4})}
    # Case 2/3: a request a coarser flow already serves on the same ports adds nothing.
    assert canonical({"1": {2}, "10": {2}, "0": {3}}) == {"0": frozenset({3}), "1": frozenset({2})}
    assert lookup({"1": frozenset({2}), "100": frozenset({2, 4})}, "1001") == {2, 4}
    assert lookup({"1": frozenset({2})}, "0111") == frozenset()


def test_balogh_merge_examples():
    # S2 Fig. 5.1: (1->0000->2,3) + (1->0011->3) = (1->00->2,3); Fig. 5.4: merging at 000.
    t = {"0000": frozenset({2, 3}), "0011": frozenset({3})}
    assert merge_points(t) == {"00"}
    assert merge_at(t, "00") == {"00": frozenset({2, 3})}
    t2 = {"00001011": frozenset({2}), "000111": frozenset({4})}
    assert merge_at(t2, "000") == {"000": frozenset({2, 4})}
    # Minimum space (Alg. 2): port 2 newly gets 00 - 0000 = 3/16 of Ω, port 3 gets 00 - 0000 - 0011 = 2/16.
    assert ms_cost(t, "00") == pytest.approx(5 / 16)
    # A region the flow above already sent to a port costs nothing for that port.
    assert ms_cost({"0": frozenset({3}), **t}, "00") == pytest.approx(3 / 16)


def test_leaf_points_have_no_merge_point_below():
    t = {k: frozenset({1}) for k in ("0000", "0001", "0100", "1")}
    assert sorted(merge_points(t)) == ["", "0", "000"]
    assert leaf_points(t) == ["000"]


@pytest.mark.parametrize("method", ["baseline", "ms", "traffic", "history"])
def test_every_switch_keeps_the_limit(method):
    import numpy as np

    from compiler.pleroma import Samples

    topo = fat_tree(4)
    hosts = topo.hosts()
    rng = random.Random(3)
    host_dzs = {h: sorted({"".join(rng.choice("01") for _ in range(rng.randint(3, 8))) for _ in range(6)})
                for h in hosts}
    pubs = hosts[:3]
    t = trees(topo, pubs, "single")
    tables = flow_tables(topo, host_dzs, t)
    before = flow_count(tables)
    limit = max(before.values()) // 3
    gen = np.random.default_rng(1)
    samples = Samples(gen.integers(0, 1 << 8, 300, dtype=np.uint64), gen.integers(0, 3, 300), pubs)
    merged, stats = enforce(topo, tables, limit, method, t, 8, samples)
    after = flow_count(merged)
    assert max(after.values()) <= limit and stats.fits
    assert stats.flows_after == sum(after.values()) < stats.flows_before == sum(before.values())
    for s, by_in in merged.items():  # every dz is still sent at least where it was (no false negatives)
        for i, table in by_in.items():
            for dz, ports in tables[s][i].items():
                assert ports <= lookup(table, dz), (s, i, dz)


def test_unknown_method_is_a_user_error():
    topo = fat_tree(4)
    with pytest.raises(P4subError, match="unknown merge method"):
        enforce(topo, {}, 5, "lru", {}, 8)


def test_traffic_cost_is_s2s_worked_example():
    # S2 Fig. 5.13: merging (1->0000->2,3) and (1->0011->2) into (1->00->2,3). Path 1: 1000 events
    # advertised over {00}, only {0000, 0011} get through the upstream switches: port 3 wrongly covers
    # 0011 (25 % of {00}), one link behind it: 250. Path 2: 200 events over {0}, {00} gets through:
    # port 2 wrongly covers {0001, 0010} (25 %) with 3 links behind, 150; port 3 {0001, 001} (37.5 %), 75.
    from compiler.pleroma.merge import TrafficPath, intersect_spaces, subtract, traffic_cost

    t = {"0000": frozenset({2, 3}), "0011": frozenset({2})}
    paths = [TrafficPath(1000, ["0000", "0011"], ["00"]), TrafficPath(200, ["00"], ["0"])]
    assert traffic_cost(t, "00", sorted(t), paths, {2: 3, 3: 1}) == pytest.approx(250 + 150 + 75)
    assert subtract("00", ["0000"]) == ["0001", "001"]
    assert intersect_spaces(["0000", "0011"], ["0001", "001"]) == ["0011"]
    # S1's difference: 0 - 000 = {001, 01} (S1 lists it expanded to length 3: 001, 010, 011).
    assert subtract("0", ["000"]) == ["001", "01"]
