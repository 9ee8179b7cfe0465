"""Header-stack encodings: exact delivery, decode(encode(tree)) == tree, byte layouts, bad stacks."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.delivery import (
    DISSERTATION_WIDTHS,
    Mixed,
    StoredTreeHybrid,
    SwitchBitmask,
    SwitchMcGroup,
    SwitchPort,
    Widths,
    encode,
    table_entries,
)
from compiler.delivery.cost import SwitchCost
from compiler.delivery.mixed import TAG_BITMASK, TAG_GROUP, TAG_PORT
from compiler.delivery.tree import DeliveryTree, prune, steiner_tree
from compiler.delivery.wire import ETHERTYPE_STACK, attach_stack
from compiler.network.topology import fat_tree, from_switch_graph, jellyfish, leaf_spine

from .helpers import PAYLOAD_FRAME, topologies, topology_and_receivers, walk

ENCODERS = {
    "port": lambda t: SwitchPort(t),
    "bitmask": lambda t: SwitchBitmask(t),
    "mcgroup": lambda t: SwitchMcGroup(t),
    "mcgroup-split2": lambda t: SwitchMcGroup(t, split=2),
    "mcgroup-split3": lambda t: SwitchMcGroup(t, split=3),
    "mixed": lambda t: Mixed(t),
    "mixed-split2": lambda t: Mixed(t, split=2),
    "hybrid": lambda t: StoredTreeHybrid(t),
}


@pytest.mark.parametrize("name", ENCODERS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=topology_and_receivers(), method=st.sampled_from(["sph", "spt"]), seed=st.integers(0, 3))
def test_exact_encodings_deliver_one_copy_to_each_receiver_and_nothing_else(name, case, method, seed):
    topo, publisher, receivers = case
    enc = ENCODERS[name](topo)
    tree = steiner_tree(topo, topo.host_attachment(publisher)[0], receivers, method=method, seed=seed)
    pub = enc.publish(publisher, receivers, PAYLOAD_FRAME, tree)
    try:
        w = walk(enc, publisher, pub.frames)
    finally:
        enc.retract(pub)
    assert dict(w.deliveries) == {r: 1 for r in receivers}
    assert all(frames == {PAYLOAD_FRAME} for frames in w.frames.values())
    assert w.back_out == 0 and w.revisits == 0 and not w.drops
    assert max(w.link_copies.values(), default=1) == 1


@st.composite
def random_trees(draw):
    """A tree the test builds itself: random spanning tree of the switches, random host leaves."""
    topo = draw(topologies())
    switches = topo.switches()
    order = draw(st.permutations(switches))
    root = order[0]
    parent_port: dict[str, list[int]] = {}
    reached = {root}
    for s in order[1:]:
        links = [(u, topo.port(u, s)) for _, u in topo.neighbours(s) if u in reached]
        if not links:
            continue
        u, p = draw(st.sampled_from(links))
        parent_port.setdefault(u, []).append(p)
        reached.add(s)
    for s in reached:
        for p in topo.host_ports(s):
            if draw(st.booleans()):
                parent_port.setdefault(s, []).append(p)
    tree = DeliveryTree.from_ports(root, parent_port)
    receivers = tree.receivers(topo)
    if not receivers:
        s, p = topo.host_attachment(topo.hosts()[0])
        return topo, steiner_tree(topo, root, [topo.hosts()[0]])
    return topo, prune(tree, topo, receivers)


@pytest.mark.parametrize("name", [n for n in ENCODERS if n != "hybrid"])
@settings(max_examples=40, deadline=None)
@given(case=random_trees())
def test_decode_of_encode_is_the_tree(name, case):
    topo, tree = case
    enc = ENCODERS[name](topo)
    assert enc.decode(enc.encode_tree(tree)) == tree


@settings(max_examples=30, deadline=None)
@given(case=random_trees(), share=st.floats(0, 1), seed=st.integers(0, 9))
def test_hybrid_decode_of_encode_is_the_tree(case, share, seed):
    topo, tree = case
    enc = StoredTreeHybrid(topo)
    receivers = sorted(tree.receivers(topo))
    stable = random.Random(seed).sample(receivers, round(share * len(receivers)))
    stored = prune(tree, topo, stable)
    if stored.branches:
        enc.install(7, stored)
    stack = enc.encode_tree(tree)
    assert enc.decode(stack) == tree
    labels = int.from_bytes(stack[:2], "big")
    extra_switches = sum(1 for s, ps in tree.branches if set(ps) - set(stored.ports(s)))
    assert labels == extra_switches + (1 if stored.branches else 0)


def test_switch_port_layout_is_preorder_with_subtrees_after_their_port():
    t = leaf_spine(2, 2, 2)  # l1 ports: 1->s1, 2->s2, 3->h1, 4->h2 ; s1 ports: 1->l1, 2->l2
    tree = steiner_tree(t, "l1", ["h2", "h3", "h4"])
    # l1 -> s1 (port 1) -> l2 (port 2) -> h3 (3), h4 (4); l1 -> h2 (port 4). Ids: l1=1 l2=2 s1=3.
    assert tree == DeliveryTree.from_ports("l1", {"l1": [1, 4], "s1": [2], "l2": [3, 4]})
    stack = SwitchPort(t).encode_tree(tree)
    assert stack == bytes([0, 5, 1, 1, 3, 2, 2, 3, 2, 4, 1, 4])
    assert SwitchBitmask(t).encode_tree(tree) == bytes([0, 3, 1, 0b1001, 3, 0b10, 2, 0b1100])


def test_attached_frame_layout_and_strip():
    t = leaf_spine(2, 2, 2)
    stack = SwitchPort(t).encode(("l1"), ["h3"])
    frame = attach_stack(PAYLOAD_FRAME, stack)
    assert frame[12:14] == ETHERTYPE_STACK.to_bytes(2, "big")
    assert frame[14:16] == PAYLOAD_FRAME[12:14]
    assert frame[16:] == stack + PAYLOAD_FRAME[14:]
    # the last hop (l2 -> h3) gives back the original frame
    out = SwitchPort(t).forward("l2", 2, attach_stack(PAYLOAD_FRAME, bytes([0, 1, 2, 3])))
    assert out == [(3, PAYLOAD_FRAME)]


def test_predictive_pruning_gives_each_clone_only_its_subtree():
    t = leaf_spine(2, 2, 2)
    enc = SwitchPort(t)
    frame = attach_stack(PAYLOAD_FRAME, bytes([0, 5, 1, 1, 3, 2, 2, 3, 2, 4, 1, 4]))
    out = enc.forward("l1", 3, frame)
    assert out == [(1, attach_stack(PAYLOAD_FRAME, bytes([0, 3, 3, 2, 2, 3, 2, 4]))), (4, PAYLOAD_FRAME)]


def test_reactive_pruning_keeps_later_subtrees():
    t = leaf_spine(2, 2, 2)
    enc = SwitchBitmask(t)
    # l1 -> s1 and h1; s1 -> l2; l2 -> h3: the clone to h1's side... l1's copy to s1 keeps s1 and l2 labels
    stack = enc.encode_tree(DeliveryTree.from_ports("l1", {"l1": [1, 3], "s1": [2], "l2": [3]}))
    out = enc.forward("l1", 4, attach_stack(PAYLOAD_FRAME, stack))
    assert [p for p, _ in out] == [1, 3]
    assert out[0][1] == attach_stack(PAYLOAD_FRAME, bytes([0, 2, 3, 0b10, 2, 0b100]))


@pytest.mark.parametrize("name", ENCODERS)
def test_malformed_stacks_are_dropped_and_counted(name):
    t = fat_tree(4)
    enc = ENCODERS[name](t)
    good = attach_stack(PAYLOAD_FRAME, enc.encode("e1_1", ["h5", "h16"]))
    size = enc.layout.size
    cases = {
        "truncated": good[: 18 + size - 1],
        "empty-stack": attach_stack(PAYLOAD_FRAME, bytes([0, 0])),
        "not-a-stack": PAYLOAD_FRAME,
        "unknown-switch-id": attach_stack(PAYLOAD_FRAME, bytes([0, 1]) + (250).to_bytes(size - enc.layout.value_bytes, "big")
                                          + bytes(enc.layout.value_bytes)),
    }
    for reason, frame in cases.items():
        cost = SwitchCost()
        assert enc.forward("e1_1", 3, frame, cost) == []
        assert cost.drops == {reason: 1}


def test_a_stack_pointing_back_never_loops():
    t = leaf_spine(2, 1, 1)  # l1:1-s1:1, l2:1-s1:2
    enc = SwitchPort(t)
    # a hand-made stack that tries to bounce l1 -> s1 -> l1 -> s1 ... (ids: l1=1, l2=2, s1=3)
    stack = bytes([0, 6, 1, 1, 3, 1, 1, 1, 3, 1, 1, 1, 3, 1])
    w = walk(enc, "h1", [attach_stack(PAYLOAD_FRAME, stack)])
    assert not w.deliveries
    assert w.link_copies == {("l1", 1): 3}
    assert w.drops == {"ingress-port": 3}


def test_dissertation_widths_give_its_label_sizes():
    t = jellyfish(255, 4, seed=1)
    assert SwitchPort(t, DISSERTATION_WIDTHS).layout.size == 2
    assert SwitchBitmask(t, DISSERTATION_WIDTHS).layout.size == 3
    assert SwitchMcGroup(t, DISSERTATION_WIDTHS).layout.size == 3
    derived = Widths.derive(t)
    assert (derived.id_bits, derived.port_bits, derived.mask_bits) == (8, 3, 5)
    with pytest.raises(P4subError):
        Widths(4, 8, 16).check(t)


def test_group_counts_match_the_dissertation_example():
    import networkx as nx

    star = nx.star_graph(16)  # node 0 with 16 neighbours -> 16 ports on node 0 (no hosts needed there)
    star = nx.relabel_nodes(star, {i: f"s{i}" for i in star})
    t = from_switch_graph(star, "star", hosts_per_switch=0)
    assert len(t.ports("s0")) == 16
    assert SwitchMcGroup(t).groups.count("s0") == 2**16 - 1
    assert SwitchMcGroup(t, split=2).groups.count("s0") == 510


def test_mixed_picks_fewest_labels_then_fewest_passes():
    t = fat_tree(4)
    enc = Mixed(t, split=2)  # 4 ports: blocks {1,2} and {3,4}
    tag_of = lambda ports: enc.choose("a1_1", ports)[0]
    assert tag_of((3,)) == TAG_PORT
    assert tag_of((3, 4)) == TAG_GROUP
    assert tag_of((1, 3)) == TAG_BITMASK


def test_switch_port_costs_follow_the_listing():
    t = leaf_spine(2, 2, 2)
    enc = SwitchPort(t)
    cost = SwitchCost()
    enc.forward("l1", 3, attach_stack(PAYLOAD_FRAME, bytes([0, 5, 1, 1, 3, 2, 2, 3, 2, 4, 1, 4])), cost)
    # original: 5 passes, 4 recirculations; clone at label 0 scans 4 labels (3 skipped, 1 deleted),
    # clone at label 4 has nothing left.
    assert cost.recirculations == 4 + 4 + 0
    original = 4 * 5 + 2 + 4
    first_clone = 3 + 4 + 3 * 4 + 3 + 2 * 1 + 1
    last_clone = 3
    assert cost.lookups == original + first_clone + last_clone + 2  # + egress fix-up per copy
    assert cost.circulations == [0 + 4, 4 + 0]


def test_bitmask_needs_m_minus_one_recirculations_for_m_ports():
    t = fat_tree(4)
    enc = SwitchBitmask(t)
    cost = SwitchCost()
    stack = bytes([0, 1, enc.sid["c1"], 0b1111])
    out = enc.forward("c1", 0, attach_stack(PAYLOAD_FRAME, stack), cost)
    assert [p for p, _ in out] == [1, 2, 3, 4]
    assert cost.recirculations == 3


def test_encode_and_table_entries_api():
    t = fat_tree(4)
    stack = encode(t, "e1_1", ["h16"], "bitmask")
    assert SwitchBitmask(t).decode(stack).receivers(t) == {"h16"}
    entries = table_entries(t, "mcgroup")
    assert entries["c1"].group_count == 15 and len(entries["c1"].multicast_groups) == 15
    assert entries["e1_1"].entries[0].match == (("entry.device", 1),)
    with pytest.raises(P4subError):
        encode(t, "e1_1", ["h16"], "unicast")


def test_hybrid_scans_the_whole_stack_then_clones_once_per_port():
    t = fat_tree(4)
    enc = StoredTreeHybrid(t)
    tree = steiner_tree(t, "e1_1", ["h2", "h5", "h9"])
    enc.install(3, prune(tree, t, ["h5"]))
    stack = enc.encode_tree(tree)
    ids, _ = enc.layout.unpack(stack[2:])
    assert ids[0] == 0 and len(ids) >= 2  # the tree label first, then hop labels
    cost = SwitchCost()
    in_port = t.host_attachment("h1")[1]
    out = enc.forward("e1_1", in_port, attach_stack(PAYLOAD_FRAME, stack), cost)
    n, m = len(ids), len(out)
    assert sorted(p for p, _ in out) == list(tree.ports("e1_1"))
    assert cost.recirculations == n + m - 1
    assert cost.circulations == [n + t for t in range(m)]
    own = enc.sid["e1_1"]
    for p, frame in out:
        if p not in t.host_ports("e1_1"):
            count = int.from_bytes(frame[16:18], "big")
            left, _ = enc.layout.unpack(frame[18 : 18 + count * enc.layout.size])
            assert own not in left and 0 in left
