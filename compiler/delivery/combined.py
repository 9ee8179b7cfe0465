"""Combined compile: subscriptions evaluated at the ingress edge, delivery trees carried in a label stack.

``p4sub route ... --delivery header-stack:ENCODING`` builds a :class:`CombinedPlan`: plain data
that both backends render and that :mod:`runtime.stack_sim` runs.

* **Ingress** (every host-facing switch, since any host may publish): the network's subscriptions
  are compiled once by the core (:func:`compiler.compile.compile_rules`) with host ids as ports;
  each leaf's host set becomes a *receiver set* with an id (``rsid``, from 1; 0 = nobody), and the
  leaf actions are rewritten to ``p4sub_set_rset(rset)``, which writes ``meta.p4sub_rset``. Leaves
  with the same host set share one id. The pipeline is the same for every ingress switch.
* **Push table** (where the label bytes live): a separate exact table ``p4sub_push`` per ingress
  switch, keyed by ``meta.p4sub_rset``, whose action ``p4sub_push_stack(count, l0 .. l{N-1})``
  holds the encoded labels as fixed-width parameters (one parameter per label, ``id|value``
  bytes; unused ones are 0). The tree depends on where the packet enters, so the same rsid has a
  different stack on each ingress switch; one entry per (ingress switch, receiver set).
* **Transit** (every switch, the ingress ones included, since a pushed stack is processed by the
  pushing switch in the same pass): the stateless stack program. Its entries: its own switch id
  (the default action of the keyless ``p4sub_self``), its host ports (``p4sub_host_port``: strip
  the stack on the way out), multicast groups for port subsets, and stored trees (fallbacks).

Port subsets: a group's id *is* the port bitmap (bit ``p - 1`` for port ``p``), so a bitmask label
selects its group without a lookup and the port encoding ORs its own labels into the same bitmap.

Encodings (the labels come from the encoders of :mod:`compiler.delivery`, nothing is re-encoded here):

* ``port``, ``bitmask``: :class:`~compiler.delivery.switch_port.SwitchPort`,
  :class:`~compiler.delivery.switch_bitmask.SwitchBitmask`.
* ``mcgroup``: :class:`~compiler.delivery.switch_mcgroup.SwitchMcGroup` with the *full* port-subset
  group table (``split=1``, 2^n - 1 groups per n-port switch), whose group id is the port bitmap:
  the label names the switch's multicast group directly (Listing 3.7's ``do_multicast``), no
  index -> bitmap table. The subset-split tables (``split=c``) need c - 1 recirculations per
  switch to reach the next block's label, which the stack program does not do; they are not rendered.
* ``mixed``: :class:`~compiler.delivery.mixed.Mixed` over the same group table: per switch a
  port label (one port) or a group label (several ports; with ``split=1`` one group always covers
  them, so the bitmask tag is never chosen but is rendered). The top two bits of the value
  (``CombinedPlan.tag_bits``, as the encoder lays them out) are the strategy tag (:data:`MIXED_TAGS`);
  the program dispatches on it. A label with the unused tag 3 yields no port.
A switch with at most :data:`ALL_SUBSETS_PORTS` ports gets every non-empty subset (its state then
depends on the topology only); a bigger one gets the subsets the compiled trees use.

**Header limits** (:data:`LIMITS`): the stack must fit the parser's fixed header stack. A tree
whose labels do not fit falls back to a *stored tree*: the ingress pushes one label ``(0, tree
id)`` (switch id 0 is reserved, as in :mod:`compiler.delivery.stored_tree`) and each switch of the
tree gets a ``p4sub_stored`` entry ``tree id -> port bitmap``. ``fallbacks`` counts them.
Camus per-switch filtering as a fallback is not implemented.

Termination: every switch removes its own label(s) from every copy it sends (a stored tree is a
tree that never returns to its parent), so a copy's stack shrinks at every hop and a stack of
``count`` labels travels at most ``count`` hops; a switch that finds no label of its own, a
truncated stack or one deeper than the parser's stack drops the packet and counts the reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Collection

from compiler import ir
from compiler import rules as ast
from compiler.base import P4subError
from compiler.compile import CompileOptions, compile_rules
from compiler.delivery.mixed import TAG_BITMASK, TAG_GROUP, TAG_PORT, Mixed
from compiler.delivery.stack import HeaderStackEncoding, Widths, mask_of
from compiler.delivery.stateless import refuse_state
from compiler.delivery.switch_bitmask import SwitchBitmask
from compiler.delivery.switch_mcgroup import SwitchMcGroup
from compiler.delivery.switch_port import SwitchPort
from compiler.delivery.tree import DeliveryTree, steiner_tree
from compiler.delivery.wire import ETH_HEADER, STACK_SHIM
from compiler.network import Topology, ceil_bytes
from compiler.spec import Spec

#: What ``--delivery header-stack:E`` accepts, and what the combined compile renders.
DELIVERY_ENCODINGS = ("port", "bitmask", "mcgroup", "mixed")
RENDERED_ENCODINGS = ("port", "bitmask", "mcgroup", "mixed")
#: The mixed encoding's strategy tag values (the tag is the top ``CombinedPlan.tag_bits`` bits of the value).
MIXED_TAGS = {"port": TAG_PORT, "bitmask": TAG_BITMASK, "group": TAG_GROUP}
RSET_META = "meta.p4sub_rset"
SET_RSET = "p4sub_set_rset"
ALL_SUBSETS_PORTS = 8
#: Port bitmaps are multicast group ids: 16-bit on both targets, and P4Runtime on BMv2 accepts 1..32767.
MAX_PORT = 15
STORED_ID = 0

#: Drop reasons, in the order of the P4 programs' drop counter indices.
DROP_REASONS = ("parser-error", "not-a-stack", "no-subscriber", "no-own-label", "unknown-tree", "no-port", "ingress-port")


@dataclass(frozen=True)
class StackLimit:
    """The largest stack a target's program parses: labels, and bytes of the whole shim + labels."""

    target: str
    max_labels: int
    max_bytes: int
    why: str


