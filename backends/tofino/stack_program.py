"""The TNA stack program of one switch in a combined compile, and its BF Runtime entries.

:func:`render_stack` renders ``templates/stack.p4.j2`` for one switch of a
:class:`~compiler.delivery.combined.CombinedPlan`: the Tofino counterpart of
:mod:`backends.bmv2.stack_program`, with the same labels, EtherType, drop reasons (indices of
``combined.DROP_REASONS``) and control-plane tables, so one plan installs the same way on both.
A host-facing switch also runs the subscription tables of the plan's receiver-set pipeline (laid
out for Tofino by :func:`backends.tofino.layout.plan`, evaluated on the first message of a queried
header stack) and the push table.

Control-plane objects (BF Runtime names):

* ``pipe.SwitchIngress.p4sub_self``: keyless; default entry ``SwitchIngress.p4sub_set_own(id)``.
* ``pipe.SwitchIngress.p4sub_push``: ``meta.p4sub_rset`` -> ``p4sub_push_stack(count, l0 .. l{N-1}, mask,
  own, stored, pop, keep, drop, reason)``: the labels, then what the switch decides for them
  (:mod:`backends.tofino.stack_edge`).
* ``pipe.SwitchIngress.p4sub_stored``: tree id -> ``p4sub_set_mask(mask)``.
* ``pipe.SwitchEgress.p4sub_host_port``: ``eg_intr_md.egress_port`` -> ``p4sub_strip``.
* ``$pre.node`` / ``$pre.mgid``: one multicast group per port bitmap (id = bitmap, rid = id).
* Counters ``SwitchIngress.p4sub_drops`` (index = position in ``DROP_REASONS``) and
  ``SwitchEgress.p4sub_ingress_port_drops``.

Everything else the program needs (first own label, the port labels' bitmap bits, the predictive
pruning of the port encoding, the labels it keeps, the mixed encoding's dispatch on the strategy tag)
is ``const entries`` (:mod:`backends.tofino.stack_rows`), the same for every switch. All four encodings of
:data:`compiler.delivery.combined.RENDERED_ENCODINGS` are rendered: bitmask and mcgroup take the
first own label's value as the bitmap (mcgroup: the group id, which is the bitmap).
What does not map from the v1model program, and why, is said in the program's header comment and
in docs/delivery.md ("Combined compile", "On Tofino").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.bmv2.stack_program import spec_ethernet
from backends.common.controls import action_decls, apply_statements, pipeline_metadata_members, user_call_members
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
from backends.common.messages import message_layout
from backends.common.names import (
    check_key_fields,
    field_expression,
    guard_condition,
    is_meta,
    p4info_param_name,
    split_field,
)
from backends.common.parser import emit_statements, parser_states
from backends.common.templates import render_template
from backends.tofino.batch import EGRESS_PORT_KEY
from backends.tofino.bfrt import FORMAT, action_name, entry_json, key_json, pre_records, table_name
from backends.tofino.layout import KeyLayout, Layout, TableLayout, TofinoOptions
from backends.tofino.layout import plan as plan_layout
from backends.tofino.op_tree import op_tree
from backends.tofino.program import EGRESS_HEADERS, EGRESS_METADATA, SPEC_START, table_text, tna_spec
from backends.tofino.stack_edge import EDGE_PARAMS, edge_args
from backends.tofino.stack_parse import first_only, fix_stack_indices
from backends.tofino.stack_rows import (
    COMPARE_GROUP,
    compare_copies,
    cut_back_rows,
    cut_front_rows,
    first_own_rows,
    keep_after,
    mixed_rows,
    port_group_rows,
    port_groups,
    prune_rows,
)
from backends.tofino.target import TOFINO1, Target, facts
from compiler import ir
from compiler.base import TargetError
from compiler.delivery import DROP_REASONS, ETH_HEADER, MIXED_TAGS, RSET_META, CombinedPlan, SwitchPlan, push_args
from compiler.delivery.vt import VtPlan

PROGRAM = "program.p4"
ENTRIES = "entries.bfrt.json"
INFO = "tofino.json"
BRIDGE = "p4sub_bridge"
#: ``p4sub_stored``'s key as BF Runtime names it (bf-p4c writes a stack element ``x[0]`` as ``x$0``).
STORED_KEY = "p4sub_label$0.value"
#: Tofino 1's egress parser reads at most this many bytes of a packet (p4c ``specs/parde_spec.h``).
EGRESS_PARSE_BYTES = 160
#: The encodings this program renders (combined.RENDERED_ENCODINGS may grow for BMv2 alone).
RENDERED = ("port", "bitmask", "mcgroup", "mixed")


@dataclass(frozen=True)
class StackTable:
    """A control-plane table of the stack program: its layout (for :mod:`backends.tofino.bfrt`) and action."""

    layout: TableLayout
    action: ir.Action


def bridge_bytes(max_labels: int) -> int:
    """Bytes of the bridged header: ingress port (2), stored flag (1), pop (1), keep bits, one byte per
    own-label bit (each in a container of its own: see the template)."""
    return 4 + math.ceil(max_labels / 8) + max_labels


def exact_table(name: str, keys: tuple[tuple[str, int], ...], action: ir.Action, gress: str, size: int,
           entries: list[ir.Entry]) -> StackTable:
    table = ir.Table(name, tuple(ir.Key(f, w, "exact") for f, w in keys), (action.name, "NoAction"), "NoAction",
                     size=size)
    layout = TableLayout(name, table, tuple(KeyLayout(f, w, "exact", "exact", "native") for f, w in keys),
                         tuple(entries), size, 0, gress)
    return StackTable(layout, action)


def stack_tables(plan: CombinedPlan, sp: SwitchPlan, target: Target = TOFINO1) -> list[StackTable]:
    """The stack program's control-plane tables with this switch's entries (``p4sub_self`` is separate:
    it is keyless and only its default entry is set)."""
    label_bits = 8 * plan.label_bytes
    set_mask = ir.Action("p4sub_set_mask", (ir.Param("mask", plan.mask_width),))
    strip = ir.Action("p4sub_strip")
    tables = [
        exact_table("p4sub_stored", ((STORED_KEY, 8 * plan.value_bytes),), set_mask, "ingress", stored_size(sp),
               [ir.Entry("p4sub_stored", (ir.Exact(t),), set_mask.name, (m,)) for t, m in sp.stored]),
        exact_table("p4sub_host_port", ((EGRESS_PORT_KEY, target.port_width),), strip, "egress", 64,
               [ir.Entry("p4sub_host_port", (ir.Exact(p),), strip.name) for p in sp.host_ports]),
    ]
    if sp.ingress:
        keep_bits = 8 * math.ceil(plan.max_labels / 8)
        widths = {"mask": plan.mask_width, "own": keep_bits, "stored": 1, "pop": 8, "keep": keep_bits, "drop": 1,
                  "reason": 8}
        push = ir.Action("p4sub_push_stack", (ir.Param("count", 16),)
                         + tuple(ir.Param(f"l{i}", label_bits) for i in range(plan.max_labels))
                         + tuple(ir.Param(name, widths[name]) for name in EDGE_PARAMS))
        tables.append(exact_table("p4sub_push", ((RSET_META, rset_width(plan)),), push, "ingress", push_size(plan),
                             [ir.Entry("p4sub_push", (ir.Exact(p.rsid),), push.name,
                                       push_args(plan, p) + edge_args(plan, sp, p))
                              for p in sp.pushes]))
    return tables


def stored_size(sp: SwitchPlan) -> int:
    return max(64, len(sp.stored))


def push_size(plan: CombinedPlan | VtPlan) -> int:
    return max(64, len(plan.receiver_sets))


def rset_width(plan: CombinedPlan | VtPlan) -> int:
    return next(m.width for m in plan.pipeline.metadata if m.name == RSET_META)


def subscription_layout(plan: CombinedPlan | VtPlan, target: Target = TOFINO1) -> Layout:
    """The receiver-set pipeline's tables as Tofino matches them (program and entries read this one object)."""
    check_key_fields(plan.pipeline, facts(target))
    return plan_layout(plan.pipeline, TofinoOptions(target=target))


