"""Baselines: exact ones deliver exactly; LIPSIN delivers a superset and counts false positives."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.delivery.cost import SwitchCost
from compiler.delivery.tree import check_tree, steiner_tree
from compiler.delivery.wire import attach_baseline
from compiler.network.topology import facebook_fabric, fat_tree, jellyfish, leaf_spine
from runtime.delivery_eval import BierStyle, Broadcast, ElmoStyle, Lipsin, OpenFlowMulticast, Unicast, simulate
from tests.compiler.delivery.helpers import PAYLOAD_FRAME, topology_and_receivers, walk

EXACT = {"unicast": Unicast, "openflow": OpenFlowMulticast, "bier": BierStyle}


def _run(scheme, topo, publisher, receivers):
    tree = steiner_tree(topo, topo.host_attachment(publisher)[0], receivers)
    pub = scheme.publish(publisher, receivers, PAYLOAD_FRAME, tree)
    try:
        return pub, walk(scheme, publisher, pub.frames)
    finally:
        scheme.retract(pub)


@pytest.mark.parametrize("name", EXACT)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=topology_and_receivers())
def test_exact_baselines_deliver_one_copy_to_each_receiver(name, case):
    topo, publisher, receivers = case
    scheme = EXACT[name](topo)
    pub, w = _run(scheme, topo, publisher, receivers)
    assert dict(w.deliveries) == {r: 1 for r in receivers}
    assert all(w.frames[r] == {pub.expected[r]} for r in receivers)
    assert w.back_out == 0 and w.revisits == 0 and not w.drops


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=topology_and_receivers(max_switches=16), seed=st.integers(0, 5), m=st.sampled_from([32, 64, 248]))
def test_lipsin_delivers_a_superset_and_counts_its_false_positives(case, seed, m):
    topo, publisher, receivers = case
    scheme = Lipsin(topo, m=m, seed=seed)
    pub, w = _run(scheme, topo, publisher, receivers)
    assert set(receivers) <= set(w.deliveries)
    assert all(w.deliveries[r] == 1 for r in receivers)
    assert all(frames == {PAYLOAD_FRAME} for frames in w.frames.values())
    assert w.back_out == 0
    metrics = simulate(scheme, publisher, receivers, PAYLOAD_FRAME,
                       steiner_tree(topo, topo.host_attachment(publisher)[0], receivers))
    # False positives may run in a circle; the copy that comes back is a counted loop, not a storm.
    assert metrics.loops == w.revisits
    extra_hosts = sum(n for h, n in w.deliveries.items() if h not in receivers)
    off_tree = sum(n for link, n in w.link_copies.items() if link not in pub.tree_links)
    assert metrics.false_positive_deliveries == extra_hosts
    assert metrics.false_positive_links == off_tree
    assert metrics.served == len(receivers) and metrics.duplicates == 0


def test_lipsin_without_a_loop_cache_is_bounded_by_the_ttl():
    topo = jellyfish(20, 4, seed=3)
    hosts = topo.hosts()
    scheme = Lipsin(topo, m=32, loop_cache=False)
    pub, w = _run(scheme, topo, hosts[0], hosts[1:15])
    assert set(hosts[1:15]) <= set(w.deliveries)
    assert w.drops["ttl"] > 0


def test_lipsin_picks_the_candidate_with_lowest_fill():
    topo = fat_tree(4)
    scheme = Lipsin(topo)
    tree = steiner_tree(topo, "e1_1", ["h16", "h9", "h3"])
    index, z = scheme.zfilter(tree)
    fills = []
    for i in range(scheme.d):
        zi = 0
        for link in tree.edges():
            zi |= scheme.lits[link][i]
        fills.append(bin(zi).count("1"))
        assert all(zi & scheme.lits[link][i] == scheme.lits[link][i] for link in tree.edges())
    assert bin(z).count("1") == min(fills) and fills.index(min(fills)) == index


def test_broadcast_reaches_every_host_once():
    topo = facebook_fabric(2, 2, 2, 2, 2)
    hosts = topo.hosts()
    scheme = Broadcast(topo)
    pub, w = _run(scheme, topo, hosts[0], hosts[1:3])
    assert dict(w.deliveries) == {h: 1 for h in hosts[1:]}
    m = simulate(scheme, hosts[0], hosts[1:3], PAYLOAD_FRAME)
    assert m.false_positive_deliveries == len(hosts) - 3 and m.served == 2


@pytest.mark.parametrize("topo", [fat_tree(4), fat_tree(6), leaf_spine(4, 3, 2), facebook_fabric(3, 2, 2, 2, 2)],
                         ids=["fat-tree-4", "fat-tree-6", "leaf-spine", "facebook"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_elmo_delivers_exactly_on_hierarchical_fabrics(topo, data):
    hosts = topo.hosts()
    publisher = data.draw(st.sampled_from(hosts))
    receivers = data.draw(st.lists(st.sampled_from([h for h in hosts if h != publisher]), min_size=1, unique=True))
    scheme = ElmoStyle(topo)
    tree, path = scheme.tree(topo.host_attachment(publisher)[0], receivers)
    check_tree(tree, topo)
    assert tree.receivers(topo) == set(receivers)
    pub, w = _run(scheme, topo, publisher, receivers)
    assert dict(w.deliveries) == {r: 1 for r in receivers}
    assert all(f == {PAYLOAD_FRAME} for f in w.frames.values())
    assert w.back_out == 0 and not w.drops


def test_elmo_refuses_flat_topologies():
    with pytest.raises(P4subError, match="hierarchical"):
        ElmoStyle(jellyfish(20, 4))


def test_bier_needs_one_frame_per_set():
    topo = leaf_spine(3, 2, 4)  # 12 hosts; 4-bit sets -> 3 sets
    scheme = BierStyle(topo, set_bits=8)
    hosts = topo.hosts()
    pub = scheme.publish(hosts[0], hosts[1:], PAYLOAD_FRAME)
    assert len(pub.frames) == 2  # hosts 2..12 -> ids 2..12 -> sets 0 (2..8) and 1 (9..12)
    w = walk(scheme, hosts[0], pub.frames)
    assert dict(w.deliveries) == {h: 1 for h in hosts[1:]}


@pytest.mark.parametrize(
    "scheme, frame, reason",
    [
        (lambda t: Lipsin(t), PAYLOAD_FRAME, "not-a-baseline-frame"),
        (lambda t: Lipsin(t), attach_baseline(PAYLOAD_FRAME[:14], bytes(5)), "truncated"),
        (lambda t: Lipsin(t), attach_baseline(PAYLOAD_FRAME, bytes([9, 3]) + bytes(31)), "bad-index"),
        (lambda t: BierStyle(t), attach_baseline(PAYLOAD_FRAME, bytes(33)), "empty-bitstring"),
        (lambda t: BierStyle(t), attach_baseline(PAYLOAD_FRAME, bytes([0]) + (1 << 200).to_bytes(32, "big")), "unknown-bit"),
        (lambda t: Unicast(t), b"\x02\x00\x00\x00\x09\x99" + PAYLOAD_FRAME[6:], "unknown-mac"),
        (lambda t: OpenFlowMulticast(t), PAYLOAD_FRAME, "no-flow"),
        (lambda t: ElmoStyle(t), attach_baseline(PAYLOAD_FRAME, bytes([0, 2, 3])), "truncated"),
    ],
)
def test_malformed_baseline_frames_are_dropped_and_counted(scheme, frame, reason):
    topo = fat_tree(4)
    cost = SwitchCost()
    assert scheme(topo).forward("e1_1", 3, frame, cost) == []
    assert cost.drops == {reason: 1}
