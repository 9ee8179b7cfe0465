"""Routing on subscriptions: Camus Algorithm 1 (CoNEXT'20 §4) over any up/down-oriented topology.

A routing policy gives every port ``p`` of every switch ``s`` a filter set ``F_p^s``; the switch
sends a packet out of every port other than its ingress port whose set matches it. The up ports of
a switch count as one *logical up port* (:data:`UP_PORT` in the per-switch rules): a packet that
arrived on an up port never goes up again, and one that goes up leaves on one physical up port,
chosen per packet by netsim and per leaf state by :func:`lower_up_port` for the targets (docs/topology.md,
"Choosing the physical up port").

* down port ``d`` (towards hosts below): the exact union of the subscriptions of the hosts below
  ``d`` (both policies);
* logical up port: ``true`` under the memory-reducing policy (MR); under the traffic-reducing
  policy (TR) the exact union of the subscriptions of every host reachable through the up ports.

Algorithm 1 as printed builds TR's ``F_up^s`` from the down ports of the first up neighbour only,
which misses hosts two levels away (other pods of a fat tree); here ``F_up^s`` covers every host
the up ports reach, which is what the paper's text defines ("the exact set of packets that are of
interest to hosts reachable through the up port").

α discretisation (:mod:`compiler.approximate`) applies to every port that leads to a switch,
never to a port that leads straight to a host, so hosts receive exactly what they subscribed to.

Routing is correct when the orientation is *tree-like* (as fat trees, leaf-spine and Facebook
fabrics, and every tree orientation, are): all up ports of a switch reach the same hosts, the down
ports of a switch reach disjoint hosts, and every host is either below a switch or reachable
through its up ports. :func:`check_routable` refuses topologies that break this, naming the switch.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping

from compiler import ir
from compiler import rules as ast
from compiler.approximate import Alpha, approximate
from compiler.base import P4subError
from compiler.network.topology import Topology
from compiler.spec import QueryField
from compiler.stateful import relax

#: The port number the per-switch rules use for the logical up port. Switch ports start at 1, so 0
#: never names a physical port; :func:`lower_up_port` (or the network stage of the target) replaces it.
UP_PORT = 0

Policy = Literal["mr", "tr"]
POLICIES = ("mr", "tr")


@dataclass(frozen=True)
class Orientation:
    """Who is where, as bitmasks over hosts (bit ``i`` is ``topology.hosts()[i]``).

    ``below[s]``: hosts reachable from ``s`` through down ports only. ``port_below[s][p]``: those
    behind down port ``p``. ``up_reach[s]``: hosts reachable through the logical up port.
    """

    hosts: tuple[str, ...]
    below: dict[str, int]
    port_below: dict[str, dict[int, int]]
    up_reach: dict[str, int]

    @property
    def all_hosts(self) -> int:
        return (1 << len(self.hosts)) - 1

    def names(self, mask: int) -> list[str]:
        return [h for i, h in enumerate(self.hosts) if mask >> i & 1]


@dataclass(frozen=True)
class SwitchRules:
    """What one switch stores: its rules over its ports (:data:`UP_PORT` for the logical up port)."""

    switch: str
    layer: int
    rules: ast.RuleSet
    up_ports: tuple[int, ...]
    down_ports: tuple[int, ...]
    host_ports: tuple[int, ...]
    miss_up: bool = False
    """MR's ``true -> up``, stored as the leaf table's default action (see :func:`_mr_table`)."""


def orientation(topology: Topology) -> Orientation:
    """Compute (and cache on the topology) the host sets below and above every switch."""
    cached = topology.cache.get("routing.orientation")
    if cached is not None:
        return cached
    hosts = tuple(topology.hosts())
    bit = {h: 1 << i for i, h in enumerate(hosts)}
    switches = topology.switches()
    port_below: dict[str, dict[int, int]] = {s: {} for s in switches}
    below: dict[str, int] = {}
    for s in sorted(switches, key=topology.layer):  # bottom up: children have lower layers
        total = 0
        for p in topology.down_ports(s):
            child, _ = topology.peer(s, p)
            if topology.is_switch(child) and child not in below:
                raise P4subError(f"switch {s!r} (layer {topology.layer(s)}) has a down port to {child!r}, "
                                 f"which is not below it (layer {topology.layer(child)})")
            mask = bit[child] if not topology.is_switch(child) else below[child]
            port_below[s][p] = mask
            total |= mask
        below[s] = total
    up_reach: dict[str, int] = {}
    for s in sorted(switches, key=lambda n: -topology.layer(n)):  # top down: parents first
        reach = None
        for p in topology.up_ports(s):
            parent, q = topology.peer(s, p)
            via = up_reach[parent]
            for d, mask in port_below[parent].items():
                if d != q:
                    via |= mask
            if reach is not None and via != reach:
                raise P4subError(f"switch {s!r}: its up ports reach different hosts (port {p} differs from "
                                 f"port {topology.up_ports(s)[0]}); routing needs a tree-like orientation")
            reach = via
        up_reach[s] = reach or 0
    result = Orientation(hosts, below, port_below, up_reach)
    check_routable(topology, result)
    topology.cache["routing.orientation"] = result
    return result


def check_routable(topology: Topology, orient: Orientation) -> None:
    """Raise unless down ports are disjoint and every host is below or above every switch."""
    everyone = orient.all_hosts
    for s in topology.switches():
        seen = 0
        for p, mask in orient.port_below[s].items():
            if seen & mask:
                raise P4subError(f"switch {s!r}: down port {p} reaches hosts another down port reaches "
                                 f"({', '.join(orient.names(seen & mask)[:3])}); they would get duplicates")
            seen |= mask
        if orient.below[s] & orient.up_reach[s]:
            both = orient.names(orient.below[s] & orient.up_reach[s])
            raise P4subError(f"switch {s!r}: hosts {', '.join(both[:3])} are both below it and reachable "
                             "through its up ports; they would get duplicates")
        missing = everyone & ~(orient.below[s] | orient.up_reach[s])
        if missing:
            raise P4subError(f"switch {s!r} cannot reach hosts {', '.join(orient.names(missing)[:3])} "
                             "through the orientation (up then down); routing would lose their packets")


def port_towards(topology: Topology, orient: Orientation) -> dict[str, dict[str, int]]:
    """``switch -> host -> port`` the switch uses towards the host (:data:`UP_PORT` when it is above)."""
    out: dict[str, dict[str, int]] = {}
    for s in topology.switches():
        table: dict[str, int] = {}
        for p, mask in orient.port_below[s].items():
            for h in orient.names(mask):
                table[h] = p
        for h in orient.names(orient.up_reach[s]):
            table[h] = UP_PORT
        out[s] = table
    return out


def filter_sets(topology: Topology, rules: ast.RuleSet, policy: Policy = "tr") -> dict[str, dict[int, list[ast.Filter]]]:
    """Algorithm 1's output: ``switch -> port -> F_p^s`` (distinct filters, first-seen order).

    ``rules`` are network rules whose ``fwd`` ports are host ids (:mod:`compiler.network.host_rules`).
    The logical up port is :data:`UP_PORT`; under MR it holds ``[true]``.
    """
    sets = _port_sets(topology, rules, policy, Alpha(), {})
    return {s: _by_port(sets.rules(table)) for s, table in sets.tables.items()}


def route(topology: Topology, rules: ast.RuleSet, fields: Mapping[str, QueryField], policy: Policy = "tr",
          alpha: Alpha = Alpha()) -> dict[str, SwitchRules]:
    """Per-switch rule sets realising ``policy`` (``"mr"`` or ``"tr"``), with α on switch-facing ports.

    ``fields`` are the attribute infos from type checking the network rules against the spec
    (:func:`compiler.rules.typecheck.check_rules`); α needs them to know widths, scales and match kinds.
    Cost: O(rules x switches) integer updates, plus one approximation per distinct filter. Switches
    hold the *same* rule objects wherever a filter goes to the same ports (a fat tree's core
    switches share all of theirs), so switches whose rule sets are equal hold equal tuples of the
    same objects (:mod:`compiler.network.compile` compiles such a set once).
    """
    if policy not in POLICIES:
        raise P4subError(f"unknown routing policy {policy!r}; expected one of {', '.join(POLICIES)}")
    sets = _port_sets(topology, rules, policy, alpha, fields)
    out = {}
    for s in topology.switches():
        host_ports = topology.host_ports(s)
        table, miss_up = sets.tables[s], False
        if policy == "mr":
            table, miss_up = _mr_table(table, sets.true_id)
        out[s] = SwitchRules(s, topology.layer(s), ast.RuleSet(sets.rules(table), f"{rules.path}@{s}"),
                             topology.up_ports(s), tuple(p for p in topology.down_ports(s) if p not in host_ports),
                             host_ports, miss_up)
    return out


_UP_BIT = 1 << UP_PORT


def _mr_table(table: dict[int, int], true_id: int | None) -> tuple[dict[int, int], bool]:
    """MR's ``true -> up`` without a rule for it: every rule also goes up, and a miss goes up.

    Compiled as a rule, ``true`` is one more predicate the diagram must carry to the leaves (the
    path that matches nothing needs entries of its own). As the leaf table's default action it costs
    no entry, and the diagram is that of the down-port rules alone, which is never larger than TR's
    diagram of the same rules plus an exact up filter (for one field order). Takes and returns one
    switch's ``filter id -> port bitmask`` table, and says whether the switch sends misses up.
    """
    if true_id is None or table.get(true_id) != _UP_BIT:
        return table, False
    return {f: mask | _UP_BIT for f, mask in table.items() if f != true_id}, True


def send_misses_up(pipeline: ir.Pipeline) -> ir.Pipeline:
    """The pipeline with its leaf table's default action forwarding to :data:`UP_PORT` instead of dropping.

    For one-lane pipelines with multicast groups only: port-bitmap lanes have no leaf table whose
    miss every packet reaches (:func:`with_up_rule` is MR for them)."""
    if pipeline.delivery.is_bitmap:
        raise P4subError("send_misses_up rewrites the leaf table of a one-lane pipeline; a bitmap switch "
                         "sends everything up with with_up_rule")
    tables = tuple(dataclasses.replace(t, default_action="forward", default_args=(UP_PORT,)) if t.role == "leaf" else t
                   for t in pipeline.tables)
    return dataclasses.replace(pipeline, tables=tables)


def with_up_rule(rules: ast.RuleSet) -> ast.RuleSet:
    """MR's ``true -> up`` as a rule, for a switch compiled in port-bitmap lanes (``miss_up``).

    With outputs on edges the catch-all costs little: it is decided at its lane's root, whose
    edges all OR in the up bit, and no other node remembers it. The up port leaves every other
    rule (the catch-all already sends every packet up), so that their port sets are the down
    ports alone, and a rule left with no port is dropped. The rule set is then what the switch
    does, all of it: ``rules.sub`` says so and ``p4sub verify`` proves the pipeline against it.
    """
    out = []
    for rule in rules:
        ports = rule.ports
        if UP_PORT not in ports:
            out.append(rule)
        elif len(ports) > 1:
            out.append(_without_up(rule))
    out.append(_UP_RULE)
    return ast.RuleSet(tuple(out), rules.path)


_UP_RULE = ast.Rule(ast.Const(True), (ast.Forward((UP_PORT,)),), None)


@functools.lru_cache(maxsize=1 << 20)
def _without_up(rule: ast.Rule) -> ast.Rule:
    """``rule`` without the up port; one object per rule, shared by the switches that hold it."""
    actions = tuple(_forward_of(frozenset(a.ports) - {UP_PORT})[0] if type(a) is ast.Forward else a
                    for a in rule.actions)
    return ast.Rule(rule.filter, actions, rule.location)


@dataclass
class _PortSets:
    """Per switch, ``filter id -> bitmask of the ports it goes to`` (bit ``p`` for port ``p``), in
    the order the filters first reach the switch; filters interned once for the whole network.

    Integers rather than rule objects while routing: TR at k=8 and 100k filters makes 7.6M
    (switch, filter) pairs, and a rule object per pair cost most of the routing time. Rules are
    made at the end, one per distinct (filter, ports) pair, shared by every switch that has it.
    """

    filters: list[ast.Filter]
    locations: list[object]
    tables: dict[str, dict[int, int]]
    true_id: int | None = None
    _made: dict[tuple[int, int], ast.Rule] = dataclasses.field(default_factory=dict)

    def rules(self, table: dict[int, int]) -> tuple[ast.Rule, ...]:
        made, filters, locations = self._made, self.filters, self.locations
        out = []
        for key in table.items():
            rule = made.get(key)
            if rule is None:
                fid, mask = key
                rule = made[key] = ast.Rule(filters[fid], _forward_mask(mask), locations[fid])
            out.append(rule)
        return tuple(out)


def _port_sets(topology: Topology, rules: ast.RuleSet, policy: Policy, alpha: Alpha,
               fields: Mapping[str, QueryField]) -> _PortSets:
    orient = orientation(topology)
    towards = port_towards(topology, orient)
    host_name = {topology.node_id(h): h for h in orient.hosts}
    host_ports = {s: set(topology.host_ports(s)) for s in topology.switches()}
    # Filters are interned to small ints once per rule, so the per-switch tables hash ints, not trees.
    ids: dict[ast.Filter, int] = {}
    filters: list[ast.Filter] = []
    locations: list[object] = []
    approx_of: dict[int, int] = {}

    def intern(f: ast.Filter, location: object) -> int:
        fid = ids.get(f)
        if fid is None:
            fid = ids[f] = len(filters)
            filters.append(f)
            locations.append(location)
        return fid

    def targets_of(hosts: tuple[str, ...]) -> list[tuple[dict[int, int], int, int]]:
        """Per switch that forwards to some of ``hosts``: its table, the bitmask of its host ports
        towards them and that of its other ports towards them."""
        out = []
        for s, table in towards.items():
            exact_ports = net_ports = 0
            for h in hosts:
                p = table.get(h)
                if p is None or (p == UP_PORT and policy == "mr"):
                    continue
                if p in host_ports[s]:
                    exact_ports |= 1 << p
                else:
                    net_ports |= 1 << p
            if exact_ports or net_ports:
                out.append((acc[s], exact_ports, net_ports))
        return out

    # Rules share few host sets (a workload of 100k rules over 128 hosts has at most 128 single
    # hosts), so the walk over switches is done once per host set, not once per rule.
    targets: dict[tuple[str, ...], list[tuple[dict[int, int], int, int]]] = {}
    acc: dict[str, dict[int, int]] = {s: {} for s in topology.switches()}
    for rule in rules:
        hosts = []
        for hid in rule.ports:
            if hid not in host_name:
                raise P4subError(f"rule forwards to host id {hid}, which {topology.name or 'the topology'} lacks",
                                 rule.location)
            hosts.append(host_name[hid])
        if not hosts:
            continue
        key = tuple(hosts)
        if key not in targets:
            targets[key] = targets_of(key)
        exact_id = intern(rule.filter, rule.location)
        approx_id = None
        for table, exact_ports, net_ports in targets[key]:
            if exact_ports:
                table[exact_id] = table.get(exact_id, 0) | exact_ports
            if net_ports:
                if approx_id is None:
                    approx_id = approx_of.get(exact_id)
                    if approx_id is None:
                        # Upstream of the last hop, state is not judged (compiler.stateful.relax).
                        approx_id = approx_of[exact_id] = intern(approximate(relax(rule.filter), alpha, fields),
                                                                 rule.location)
                table[approx_id] = table.get(approx_id, 0) | net_ports
    true_id = None
    if policy == "mr":
        true_id = intern(ast.Const(True), None)
        for s in topology.switches():
            if orient.up_reach[s] and topology.up_ports(s):
                acc[s][true_id] = acc[s].get(true_id, 0) | _UP_BIT
    return _PortSets(filters, locations, acc, true_id)


@functools.lru_cache(maxsize=1 << 16)
def _forward_of(ports: frozenset[int]) -> tuple[ast.Forward]:
    return (ast.Forward(tuple(sorted(ports))),)


def _forward_mask(mask: int) -> tuple[ast.Forward]:
    """The actions of a rule forwarding to the ports whose bits are set in ``mask``; one shared
    object per port set (routing makes hundreds of thousands of rules over a few hundred port sets)."""
    return _forward_of(frozenset(p for p in range(mask.bit_length()) if mask >> p & 1))


def _by_port(rules: Iterable[ast.Rule]) -> dict[int, list[ast.Filter]]:
    out: dict[int, list[ast.Filter]] = {}
    for r in rules:
        for p in r.ports:
            out.setdefault(p, []).append(r.filter)
    return out


# ------------------------------------------------------------------------------------------------
# The logical up port in a compiled pipeline
# ------------------------------------------------------------------------------------------------


def lower_up_port(pipeline: ir.Pipeline, up_ports: tuple[int, ...]) -> ir.Pipeline:
    """Replace :data:`UP_PORT` in a pipeline's leaf entries by physical up ports, statically.

    The IR has no hash primitive, so a target that renders the IR as is cannot pick the up port per
    packet. This spreads the choice over the *leaf states* instead (state ``s`` uses
    ``up_ports[s % n]``): every packet of one subscription class leaves on the same up port, and
    different classes use different ports. Multicast groups that hold the marker get one variant per
    up port actually used (new ids after the existing ones). A switch without up ports must not
    forward to the marker (routing never makes it do so).
    """
    if pipeline.delivery.is_bitmap:
        return _lower_bitmap(pipeline, up_ports)
    leaf_tables = {t.name for t in pipeline.tables if t.role == "leaf"}
    groups = {g.id: g for g in pipeline.multicast_groups}
    if not up_ports:
        if any(UP_PORT in g.ports for g in groups.values()) or any(
                e.table in leaf_tables and e.action == "forward" and e.args == (UP_PORT,) for e in pipeline.entries) or any(
                t.name in leaf_tables and t.default_args == (UP_PORT,) for t in pipeline.tables):
            raise P4subError("the pipeline forwards to the logical up port, but the switch has no up ports")
        return pipeline
    tables = tuple(dataclasses.replace(t, default_args=(up_ports[0],))
                   if t.name in leaf_tables and t.default_action == "forward" and t.default_args == (UP_PORT,) else t
                   for t in pipeline.tables)
    variants: dict[tuple[int, int], int] = {}
    next_id = max(groups, default=0) + 1
    new_groups = list(pipeline.multicast_groups)
    entries = []
    for e in pipeline.entries:
        if e.table not in leaf_tables:
            entries.append(e)
            continue
        action = pipeline.action(e.action)
        state = e.matches[0].value if e.matches and isinstance(e.matches[0], ir.Exact) else 0
        choice = up_ports[state % len(up_ports)]
        args = list(e.args)
        bound = {p.name: i for i, p in enumerate(action.params)}
        for prim in action.body:
            if prim.op == "set_egress_port" and args[bound[prim.args[0]]] == UP_PORT:
                args[bound[prim.args[0]]] = choice
            elif prim.op == "set_mcast_group":
                gid = args[bound[prim.args[0]]]
                if UP_PORT in groups[gid].ports:
                    key = (gid, choice)
                    if key not in variants:
                        ports = tuple(sorted({p for p in groups[gid].ports if p != UP_PORT} | {choice}))
                        variants[key] = next_id
                        new_groups.append(ir.MulticastGroup(next_id, ports))
                        next_id += 1
                    args[bound[prim.args[0]]] = variants[key]
        entries.append(ir.Entry(e.table, e.matches, e.action, tuple(args), e.priority))
    used = {g for e in entries if e.table in leaf_tables for g in _groups_of(pipeline, e)}
    kept = tuple(g for g in new_groups if g.id in used)
    return dataclasses.replace(pipeline, tables=tables, entries=tuple(entries), multicast_groups=kept)


def _lower_bitmap(pipeline: ir.Pipeline, up_ports: tuple[int, ...]) -> ir.Pipeline:
    """:func:`lower_up_port` for port-bitmap delivery: the up port's bit stands for ``up_ports[0]``.

    The bit keeps its place, so no entry changes: the delivery's port list and its group name the
    physical port instead of the marker. One up port per switch, not per leaf state as with groups:
    lanes OR their bits, and two lanes naming two up ports would send a packet up twice.
    """
    d = pipeline.delivery
    if UP_PORT not in d.ports:
        return pipeline
    if not up_ports:
        raise P4subError("the pipeline forwards to the logical up port, but the switch has no up ports")
    if up_ports[0] in d.ports:
        raise P4subError(f"the pipeline forwards to up port {up_ports[0]} itself; rules name the up port as {UP_PORT}")
    ports = tuple(up_ports[0] if p == UP_PORT else p for p in d.ports)
    groups = tuple(ir.MulticastGroup(g.id, tuple(sorted(ports))) if g.id == d.group else g
                   for g in pipeline.multicast_groups)
    return dataclasses.replace(pipeline, delivery=dataclasses.replace(d, ports=ports), multicast_groups=groups)


def _groups_of(pipeline: ir.Pipeline, entry: ir.Entry) -> list[int]:
    action = pipeline.action(entry.action)
    bound = {p.name: i for i, p in enumerate(action.params)}
    return [entry.args[bound[prim.args[0]]] for prim in action.body if prim.op == "set_mcast_group"]