def _check(plan: CombinedPlan, sp: SwitchPlan, target: Target) -> None:
    if plan.encoding not in RENDERED:
        raise TargetError(f"{target.name}: no header-stack program for the {plan.encoding} encoding "
                          f"(the TNA stack program renders {', '.join(RENDERED)})")
    bad = [g for g, _ in sp.groups if not target.first_group_id <= g < target.multicast_groups]
    if bad:
        raise TargetError(f"{target.name}: switch {sp.name}: port bitmap {bad[0]} is not a multicast group id")
    depth = bridge_bytes(plan.max_labels) + ETH_HEADER + plan.max_bytes
    if depth > EGRESS_PARSE_BYTES:
        raise TargetError(f"{target.name}: the egress would parse {depth} bytes (bridged header, Ethernet, "
                          f"stack of {plan.max_labels} labels), more than {EGRESS_PARSE_BYTES}; lower --max-labels")


def _key_expression(stacked: set[str], intrinsic: dict[str, str]):
    def expr(key: ir.Key) -> str:
        if not is_meta(key.field) and split_field(key.field)[0] in stacked:
            return field_expression(key.field, index=0)
        return field_expression(key.field, intrinsic=intrinsic)
    return expr


def subscription_context(plan: CombinedPlan | VtPlan, target: Target) -> tuple[dict[str, Any], list[Member]]:
    """The edge's pieces: spec headers and parser, subscription tables and actions, push table."""
    pipeline = plan.pipeline
    eth = spec_ethernet(pipeline.spec)
    spec, stopped = tna_spec(pipeline.spec, TofinoOptions().variable_advance, target)
    layout = subscription_layout(plan, target)
    messages = message_layout(pipeline)
    stacked = {h for h in messages.query_headers if spec.header(h).stack_size}
    from_back = False
    if stacked and messages.stack:
        # Only the first message is evaluated: the parse stops after it and the rest rides as payload
        # (ITCH's 12 parsed messages left no PHV for the label stack's metadata: bf-p4c's PHV allocation
        # failed), and the elements get fixed indices (the parser's match registers, as in program.py).
        spec, from_back = fix_stack_indices(first_only(spec, messages.stack))
    key_expr = _key_expression(stacked, facts(target).query_metadata)
    tables = []
    for t in layout.tables:
        tables.append(table_text(t, layout, key_expr))
    context = dict(
        name=pipeline.name, spec_path=pipeline.spec.path, eth=eth, stopped=stopped, first_only=bool(stacked),
        header_types=header_type_decls(spec), spec_members=[header_member(h).render() for h in spec.headers],
        parser_states=[s for s in parser_states(spec, packet="pkt") if not s.startswith("state start {")],
        emits=emit_statements(spec, packet="pkt", descending=from_back),
        actions=action_decls(pipeline, facts(target)), tables=tables, apply_lines=apply_statements(pipeline),
        valid_condition=guard_condition(pipeline),
        rset_meta=field_expression(RSET_META), rset_ref=RSET_META,
        rset_literal_zero=literal(0, rset_width(plan)), push_size=push_size(plan),
    )
    return context, pipeline_metadata_members(pipeline) + user_call_members(pipeline)


