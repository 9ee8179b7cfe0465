"""PLEROMA in a fat tree against the rules themselves: no missed event, with or without a flow limit.

The oracle is :func:`compiler.oracle.filter_holds`, rule by rule on each event's field values; it
shares no code with the dz's, the flows, their merging or the ground truth the simulator uses.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.network import HOST_ID_BITS, fat_tree, parse_network_rules
from compiler.oracle import filter_holds
from compiler.pleroma import Samples, build, compile_tables, enforce, flow_count, walk
from compiler.rules import check_rules
from runtime.pleroma_sim import simulate, tree_behind_masks, wanted_matrix
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (6, {"match_kind": "range"}), "m.b": (6, {"match_kind": "range"}),
                  "m.c": (8, {"match_kind": "range"})})
TOPO = fat_tree(4)
HOSTS = TOPO.hosts()
OPS = ("==", "!=", "<", ">", ">=")


def _rule():
    cmp = st.builds(lambda f, op, c: f"m.{f} {op} {c}", st.sampled_from("abc"), st.sampled_from(OPS),
                    st.integers(1, 62))
    filt = st.lists(cmp, min_size=1, max_size=3).map(" and ".join)
    return st.builds(lambda f, hs: f"{f}: fwd({', '.join(HOSTS[h] for h in sorted(set(hs)))});", filt,
                     st.lists(st.integers(0, len(HOSTS) - 1), min_size=1, max_size=3))


def _delivered(net, tables, dz, pubs, pub_names):
    got = np.zeros((len(dz), len(HOSTS)), dtype=bool)
    col = {h: i for i, h in enumerate(HOSTS)}
    for s, _, q, rows in walk(TOPO, compile_tables(tables), dz, net.resolution, pubs, pub_names):
        peer, _ = TOPO.peer(s, q)
        if peer in col:
            got[rows, col[peer]] = True
    return got


@settings(max_examples=40, deadline=None)
@given(st.lists(_rule(), min_size=1, max_size=8), st.integers(0, 2**32 - 1), st.sampled_from(["value", "rank"]),
       st.sampled_from(["single", "publisher"]), st.sampled_from([None, "baseline", "ms", "history", "traffic"]),
       st.integers(2, 24), st.booleans(), st.booleans())
def test_every_subscriber_gets_every_event_it_wants(lines, seed, indexing, tree, merge, resolution, exact, on_add):
    """No false negative in any case; with rank indexing at full resolution, no dz cap and no flow
    limit (an exact decomposition), exactly the wanted hosts get each event."""
    if exact:
        indexing, merge, resolution = "rank", None, 24
    typed = check_rules(parse_network_rules("\n".join(lines), TOPO), SPEC, port_bits=HOST_ID_BITS)
    rng = np.random.default_rng(seed)
    n = 120
    cols = {f: rng.integers(0, 64, n).astype(np.uint64) for f in ("m.a", "m.b", "m.c")}
    pub_names = [HOSTS[0], HOSTS[5], HOSTS[14]]
    pubs = rng.integers(0, len(pub_names), n)
    full = merge is None and indexing == "rank" and resolution == 24
    net = build(TOPO, typed, pub_names, 64 if full else resolution, indexing, tree, max_dz=None if full else 8)
    dz = net.space.event_dz(cols, net.resolution)
    tables = net.tables
    if merge is not None:
        limit = max(2, max(flow_count(tables).values()) // 2)
        tables, stats = enforce(TOPO, tables, limit, merge, net.trees, net.resolution,
                                Samples(dz[:40], pubs[:40], pub_names), seed=seed,
                                requests=net.subscriptions if on_add else None)
        assert all(c <= limit for c in flow_count(tables).values()) or not stats.fits
    got = _delivered(net, tables, dz, pubs, pub_names)
    ids = {TOPO.node_id(h): h for h in HOSTS}
    for i in range(n):
        values = {f: int(cols[f][i]) for f in typed.fields}
        want = {ids[p] for r in typed.rules if filter_holds(r.filter, typed.fields, values) for p in r.ports}
        want.discard(pub_names[pubs[i]])
        delivered = {HOSTS[j] for j in np.flatnonzero(got[i])}
        assert want <= delivered, (i, values, want - delivered)
        if full:
            assert net.exact and delivered == want, (i, values, delivered ^ want)
    wanted = wanted_matrix(typed, TOPO, cols, n)
    result = simulate(TOPO, tables, dz, net.resolution, pubs, pub_names, wanted, tree_behind_masks(TOPO, net.trees))
    assert result.summary()["false_negatives"] == 0
    if full:
        assert result.summary()["false_positives"] == 0 and result.summary()["extra_link_copies"] == 0
