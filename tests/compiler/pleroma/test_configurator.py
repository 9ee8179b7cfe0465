"""S1 Alg. 1 request by request reaches the fixed point flows.py builds at once, in any order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.network import fat_tree
from compiler.pleroma import flow_count, flow_tables, lookup, trees
from compiler.pleroma.configurator import configure, install

TOPO = fat_tree(4)
HOSTS = TOPO.hosts()
DZ = st.text("01", min_size=0, max_size=5)


def test_the_five_cases_of_s1_figs_3_and_4():
    table = {"1": frozenset({2}), "100": frozenset({2, 4})}
    assert not install(table, "10", 2)  # case 2: the coarser flow 1 already sends 10 to port 2
    assert install(table, "10", 3)  # cases 4 and 5: 10 -> {2, 3}, and 100 gains port 3
    assert table == {"1": frozenset({2}), "10": frozenset({2, 3}), "100": frozenset({2, 3, 4})}
    assert install(table, "1", 3)  # case 3: 10 now sends what 1 sends: dropped
    assert table == {"1": frozenset({2, 3}), "100": frozenset({2, 3, 4})}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(HOSTS), st.lists(DZ, min_size=1, max_size=3)), min_size=1, max_size=10),
       st.randoms(use_true_random=False), st.sampled_from(["single", "publisher"]))
def test_request_by_request_equals_the_fixed_point_in_any_order(requests, rnd, kind):
    pubs = [HOSTS[0], HOSTS[9]]
    t = trees(TOPO, pubs, kind)
    shuffled = list(requests)
    rnd.shuffle(shuffled)
    got, merges = configure(TOPO, shuffled, t)
    host_dzs: dict[str, set[str]] = {}
    for host, dzs in requests:
        host_dzs.setdefault(host, set()).update(dzs)
    assert merges == 0
    assert {s: {i: tb for i, tb in by.items() if tb} for s, by in got.items()} == flow_tables(TOPO, host_dzs, t)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(HOSTS), st.lists(DZ, min_size=1, max_size=3)), min_size=1, max_size=12),
       st.sampled_from(["baseline", "ms"]), st.integers(1, 6))
def test_local_enforcers_on_every_add_keep_the_limit_and_every_request(requests, method, limit):
    pubs = [HOSTS[0], HOSTS[9]]
    t = trees(TOPO, pubs, "single")
    host_dzs: dict[str, set[str]] = {}
    for host, dzs in requests:
        host_dzs.setdefault(host, set()).update(dzs)
    full = flow_tables(TOPO, host_dzs, t)
    got, _ = configure(TOPO, requests, t, limit, method)
    for s, by in got.items():
        ingress_ports = len([i for i in by if by[i]])
        assert flow_count({s: by})[s] <= max(limit, ingress_ports)
        for i, table in full[s].items():
            for dz, ports in table.items():
                assert ports <= lookup(got[s][i], dz)  # merged flows send at least what was asked
