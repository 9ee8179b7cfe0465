"""Combined compile with virtual trees: ``p4sub route ... --delivery vt[:STRATEGY]``.

The ingress edge works as in the chapter-3 combined compile (:mod:`compiler.delivery.combined`):
the network's subscriptions are compiled once with host ids as ports, each leaf's host set becomes
a receiver set (``rsid``) and the edge's ``p4sub_push`` table pushes that set's stack. What differs
is the stack: EtherType 0x9999, 16-bit VT labels (:mod:`.labels`) computed by Algorithm 5.1 over
the VTs the strategy installed, and the transit program: the VT-aware pipeline
(``backends/bmv2/templates/vt.p4.j2``, :mod:`runtime.vt_sim`).

Installed state per switch (:class:`VtSwitchPlan`): ``check_tree`` entries (VT id -> port bitmap,
at most ``max_rules``), ``check_hop`` / ``check_stop`` entries (one each per link of the switch),
host ports (stack stripped there), one clone session per port (the program clones each copy,
Listing 5.4), and on ingress switches the pushes. Port bitmaps (``remaining_ports``, a tree's
ports) are 64 bits, as the dissertation's, when every port is at most 64; a topology with a higher
port gets the next multiple of 64 (:func:`mask_bits`): the width is a representation choice, not a
limit of the scheme, and both targets take any width (a 9-bit port is at most 511).

Strategies that need statistics get them from the rules: every host may publish, a host
subscribes to a publisher when it is in some receiver set other than for its own messages, and its
frequency is the share of receiver sets it is in.

A receiver set whose stack would exceed the program's header stack (``max_labels``) gets its own
VT, the delivery tree itself (a *fallback*: one tree label), if the budget allows; otherwise the
plan is refused with a P4subError saying which limit to raise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from compiler import ir
from compiler import rules as ast
from compiler.base import P4subError
from compiler.compile import CompileOptions, compile_rules
from compiler.delivery.combined import ReceiverSet, receiver_pipeline
from compiler.delivery.stateless import refuse_state
from compiler.delivery.vt.encoder import encode
from compiler.delivery.vt.installed import VtTable
from compiler.delivery.vt.labels import LABEL_BYTES, SHIM
from compiler.delivery.vt.steiner import VtGraph, steiner
from compiler.delivery.vt.strategies import install_strategy, make_strategy
from compiler.delivery.vt.workload import Workload
from compiler.network import Topology
from compiler.spec import Spec

#: Drop reasons of the VT program, in counter-index order.
VT_DROP_REASONS = ("parser-error", "not-a-stack", "no-subscriber", "empty-stack", "no-port")
#: Labels the v1model program's header stack holds (BMv2 has no parse-depth limit; the unrolled
#: per-position reads and pops grow with it).
VT_MAX_LABELS = {"bmv2": 32, "tofino": 16}
DEFAULT_STRATEGY = "broadcast"
#: Width of the port bitmaps (``remaining_ports``, ``served`` in Listing 5.2): the dissertation's 64
#: bits at most for a switch of up to 64 ports; wider topologies get the next multiple
#: (:func:`mask_bits`), narrower ones the narrowest PHV container that holds their highest port.
MASK_BITS = 64
NARROW_MASKS = (8, 16, 32)
DEFAULT_MAX_RULES = 16


@dataclass(frozen=True)
class VtPush:
    """An ingress switch's stack for one receiver set: packed 16-bit labels."""

    rsid: int
    labels: tuple[int, ...]
    trees: int
    hops: int
    stops: int
    fallback: bool = False


@dataclass(frozen=True)
class VtSwitchPlan:
    """One switch's VT program state."""

    name: str
    switch_id: int
    ports: tuple[int, ...]
    host_ports: tuple[int, ...]
    trees: tuple[tuple[int, int], ...]  # (VT id, port bitmap): check_tree
    links: tuple[tuple[int, int], ...]  # (edge id, port): check_hop and check_stop
    pushes: tuple[VtPush, ...] = ()

    @property
    def ingress(self) -> bool:
        return bool(self.host_ports)


