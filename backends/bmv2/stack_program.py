"""The v1model stack program of one switch in a combined compile, and its entries.

:func:`render_stack` renders ``templates/stack.p4.j2`` for one switch of a
:class:`~compiler.delivery.combined.CombinedPlan` and writes the same state both ways BMv2 takes
it: ``entries.p4rt.json`` (the P4Runtime write request, as :mod:`backends.bmv2.p4runtime` writes
it) and ``commands.txt`` (``simple_switch_CLI``). Every switch runs the same stateless stack
processing; a host-facing switch also runs the subscription tables (the receiver-set pipeline of
the plan) and the push table. Its filter evaluates one message per packet: a queried header stack
(ITCH ``add_order[N]``) is evaluated on element 0 only, as the BMv2 backend's ``--batch first``.

The own label becomes a port bitmap in ingress: switch/port ORs ``1 << (port - 1)`` over its own
labels; switch/bitmask takes the value; switch/multicast-group takes the value as the group id,
which is the bitmap (the full subset table, ``split=1``: Listing 3.7's ``do_multicast`` without a
lookup); mixed dispatches on the strategy tag in the value's top bits (port, bitmask or group as
above; the unused tag gives no port). The bitmap is the multicast group; egress prunes
predictively (port) or pops up to the own label (the others).

Control-plane objects (names as in P4Info):

* ``MyIngress.p4sub_self``: keyless; default action ``p4sub_set_own(id)`` set by the control plane.
* ``MyIngress.p4sub_push``: ``meta.p4sub_rset`` -> ``p4sub_push_stack(count, l0 .. l{N-1})``.
* ``MyIngress.p4sub_stored``: ``p4sub_label[0].value`` (tree id) -> ``p4sub_set_mask(mask)``.
* ``MyEgress.p4sub_host_port``: ``standard_metadata.egress_port`` -> ``p4sub_strip``.
* Multicast group ``m`` for every port bitmap ``m`` the switch may need (replicas: its ports).
* Counters ``MyIngress.p4sub_drops`` (index = position in ``DROP_REASONS``) and
  ``MyEgress.p4sub_ingress_port_drops``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.bmv2.cli_commands import multicast_commands, number, table_add
from backends.bmv2.p4runtime import FORMAT, hexbytes, multicast_group_entry, table_entry
from backends.bmv2.program import Copy, copy_member
from backends.bmv2.target import MAX_GROUP_ID, V1MODEL
from backends.common.controls import (
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
    header_member,
    header_type_decls,
    struct_decl,
)
from backends.common.messages import message_layout
from backends.common.names import check_key_fields, field_expression, guard_condition, is_meta, split_field
from backends.common.parser import emit_statements, parser_states
from backends.common.templates import render_template
from compiler import ir
from compiler.base import TargetError, write_files
from compiler.delivery import (
    DROP_REASONS,
    MIXED_TAGS,
    RENDERED_ENCODINGS,
    RSET_META,
    CombinedPlan,
    SwitchPlan,
    push_args,
)
from compiler.spec import Extract

PROGRAM = "program.p4"
ENTRIES = "entries.p4rt.json"
COMMANDS = "commands.txt"
INFO = "bmv2.json"
INGRESS, EGRESS = V1MODEL.ingress_control, V1MODEL.egress_control


@dataclass(frozen=True)
class EthernetFields:
    """The spec's Ethernet header: the edge copies it into ``p4sub_eth`` when it pushes a stack."""

    header: str
    dst: str
    src: str
    type: str


def spec_ethernet(spec) -> EthernetFields:
    """The header the spec's start state extracts first; it must be Ethernet (48, 48, 16 bits)."""
    states = spec.parser_states
    start = states.get(spec.start_state or "start")
    first = next((st.header for st in start.statements if isinstance(st, Extract)), None) if start else None
    if first is None or not isinstance(start.statements[0], Extract):
        raise TargetError("combined compile: the spec's start state extracts nothing; the stack goes after an "
                          "Ethernet header the start state extracts first")
    inst = spec.header(first)
    fields = spec.header_types[inst.type_name].fields
    if inst.stack_size or [f.width for f in fields] != [48, 48, 16]:
        raise TargetError(f"combined compile: the spec's first header {first} is not Ethernet "
                          "(48-bit dst, 48-bit src, 16-bit EtherType)")
    return EthernetFields(first, fields[0].name, fields[1].name, fields[2].name)


