"""The v1model program for a pipeline: ``program.p4``, and what the entry writers must know about it.

:func:`build_program` decides how messages are evaluated (see :class:`Bmv2Options` and
docs/bmv2.md), renders ``templates/program.p4.j2`` with the shared pieces of
:mod:`backends.common`, and returns a :class:`Bmv2Program`: the text plus the facts the P4Runtime
and CLI writers need (the extra egress tables and their entries, the union multicast group).

Modes (``Bmv2Options.batch``):

* ``single``: the queried headers are scalar headers; one packet is one message.
* ``first``: the queried header is a stack, only element 0 is evaluated (a fallback, documented).
* ``union``: message ``i`` is evaluated on pass ``i`` (the ingress resubmits the packet with the
  per-message results preserved); a packet goes to the union of its messages' ports (INT hops).
* ``prune``: as ``union``, and each port's copy keeps only the messages that port subscribed to;
  the count field and the IPv4/UDP lengths are fixed, the UDP checksum cleared (ITCH).
* ``auto`` (default): ``single`` for scalar query headers; else ``prune`` when the layout has a
  count field, else ``union``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from backends.bmv2 import state
from backends.bmv2.target import (
    MAX_GROUP_ID,
    RESUBMIT_FIELD_LIST,
    UNION_GROUP,
    V1MODEL,
)
from backends.common.controls import (
    action_decl,
    action_decls,
    apply_statements,
    chained_tables,
    pipeline_metadata_members,
    table_decl,
    user_call_members,
)
from backends.common.headers import (
    HEADERS_STRUCT,
    METADATA_STRUCT,
    Member,
    bits,
    header_type_decls,
    headers_struct_decl,
    struct_decl,
)
from backends.common.literals import literal
from backends.common.messages import MessageLayout, ipv4_checksum, message_layout
from backends.common.names import (
    check_key_fields,
    field_expression,
    guard_condition,
    identifier,
    is_intrinsic,
    is_meta,
    looked_at_condition,
    split_field,
)
from backends.common.parser import emit_statements, parser_states
from backends.common.state import check_state, state_keys
from backends.common.target import check_match_kinds
from backends.common.templates import render_template
from compiler import ir
from compiler.base import ResourceError, TargetError
from compiler.default_path import default_of

BATCH_MODES = ("auto", "single", "first", "union", "prune")
# The batched path's table from a multicast group to its ports as a bitmap (bit p set for port p).
PORTS_TABLE = "p4sub_group_ports"
PORTS_ACTION = "p4sub_set_ports"
PORTS_KEY = "standard_metadata.mcast_grp"
PORTS_WIDTH = 1 << V1MODEL.port_width
# Port-bitmap delivery (ir.Delivery "bitmap"): the egress table from a copy's port to its bit.
PORT_BIT_TABLE = "p4sub_port_bit"
PORT_BIT_ACTION = "p4sub_set_port_bit"
PORT_BIT_FIELD = "meta.p4sub_port_bit"
EGRESS_ROLES = ("port_bit",)


def port_bitmap(ports) -> int:
    """The ports as a bitmap: bit ``p`` set for port ``p``."""
    return sum(1 << p for p in set(ports))


def port_bitmaps(groups) -> list[int]:
    """:func:`port_bitmap` of every group's ports at once (20,000 groups of 100 ports: a bit set per
    port in Python took seconds; here numpy packs them)."""
    from itertools import chain

    import numpy as np

    ports = [g.ports for g in groups]
    lengths = np.fromiter(map(len, ports), np.int64, len(ports))
    flat = np.fromiter(chain.from_iterable(ports), np.int64, int(lengths.sum()))
    if not flat.size:
        return [0] * len(groups)
    if flat.min() < 0:
        return [port_bitmap(g.ports) for g in groups]
    bits = np.zeros((len(groups), (int(flat.max()) // 8 + 1) * 8), dtype=bool)
    bits[np.repeat(np.arange(len(groups)), lengths), flat] = True
    packed = np.packbits(bits, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


@dataclass(frozen=True)
class Bmv2Options:
    """How to render. ``table_sizes`` overrides the IR's sizes by table name (also ``p4sub_group_ports``)."""

    batch: str = "auto"
    table_sizes: dict[str, int] = field(default_factory=dict)
    count_field: str | None = None
    length_fields: tuple[str, ...] | None = None
    # A switch in a routed network (p4sub route): its up ports, and the network stage in the egress
    # (no copy back out the ingress port, none up again after coming in on an up port). None: a lone switch.
    network_up_ports: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Copy:
    """A stacked query field copied into metadata before the tables run: ``meta.<member> = hdr.<header>[i].<field>``."""

    member: str
    header: str
    field: str
    width: int


