"""Hypothesis strategies and an independent hop-by-hop walker for the delivery tests.

The walker does its own bookkeeping (it shares nothing with runtime.delivery_eval.simulator): it only
calls the scheme's per-switch ``forward`` and records where every copy goes.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import networkx as nx
from hypothesis import strategies as st

from compiler.delivery.cost import SwitchCost
from compiler.network.topology import Topology, from_switch_graph

PAYLOAD_FRAME = b"\x01\x00\x5e\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + bytes(range(40))


@st.composite
def topologies(draw, max_switches: int = 12, max_hosts_per_switch: int = 2) -> Topology:
    n = draw(st.integers(1, max_switches))
    g = nx.Graph()
    g.add_nodes_from(f"s{i}" for i in range(n))
    for i in range(1, n):
        g.add_edge(f"s{i}", f"s{draw(st.integers(0, i - 1))}")
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n))
    g.add_edges_from((f"s{a}", f"s{b}") for a, b in extra if a != b)
    hosts = draw(st.integers(1, max_hosts_per_switch))
    topo = from_switch_graph(g, "random", hosts_per_switch=hosts)
    if len(topo.hosts()) < 2:
        topo = from_switch_graph(g, "random", hosts_per_switch=2)
    return topo


@st.composite
def topology_and_receivers(draw, **kw):
    topo = draw(topologies(**kw))
    hosts = topo.hosts()
    publisher = draw(st.sampled_from(hosts))
    others = [h for h in hosts if h != publisher]
    receivers = draw(st.lists(st.sampled_from(others), min_size=1, max_size=len(others), unique=True))
    return topo, publisher, sorted(receivers)


@dataclass
class Walk:
    deliveries: Counter = field(default_factory=Counter)  # host -> copies received
    frames: dict = field(default_factory=dict)  # host -> set of frames received
    back_out: int = 0  # copies sent out of the port they came in on
    revisits: int = 0  # copies reaching a switch already on their path
    drops: Counter = field(default_factory=Counter)
    link_copies: Counter = field(default_factory=Counter)  # (switch, port) -> copies sent


def walk(scheme, publisher: str, frames, limit: int = 100_000) -> Walk:
    """Inject ``frames`` at the publisher's switch and follow every copy."""
    topo = scheme.topology
    switch, port = topo.host_attachment(publisher)
    w = Walk()
    queue = deque((switch, port, f, (switch,)) for f in frames)
    steps = 0
    while queue:
        steps += 1
        assert steps < limit, "runaway forwarding"
        s, in_port, f, path = queue.popleft()
        cost = SwitchCost()
        for out_port, out in scheme.forward(s, in_port, f, cost):
            w.link_copies[s, out_port] += 1
            if out_port == in_port:
                w.back_out += 1
            node, node_port = topo.peer(s, out_port)
            if topo.is_switch(node):
                if node in path:
                    w.revisits += 1
                    continue
                queue.append((node, node_port, out, path + (node,)))
            else:
                w.deliveries[node] += 1
                w.frames.setdefault(node, set()).add(out)
        w.drops.update(cost.drops)
    return w