def stack_tables(plan: CombinedPlan, sp: SwitchPlan) -> tuple[list[tuple[ir.Table, ir.Action | None, str]], list[ir.Entry]]:
    """The stack program's tables (with the control they live in) and this switch's entries."""
    label_bits = 8 * plan.label_bytes
    set_own = ir.Action("p4sub_set_own", (ir.Param("id", 8 * plan.id_bytes),))
    set_mask = ir.Action("p4sub_set_mask", (ir.Param("mask", plan.mask_width),))
    push = ir.Action("p4sub_push_stack", (ir.Param("count", 16),)
                     + tuple(ir.Param(f"l{i}", label_bits) for i in range(plan.max_labels)))
    strip = ir.Action("p4sub_strip")
    rset_width = next(m.width for m in plan.pipeline.metadata if m.name == RSET_META)
    tables = [
        (ir.Table("p4sub_self", (), ("p4sub_set_own",), "p4sub_set_own", (0,), size=1), set_own, INGRESS),
        (ir.Table("p4sub_stored", (ir.Key("p4sub_label[0].value", 8 * plan.value_bytes, "exact"),),
                  ("p4sub_set_mask", "NoAction"), "NoAction", size=stored_size(sp)), set_mask, INGRESS),
        (ir.Table("p4sub_host_port", (ir.Key("standard_metadata.egress_port", V1MODEL.port_width, "exact"),),
                  ("p4sub_strip", "NoAction"), "NoAction", size=64), strip, EGRESS),
    ]
    if sp.ingress:
        tables.append((ir.Table("p4sub_push", (ir.Key(RSET_META, rset_width, "exact"),),
                                ("p4sub_push_stack", "NoAction"), "NoAction", size=push_size(plan)), push, INGRESS))
    entries = [ir.Entry("p4sub_stored", (ir.Exact(t),), "p4sub_set_mask", (m,)) for t, m in sp.stored]
    entries += [ir.Entry("p4sub_host_port", (ir.Exact(p),), "p4sub_strip") for p in sp.host_ports]
    entries += [ir.Entry("p4sub_push", (ir.Exact(p.rsid),), "p4sub_push_stack", push_args(plan, p)) for p in sp.pushes]
    return tables, entries


def stored_size(sp: SwitchPlan) -> int:
    return max(64, len(sp.stored))


def push_size(plan: CombinedPlan) -> int:
    return max(64, len(plan.receiver_sets))



def edge_context(pipeline: ir.Pipeline, push_table_size: int) -> tuple[dict[str, Any], list[Member]]:
    """What an ingress edge's template needs to evaluate the subscriptions before pushing a stack
    (shared by the header-stack and VT programs): the spec's headers and parser (its start state
    renamed ``p4sub_spec_start``), the pipeline's actions, tables and apply statements, and the
    metadata members they use (queried stack fields are copied from element 0)."""
    spec = pipeline.spec
    eth = spec_ethernet(spec)
    layout = message_layout(pipeline)
    stacked = {h for h in layout.query_headers if spec.header(h).stack_size}
    copies = [Copy(copy_member(f), *split_field(f), spec.field_width(f)) for f in layout.query_fields
              if split_field(f)[0] in stacked]

    check_key_fields(pipeline, V1MODEL)

    def key_expr(key: ir.Key) -> str:
        if not is_meta(key.field) and split_field(key.field)[0] in stacked:
            return f"meta.{copy_member(key.field)}"
        return field_expression(key.field, intrinsic=V1MODEL.query_metadata)

    members = pipeline_metadata_members(pipeline) + user_call_members(pipeline)
    members += [Member(bits(c.width), c.member) for c in copies]
    states = parser_states(spec)
    states[0] = states[0].replace("state start {", "state p4sub_spec_start {", 1)
    rset_width = next(m.width for m in pipeline.metadata if m.name == RSET_META)
    context = dict(
        name=pipeline.name, spec_path=spec.path, eth=eth, copies=copies,
        header_types=header_type_decls(spec),
        spec_members=[header_member(h).render() for h in spec.headers],
        parser_states=states, emits=emit_statements(spec),
        actions=action_decls(pipeline, V1MODEL),
        tables=[table_decl(t, pipeline, key_expr) for t in chained_tables(pipeline)],
        apply_lines=apply_statements(pipeline), valid_condition=guard_condition(pipeline),
        rset_meta=field_expression(RSET_META), rset_ref=RSET_META, rset_literal_zero=f"{rset_width}w0",
        push_size=push_table_size,
    )
    return context, members