#: Documented choices (docs/delivery.md, "Combined compile").
LIMITS = {
    "bmv2": StackLimit("bmv2", 32, 32 * 4 + STACK_SHIM,
                       "BMv2 has no parse-depth limit; the program's header stack holds 32 labels "
                       "(the unrolled ingress and egress chains grow with it)"),
    "tofino": StackLimit("tofino", 16, 160 - ETH_HEADER - STACK_SHIM,
                         "Tofino's egress parser reads at most 160 bytes and unrolls the label loop into "
                         "parser TCAM rows; 16 labels keep the PHV cost small"),
}


@dataclass(frozen=True)
class ReceiverSet:
    """Hosts (by id) one leaf forwards to; ``rsid`` is the value the leaf action writes."""

    rsid: int
    hosts: tuple[int, ...]


@dataclass(frozen=True)
class Push:
    """What an ingress switch pushes for one receiver set: ``labels`` as ``(switch id, value)``.

    ``kind`` is ``stack`` (the encoding's labels) or ``stored`` (one label ``(0, tree id)``).
    ``tree_labels`` is how many labels the tree needed in the encoding (equal to ``len(labels)``
    unless it fell back)."""

    rsid: int
    kind: str
    labels: tuple[tuple[int, int], ...]
    tree_labels: int


@dataclass(frozen=True)
class SwitchPlan:
    """One switch's stack program state."""

    name: str
    switch_id: int
    ports: tuple[int, ...]
    host_ports: tuple[int, ...]
    groups: tuple[tuple[int, tuple[int, ...]], ...]  # (group id = port bitmap, ports)
    stored: tuple[tuple[int, int], ...]  # (tree id, port bitmap)
    pushes: tuple[Push, ...] = ()  # ingress switches only

    @property
    def ingress(self) -> bool:
        return bool(self.host_ports)

    def entry_count(self) -> int:
        """Table entries (self + host ports + stored + pushes) plus multicast groups."""
        return 1 + len(self.host_ports) + len(self.stored) + len(self.pushes) + len(self.groups)