def metadata_context(members: list[Member], egress_members: list[Member]) -> dict[str, Any]:
    """The ingress and egress metadata structs and the parser lines that zero every member (TNA
    metadata is not zeroed for the program)."""
    def zero(ms: list[Member]) -> list[str]:
        return [f"meta.{m.name} = {literal(0, int(m.type[4:-1]))};" for m in ms]

    return {"metadata_struct": struct_decl(METADATA_STRUCT, members),
            "egress_metadata_struct": struct_decl(EGRESS_METADATA, egress_members),
            "meta_init": zero(members), "egress_meta_init": zero(egress_members)}


def program_text(plan: CombinedPlan, sp: SwitchPlan, target: Target = TOFINO1) -> str:
    """``program.p4`` for switch ``sp``; raises a :class:`TargetError` if it cannot be rendered."""
    _check(plan, sp, target)
    n = plan.max_labels
    keep_bits = 8 * math.ceil(n / 8)
    unused = {"ingress-port", "no-subscriber" if not sp.ingress else "not-a-stack"}  # egress / the other role
    reasons = [{"name": r, "const": r.upper().replace("-", "_"), "index": i} for i, r in enumerate(DROP_REASONS)
               if r not in unused]
    members = [*(Member(bits(8 * plan.id_bytes), f"p4sub_own_{c}") for c in range(compare_copies(n))),
               Member(bits(8), "p4sub_index"),
               Member(bits(16), "p4sub_mask"), Member(bits(1), "p4sub_too_deep"), Member(bits(1), "p4sub_drop"),
               Member(bits(8), "p4sub_reason")]
    if plan.encoding == "port":
        members += [Member(bits(16), f"p4sub_bits_{g}") for g in range(len(port_groups(n)))]
    if plan.encoding == "mixed":
        members.append(Member(bits(8 * plan.value_bytes), "p4sub_own_value"))
    egress_members = [Member(bits(keep_bits), "p4sub_keep")]
    if plan.encoding == "port":
        egress_members += [Member(bits(1), f"p4sub_at_{i}") for i in range(n)]
        egress_members += [Member(bits(target.port_width), f"p4sub_eport_{c}") for c in range(compare_copies(n))]
    context: dict[str, Any] = dict(
        switch=sp.name, switch_id=sp.switch_id, encoding=plan.encoding, n=n, include=target.include, t=target,
        id_bits=8 * plan.id_bytes, value_bits=8 * plan.value_bytes, label_bits=8 * plan.label_bytes,
        reasons=reasons, n_reasons=len(DROP_REASONS), H=HEADERS_STRUCT, M=METADATA_STRUCT,
        EH=EGRESS_HEADERS, EM=EGRESS_METADATA, bridge=BRIDGE, keep_bits=keep_bits,
        keep_after=[keep_after(i, n) for i in range(n)], first_own_rows=first_own_rows(n),
        cut_front_rows=cut_front_rows(n), cut_back_rows=cut_back_rows(n),
        port_groups=port_groups(n), compare_group=COMPARE_GROUP, compare_copies=compare_copies(n),
        port_group_rows={k: port_group_rows(k, 8 * plan.value_bytes, plan.mask_width)
                         for k in {len(g) for g in port_groups(n)}} if plan.encoding == "port" else {},
        prune_rows=prune_rows(n, keep_bits) if plan.encoding == "port" else [],
        edge=sp.ingress, stored_size=stored_size(sp), stored_key=STORED_KEY, host_port_key=EGRESS_PORT_KEY,
        spec_start=SPEC_START, header_types=[], spec_members=[], parser_states=[], emits=[], stopped=(),
        first_only=False, tag_bits=plan.tag_bits, tag_shift=plan.tag_shift, tags=MIXED_TAGS,
        mask_bits=plan.mask_width, mixed_rows=mixed_rows(plan) if plan.encoding == "mixed" else [],
        or_levels=(op_tree("p4sub_bits_or", [f"meta.p4sub_bits_{g}" for g in range(len(port_groups(n)))])
                   if plan.encoding == "port" else []),
    )
    if sp.ingress:
        extra, pipeline_members = subscription_context(plan, target)
        context.update(extra)
        members += pipeline_members
    context.update(metadata_context(members, egress_members))
    return render_template(__file__, "stack.p4.j2", **context)


