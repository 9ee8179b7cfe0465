"""The TNA program for a pipeline: ``program.p4``.

:func:`render` fills ``templates/program.p4.j2`` with the pieces of :mod:`backends.common` (header
types, parse graph, actions, tables) and the TNA-specific ones made here: the intrinsic-metadata
prologue of the ingress parser, the bridged header (batched packets' leaf states, the network stage's
ingress port), the recirculation header of a two-pass pipeline, the network stage of a routed switch
(:mod:`backends.tofino.network`), and the egress. Everything the program says about tables (keys, match kinds,
sizes, range pragmas) comes from the :class:`~backends.tofino.layout.Layout`, the same object the
entry writer reads, so the two cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from backends.common.controls import action_decls, apply_statements, table_decl, user_call_members
from backends.common.headers import (
    HEADERS_STRUCT,
    METADATA_STRUCT,
    Member,
    bits,
    header_member,
    header_type_decls,
    struct_decl,
)
from backends.common.literals import literal
from backends.common.names import (
    field_expression,
    guard_condition,
    identifier,
    is_intrinsic,
    is_meta,
    looked_at_condition,
    meta_member,
    split_field,
)
from backends.common.parser import emit_statements, parser_states
from backends.common.state import state_keys
from backends.common.target import unsupported
from backends.common.templates import render_template
from backends.tofino.batch import EGRESS_PORT_KEY, NO_PORTS_TABLE, PORT_BIT_TABLE, Batched
from backends.tofino.layout import Layout, TableLayout, entries_with_ranges
from backends.tofino.network import (
    FROM_UP,
    FROM_UP_TABLE,
    IN_PORT,
    TO_UP_TABLE,
    egress_decls,
    ingress_decls,
    network_stage,
)
from backends.tofino import split as split_mode
from backends.tofino.op_tree import timed_tree
from backends.tofino.stack_parse import first_only, fix_stack_indices
from backends.tofino.state import render_state
from backends.tofino.target import Target, facts
from compiler import ir
from compiler.default_path import default_of
from compiler.spec import Advance, ParserState, SelectCase, Spec

EGRESS_HEADERS = "p4sub_egress_headers_t"
EGRESS_METADATA = "p4sub_egress_metadata_t"
BRIDGE = "p4sub_bridge"
RECIRC = "p4sub_recirc"
SPEC_START = "p4sub_spec_start"


@dataclass(frozen=True)
class Program:
    """The rendered text and the facts about it the other writers report."""

    text: str
    stopped_states: tuple[str, ...]
    recirculates: bool
    bridged_bits: int = 0  # the bridged header's size (PHV bits in both gresses, bytes on the internal path)
    registers: int = 0  # counters' registers (backends.tofino.state), one stateful ALU each


def tna_spec(spec: Spec, policy: str, target: Target) -> tuple[Spec, tuple[str, ...]]:
    """The spec's parse graph as TNA can run it: start renamed (the TNA prologue is ``start``) and
    packet-dependent ``advance`` statements handled per ``policy`` (``stop`` or ``refuse``)."""
    start = spec.start_state or "start"
    stopped: list[str] = []
    states: dict[str, ParserState] = {}
    for name, st in spec.parser_states.items():
        new_name = SPEC_START if name == start else name
        cut = next((i for i, s in enumerate(st.statements) if isinstance(s, Advance) and s.bits is None), None)
        if cut is not None:
            if policy != "stop":
                unsupported(target.name, f"parser state {name}: packet.advance({st.statements[cut].expression}) "
                                         "(Tofino parsers advance by constants only)")
            stopped.append(name)
            st = ParserState(st.name, st.statements[:cut], (), (SelectCase((), "accept", True),), st.location)
        cases = tuple(replace(c, next_state=SPEC_START if c.next_state == start else c.next_state) for c in st.cases)
        states[new_name] = replace(st, name=new_name, cases=cases)
    return replace(spec, parser_states=states, start_state=SPEC_START), tuple(stopped)


def _padded(members: list[Member], name: str = "_pad") -> list[Member]:
    """Members of a header padded to whole bytes (TNA headers are byte-aligned)."""
    total = sum(int(m.type[4:-1]) for m in members)
    pad = -total % 8
    # @padding: bits bf-p4c may overwrite, so a field sharing their byte can be written whole
    # (an OR into the bridged port bitmap otherwise "violates action constraints").
    return members + ([Member(bits(pad), name, "@padding")] if pad else [])


def _mark_extracts(states: list[str], stack: str, valid_fields: tuple[str, ...], target: str) -> list[str]:
    """The parser states with ``meta.<slot i's valid field> = 1`` after each extract of element ``i``."""
    extract = re.compile(rf"^(\s*)pkt\.extract\(hdr\.{re.escape(stack)}\[(\d+)\]\);$", re.M)
    marked, seen = [], set()

    def mark(m: re.Match) -> str:
        i = int(m.group(2))
        seen.add(i)
        return f"{m.group(0)}\n{m.group(1)}meta.{meta_member(valid_fields[i])} = 1w1;"
    for state in states:
        marked.append(extract.sub(mark, state))
    if seen != set(range(len(valid_fields))):  # an unmarked slot would never be delivered
        unsupported(target, f"several messages per packet where the parser does not extract each of {stack}'s "
                            "elements at a fixed index (a .next whose element depends on the path)")
    return marked


