"""Alg. 7's deployment plans, with subscriptions arriving and leaving and with merges: no lost event.

The oracle is :func:`compiler.oracle.filter_holds` on each event's field values, rule by rule; events
travel the intermediate networks through a walker written here (longest prefix per switch and ingress
port, on the dz strings), which shares no code with the planner, the configurator, the flows or the
simulator.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.network import HOST_ID_BITS, parse_network_rules
from compiler.oracle import filter_holds
from compiler.pleroma import Samples, decompose, enforce, event_space, flow_tables, trees
from compiler.pleroma.churn import subscribe, unsubscribe
from compiler.pleroma.deploy import plan
from compiler.rules import check_rules
from tests.compiler.pleroma.cases import HOSTS, PUBS, SPEC, TOPO, subscription

def _longest(table, dz: str) -> frozenset[int]:
    for k in range(len(dz), -1, -1):
        if dz[:k] in table:
            return table[dz[:k]]
    return frozenset()


def _delivered(tables, dz: str, publisher: str) -> set[str]:
    """The hosts an event published at ``publisher`` reaches (the test's own walker)."""
    switch, port = TOPO.host_attachment(publisher)
    frontier, got, hops = [(switch, port)], set(), 0
    while frontier:
        hops += 1
        assert hops < 50, "flows loop"
        nxt = []
        for s, ingress in frontier:
            for q in _longest(tables.get(s, {}).get(ingress, {}), dz):
                if q == ingress:
                    continue
                peer, peer_port = TOPO.peer(s, q)
                if TOPO.is_switch(peer):
                    nxt.append((peer, peer_port))
                else:
                    got.add(peer)
        frontier = nxt
    return got


def _norm(tables):
    return {s: {i: dict(t) for i, t in tables.get(s, {}).items() if t} for s in TOPO.switches()}


def _wanters(rules, fields, values) -> set[str]:
    return {TOPO.host_by_id(p) for r in rules if filter_holds(r.filter, fields, values) for p in r.ports}


def _replay(old, steps, new, events, check):
    """Run ``steps`` on a copy of ``old``; after every one (and before the first) ``check(state)``;
    also, on the table each step touches, every event goes where ``old`` or ``new`` sends it there."""
    state = _norm(old)
    check(state)
    for st_ in steps:
        table = state[st_.switch].setdefault(st_.ingress, {})
        if st_.op == "add":
            assert st_.dz not in table
            table[st_.dz] = st_.ports
        elif st_.op == "modify":
            assert st_.dz in table and table[st_.dz] != st_.ports
            table[st_.dz] = st_.ports
        else:
            assert table.pop(st_.dz) == st_.ports
        if not table:
            del state[st_.switch][st_.ingress]
        before = old.get(st_.switch, {}).get(st_.ingress, {})
        after = new.get(st_.switch, {}).get(st_.ingress, {})
        for dz, _ in events:
            ports = _longest(table, dz)
            assert ports in (_longest(before, dz), _longest(after, dz)), (st_, dz)
        check(state)
    return state


def _events(space, fields, n, seed, resolution):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        values = {f: int(rng.integers(0, 64)) for f in fields}
        out.append((space.dz_of(values, resolution), values))
    return out


@settings(max_examples=30, deadline=None)
@given(st.lists(subscription(), min_size=1, max_size=7), st.data(), st.integers(0, 2**32 - 1),
       st.sampled_from(["value", "rank"]), st.sampled_from(["single", "publisher"]), st.integers(2, 12))
def test_subscriptions_arriving_and_leaving_deploy_without_losing_an_event(lines, data, seed, indexing, kind,
                                                                           resolution):
    """Before: ``lines[:a]``; after: ``lines[b:]`` (``lines[:b]`` unsubscribe, ``lines[a:]`` subscribe).
    In every state of the plan each host that wants an event before and after gets it; the last state
    is the fixed point of the subscriptions after, computed from scratch."""
    b = data.draw(st.integers(0, len(lines)))
    a = data.draw(st.integers(b, len(lines)))
    typed = check_rules(parse_network_rules("\n".join(lines), TOPO), SPEC, port_bits=HOST_ID_BITS)
    rules = list(typed.rules)
    space = event_space(typed.fields, [r.filter for r in rules], indexing)
    res = min(resolution, space.max_length)
    subs = [[(TOPO.host_by_id(p), tuple(decompose(space, r.filter, typed.fields, res, 8).dzs)) for p in r.ports]
            for r in rules]
    t = trees(TOPO, PUBS, kind)

    def fixed_point(rule_subs):
        host_dzs: dict[str, set[str]] = {}
        for per_rule in rule_subs:
            for h, dzs in per_rule:
                host_dzs.setdefault(h, set()).update(dzs)
        return _norm(flow_tables(TOPO, host_dzs, t))

    old = fixed_point(subs[:a])
    tables = old
    live = [s for per_rule in subs[:a] for s in per_rule]
    for per_rule in subs[:b]:  # S1's unsubscriptions, one by one
        for sub in per_rule:
            live.remove(sub)
            tables = unsubscribe(TOPO, tables, t, sub[0], live)
    for per_rule in subs[a:]:  # and the new subscriptions
        for host, dzs in per_rule:
            tables = subscribe(TOPO, tables, t, host, dzs)
    new = fixed_point(subs[b:])
    assert _norm(tables) == new  # the configurator's incremental state is the fixed point
    p = plan(old, _norm(tables), TOPO.switches())

    events = _events(space, typed.fields, 24, seed, res)
    pub_of = random.Random(seed).choices(PUBS, k=len(events))

    def check(state):
        for (dz, values), pub in zip(events, pub_of):
            want = _wanters(rules[:a], typed.fields, values) & _wanters(rules[b:], typed.fields, values)
            want.discard(pub)
            got = _delivered(state, dz, pub)
            assert want <= got, (dz, values, want - got)

    final = _replay(old, p.steps, new, events, check)
    assert final == new
    assert len(p.steps) == len({(s.switch, s.ingress, s.dz) for s in p.steps})  # one step per flow that changes


@settings(max_examples=25, deadline=None)
@given(st.lists(subscription(), min_size=1, max_size=7), st.integers(0, 2**32 - 1),
       st.sampled_from(["baseline", "ms", "traffic", "history"]), st.booleans(), st.integers(4, 12))
def test_merges_under_a_limit_deploy_without_losing_an_event(lines, seed, method, from_local, resolution):
    """From the unconstrained flows (or the ``ms`` local enforcer's) to ``method``'s under a limit:
    every subscriber gets every event it wants in every state of the plan; the last state is ``method``'s."""
    typed = check_rules(parse_network_rules("\n".join(lines), TOPO), SPEC, port_bits=HOST_ID_BITS)
    space = event_space(typed.fields, [r.filter for r in typed.rules], "value")
    res = min(resolution, space.max_length)
    t = trees(TOPO, PUBS, "single")
    host_dzs: dict[str, set[str]] = {}
    subs = []
    for r in typed.rules:
        dzs = tuple(decompose(space, r.filter, typed.fields, res, 8).dzs)
        for p in r.ports:
            host_dzs.setdefault(TOPO.host_by_id(p), set()).update(dzs)
            subs.append((TOPO.host_by_id(p), dzs))
    full = _norm(flow_tables(TOPO, host_dzs, t))
    limit = max(2, max(sum(len(x) for x in by.values()) for by in full.values()) // 2)
    rng = np.random.default_rng(seed)
    sample = Samples(rng.integers(0, 1 << res, 60, dtype=np.uint64), rng.integers(0, len(PUBS), 60), PUBS)
    old = full
    if from_local:
        old, _ = enforce(TOPO, full, limit, "ms", t, res, sample, seed=seed, requests=subs)
        old = _norm(old)
    new, _ = enforce(TOPO, full, limit, method, t, res, sample, seed=seed, requests=subs)
    new = _norm(new)
    p = plan(old, new, TOPO.switches())
    events = _events(space, typed.fields, 24, seed, res)
    pub_of = random.Random(seed).choices(PUBS, k=len(events))

    def check(state):
        for (dz, values), pub in zip(events, pub_of):
            want = _wanters(typed.rules, typed.fields, values) - {pub}
            got = _delivered(state, dz, pub)
            assert want <= got, (dz, values, want - got)

    assert _replay(old, p.steps, new, events, check) == new


def test_s2s_merge_and_unmerge_examples_need_one_spare_flow():
    """S2 §5.5: 0000 and 0011 merged into 00 (add 00, then delete the two), and back (add the two,
    then delete 00): one flow above the larger of before and after, never a state without them."""
    parts = {"s": {1: {"0000": frozenset({2}), "0011": frozenset({3}), "1": frozenset({4})}}}
    merged = {"s": {1: {"00": frozenset({2, 3}), "1": frozenset({4})}}}
    p = plan(parts, merged)
    assert [(s.op, s.dz) for s in p.steps] == [("add", "00"), ("delete", "0000"), ("delete", "0011")]
    assert p.peak == {"s": 4} and p.overshoot() == 1
    p = plan(merged, parts)
    assert [(s.op, s.dz) for s in p.steps] == [("add", "0000"), ("add", "0011"), ("delete", "00")]
    assert p.overshoot() == 1


def test_the_naive_order_would_lose_events_the_plan_keeps():
    """S1 Fig. 5's unsubscription: 10 downgraded to 100 on a switch. Deleting 10 before adding 100
    would drop 100's events; the plan adds (or modifies) first."""
    old = {"s": {1: {"10": frozenset({2, 3})}}}
    new = {"s": {1: {"100": frozenset({2})}}}
    steps = [(s.op, s.dz) for s in plan(old, new).steps]
    assert steps.index(("add", "100")) < steps.index(("delete", "10"))
