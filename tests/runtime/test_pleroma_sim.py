"""PLEROMA in a fat tree against the rules themselves: no missed event, with or without a flow limit.

The oracle is :func:`compiler.oracle.filter_holds`, rule by rule on each event's field values; it
shares no code with the dz's, the flows, their merging or the ground truth the simulator uses.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.oracle import filter_holds
from compiler.pleroma import compile_tables, flow_count, walk
from runtime.pleroma_sim import simulate, tree_behind_masks, wanted_matrix
from tests.compiler.pleroma.cases import EVENTS, HOSTS, PUBS, SCENARIO_ARGS, TOPO, scenario, subscription


def _delivered(net, tables, dz, pubs):
    got = np.zeros((len(dz), len(HOSTS)), dtype=bool)
    col = {h: i for i, h in enumerate(HOSTS)}
    for s, _, q, rows in walk(TOPO, compile_tables(tables), dz, net.resolution, pubs, PUBS):
        peer, _ = TOPO.peer(s, q)
        if peer in col:
            got[rows, col[peer]] = True
    return got


@settings(max_examples=40, deadline=None)
@given(st.lists(subscription(), min_size=1, max_size=8), *SCENARIO_ARGS)
def test_every_subscriber_gets_every_event_it_wants(lines, seed, indexing, tree, merge, resolution, exact, on_add):
    """No false negative in any case; with rank indexing at full resolution, no dz cap and no flow
    limit (an exact decomposition), exactly the wanted hosts get each event."""
    sc = scenario(lines, seed, indexing, tree, merge, resolution, exact, on_add)
    typed, net, tables, cols, dz, pubs, full = sc.typed, sc.net, sc.tables, sc.cols, sc.dz, sc.pubs, sc.full
    if sc.limit is not None:
        assert all(c <= sc.limit for c in flow_count(tables).values()) or not sc.fits
    got = _delivered(net, tables, dz, pubs)
    ids = {TOPO.node_id(h): h for h in HOSTS}
    for i in range(EVENTS):
        values = {f: int(cols[f][i]) for f in typed.fields}
        want = {ids[p] for r in typed.rules if filter_holds(r.filter, typed.fields, values) for p in r.ports}
        want.discard(PUBS[pubs[i]])
        delivered = {HOSTS[j] for j in np.flatnonzero(got[i])}
        assert want <= delivered, (i, values, want - delivered)
        if full:
            assert net.exact and delivered == want, (i, values, delivered ^ want)
    wanted = wanted_matrix(typed, TOPO, cols, EVENTS)
    result = simulate(TOPO, tables, dz, net.resolution, pubs, PUBS, wanted, tree_behind_masks(TOPO, net.trees))
    assert result.summary()["false_negatives"] == 0
    if full:
        assert result.summary()["false_positives"] == 0 and result.summary()["extra_link_copies"] == 0