@dataclass(frozen=True)
class VtPlan:
    """Everything the VT combined compile decided; backends render it, :mod:`runtime.vt_sim` runs it."""

    strategy: str
    max_rules: int | None
    target: str | None
    max_labels: int
    pipeline: ir.Pipeline
    receiver_sets: tuple[ReceiverSet, ...]
    switches: dict[str, VtSwitchPlan]
    vts: dict[int, tuple[tuple[str, str], ...]]  # VT id -> links, for delivery.json
    fallbacks: int = 0
    compile_stats: dict[str, Any] = field(default_factory=dict)
    mask_width: int = MASK_BITS

    def stats(self) -> dict[str, Any]:
        pushes = [p for s in self.switches.values() for p in s.pushes]
        sizes = [SHIM + LABEL_BYTES * len(p.labels) for p in pushes]
        return {
            "delivery": f"vt:{self.strategy}", "max_rules": self.max_rules, "label_bytes": LABEL_BYTES,
            "max_labels": self.max_labels, "receiver_sets": len(self.receiver_sets), "pushes": len(pushes),
            "vts": len(self.vts), "fallbacks": self.fallbacks,
            "check_tree_entries": {"max": max((len(s.trees) for s in self.switches.values()), default=0),
                                   "total": sum(len(s.trees) for s in self.switches.values())},
            "stack_bytes": {"max": max(sizes, default=0),
                            "mean": round(sum(sizes) / len(sizes), 2) if sizes else 0.0},
            "labels": {"trees": sum(p.trees for p in pushes), "hops": sum(p.hops for p in pushes),
                       "stops": sum(p.stops for p in pushes)},
            "recirculations_per_switch": "labels + copies - 1",
            "ingress_pipeline_entries": len(self.pipeline.entries),
        }