@dataclass(frozen=True)
class Bmv2Program:
    """A rendered program and the control-plane facts that go with it."""

    text: str
    mode: str
    layout: MessageLayout
    sizes: dict[str, int]
    extra_tables: tuple[ir.Table, ...] = ()
    extra_actions: tuple[ir.Action, ...] = ()
    extra_entries: tuple[ir.Entry, ...] = ()
    union_group: ir.MulticastGroup | None = None

    @property
    def batched(self) -> bool:
        return self.mode in ("union", "prune")

    def control_of(self, table: ir.Table) -> str:
        """The control an extra table sits in (the port-bit table is the egress's)."""
        return V1MODEL.egress_control if table.role in EGRESS_ROLES else V1MODEL.ingress_control

    def multicast_groups(self, pipeline: ir.Pipeline) -> tuple[ir.MulticastGroup, ...]:
        """The IR's groups and, in a batched mode, the union group."""
        extra = (self.union_group,) if self.union_group else ()
        return tuple(pipeline.multicast_groups) + extra


def copy_member(ref: str) -> str:
    return f"p4sub_q_{identifier(ref)}"


def choose_mode(layout: MessageLayout, requested: str) -> str:
    """The mode to render for ``requested`` (see the module docstring); refuses impossible requests."""
    if requested not in BATCH_MODES:
        raise TargetError(f"bmv2: unknown batch mode {requested!r} (one of {', '.join(BATCH_MODES)})")
    if layout.stack is None:
        if requested in ("auto", "single"):
            return "single"
        raise TargetError(f"bmv2: --batch {requested} needs a queried header stack; the tables query only "
                          f"scalar headers ({', '.join(layout.query_headers)})")
    if requested == "single":
        raise TargetError(f"bmv2: the tables query header stack {layout.stack}; use --batch first, union or prune")
    if layout.depth == 1:
        return "first"
    if requested == "auto":
        return "prune" if layout.can_prune else "union"
    if requested == "prune" and not layout.can_prune:
        raise TargetError(f"bmv2: cannot prune messages of {layout.stack}: no message-count field found before it "
                          "(name one with count_field)")
    return requested


def leaf_ports(pipeline: ir.Pipeline) -> tuple[int, ...]:
    """Every port a leaf entry forwards or multicasts to (the union group's ports)."""
    ports: set[int] = set()
    groups = {g.id: g for g in pipeline.multicast_groups}
    reads: dict[str, list[tuple[str, int]]] = {}  # action -> (primitive, index of the argument it reads)
    for a in pipeline.actions:
        names = [p.name for p in a.params]
        reads[a.name] = [(prim.op, names.index(prim.args[0])) for prim in a.body
                         if prim.op in ("set_egress_port", "set_mcast_group") and prim.args[0] in names]
    used: set[int] = set()  # groups named by leaf entries: their ports added once each
    for t in pipeline.tables:
        if t.role != "leaf":
            continue
        for e in pipeline.entries_of(t.name):
            for op, i in reads[e.action]:
                if op == "set_egress_port":
                    ports.add(e.args[i])
                else:
                    used.add(e.args[i])
    for g in used:
        ports.update(groups[g].ports)
    return tuple(sorted(ports))


def _key_expression(layout: MessageLayout, stacked: set[str], intrinsic: dict[str, str]):
    def expr(key: ir.Key) -> str:
        if is_meta(key.field):
            return field_expression(key.field)
        if key.field in intrinsic:
            return intrinsic[key.field]
        if split_field(key.field)[0] in stacked:
            return f"meta.{copy_member(key.field)}"
        return field_expression(key.field)
    return expr


IN_PORT_MEMBER = "p4sub_in_port"