def stack_entry(entry: ir.Entry, table: StackTable, target: Target) -> dict[str, Any]:
    key = {k.name: key_json(m, k) for m, k in zip(entry.matches, table.layout.keys)}
    data = {p4info_param_name(p): a for p, a in zip(table.action.params, entry.args)}
    return {"table_name": table_name(table.layout, target), "action": action_name(entry.action, table.layout, target),
            "key": key, "data": data}


def table_summary(t: TableLayout, target: Target) -> dict[str, Any]:
    return {"table_name": table_name(t, target), "gress": t.gress, "size": t.size,
            "keys": [{"name": k.field, "match_type": k.match_kind, "width": k.width} for k in t.keys],
            "actions": [action_name(a, t, target) for a in t.table.actions], "priority": t.needs_priority}


def document(plan: CombinedPlan, sp: SwitchPlan, target: Target = TOFINO1) -> dict[str, Any]:
    """The switch's ``entries.bfrt.json``: the own id (default entry of ``p4sub_self``), the stack
    tables' entries, on an ingress switch the subscription tables' entries, and the PRE records."""
    own = TableLayout("p4sub_self", ir.Table("p4sub_self", (), ("p4sub_set_own",), "p4sub_set_own", (0,), size=1),
                      (), (), 1, 0, "ingress")
    entries: list[dict[str, Any]] = [{
        "table_name": table_name(own, target), "default_entry": True,
        "action": action_name("p4sub_set_own", own, target), "key": {}, "data": {"id": sp.switch_id},
    }]
    stack = stack_tables(plan, sp, target)
    for t in stack:
        entries.extend(stack_entry(e, t, target) for e in t.layout.entries)
    layouts = [own] + [t.layout for t in stack]
    if sp.ingress:
        layout = subscription_layout(plan, target)
        entries.extend(entry_json(e, t, layout.pipeline, target) for t in layout.tables for e in t.entries)
        layouts += list(layout.tables)
    groups = tuple(ir.MulticastGroup(g, ports) for g, ports in sp.groups)
    return {"format": FORMAT, "target": target.name, "p4_name": Path(PROGRAM).stem,
            "pipeline": f"p4sub-stack-{sp.name}", "tables": [table_summary(t, target) for t in layouts],
            "entries": entries, "pre": pre_records(groups)}


def render_stack(plan: CombinedPlan, switch: str, target: Target = TOFINO1) -> dict[str, str]:
    """Every file of one switch, as {name: text}, without writing anything."""
    sp = plan.switches[switch]
    text = program_text(plan, sp, target)
    doc = document(plan, sp, target)
    info = {
        "target": target.name, "architecture": "TNA", "mode": "header-stack", "encoding": plan.encoding,
        "switch": sp.name, "switch_id": sp.switch_id, "edge": sp.ingress,
        "controls": {"ingress": target.ingress_control, "egress": target.egress_control},
        "max_labels": plan.max_labels, "label_bytes": plan.label_bytes, "tag_bits": plan.tag_bits,
        "bridge_bytes": bridge_bytes(plan.max_labels),
        "egress_parse_bytes": bridge_bytes(plan.max_labels) + ETH_HEADER + plan.max_bytes,
        "drop_reasons": list(DROP_REASONS), "recirculations_per_packet": 0, "multicast_groups": len(sp.groups),
        "build": f"bf-p4c --target tofino --arch tna -o OUT {PROGRAM} (not run by p4sub; p4test checks the types)",
    }
    return {PROGRAM: text, ENTRIES: json.dumps(doc, indent=1) + "\n", INFO: json.dumps(info, indent=2) + "\n"}