@dataclass(frozen=True)
class CombinedPlan:
    """Everything the combined compile decided; backends render it, :mod:`runtime.stack_sim` runs it."""

    encoding: str
    target: str | None
    id_bytes: int
    value_bytes: int
    max_labels: int
    max_bytes: int
    pipeline: ir.Pipeline
    receiver_sets: tuple[ReceiverSet, ...]
    switches: dict[str, SwitchPlan]
    fallbacks: int = 0
    compile_stats: dict[str, Any] = field(default_factory=dict)
    #: Strategy-tag bits at the top of the label value (mixed: 2; the other encodings: 0).
    tag_bits: int = 0

    @property
    def label_bytes(self) -> int:
        return self.id_bytes + self.value_bytes

    @property
    def tag_shift(self) -> int:
        """Where the tag starts in the value: ``tag = value >> tag_shift`` (the value's width without a tag)."""
        return 8 * self.value_bytes - self.tag_bits

    @property
    def mask_width(self) -> int:
        return 16

    def stats(self) -> dict[str, Any]:
        pushes = [p for s in self.switches.values() for p in s.pushes]
        stack_bytes = [STACK_SHIM + len(p.labels) * self.label_bytes for p in pushes]
        transit = [s.entry_count() - len(s.pushes) for s in self.switches.values()]
        extra: dict[str, Any] = {}
        if self.tag_bits:
            names = {v: k for k, v in MIXED_TAGS.items()}
            tags = [names.get(v >> self.tag_shift, "invalid") for p in pushes if p.kind == "stack" for _, v in p.labels]
            extra["label_tags"] = {k: tags.count(k) for k in MIXED_TAGS}
        return {
            "delivery": f"header-stack:{self.encoding}",
            "label_bytes": self.label_bytes, "id_bytes": self.id_bytes, "value_bytes": self.value_bytes,
            "max_labels": self.max_labels, "max_stack_bytes": self.max_bytes,
            "receiver_sets": len(self.receiver_sets),
            "pushes": len(pushes),
            "fallbacks": self.fallbacks,
            "fallback_kind": "stored-tree",
            "stack_bytes": {"max": max(stack_bytes, default=0),
                            "mean": round(sum(stack_bytes) / len(stack_bytes), 2) if stack_bytes else 0.0},
            "transit_entries": {"max": max(transit, default=0), "total": sum(transit)},
            "recirculations_per_packet": 0,
            "ingress_pipeline_entries": len(self.pipeline.entries),
            **extra,
        }


def encoding_for(name: str, topology: Topology) -> HeaderStackEncoding:
    """The encoder whose labels the combined compile pushes."""
    if name not in DELIVERY_ENCODINGS:
        raise P4subError(f"--delivery header-stack:{name}: unknown encoding (one of {', '.join(DELIVERY_ENCODINGS)})")
    if name not in RENDERED_ENCODINGS:
        raise P4subError(f"--delivery header-stack:{name}: the combined compile renders "
                         f"{' and '.join(RENDERED_ENCODINGS)} only; {name} exists in `p4sub eval delivery` "
                         "(simulator) but has no stack program yet")
    too_big = [s for s in topology.switches() if max(topology.ports(s), default=0) > MAX_PORT]
    if too_big:
        raise P4subError(f"--delivery header-stack: switch {too_big[0]} has ports above {MAX_PORT}; the stack "
                         "program uses port bitmaps as 16-bit multicast group ids")
    widths = Widths.derive(topology)
    if name == "port":
        return SwitchPort(topology, widths)
    if name == "bitmask":
        return SwitchBitmask(topology, widths)
    # split=1: the group id is the port bitmap, which is what the plan installs as multicast groups.
    return SwitchMcGroup(topology, widths, split=1) if name == "mcgroup" else Mixed(topology, widths, split=1)