def intrinsic_keys(pipeline: ir.Pipeline, batched: bool) -> dict[str, str]:
    """The P4 expression each intrinsic metadata key of ``pipeline`` matches (``ig_intr_md.ingress_port``
    -> ``standard_metadata.ingress_port``).

    A batched program evaluates message ``i`` on its ``i``-th pass, a resubmitted copy on which BMv2
    no longer has the ingress port: there the key matches the port saved on the first pass
    (``meta.p4sub_in_port``, preserved with the other ``@field_list`` members). The other intrinsic
    fields would change between passes (the timestamp) and are refused in that mode.
    """
    out = {}
    for f in sorted({k.field for t in pipeline.tables for k in t.keys if is_intrinsic(pipeline.spec, k.field)}):
        expr = V1MODEL.query_metadata[f]  # check_key_fields ran first
        if batched:
            if expr != V1MODEL.intrinsic_metadata["ingress_port"]:
                raise TargetError(f"bmv2: cannot match {f} when several messages are evaluated per packet (one "
                                  "pass each, by resubmission): only the ingress port is kept across passes; "
                                  "compile with --batch first or query the ingress port")
            expr = f"meta.{IN_PORT_MEMBER}"
        out[f] = expr
    return out



def build_program(pipeline: ir.Pipeline, options: Bmv2Options = Bmv2Options()) -> Bmv2Program:
    """Render ``program.p4``; raises a P4subError before anything is written if it cannot be rendered."""
    spec = pipeline.spec
    if spec.pragma_only:
        raise TargetError(f"bmv2: {spec.path} is a pragma-only spec (only @pragma query_* lines): it has no headers "
                          "or parser to make a whole program from; compile with --emit control to get the "
                          "subscription control to #include in your own program (docs/bmv2.md, \"Include mode\")")
    check_key_fields(pipeline, V1MODEL)
    check_match_kinds(pipeline, V1MODEL)
    layout = message_layout(pipeline, count_field=options.count_field, length_fields=options.length_fields)
    mode = choose_mode(layout, options.batch)
    batched = mode in ("union", "prune")
    bitmap = pipeline.delivery.is_bitmap
    if pipeline.default_control and (batched or options.network_up_ports is not None):
        raise TargetError(f"bmv2: --default {default_of(pipeline)} is rendered for one message per packet on a lone "
                          "switch; use --default drop " + ("in a network" if not batched else f"with --batch {mode}"))
    check_state(pipeline, "bmv2", batched=batched or mode == "first")
    stacked = {h for h in layout.query_headers if spec.header(h).stack_size}
    copies = [Copy(copy_member(f), *split_field(f), spec.field_width(f)) for f in layout.query_fields
              if split_field(f)[0] in stacked]

    sizes = {t.name: options.table_sizes.get(t.name, t.size) for t in pipeline.tables}
    unknown = set(options.table_sizes) - set(sizes) - {PORTS_TABLE}
    if unknown:
        raise TargetError(f"bmv2: table sizes given for unknown tables: {', '.join(sorted(unknown))}")
    for t in pipeline.tables:
        n = len(pipeline.entries_of(t.name))
        if n > sizes[t.name]:
            raise ResourceError(f"bmv2: table {t.name} has {n} entries but size {sizes[t.name]}")

    too_high = [g.id for g in pipeline.multicast_groups if g.id >= MAX_GROUP_ID]
    if too_high:
        raise ResourceError(f"bmv2: {len(pipeline.multicast_groups)} multicast groups (ids up to {max(too_high)}); "
                            f"P4Runtime on BMv2 accepts ids 1..{MAX_GROUP_ID - 1} for rule groups "
                            f"({MAX_GROUP_ID} is the batched path's, and ids from 32768 are clone sessions)")
    members: list[Member] = pipeline_metadata_members(pipeline) + user_call_members(pipeline)
    members += [Member(bits(c.width), c.member) for c in copies]
    network = options.network_up_ports is not None
    intrinsic = intrinsic_keys(pipeline, batched)
    # The ingress port, saved on the first pass: the network stage's hairpin check and, in a
    # batched program, keys on the ingress port read it on every pass.
    save_in_port = network or f"meta.{IN_PORT_MEMBER}" in intrinsic.values()
    if save_in_port:
        members.append(Member(bits(V1MODEL.port_width), IN_PORT_MEMBER, f"@field_list({RESUBMIT_FIELD_LIST})"))
    up_ports = options.network_up_ports or ()
    extra_tables: list[ir.Table] = []
    extra_actions: list[ir.Action] = []
    extra_entries: list[ir.Entry] = []
    union = None
    if batched:
        # Each message's port set, kept across passes: with port-bitmap delivery the lanes' bitmap
        # itself (the delivery's bit per port, which the egress's port-bit table reads), else the
        # ports of the message's group or port as a bitmap (bit p for port p).
        fl = f"@field_list({RESUBMIT_FIELD_LIST})"
        members.append(Member(bits(8), "p4sub_msg", fl))
        set_width = pipeline.delivery.width if bitmap else PORTS_WIDTH
        members += [Member(bits(set_width), f"p4sub_set_{j}", fl) for j in range(layout.depth)]
        members += [Member(bits(8), "p4sub_msgs"), Member(bits(1), "p4sub_select")]
    if batched and not bitmap:
        members.append(Member(bits(PORTS_WIDTH), "p4sub_ports"))
        ports = leaf_ports(pipeline)
        # With no port to send to, every message's port set is empty and the union path is never taken.
        union = ir.MulticastGroup(UNION_GROUP, ports) if ports else None
        action = ir.Action(PORTS_ACTION, (ir.Param("ports", PORTS_WIDTH),),
                           (ir.Primitive("set_meta", ("meta.p4sub_ports", "ports")),))
        groups = pipeline.multicast_groups
        size = options.table_sizes.get(PORTS_TABLE, max(64, math.ceil(len(groups) * 1.25)))
        table = ir.Table(PORTS_TABLE, (ir.Key(PORTS_KEY, V1MODEL.group_width, "exact"),), (PORTS_ACTION, "NoAction"),
                         "NoAction", size=size, role="ports")
        if len(groups) > size:
            raise ResourceError(f"bmv2: table {PORTS_TABLE} needs {len(groups)} entries but has size {size}")
        sizes[PORTS_TABLE] = size
        extra_tables.append(table)
        extra_actions.append(action)
        extra_entries += [ir.Entry(PORTS_TABLE, (ir.Exact(g.id),), PORTS_ACTION, (bits_of,))
                          for g, bits_of in zip(groups, port_bitmaps(groups))]

    if bitmap:
        width = pipeline.delivery.width
        members.append(Member(bits(width), PORT_BIT_FIELD.removeprefix("meta.")))
        action = ir.Action(PORT_BIT_ACTION, (ir.Param("mask", width),), (ir.Primitive("set_meta", (PORT_BIT_FIELD, "mask")),))
        ports = pipeline.delivery.ports
        size = options.table_sizes.get(PORT_BIT_TABLE, max(64, math.ceil(len(ports) * 1.25)))
        if len(ports) > size:
            raise ResourceError(f"bmv2: table {PORT_BIT_TABLE} needs {len(ports)} entries but has size {size}")
        sizes[PORT_BIT_TABLE] = size
        extra_tables.append(ir.Table(PORT_BIT_TABLE, (ir.Key("standard_metadata.egress_port", V1MODEL.port_width, "exact"),),
                                     (PORT_BIT_ACTION, "NoAction"), "NoAction", size=size, role="port_bit"))
        extra_actions.append(action)
        extra_entries += [ir.Entry(PORT_BIT_TABLE, (ir.Exact(p),), PORT_BIT_ACTION, (pipeline.delivery.bit(p),))
                          for p in ports]

    key_expr = _key_expression(layout, stacked, {**intrinsic, **state_keys(pipeline)})
    tables = [table_decl(t, pipeline, key_expr, size=sizes[t.name]) for t in chained_tables(pipeline)]
    tables += [table_decl(t, pipeline, lambda k: k.field, size=sizes[t.name]) for t in extra_tables
               if t.role not in EGRESS_ROLES]
    egress_tables = [table_decl(t, pipeline, lambda k: k.field, size=sizes[t.name]) for t in extra_tables
                     if t.role in EGRESS_ROLES]
    egress_names = {a for t in extra_tables if t.role in EGRESS_ROLES for a in t.actions}
    actions = action_decls(pipeline, V1MODEL) + [action_decl(a, V1MODEL) for a in extra_actions
                                                  if a.name not in egress_names]
    egress_actions = [action_decl(a, V1MODEL) for a in extra_actions if a.name in egress_names]
    ipv4 = ipv4_checksum(spec)
    length_fields = []
    if mode == "prune":
        for ref in layout.length_fields:
            length_fields.append({"ref": ref, "header": split_field(ref)[0], "width": spec.field_width(ref)})
    mode_text = {
        "single": "one message per packet.",
        "first": f"only the first element of {layout.stack}[{layout.depth}] is evaluated.",
        "union": f"up to {layout.depth} messages of {layout.stack} per packet, one per pass (resubmit); "
                 "a packet goes to the union of its messages' ports.",
        "prune": f"up to {layout.depth} messages of {layout.stack} per packet, one per pass (resubmit); "
                 "each port gets only the messages it subscribed to.",
    }[mode] + (" Each message's port set is its port bitmap (port-bitmap delivery)." if bitmap and batched else "")
    context = dict(
        name=pipeline.name, spec_path=spec.path, mode_text=mode_text, includes=V1MODEL.includes,
        H=HEADERS_STRUCT, M=METADATA_STRUCT,
        header_types=header_type_decls(spec), headers_struct=headers_struct_decl(spec),
        metadata_struct=struct_decl(METADATA_STRUCT, members),
        parser_states=parser_states(spec), actions=actions, tables=tables,
        valid_condition=guard_condition(pipeline),
        batched=batched, first_only=mode == "first", prune=mode == "prune",
        depth=layout.depth, stack=layout.stack, copies=copies, parallel=layout.parallel,
        apply_lines=apply_statements(pipeline),
        default_lines=apply_statements(pipeline, order=pipeline.default_control),
        looked_at_condition=looked_at_condition(pipeline),
        ports_width=PORTS_WIDTH, ports_table=PORTS_TABLE,
        drop_port=literal(V1MODEL.drop_port, V1MODEL.port_width), field_list=literal(RESUBMIT_FIELD_LIST, 8),
        union_group=literal(UNION_GROUP, V1MODEL.group_width),
        count_field=layout.count_field, count_width=spec.field_width(layout.count_field) if layout.count_field else 0,
        length_fields=length_fields, message_bytes=layout.message_bytes,
        udp_checksum=layout.udp_checksum if mode == "prune" else None,
        udp_checksum_header=split_field(layout.udp_checksum)[0] if layout.udp_checksum else "",
        ipv4=({"header": ipv4.header, "fields": [f"hdr.{ipv4.header}.{f}" for f, _ in ipv4.fields],
               "checksum": ipv4.checksum}
              if ipv4 else None),
        emits=emit_statements(spec),
        network=network, save_in_port=save_in_port,
        up_in=" || ".join(f"meta.p4sub_in_port == {literal(p, V1MODEL.port_width)}" for p in up_ports),
        up_out=" || ".join(f"standard_metadata.egress_port == {literal(p, V1MODEL.port_width)}" for p in up_ports),
    )
    context.update(
        bitmap=bitmap,
        bitmap_field=field_expression(pipeline.delivery.fields[0]) if bitmap else "",
        bitmap_others=[field_expression(f) for f in pipeline.delivery.fields[1:]] if bitmap else [],
        bitmap_width=pipeline.delivery.width,
        bitmap_group=literal(pipeline.delivery.group, V1MODEL.group_width) if bitmap else "",
        port_bit_table=PORT_BIT_TABLE, port_bit_field=field_expression(PORT_BIT_FIELD),
        egress_tables=egress_tables, egress_actions=egress_actions,
    )
    context.update(state_decls=state.declarations(pipeline),
                   state_lines=state.apply_lines(pipeline, V1MODEL.query_metadata))
    text = render_template(__file__, "program.p4.j2", **context)
    return Bmv2Program(text, mode, layout, sizes, tuple(extra_tables), tuple(extra_actions), tuple(extra_entries),
                       union)