def program_text(plan: CombinedPlan, sp: SwitchPlan) -> str:
    """``program.p4`` for switch ``sp``; raises a P4subError if it cannot be rendered."""
    if plan.encoding not in RENDERED_ENCODINGS:
        raise TargetError(f"bmv2: no stack program for the {plan.encoding} encoding")
    bad = [g for g, _ in sp.groups if not 1 <= g < MAX_GROUP_ID + 1]
    if bad:
        raise TargetError(f"bmv2: switch {sp.name}: port bitmap {bad[0]} is not a multicast group id P4Runtime accepts")
    pipeline = plan.pipeline
    unused = {"ingress-port", "no-subscriber" if not sp.ingress else "not-a-stack"}  # egress / the other role
    reasons = [{"name": r, "const": r.upper().replace("-", "_"), "index": i} for i, r in enumerate(DROP_REASONS)
               if r not in unused]
    members = [Member(bits(16), "p4sub_remaining"), Member(bits(8 * plan.id_bytes), "p4sub_own"),
               Member(bits(8), "p4sub_index"), Member(bits(16), "p4sub_mask"), Member(bits(1), "p4sub_stored")]
    context: dict[str, Any] = dict(
        switch=sp.name, switch_id=sp.switch_id, encoding=plan.encoding, n=plan.max_labels,
        id_bits=8 * plan.id_bytes, value_bits=8 * plan.value_bytes, label_bits=8 * plan.label_bytes,
        tag_bits=plan.tag_bits, tag_shift=plan.tag_shift, tags=MIXED_TAGS, mask_bits=plan.mask_width,
        reasons=reasons, n_reasons=len(DROP_REASONS), H=HEADERS_STRUCT, M=METADATA_STRUCT, edge=sp.ingress, stored_size=stored_size(sp),
        header_types=[], spec_members=[], parser_states=[], emits=[], copies=[],
    )
    if sp.ingress:
        edge, edge_members = edge_context(pipeline, push_size(plan))
        members += edge_members
        context.update(edge)
    context["metadata_struct"] = struct_decl(METADATA_STRUCT, members)
    return render_template(__file__, "stack.p4.j2", **context)


def write_request(plan: CombinedPlan, sp: SwitchPlan) -> dict[str, Any]:
    """The switch's ``entries.p4rt.json``: groups, the own id (default action), stack entries, and on
    an ingress switch the subscription pipeline's entries."""
    tables, entries = stack_tables(plan, sp)
    by_name = {t.name: (t, a, c) for t, a, c in tables}
    updates: list[dict[str, Any]] = [
        {"type": "INSERT", "entity": {"packet_replication_engine_entry": multicast_group_entry(ir.MulticastGroup(g, ports))}}
        for g, ports in sp.groups
    ]
    updates.append({"type": "MODIFY", "entity": {"table_entry": {
        "table_name": f"{INGRESS}.p4sub_self", "is_default_action": True,
        "action": {"action": {"action_name": f"{INGRESS}.p4sub_set_own",
                              "params": [{"param_name": "id", "value": hexbytes(sp.switch_id)}]}},
    }}})
    for e in entries:
        t, a, control = by_name[e.table]
        updates.append({"type": "INSERT", "entity": {"table_entry": table_entry(e, t, a, control)}})
    if sp.ingress:
        updates += edge_updates(plan.pipeline)
    return {"format": FORMAT, "pipeline": f"p4sub-stack-{sp.name}",
            "controls": {"ingress": INGRESS, "egress": EGRESS}, "updates": updates}