def _byte_aligned(members: list[Member]) -> list[Member]:
    """Each member that is not whole bytes preceded by padding that ends it on a byte boundary: the
    network stage copies the ingress port into the bridged header, and bf-p4c refuses a copy between
    fields placed at different bit offsets in their containers ("conflicting PARDE alignment
    requirements"); ``ig_intr_md.ingress_port`` ends on a byte boundary."""
    out = []
    for m in members:
        pad = -int(m.type[4:-1]) % 8
        out += ([Member(bits(pad), f"_pad_{m.name}", "@padding")] if pad else []) + [m]
    return out


def _header_decl(name: str, members: list[Member]) -> str:
    return "\n".join([f"header {name} {{"] + [f"    {m.render()}" for m in members] + ["}"])


def _key_expression(table: TableLayout, batched: Batched, spec: Spec, target: Target,
                    stateful: dict[str, str] | None = None):
    slot = batched.slot_of.get(table.name)
    intrinsic = {**facts(target).query_metadata, **(stateful or {})}

    def expr(key: ir.Key) -> str:
        if key.field == EGRESS_PORT_KEY:
            return f"{target.egress_md}.{target.egress_port_field}"
        if batched.mode == "split":
            if key.field == split_mode.RID_FIELD:
                return f"hdr.{split_mode.HEADER}.rid"
            if not is_meta(key.field) and key.field not in intrinsic:
                inst = spec.header(split_field(key.field)[0])
                if inst is not None and inst.stack_size:  # pass 2 matches the picked message's copy
                    return field_expression(split_mode.copy_field(key.field))
        if is_meta(key.field):
            if table.gress == "egress":
                return f"hdr.{BRIDGE}.{meta_member(key.field)}"
            return field_expression(key.field)
        if key.field in intrinsic:
            return intrinsic[key.field]
        header = split_field(key.field)[0]
        inst = spec.header(header)
        index = (slot or 0) if inst is not None and inst.stack_size else None
        return field_expression(key.field, index=index)
    return expr


def _table_text(t: TableLayout, layout: Layout, batched: Batched, spec: Spec) -> str:
    return table_text(t, layout, _key_expression(t, batched, spec, layout.target, state_keys(layout.pipeline)))


def table_text(t: TableLayout, layout: Layout, key_expression: Callable[[ir.Key], str]) -> str:
    """A laid-out table's declaration (whole program and include mode): its Tofino keys, a sliced key
    as a slice of its field's expression (``hdr.add_order.price[15:0]``) named ``add_order.price[15:0]``,
    and ``@entries_with_ranges`` where it has range keys."""
    by_name = {k.name: k for k in t.keys}

    def expr(key: ir.Key) -> str:
        k = by_name[key.field]
        whole = key_expression(ir.Key(k.field, k.width, k.match_kind))
        return whole if k.bits is None else f"{whole}[{k.bits[0]}:{k.bits[1]}]"

    table = replace(t.table, keys=tuple(ir.Key(k.name, k.width, k.match_kind) for k in t.keys))
    text = table_decl(table, layout.pipeline, expr, size=t.size)
    n = entries_with_ranges(t, layout.target)
    return f"@entries_with_ranges({n})\n{text}" if n is not None else text



