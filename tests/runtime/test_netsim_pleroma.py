"""netsim running PLEROMA networks (:mod:`runtime.netsim_pleroma`).

Two independent checks. Against the rules themselves (:func:`compiler.oracle.filter_holds`, rule by
rule on each event's values, no code shared with the dz's, the flows, their merging or netsim's
ground truth): every host whose subscription matches gets the event, and with rank indexing at full
resolution, no dz cap and no flow limit exactly those hosts. Against the separate PLEROMA simulator
(:mod:`runtime.pleroma_sim`, its own walk, ground truth call and link counting): the same
deliveries, false positives and negatives, duplicates per host, and the same copies and extra
copies per link, so that the eval's switch from one judge to the other changed no figure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.base import P4subError
from compiler.network import HOST_ID_BITS, parse_network_rules
from compiler.oracle import filter_holds
from compiler.pleroma import build
from compiler.rules import check_rules
from runtime.netsim import Batch, simulate
from runtime.netsim_pleroma import pleroma_network
from runtime.pleroma_sim import simulate as pleroma_simulate, tree_behind_masks, wanted_matrix
from tests.compiler.pleroma.cases import EVENTS, FIELDS, HOSTS, PUBS, SCENARIO_ARGS, SPEC, TOPO, scenario, subscription


def _batch(cols: dict[str, np.ndarray], rows: np.ndarray) -> Batch:
    n = len(rows)
    return Batch({f: v[rows] for f, v in cols.items()}, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                 np.full(n, 80, dtype=np.int64))


@settings(max_examples=40, deadline=None)
@given(st.lists(subscription(), min_size=1, max_size=8), *SCENARIO_ARGS)
def test_netsim_delivers_what_the_rules_want_and_agrees_with_pleroma_sim(lines, seed, indexing, tree, merge,
                                                                         resolution, exact, on_add):
    sc = scenario(lines, seed, indexing, tree, merge, resolution, exact, on_add)
    typed, net, tables, cols, dz, pubs, full = sc.typed, sc.net, sc.tables, sc.cols, sc.dz, sc.pubs, sc.full
    pub_names, n = PUBS, EVENTS
    network = pleroma_network(TOPO, typed, SPEC, net.space, net.resolution, tables, net.trees, net.tree)
    ids = {TOPO.node_id(h): h for h in HOSTS}
    per_host = {h: np.zeros(4, dtype=np.int64) for h in HOSTS}  # delivered, wanted, FP, FN (others' events)
    duplicates = {h: 0 for h in HOSTS}
    links: dict[tuple[str, int], list[int]] = {}
    for k, p in enumerate(pub_names):
        rows = np.flatnonzero(pubs == k)
        if not len(rows):
            continue
        sim = simulate(network, [_batch(cols, rows)], p, "union", record=True)
        assert sim.lost_copies == 0
        got_by_host = {h: set((np.concatenate(sim.deliveries[h]) if sim.deliveries[h] else []).tolist())
                       for h in HOSTS}
        for j, i in enumerate(rows):
            values = {f: int(cols[f][i]) for f in typed.fields}
            want = {ids[q] for r in typed.rules if filter_holds(r.filter, typed.fields, values) for q in r.ports}
            want.discard(p)
            delivered = {h for h in HOSTS if j in got_by_host[h]}
            assert p not in delivered  # never back to the publisher
            assert want <= delivered, (i, values, want - delivered)
            if full:
                assert net.exact and delivered == want, (i, values, delivered ^ want)
        for h, s in sim.hosts.items():
            if h != p:
                per_host[h] += (s.delivered, s.wanted, s.false_positives, s.false_negatives)
                duplicates[h] += s.duplicates
            else:
                assert s.delivered == 0 and s.false_positives == 0
        for link, ls in sim.links.items():
            st_ = links.setdefault(link, [0, 0])
            st_[0] += ls.packets
            st_[1] += ls.extra_packets
    ref = pleroma_simulate(TOPO, tables, dz, net.resolution, pubs, pub_names, wanted_matrix(typed, TOPO, cols, n),
                           tree_behind_masks(TOPO, net.trees))
    for j, h in enumerate(ref.hosts):
        assert per_host[h].tolist() == [ref.delivered[j], ref.wanted[j], ref.false_positives[j],
                                        ref.false_negatives[j]], h
        assert duplicates[h] == ref.duplicates[j]
    assert links == ref.links
    assert sum(int(v[3]) for v in per_host.values()) == 0


def _small():
    typed = check_rules(parse_network_rules(f"m.a > 10: fwd({HOSTS[3]});\nm.b == 5: fwd({HOSTS[9]});", TOPO), SPEC,
                        port_bits=HOST_ID_BITS)
    return typed


def test_a_packet_of_several_events_has_no_single_dz_in_union_mode():
    typed = _small()
    net = build(TOPO, typed, [HOSTS[0]], 16, "rank")
    network = pleroma_network(TOPO, typed, SPEC, net.space, net.resolution, net.tables, net.trees, net.tree)
    cols = {"m.a": np.array([11, 12], dtype=np.uint64), "m.b": np.array([5, 5], dtype=np.uint64),
            "m.c": np.array([0, 0], dtype=np.uint64)}
    batch = Batch(cols, np.array([0, 0]), np.zeros(2, dtype=np.int64), np.array([80, 0]))
    with pytest.raises(P4subError, match="one dz"):
        simulate(network, [batch], HOSTS[0], "union")
    sim = simulate(network, [batch], HOSTS[0], "prune")  # each message on its own: both get there
    assert sim.hosts[HOSTS[3]].delivered == 2 and sim.hosts[HOSTS[9]].delivered == 2


def test_a_publisher_without_a_tree_is_refused():
    typed = _small()
    net = build(TOPO, typed, [HOSTS[0]], 16, "rank", tree="publisher")
    network = pleroma_network(TOPO, typed, SPEC, net.space, net.resolution, net.tables, net.trees, net.tree)
    cols = {f: np.array([11], dtype=np.uint64) for f in FIELDS}
    with pytest.raises(P4subError, match="not one of this PLEROMA network's publishers"):
        simulate(network, [_batch(cols, np.arange(1))], HOSTS[7], "union")