def receiver_pipeline(pipeline: ir.Pipeline, host_bits: int = 32) -> tuple[ir.Pipeline, tuple[ReceiverSet, ...]]:
    """Rewrite the leaf actions of a pipeline compiled with host ids as ports to write receiver-set ids.

    ``forward(h)`` becomes the set ``{h}``, ``multicast(g)`` the group's hosts; equal sets share
    an id (ids from 1 in order of first appearance in the leaf entries). The multicast groups go.
    """
    groups = {g.id: tuple(sorted(g.ports)) for g in pipeline.multicast_groups}
    leaf_tables = {t.name for t in pipeline.tables if t.role == "leaf"}
    ids: dict[tuple[int, ...], int] = {}
    entries = []
    for e in pipeline.entries:
        if e.table not in leaf_tables:
            entries.append(e)
            continue
        action = pipeline.action(e.action)
        bound = dict(zip((p.name for p in action.params), e.args))
        hosts: set[int] = set()
        dropped = False
        for prim in action.body:
            if prim.op == "set_egress_port":
                hosts.add(bound[prim.args[0]])
            elif prim.op == "set_mcast_group":
                hosts.update(groups[bound[prim.args[0]]])
            elif prim.op == "drop":
                dropped = True
        if dropped or not hosts:
            entries.append(e)
            continue
        key = tuple(sorted(hosts))
        rsid = ids.setdefault(key, len(ids) + 1)
        entries.append(dataclasses.replace(e, action=SET_RSET, args=(rsid,)))
    width = max(1, len(ids).bit_length())
    width = max(8, ceil_bytes(width) * 8)
    set_rset = ir.Action(SET_RSET, (ir.Param("rset", width),), (ir.Primitive("set_meta", (RSET_META, "rset")),))
    used = {e.action for e in entries} | {t.default_action for t in pipeline.tables}
    tables = []
    for t in pipeline.tables:
        if t.name in leaf_tables:
            keep = tuple(a for a in t.actions if a in used and a not in ("forward", "multicast"))
            t = dataclasses.replace(t, actions=(SET_RSET,) + tuple(a for a in keep if a != SET_RSET))
        tables.append(t)
    actions = tuple(a for a in pipeline.actions if a.name in used or any(a.name in t.actions for t in tables))
    actions = tuple(a for a in actions if a.name != SET_RSET) + (set_rset,)
    out = dataclasses.replace(pipeline, tables=tuple(tables), entries=tuple(entries), actions=actions,
                              multicast_groups=(), metadata=tuple(pipeline.metadata) + (ir.Metadata(RSET_META, width),))
    return out, tuple(ReceiverSet(i, hosts) for hosts, i in ids.items())


def _tree_masks(tree: DeliveryTree) -> dict[str, int]:
    return {s: mask_of(ports) for s, ports in tree.branches}


