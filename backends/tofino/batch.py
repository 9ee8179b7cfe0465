"""Packets that carry several messages (ITCH ``add_order[12]``, INT ``int_hop[8]``) on Tofino.

The IR evaluates one message. BMv2 evaluates a packet's messages one per pass, resubmitting the
packet between passes (docs/bmv2.md). Tofino resubmits a packet at most once, and each extra pass
through recirculation costs a trip through the pipe, so p4sub evaluates all messages in one pass
instead: the field tables are copied once per message slot (``field_x_m3`` matches
``hdr.add_order[3].price`` and keeps its state in ``meta.p4sub_state_m3``). The copies do not depend
on each other, so they run side by side in the same stages: the stage count is that of one message,
the memory that of one message times the number of slots (the resource estimate says so).

What a packet then does (the "union" of BMv2, spelled for TNA):

* ingress: every slot's tables run whether its message is there or not: no condition guards a
  slot, since bf-p4c places a condition's tables after it (twelve guarded slots ran one after the
  other, 20 stages and more). A packet the tables can test is multicast to the *union group*
  (every port any leaf forwards to, fixed id 0xFFFF like BMv2's). The slots' leaf states and
  validity bits (``meta.p4sub_valid_m<i>``, set by the parser state that extracts element ``i``:
  free, where a copy of ``isValid()`` in an action crashed bf-p4c) travel to the egress in a bridged
  header (``p4sub_bridge``), which the egress parser removes again;
* egress: slot ``i``'s keep table, keyed on (egress port, slot i's leaf state, slot i's validity),
  sets ``meta.p4sub_keep_m<i>`` when that port subscribed to message ``i``; a copy with no kept
  message is dropped. Each subscribed port gets the whole packet.

The ingress does not test whether any message goes anywhere: a per-slot hit flag written by twelve
leaf tables needs a PHV container each (flags sharing one cannot be written in one stage), and
ITCH's twelve messages leave no room for them (bf-p4c: "PHV allocation was not successful"). So a
packet none of whose messages is subscribed is still replicated to the subscribed ports and dropped
in each egress: no port gets it, but the traffic manager copies it.

Union mode does not remove, per port, the messages it did not subscribe to (BMv2's ``prune``). The
egress would have to parse the messages to remove them, and Tofino 1's egress parser reaches at most
160 bytes into a packet (p4c ``specs/parde_spec.h``, ``maxParseDepth(EGRESS)``): the Ethernet, IPv4,
UDP and MoldUDP64 headers take 62 bytes and each Add Order block 38, so at most two messages could
be pruned. Ports get the packet's other messages too (message-level false positives, which the
replay counts as such). Split mode (:mod:`backends.tofino.split`) delivers each message alone instead,
with one copy of the tables, at the cost of a recirculated copy per message; ``auto`` takes it when
the union does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from backends.common.messages import MessageLayout
from compiler import ir
from compiler.base import TargetError

UNION_GROUP = 0xFFFF
EGRESS_PORT_KEY = "eg_intr_md.egress_port"
BATCH_MODES = ("auto", "single", "first", "union", "split")


@dataclass(frozen=True)
class Batched:
    """A pipeline rewritten for several message slots, and where each table belongs."""

    pipeline: ir.Pipeline
    mode: str
    slot_of: dict[str, int | None]
    gress_of: dict[str, str]
    ingress_control: tuple[tuple[int | None, str], ...]
    egress_control: tuple[str, ...] = ()
    bridged: tuple[ir.Metadata, ...] = ()
    keep_fields: tuple[str, ...] = ()
    union_group: ir.MulticastGroup | None = None
    groups: tuple[ir.MulticastGroup, ...] = field(default_factory=tuple)
    # Port-bitmap delivery: egress-only metadata and the bitmap fields.
    egress_meta: tuple[ir.Metadata, ...] = ()
    bitmap: ir.Delivery | None = None
    # Union: slot i's validity, set to 1 by the ingress parser where it extracts element i.
    valid_fields: tuple[str, ...] = ()
    # Split: the pass-1 groups (one copy per message to the recirculation port; backends.tofino.split).
    split_groups: tuple[ir.MulticastGroup, ...] = ()


def choose_mode(layout: MessageLayout, requested: str) -> str:
    """``single`` for scalar query headers; for a stack ``union`` (``auto``: the backend falls back to
    ``split`` when the union does not fit), ``first`` or ``split`` on request."""
    if requested not in BATCH_MODES:
        raise TargetError(f"tofino: unknown batch mode {requested!r} (one of {', '.join(BATCH_MODES)})")
    if layout.stack is None:
        if requested in ("auto", "single"):
            return "single"
        raise TargetError(f"tofino: batch mode {requested} needs a queried header stack; the tables query only "
                          f"scalar headers ({', '.join(layout.query_headers)})")
    if requested == "single":
        raise TargetError(f"tofino: the tables query header stack {layout.stack}; use batch mode first or union")
    if layout.depth == 1 or requested == "first":
        return "first"
    if requested == "split":
        return "split"
    return "union"


def slot_name(name: str, slot: int) -> str:
    return f"{name}_m{slot}"


def single(pipeline: ir.Pipeline, mode: str) -> Batched:
    """One message per packet (``single``), or only slot 0 of the stack (``first``): the IR as it is."""
    slot = 0 if mode == "first" else None
    names = [t.name for t in pipeline.tables]
    return Batched(pipeline, mode, {n: slot for n in names}, {n: "ingress" for n in names},
                   tuple((slot, n) for n in pipeline.control), groups=pipeline.multicast_groups)


PORT_BIT_TABLE = "p4sub_port_bit"
PORT_BIT_ACTION = "p4sub_port_in_bitmap"
NO_PORTS_TABLE = "p4sub_no_ports"
NO_PORTS_ACTION = "p4sub_nowhere"


def bitmap(pipeline: ir.Pipeline, mode: str) -> Batched:
    """One message per packet with port-bitmap delivery (:class:`compiler.ir.Delivery`).

    The ingress ORs the lanes' bitmaps; the table ``p4sub_no_ports`` (one ternary entry: every bit
    clear) drops a packet that goes nowhere, any other is multicast to the delivery group with the
    bitmap bridged; in the egress, ``p4sub_port_bit`` (the copy's port, and that port's bit of the
    bitmap as a ternary key) hits when the port's bit is set, and a copy that misses is dropped
    (per-port pruning in the egress, as Elmo does). Tables, not conditions: a Tofino condition reads
    at most 4 bytes and 12 bits, and a bitmap of 198 ports is 25 bytes.
    """
    return with_bitmap(single(bitmap_pipeline(pipeline), mode))


def bitmap_pipeline(pipeline: ir.Pipeline) -> ir.Pipeline:
    """The pipeline with its bitmap fields in whole PHV containers (refused past 9 x 64 ports)."""
    if pipeline.delivery.ports and pipeline.delivery.width > 9 * 64:
        raise TargetError(f"tofino: a port bitmap of {pipeline.delivery.width} bits")
    return _whole_containers(pipeline)


def with_bitmap(base: Batched) -> Batched:
    """``base`` (one message's tables: ``single``, or split mode's pass 2) with port-bitmap delivery's
    tables added: ``p4sub_no_ports`` in the ingress, ``p4sub_port_bit`` in the egress, the bitmap bridged."""
    pipeline = base.pipeline
    d = pipeline.delivery
    width = container_width(d.width)
    bitmap_key = ir.Key(d.fields[0], width, "ternary")
    keep = ir.Action(PORT_BIT_ACTION)
    table = ir.Table(PORT_BIT_TABLE, (ir.Key(EGRESS_PORT_KEY, 9, "exact"), bitmap_key), (PORT_BIT_ACTION, "NoAction"),
                     "NoAction", size=max(64, -(-len(d.ports) * 5 // 4)), role="port_bit")
    entries = tuple(ir.Entry(PORT_BIT_TABLE, (ir.Exact(p), ir.Ternary(d.bit(p), d.bit(p))), PORT_BIT_ACTION, (), 1)
                    for p in d.ports)
    nowhere = ir.Action(NO_PORTS_ACTION)
    no_ports = ir.Table(NO_PORTS_TABLE, (bitmap_key,), (NO_PORTS_ACTION, "NoAction"), "NoAction", size=64,
                        role="port_bit")
    entries += (ir.Entry(NO_PORTS_TABLE, (ir.Ternary(0, (1 << width) - 1),), NO_PORTS_ACTION, (), 1),)
    rewritten = replace(pipeline, actions=pipeline.actions + (keep, nowhere),
                        tables=pipeline.tables + (no_ports, table), entries=pipeline.entries + entries)
    return replace(base, pipeline=rewritten, slot_of={**base.slot_of, PORT_BIT_TABLE: None, NO_PORTS_TABLE: None},
                   gress_of={**base.gress_of, PORT_BIT_TABLE: "egress", NO_PORTS_TABLE: "ingress"},
                   egress_control=(PORT_BIT_TABLE,), bridged=(ir.Metadata(d.fields[0], width),), bitmap=d)


def container_width(bits: int) -> int:
    """The narrowest of Tofino's PHV container sizes (8, 16, 32 bits, then whole 32-bit words) that
    holds ``bits``."""
    return next((w for w in (8, 16, 32) if bits <= w), -(-bits // 32) * 32)


def _whole_containers(pipeline: ir.Pipeline) -> ir.Pipeline:
    """The bitmap fields (and the action parameters ORed into them) widened to whole PHV containers,
    high bits zero: bf-p4c could not allocate a 198-bit bitmap ORed with another ("field slices
    remain unallocated"), whose slices do not line up with containers. Bit ``i`` is still port ``i``."""
    d = pipeline.delivery
    width = container_width(d.width)
    if width == d.width:
        return pipeline
    fields = set(d.fields)
    metadata = tuple(replace(m, width=width) if m.name in fields else m for m in pipeline.metadata)
    actions = []
    for a in pipeline.actions:
        widened = {p.args[1] for p in a.body if p.op in ("set_meta", "or_meta") and p.args[0] in fields}
        actions.append(replace(a, params=tuple(replace(q, width=width) if q.name in widened else q for q in a.params)))
    return replace(pipeline, metadata=metadata, actions=tuple(actions))


def replicate(pipeline: ir.Pipeline, layout: MessageLayout) -> Batched:
    """The pipeline with its field tables copied per slot and the egress keep tables (no leaf table: the keep
    tables turn a slot's leaf state into ports)."""
    if any(t.role == "call" for t in pipeline.tables):
        raise TargetError("tofino: user actions (call tables) with several messages per packet: two messages "
                          "could call the same action with different arguments; use batch mode first")
    depth = layout.depth
    meta_names = {m.name for m in pipeline.metadata}
    leaf = [t for t in pipeline.tables if t.role == "leaf"]
    if len(leaf) != 1:
        raise TargetError(f"tofino: expected one leaf table, found {len(leaf)}")
    leaf_table = leaf[0]

    def rename_meta(ref: str, i: int) -> str:
        return slot_name(ref, i) if ref in meta_names else ref

    writer_actions = {a.name for a in pipeline.actions if any(p.op == "set_meta" for p in a.body)}

    def rename_action(name: str, i: int) -> str:
        return slot_name(name, i) if name in writer_actions else name

    metadata: list[ir.Metadata] = []
    actions: list[ir.Action] = [a for a in pipeline.actions if a.name not in writer_actions
                                and a.name not in ("forward", "multicast", "drop_packet")]
    tables: list[ir.Table] = []
    entries: list[ir.Entry] = []
    slot_of: dict[str, int | None] = {}
    gress_of: dict[str, str] = {}
    control: list[tuple[int | None, str]] = []
    valid_fields, keep_fields = [], []
    state_width = next(m.width for m in pipeline.metadata if m.name == ir.STATE)
    by_table: dict[str, list[ir.Entry]] = {}
    for e in pipeline.entries:
        by_table.setdefault(e.table, []).append(e)
    # Slot i's element may be absent: its tables run anyway (below), the egress asks.
    leaf_rows = _leaf_ports(pipeline, by_table.get(leaf_table.name, []))
    rows = [(port, state) for state, ports in leaf_rows for port in sorted(ports)]

    for i in range(depth):
        metadata += [ir.Metadata(slot_name(m.name, i), m.width) for m in pipeline.metadata]
        for a in pipeline.actions:
            if a.name in writer_actions:
                body = tuple(ir.Primitive(p.op, (rename_meta(p.args[0], i),) + p.args[1:]) if p.op == "set_meta" else p
                             for p in a.body)
                actions.append(ir.Action(slot_name(a.name, i), a.params, body))
        for t in pipeline.tables:
            if t.role == "leaf":
                continue
            name = slot_name(t.name, i)
            keys = tuple(ir.Key(rename_meta(k.field, i), k.width, k.match_kind) for k in t.keys)
            tables.append(replace(t, name=name, keys=keys, actions=tuple(rename_action(a, i) for a in t.actions),
                                  default_action=rename_action(t.default_action, i),
                                  on_miss=slot_name(t.on_miss, i) if t.on_miss else None))
            slot_of[name], gress_of[name] = i, "ingress"
            entries += [replace(e, table=name, action=rename_action(e.action, i)) for e in by_table.get(t.name, [])]
        control += [(i, slot_name(n, i)) for n in pipeline.control if n != leaf_table.name]
        # Slot i's egress keep table: did the copy's port subscribe to message i? Keyed on the slot's
        # validity too: an absent message's state means nothing.
        valid = f"meta.p4sub_valid_m{i}"
        valid_fields.append(valid)
        metadata.append(ir.Metadata(valid, 1))
        keep = f"meta.p4sub_keep_m{i}"
        keep_fields.append(keep)
        keep_action = ir.Action(f"p4sub_keep_m{i}", (ir.Param("keep", 1),), (ir.Primitive("set_meta", (keep, "keep")),))
        actions.append(keep_action)
        state_key = ir.Key(slot_name(ir.STATE, i), state_width, "exact")
        keep_table = ir.Table(f"keep_m{i}", (ir.Key(EGRESS_PORT_KEY, 9, "exact"), state_key, ir.Key(valid, 1, "exact")),
                              (keep_action.name, "NoAction"), "NoAction", size=max(64, -(-len(rows) * 5 // 4)),
                              role="keep")
        tables.append(keep_table)
        slot_of[keep_table.name], gress_of[keep_table.name] = i, "egress"
        entries += [ir.Entry(keep_table.name, (ir.Exact(p), ir.Exact(s), ir.Exact(1)), keep_action.name, (1,))
                    for p, s in rows]
    all_ports = sorted({p for _, ports in leaf_rows for p in ports})
    union = ir.MulticastGroup(UNION_GROUP, tuple(all_ports))
    keep_meta = tuple(ir.Metadata(k, 1) for k in keep_fields)
    bridged = tuple(ir.Metadata(slot_name(ir.STATE, i), state_width) for i in range(depth))
    bridged += tuple(ir.Metadata(v, 1) for v in valid_fields)
    rewritten = replace(pipeline, metadata=tuple(metadata) + keep_meta, actions=tuple(actions), tables=tuple(tables),
                        control=tuple(n for _, n in control), entries=tuple(entries), multicast_groups=(union,))
    return Batched(rewritten, "union", slot_of, gress_of, tuple(control),
                   tuple(f"keep_m{i}" for i in range(depth)), bridged, tuple(keep_fields), union, (union,),
                   valid_fields=tuple(valid_fields))


def _leaf_ports(pipeline: ir.Pipeline, entries: list[ir.Entry]) -> list[tuple[int, tuple[int, ...]]]:
    """(state, ports) of every leaf entry: a forward's port, a multicast group's ports, none for a drop."""
    groups = {g.id: g.ports for g in pipeline.multicast_groups}
    out = []
    for e in entries:
        action = pipeline.action(e.action)
        bound = dict(zip((p.name for p in action.params), e.args))
        ports: set[int] = set()
        for prim in action.body:
            if prim.op == "set_egress_port":
                ports.add(bound[prim.args[0]])
            elif prim.op == "set_mcast_group":
                ports.update(groups[bound[prim.args[0]]])
        out.append((e.matches[0].value, tuple(sorted(ports))))
    return out