def _scalar_guard(pipeline: ir.Pipeline) -> str:
    """The guard without the stacks (split's first pass: the copies table asks which elements are there)."""
    parts = [f"hdr.{h}.isValid()" for h in pipeline.guard_headers()
             if pipeline.spec.header(h) is not None and not pipeline.spec.header(h).stack_size]
    return " && ".join(parts) if parts else "true"


def _apply_lines(pipeline: ir.Pipeline, names: list[str]) -> list[str]:
    return apply_statements(pipeline, order=tuple(names))


def render(layout: Layout, batched: Batched, message_stack: str | None, depth: int,
           query_headers: tuple[str, ...], pass_of: dict[str, int] | None = None,
           bitmap_ready: list[int] | None = None) -> Program:
    """``program.p4`` for a planned layout; ``pass_of`` (table -> pass) splits a recirculating pipeline;
    ``bitmap_ready`` (per lane bitmap, the estimate's first stage at which it is final) orders the OR
    of the lanes' bitmaps (:func:`backends.tofino.op_tree.timed_tree`)."""
    target = layout.target
    pipeline = layout.pipeline
    spec, stopped = tna_spec(pipeline.spec, layout.options.variable_advance, target)
    if batched.mode == "first" and message_stack:
        spec = first_only(spec, message_stack)
    spec, from_back = fix_stack_indices(spec)
    tna = facts(target)
    union = batched.mode == "union"
    split = batched.mode == "split"
    keep = set(batched.keep_fields)
    ingress_tables = [t for t in layout.tables if t.gress == "ingress"]
    egress_tables = [t for t in layout.tables if t.gress == "egress"]
    ingress_actions = {a for t in ingress_tables for a in t.table.actions}
    egress_actions = {a for t in egress_tables for a in t.table.actions}
    action_text = {a.name: d for a, d in zip([a for a in pipeline.actions if a.name != "NoAction"],
                                             action_decls(pipeline, tna))}

    counters = render_state(pipeline, tna.query_metadata, target.ingress_md)
    meta_members = [Member(bits(m.width), meta_member(m.name)) for m in pipeline.metadata if m.name not in keep]
    meta_members += user_call_members(pipeline) + counters.members
    egress_meta = [Member(bits(1), meta_member(k)) for k in batched.keep_fields]
    egress_meta += [Member(bits(m.width), meta_member(m.name)) for m in batched.egress_meta]

    recirc = bool(pass_of) and max(pass_of.values(), default=0) > 0
    if recirc and any(is_intrinsic(spec, k.field) for t in pipeline.tables for k in t.keys):
        # The second pass comes in on the recirculation port, with a new MAC timestamp.
        unsupported(target.name, "a pipeline that needs two passes and matches intrinsic metadata (the second pass's "
                                 "ingress port is the recirculation port); more lanes or fewer fields make it shorter")
    if recirc and pipeline.updates:
        unsupported(target.name, "a pipeline that needs two passes and keeps counters (the second pass would "
                                 "count the packet again); more lanes or fewer fields make it shorter")
    if recirc and (union or split):
        unsupported(target.name, "a pipeline that needs two passes and evaluates several messages per packet")
    if recirc and batched.bitmap is not None:
        unsupported(target.name, "a pipeline that needs two passes with port-bitmap delivery (more lanes make the "
                                 "lanes shorter: --lanes)")
    stage = network_stage(layout.options.network_up_ports, target)
    network_members = stage.bridged(target) if stage else []
    extra_types, ingress_members, egress_members, emits = [], [], [], []
    # The bridged header is the only way metadata reaches Tofino's egress, which parses the packet
    # afresh: the ingress deparser puts it first, the egress parser takes it off, nothing emits it again.
    bridge_fields = [Member(bits(m.width), meta_member(m.name)) for m in batched.bridged]
    if network_members:
        # Every field in bytes of its own: the network stage's copy of the ingress port must end on a
        # byte boundary (see _byte_aligned), and the one action that fills the header may read at most
        # two PHV sources per container (2-bit leaf states packed four to a byte: "too many sources").
        bridge_fields = _byte_aligned(bridge_fields + network_members)
    if pipeline.default_control and (bridge_fields or recirc):
        unsupported(target.name, f"--default {default_of(pipeline)} with recirculation, several messages per packet "
                                 "or a port bitmap (the egress expects a bridged header on every packet); use "
                                 "--default drop, or --delivery groups")
    if bridge_fields:
        extra_types.append(_header_decl(f"{BRIDGE}_h", _padded(bridge_fields)))
        ingress_members.append(Member(f"{BRIDGE}_h", BRIDGE))
        egress_members.append(Member(f"{BRIDGE}_h", BRIDGE))
        emits.append(f"pkt.emit(hdr.{BRIDGE});")
    recirc_fields = [Member(bits(m.width), meta_member(m.name)) for m in pipeline.metadata]
    if recirc:
        # A second pass comes in on the recirculation port: the first keeps the network stage's fields here.
        recirc_members = _padded(recirc_fields, "_pad_meta") + _byte_aligned(network_members)
        extra_types.append(_header_decl(f"{RECIRC}_h", recirc_members))
        ingress_members.append(Member(f"{RECIRC}_h", RECIRC))
        emits.append(f"pkt.emit(hdr.{RECIRC});")
    split_fix = None
    if split:
        # The copy's replication id, which the pass-1 egress puts in front of the packet (split.py).
        extra_types.append(_header_decl(f"{split_mode.HEADER}_h", [Member(bits(16), "rid")]))
        ingress_members.append(Member(f"{split_mode.HEADER}_h", split_mode.HEADER))
        egress_members.append(Member(f"{split_mode.HEADER}_h", split_mode.HEADER))
        from backends.common.messages import message_layout
        messages = message_layout(pipeline)
        split_fix = split_mode.fix_of(spec, messages)
        stacked = split_mode.stacked_fields(messages)
        for e in range(depth):
            action_text[split_mode.pick_action(e)] = split_mode.pick_text(e, messages, split_fix, stacked)
    ingress_members += [header_member(h) for h in spec.headers]
    emits += emit_statements(spec, packet="pkt", descending=from_back)

    tables_text = [_table_text(t, layout, batched, spec) for t in ingress_tables]
    egress_text = [_table_text(t, layout, batched, spec) for t in egress_tables]

    # Which tables each block applies, in order; top-level names only (miss tables chain inside).
    slots: dict[int | None, list[str]] = {}
    for slot, name in batched.ingress_control:
        slots.setdefault(slot, []).append(name)
    if union:
        slot_blocks = [_apply_lines(pipeline, slots[i]) for i in range(depth)]
    else:
        names = [n for _, n in batched.ingress_control
                 if n not in (split_mode.PICK_TABLE, split_mode.COPIES_TABLE)]
        slot_blocks = []
    pass_lines: list[list[str]] = []
    if not union:
        if recirc:
            first = [n for n in names if pass_of.get(n, 0) == 0]
            second = [n for n in names if pass_of.get(n, 0) > 0]
            pass_lines = [_apply_lines(pipeline, first), _apply_lines(pipeline, second)]
        else:
            pass_lines = [_apply_lines(pipeline, names)]

    states = [s for s in parser_states(spec, packet="pkt") if not s.startswith("state start {")]
    if union or split:
        states = _mark_extracts(states, message_stack, batched.valid_fields, target.name)
    checksum_line = ""
    if split and split_fix.ipv4 is not None:
        c = split_fix.ipv4
        checksum_line = (f"hdr.{c.header}.{c.checksum} = p4sub_ipv4_checksum.update({{"
                         + ", ".join(f"hdr.{c.header}.{f}" for f, _ in c.fields) + "});")
    context = dict(
        name=pipeline.name, spec_path=pipeline.spec.path, target=target, mode=batched.mode, depth=depth,
        stack=message_stack, stopped=stopped, include=target.include,
        H=HEADERS_STRUCT, M=METADATA_STRUCT, EH=EGRESS_HEADERS, EM=EGRESS_METADATA,
        header_types=header_type_decls(spec) + extra_types + counters.types,
        state_decls=counters.declarations, state_lines=counters.lines,
        headers_struct=struct_decl(HEADERS_STRUCT, ingress_members),
        metadata_struct=struct_decl(METADATA_STRUCT, meta_members),
        egress_headers_struct=struct_decl(EGRESS_HEADERS, egress_members),
        egress_metadata_struct=struct_decl(EGRESS_METADATA, egress_meta),
        meta_init=[f"meta.{m.name} = {literal(0, int(m.type[4:-1]))};" for m in meta_members],
        egress_meta_init=[f"meta.{m.name} = {literal(0, int(m.type[4:-1]))};" for m in egress_meta],
        parser_states=states,
        spec_start=SPEC_START,
        actions=[action_text[a.name] for a in pipeline.actions if a.name in ingress_actions and a.name in action_text],
        egress_actions=[action_text[a.name] for a in pipeline.actions if a.name in egress_actions
                        and a.name in action_text],
        tables=tables_text, egress_tables=egress_text,
        egress_table_names=[identifier(t.name) for t in egress_tables],
        valid_condition=guard_condition(pipeline),
        union=union, slot_blocks=slot_blocks,
        keep_fields=[f"meta.{meta_member(k)}" for k in batched.keep_fields],
        bridged=[meta_member(m.name) for m in batched.bridged],
        union_group=literal(batched.union_group.id, target.group_width) if batched.union_group else "",
        recirc=recirc, recirc_port=literal(target.recirculation_port, target.port_width),
        recirc_fields=[meta_member(m.name) for m in pipeline.metadata], pass_lines=pass_lines,
        bridge=BRIDGE, recirc_header=RECIRC, emits=emits, bridged_any=bool(bridge_fields),
        default_lines=_apply_lines(pipeline, list(pipeline.default_control)),
        looked_at_condition=looked_at_condition(pipeline),
        network=stage is not None, from_up=bool(stage and stage.up_ports),
        network_fields=[m.name for m in network_members], in_port=IN_PORT, from_up_field=FROM_UP,
        from_up_table=FROM_UP_TABLE, to_up_table=TO_UP_TABLE,
        network_ingress=ingress_decls(stage, target, BRIDGE) if stage else [],
        network_egress=egress_decls(stage, target) if stage else [],
        bitmap=batched.bitmap is not None,
        bitmap_field=f"meta.{meta_member(batched.bitmap.fields[0])}" if batched.bitmap else "",
        bitmap_member=meta_member(batched.bitmap.fields[0]) if batched.bitmap else "",
        bitmap_or=timed_tree("p4sub_ports_or", [f"meta.{meta_member(f)}" for f in batched.bitmap.fields],
                             bitmap_ready or [0] * len(batched.bitmap.fields))[0] if batched.bitmap else [],
        bitmap_group=literal(batched.bitmap.group, target.group_width) if batched.bitmap else "",
        no_ports_table=NO_PORTS_TABLE, port_bit_table=PORT_BIT_TABLE,
        split=split, split_header=split_mode.HEADER, split_rid=literal(split_mode.SPLIT_RID, target.rid_width),
        split_guard=_scalar_guard(pipeline), pick_table=split_mode.PICK_TABLE, copies_table=split_mode.COPIES_TABLE,
        checksum_line=checksum_line,
    )
    text = render_template(__file__, "program.p4.j2", **context)
    bridged_bits = sum(int(m.type[4:-1]) for m in _padded(bridge_fields)) if bridge_fields else 0
    return Program(text, stopped, recirc, bridged_bits, counters.registers)