def plan_combined(
    topology: Topology,
    rules: ast.RuleSet,
    spec: Spec,
    encoding: str = "port",
    *,
    target: str | None = None,
    max_labels: int | None = None,
    options: CompileOptions = CompileOptions(),
    seed: int = 0,
) -> CombinedPlan:
    """Compile ``rules`` (network rules: host ids as ports) for header-stack delivery on ``topology``.

    ``max_labels`` overrides the target's limit (:data:`LIMITS`; without a target, the BMv2 one).
    Trees come from :func:`compiler.delivery.tree.steiner_tree` (shortest-path heuristic, ``seed``).
    """
    refuse_state(rules, f"header-stack:{encoding}")
    enc = encoding_for(encoding, topology)
    limit = LIMITS[target or "bmv2"]
    label_bytes = enc.layout.size
    n_max = limit.max_labels if max_labels is None else max_labels
    if n_max < 1:
        raise P4subError("--max-labels must be at least 1 (a stored-tree fallback needs one label)")
    n_max = min(n_max, limit.max_labels, limit.max_bytes // label_bytes)
    # Leaf entries become receiver-set ids (receiver_pipeline): one lane whose leaves name the port sets.
    compiled = compile_rules(spec, rules, dataclasses.replace(options, port_bits=32, delivery="groups", lanes=None))
    pipeline, rsets = receiver_pipeline(compiled.pipeline)
    by_id = {topology.node_id(h): h for h in topology.hosts()}
    unknown = sorted({h for r in rsets for h in r.hosts if h not in by_id})
    if unknown:
        raise P4subError(f"rules forward to host id(s) {unknown} that the topology does not have")

    ingress = [s for s in topology.switches() if topology.host_ports(s)]
    pushes: dict[str, list[Push]] = {s: [] for s in ingress}
    used_masks: dict[str, set[int]] = {s: set() for s in topology.switches()}
    stored: dict[str, list[tuple[int, int]]] = {s: [] for s in topology.switches()}
    next_tree = 1
    max_tree = (1 << (8 * enc.layout.value_bytes)) - 1
    fallbacks = 0
    for s in ingress:
        for r in rsets:
            tree = steiner_tree(topology, s, [by_id[h] for h in r.hosts], seed=seed)
            labels = tuple(enc.labels(tree))
            masks = _tree_masks(tree)
            for sw, m in masks.items():
                used_masks[sw].add(m)
            if len(labels) <= n_max:
                pushes[s].append(Push(r.rsid, "stack", labels, len(labels)))
                continue
            if next_tree > max_tree:
                raise P4subError(f"more than {max_tree} stored-tree fallbacks: tree ids must fit the "
                                 f"{8 * enc.layout.value_bytes}-bit label value; raise --max-labels")
            for sw, m in masks.items():
                stored[sw].append((next_tree, m))
            pushes[s].append(Push(r.rsid, "stored", ((STORED_ID, next_tree),), len(labels)))
            next_tree += 1
            fallbacks += 1

    switches = {}
    for s in topology.switches():
        ports = tuple(topology.ports(s))
        if len(ports) <= ALL_SUBSETS_PORTS:
            masks = range(1, 1 << len(ports))
            groups = tuple((mask_of(sub), sub) for sub in (tuple(p for i, p in enumerate(ports) if m >> i & 1)
                                                            for m in masks))
            groups = tuple(sorted(groups))
        else:
            groups = tuple(sorted((m, tuple(_ports(m))) for m in used_masks[s]))
        switches[s] = SwitchPlan(s, topology.node_id(s), ports, tuple(topology.host_ports(s)), groups,
                                 tuple(stored[s]), tuple(pushes.get(s, ())))
    return CombinedPlan(encoding, target, enc.layout.id_bytes, enc.layout.value_bytes, n_max,
                        STACK_SHIM + n_max * label_bytes, pipeline, rsets, switches, fallbacks,
                        dict(compiled.stats),
                        8 * enc.layout.value_bytes - enc.tag_shift if isinstance(enc, Mixed) else 0)


def _ports(mask: int) -> list[int]:
    return [i + 1 for i in range(mask.bit_length()) if mask >> i & 1]


def pack_label(plan: CombinedPlan, label: tuple[int, int]) -> int:
    """A label as one integer of ``label_bytes`` bytes: id in the high bytes, value in the low ones."""
    return label[0] << (8 * plan.value_bytes) | label[1]


def push_args(plan: CombinedPlan, push: Push) -> tuple[int, ...]:
    """The push action's arguments: count, then ``max_labels`` packed labels (unused ones 0)."""
    packed = [pack_label(plan, lab) for lab in push.labels]
    return (len(packed), *packed, *([0] * (plan.max_labels - len(packed))))


def receivers_of(plan: CombinedPlan, rsid: int) -> Collection[int]:
    return next(r.hosts for r in plan.receiver_sets if r.rsid == rsid)


def plan_json(plan: CombinedPlan) -> dict[str, Any]:
    """The plan as JSON (``OUT/delivery.json``): what each switch has installed and why."""
    return {
        "format": "p4sub-delivery/1",
        "encoding": plan.encoding, "target": plan.target,
        "label": {"id_bytes": plan.id_bytes, "value_bytes": plan.value_bytes},
        "max_labels": plan.max_labels, "max_stack_bytes": plan.max_bytes,
        "receiver_sets": [{"rsid": r.rsid, "hosts": list(r.hosts)} for r in plan.receiver_sets],
        "switches": {
            s.name: {
                "id": s.switch_id, "ports": list(s.ports), "host_ports": list(s.host_ports),
                "groups": len(s.groups), "stored": [list(x) for x in s.stored],
                "pushes": [{"rsid": p.rsid, "kind": p.kind, "labels": [list(x) for x in p.labels],
                            "tree_labels": p.tree_labels} for p in s.pushes],
            } for s in plan.switches.values()
        },
        "fallbacks": plan.fallbacks,
    }