def cli_commands(plan: CombinedPlan, sp: SwitchPlan) -> list[str]:
    """The same state as ``simple_switch_CLI`` commands."""
    tables, entries = stack_tables(plan, sp)
    by_name = {t.name: (t, c) for t, _, c in tables}
    out = multicast_commands(tuple(ir.MulticastGroup(g, ports) for g, ports in sp.groups))
    out.append(f"table_set_default {INGRESS}.p4sub_self {INGRESS}.p4sub_set_own {number(sp.switch_id)}")
    for e in entries:
        t, control = by_name[e.table]
        out.append(table_add(e, t, control, None))
    if sp.ingress:
        out += edge_commands(plan.pipeline)
    return out


def edge_updates(pipeline: ir.Pipeline) -> list[dict[str, Any]]:
    """P4Runtime inserts of an ingress edge's subscription entries (shared with VT programs)."""
    tables = {t.name: t for t in pipeline.tables}
    return [{"type": "INSERT", "entity": {"table_entry": table_entry(e, tables[e.table], pipeline.action(e.action), INGRESS)}}
            for e in pipeline.entries]


def edge_commands(pipeline: ir.Pipeline) -> list[str]:
    """``simple_switch_CLI`` commands for an ingress edge's subscription tables (shared with VT programs)."""
    from backends.bmv2.cli_commands import cli_priorities

    out = []
    for t in pipeline.tables:
        if t.default_action != "NoAction":
            args = " ".join(number(a) for a in t.default_args)
            out.append(f"table_set_default {INGRESS}.{t.name} {INGRESS}.{t.default_action} {args}".rstrip())
    for t in pipeline.tables:
        rows = pipeline.entries_of(t.name)
        prio = cli_priorities(rows) if t.needs_priority else {}
        out.extend(table_add(e, t, INGRESS, prio.get(e.priority) if t.needs_priority else None) for e in rows)
    return out


def entries_text(request: dict) -> str:
    """A P4Runtime write request as JSON with one update per line (diffable, streamable)."""
    lines = [json.dumps(u, separators=(",", ":")) for u in request["updates"]]
    head = {k: v for k, v in request.items() if k != "updates"}
    return json.dumps(head)[:-1] + ', "updates": [\n  ' + ",\n  ".join(lines) + "\n]}\n"


def render_stack(plan: CombinedPlan, switch: str) -> dict[str, str]:
    """Every file of one switch, as {name: text}, without writing anything."""
    sp = plan.switches[switch]
    text = program_text(plan, sp)
    request = write_request(plan, sp)
    entries = entries_text(request)
    info = {
        "target": V1MODEL.name, "architecture": V1MODEL.architecture, "mode": "header-stack",
        "encoding": plan.encoding, "switch": sp.name, "switch_id": sp.switch_id, "edge": sp.ingress,
        "controls": {"ingress": INGRESS, "egress": EGRESS},
        "max_labels": plan.max_labels, "label_bytes": plan.label_bytes, "tag_bits": plan.tag_bits,
        "drop_reasons": list(DROP_REASONS), "recirculations_per_packet": 0,
        "multicast_groups": len(sp.groups),
    }
    return {PROGRAM: text, ENTRIES: entries, COMMANDS: "\n".join(cli_commands(plan, sp)) + "\n",
            INFO: json.dumps(info, indent=2) + "\n"}


def emit_stack(plan: CombinedPlan, switch: str, out_dir: str | Path) -> list[Path]:
    """Render and write one switch's files into ``out_dir``."""
    return write_files(render_stack(plan, switch), out_dir)
