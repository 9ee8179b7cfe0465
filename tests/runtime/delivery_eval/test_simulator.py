"""The simulator's counts and the dissertation's delay model, against hand-computed values."""

from __future__ import annotations

import networkx as nx
import pytest

from compiler.delivery import SwitchBitmask, SwitchPort
from compiler.delivery.cost import SwitchCost
from compiler.delivery.scheme import Emit, Publication, Scheme, SwitchEntries
from compiler.delivery.tree import steiner_tree
from compiler.network.topology import from_switch_graph, jellyfish
from runtime.delivery_eval import OpenFlowMulticast, Unicast, make_scheme, simulate
from runtime.delivery_eval.simulator import SimulationLimit
from tests.compiler.delivery.helpers import PAYLOAD_FRAME


def line(n: int):
    return from_switch_graph(nx.relabel_nodes(nx.path_graph(n), {i: f"s{i + 1}" for i in range(n)}), "line", 1)


def test_delay_of_one_packet_is_feed_in_plus_switches():
    t = line(4)  # h1 on s1 ... h4 on s4
    m = simulate(OpenFlowMulticast(t), "h1", ["h4"], PAYLOAD_FRAME)
    assert m.delay_ms == pytest.approx(0.1 + 4 * 0.1)
    assert m.packets == 5 and m.bytes == 5 * len(PAYLOAD_FRAME)
    assert m.lookups == 4 and m.rules == 4 and m.exact


def test_recirculations_add_ten_microseconds_each():
    t = line(2)
    scheme = SwitchBitmask(t)
    # s1 forwards to s2 (its port 1); s2 to h2 (port 2): one label each, one bit each: no recirculation
    m = simulate(scheme, "h1", ["h2"], PAYLOAD_FRAME)
    assert m.recirculations == 0 and m.delay_ms == pytest.approx(0.3)
    # switch/port on the same tree: s1 holds 2 labels (its own, then s2's); its clone scans 1 label
    m = simulate(SwitchPort(t), "h1", ["h2"], PAYLOAD_FRAME)
    assert m.delay_ms == pytest.approx(0.1 + (0.1 + 0.01 * 1) + (0.1 + 0.01 * 0))


def test_unicast_feeds_one_packet_per_receiver_and_ends_with_the_farthest():
    t = jellyfish(255, 4, seed=1)
    hosts = t.hosts()
    receivers = hosts[1:205]  # 204 receivers, as at 80 % of 255 hosts
    m = simulate(Unicast(t), hosts[0], receivers, PAYLOAD_FRAME)
    g = t.switch_graph()
    src = t.host_attachment(hosts[0])[0]
    far = max(nx.shortest_path_length(g, src, t.host_attachment(r)[0]) for r in receivers)
    assert m.frames_sent == 204
    assert m.delay_ms == pytest.approx(20.4 + 0.1 * (far + 1))
    assert m.exact


@pytest.mark.parametrize("name", ["port", "bitmask", "mcgroup", "mixed", "hybrid", "openflow"])
def test_tree_schemes_send_one_packet_per_tree_link(name):
    t = jellyfish(40, 4, seed=2)
    hosts = t.hosts()
    receivers = hosts[3:30:2]
    tree = steiner_tree(t, t.host_attachment(hosts[0])[0], receivers)
    m = simulate(make_scheme(name, t), hosts[0], receivers, PAYLOAD_FRAME, tree)
    assert m.exact
    assert m.packets == 1 + sum(len(ps) for _, ps in tree.branches)


class _Bouncer(Scheme):
    """Sends every frame to every port, including back: loops and reflections to be caught."""

    name = "bouncer"

    def publish(self, publisher, receivers, frame, tree=None):
        return Publication((frame,), {r: frame for r in receivers}, 0)

    def forward(self, switch, in_port, frame, cost=None):
        cost = cost if cost is not None else SwitchCost()
        out = [Emit(p, frame) for p in self.topology.ports(switch)]
        cost.circulations.extend(0 for _ in out)
        return out

    def switch_entries(self, switch):
        return SwitchEntries(switch, 0, ())


def test_loops_and_reflections_are_counted_and_stopped():
    t = from_switch_graph(nx.relabel_nodes(nx.cycle_graph(3), {i: f"s{i}" for i in range(3)}), "ring", 1)
    m = simulate(_Bouncer(t), "h1", ["h2"], PAYLOAD_FRAME)
    assert m.loops > 0 and m.reflections > 0
    assert m.duplicates > 0 and m.false_positive_deliveries > 0


def test_runaway_schemes_hit_the_copy_limit():
    t = from_switch_graph(nx.relabel_nodes(nx.complete_graph(5), {i: f"s{i}" for i in range(5)}), "k5", 1)
    with pytest.raises(SimulationLimit):
        simulate(_Bouncer(t), "h1", ["h2"], PAYLOAD_FRAME, max_copies=50)