def mask_bits(topology: Topology) -> int:
    """Bits of the port bitmaps: 8, 16, 32 or 64, or the next multiple of 64, whichever first holds
    the highest port (bit p-1 for port p). Not always 64 as in the dissertation: a Tofino switch keeps
    two bitmaps per label position in PHV (16 positions x 2 x 64 bits did not fit bf-p4c's PHV
    allocation beside the packet's headers), and a 4-port switch needs 8 bits."""
    top = max((p for s in topology.switches() for p in topology.ports(s)), default=0)
    narrow = [w for w in NARROW_MASKS if top <= w]
    return narrow[0] if narrow else MASK_BITS * max(1, -(-top // MASK_BITS))


def rules_workload(topology: Topology, rsets: tuple[ReceiverSet, ...]) -> Workload:
    """Statistics for the workload-driven strategies, read off the receiver sets (module docstring)."""
    hosts = topology.hosts()
    members = [{topology.host_by_id(h) for h in r.hosts} for r in rsets]
    anyone = set().union(*members) if members else set()
    subscribers = {p: tuple(h for h in hosts if h in anyone and h != p) for p in hosts}
    frequency = {h: (sum(h in m for m in members) / len(members) if members else 0.0) for h in hosts}
    publishers = tuple(p for p in hosts if subscribers[p])
    return Workload(publishers, {p: subscribers[p] for p in publishers}, frequency)


def plan_vt(
    topology: Topology,
    rules: ast.RuleSet,
    spec: Spec,
    strategy: str = DEFAULT_STRATEGY,
    *,
    max_rules: int | None = DEFAULT_MAX_RULES,
    target: str | None = None,
    max_labels: int | None = None,
    options: CompileOptions = CompileOptions(),
    mode: str = "single",
) -> VtPlan:
    """Compile ``rules`` (host ids as ports) for VT delivery on ``topology``."""
    refuse_state(rules, f"vt:{strategy}")
    limit = VT_MAX_LABELS[target or "bmv2"]
    n_max = limit if max_labels is None else min(max_labels, limit)
    if n_max < 1:
        raise P4subError("--max-labels must be at least 1 (a fallback VT needs one label)")
    compiled = compile_rules(spec, rules, dataclasses.replace(options, port_bits=32, delivery="groups", lanes=None))
    pipeline, rsets = receiver_pipeline(compiled.pipeline)
    by_id = {topology.node_id(h): h for h in topology.hosts()}
    unknown = sorted({h for r in rsets for h in r.hosts if h not in by_id})
    if unknown:
        raise P4subError(f"rules forward to host id(s) {unknown} that the topology does not have")

    table = VtTable(topology, max_rules=max_rules)
    chosen = make_strategy(strategy)
    install_strategy(chosen, table, rules_workload(topology, rsets) if chosen.uses_workload else None)
    g = VtGraph.of(topology)
    ingress = [s for s in topology.switches() if topology.host_ports(s)]
    pushes: dict[str, list[VtPush]] = {s: [] for s in ingress}
    fallbacks = 0
    for s in ingress:
        for r in rsets:
            receivers = [by_id[h] for h in r.hosts]
            # Pushes are per (ingress switch, receiver set), not per publisher: every installed VT may serve.
            enc = encode(g, table.view(), s, receivers, mode=mode)
            labels = tuple(lab.pack() for lab in enc.labels())
            if len(labels) > n_max:
                edges = steiner(g, g.index[s], [g.index[h] for h in receivers])
                vt = table.install(edges, f"fallback {s} rset {r.rsid}") if len(edges) > 1 else None
                if vt is None:
                    raise P4subError(f"receiver set {r.rsid} from {s} needs {len(labels)} labels (more than "
                                     f"{n_max}) and a fallback VT does not fit: raise --max-labels or --max-rules")
                enc = encode(g, {vt.vt_id: vt.edges}, s, receivers, mode=mode)
                labels = tuple(lab.pack() for lab in enc.labels())
                fallbacks += 1
                pushes[s].append(VtPush(r.rsid, labels, len(enc.trees), len(enc.hops), len(enc.stops), True))
            else:
                pushes[s].append(VtPush(r.rsid, labels, len(enc.trees), len(enc.hops), len(enc.stops)))

    switches = {}
    for s in topology.switches():
        ports = tuple(topology.ports(s))
        trees = tuple(sorted(table.masks(s).items()))
        links = tuple(table.edge_ids.incident(s))
        switches[s] = VtSwitchPlan(s, topology.node_id(s), ports, tuple(topology.host_ports(s)), trees, links,
                                   tuple(pushes.get(s, ())))
    vts = {t: tuple(table.edge_ids.edge(e) for e in sorted(vt.edges)) for t, vt in table.trees.items()}
    return VtPlan(strategy, max_rules, target, n_max, pipeline, rsets, switches, vts, fallbacks, dict(compiled.stats),
                  mask_bits(topology))


def vt_plan_json(plan: VtPlan) -> dict[str, Any]:
    """The plan as JSON (``OUT/delivery.json``)."""
    return {
        "format": "p4sub-delivery-vt/1",
        "strategy": plan.strategy, "max_rules": plan.max_rules, "target": plan.target, "max_labels": plan.max_labels,
        "mask_bits": plan.mask_width,
        "label": {"bytes": LABEL_BYTES, "type_bits": 2, "id_bits": 14, "types": {"tree": 1, "hop": 2, "stop": 3},
                  "ethertype": "0x9999"},
        "receiver_sets": [{"rsid": r.rsid, "hosts": list(r.hosts)} for r in plan.receiver_sets],
        "vts": {str(t): [list(e) for e in edges] for t, edges in plan.vts.items()},
        "switches": {
            s.name: {"id": s.switch_id, "ports": list(s.ports), "host_ports": list(s.host_ports),
                     "check_tree": [list(x) for x in s.trees], "links": [list(x) for x in s.links],
                     "pushes": [{"rsid": p.rsid, "labels": [f"0x{w:04x}" for w in p.labels],
                                 "trees": p.trees, "hops": p.hops, "stops": p.stops, "fallback": p.fallback}
                                for p in s.pushes]}
            for s in plan.switches.values()
        },
        "fallbacks": plan.fallbacks,
    }


def push_words(plan: VtPlan, push: VtPush) -> tuple[int, ...]:
    """The push action's arguments: count, then ``max_labels`` 16-bit labels (unused ones 0)."""
    return (len(push.labels), *push.labels, *([0] * (plan.max_labels - len(push.labels))))

