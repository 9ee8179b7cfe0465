"""Include mode: only the subscription control, for a v1model program of the user's own.

Camus's deployment mode: the user keeps their program (parser, routing, deparser) and adds the
subscriptions as one control, ``#include "p4sub_control.p4"``. ``p4sub compile --target bmv2 --emit
control`` writes (:func:`render_include`):

* ``p4sub_control.p4``: ``struct p4sub_metadata_t`` and ``control P4subIngress(inout <headers type>
  hdr, inout p4sub_metadata_t p4sub, inout standard_metadata_t standard_metadata)`` with the IR's
  tables, actions and apply block (guard, default path, groups);
* ``commands.txt`` and ``entries.p4rt.json``: the entries and multicast groups, with the tables
  named as p4c names them under the user's instance (``MyIngress.p4sub.leaf_actions`` for
  ``P4subIngress() p4sub;`` declared in ``MyIngress``: :func:`instance_path`);
* ``bmv2.json``: the facts (mode ``include``, the instance path, the headers the control reads).

The contract (docs/bmv2.md, "Include mode"): the control reads the headers the rules name (members
of the user's headers struct called as the spec's instances, with the fields the rules test) and
``standard_metadata.ingress_port`` when a rule does. It writes ``egress_spec`` (``forward``),
``mcast_grp`` (``multicast``) and ``mark_to_drop`` only for packets it *claims*, and always sets
``p4sub.looked_at`` (the packet carries a header some rule reads) and ``p4sub.matched`` (a rule sent
the packet somewhere, or the ``--default`` path decided it). A packet it does not claim is left as
it came: the leaf table's miss is ``NoAction`` here, not the whole program's drop, so that the
user's program can route it (Camus's coexistence programs did exactly that).

Why only one message per packet and only multicast groups: evaluating several messages needs
resubmission and an egress that prunes per port, and port-bitmap delivery needs an egress table;
both are parts of a whole program that the user's program would have to reproduce. Include mode
refuses them with what to compile instead (``--batch first``, ``--delivery groups``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from backends.bmv2 import state
from backends.bmv2.cli_commands import commands
from backends.bmv2.p4runtime import one_update_per_line, write_request
from backends.bmv2.program import Bmv2Program, Copy, copy_member, intrinsic_keys
from backends.bmv2.target import MAX_GROUP_ID, V1MODEL
from backends.common.controls import action_decls, apply_statements, chained_tables, table_decl
from backends.common.headers import Member, bits, struct_decl
from backends.common.include import (
    CONTROL,
    CONTROL_FILE,
    LOOKED_AT,
    MATCHED,
    META_PARAM,
    METADATA_TYPE,
    check_headers_type,
    check_instance,
    headers_read,
    include_pipeline,
    metadata_members,
)
from backends.common.literals import literal
from backends.common.messages import message_layout
from backends.common.names import (
    check_key_fields,
    field_expression,
    guard_condition,
    is_meta,
    looked_at_condition,
    split_field,
)
from backends.common.state import check_state, state_keys
from backends.common.target import check_match_kinds
from backends.common.templates import render_template
from compiler import ir
from compiler.base import ResourceError, TargetError

DEFAULT_INSTANCE = "MyIngress.p4sub"


@dataclass(frozen=True)
class IncludeOptions:
    """``headers_type``: the user's headers struct type; ``instance``: where the user instantiates the
    control, as ``<control>.<instance name>`` (the P4Info prefix of its tables and actions);
    ``batch``: ``auto``/``single`` for scalar query headers, ``first`` for a queried stack."""

    headers_type: str = "headers"
    instance: str = DEFAULT_INSTANCE
    batch: str = "auto"


def instance_path(text: str) -> str:
    """The ``--instance`` argument checked: ``MyIngress.p4sub`` (dotted P4 identifiers, at least two:
    v1model controls are instantiated inside the user's ingress control).

    p4c names an object declared in a control instantiated as ``P4subIngress() p4sub;`` inside
    ``MyIngress`` by the instance path, then its own ``@name``: table ``leaf_actions`` is
    ``MyIngress.p4sub.leaf_actions``, action ``forward`` is ``MyIngress.p4sub.forward``; keys keep
    their ``@name`` unqualified (``ipv4.dst_addr``) and ``NoAction`` stays ``NoAction``.
    """
    return check_instance(text, DEFAULT_INSTANCE)


def check_include(pipeline: ir.Pipeline, options: IncludeOptions) -> str:
    """Refuse what an included control cannot do; returns the batch mode (``single`` or ``first``)."""
    check_headers_type(options.headers_type)
    instance_path(options.instance)
    if pipeline.delivery.is_bitmap:
        raise TargetError("bmv2 include mode: port-bitmap delivery needs an egress table that drops the copies whose "
                          "port bit is clear, which is your program's egress; compile with --delivery groups")
    layout = message_layout(pipeline)
    if layout.stack is None:
        if options.batch not in ("auto", "single"):
            raise TargetError(f"bmv2 include mode: --batch {options.batch} needs a queried header stack; the tables "
                              f"query only scalar headers")
        return "single"
    if options.batch != "first":
        raise TargetError(f"bmv2 include mode evaluates one message per packet, and the tables query header stack "
                          f"{layout.stack}[{layout.depth}]: compile with --batch first (element 0 only), or use a "
                          "whole program (--emit program), which evaluates every message by resubmission")
    return "first"


def render_include(pipeline: ir.Pipeline, options: IncludeOptions = IncludeOptions()) -> dict[str, str]:
    """Every file include mode writes, as {name: text}; raises a P4subError before anything is written."""
    mode = check_include(pipeline, options)
    check_key_fields(pipeline, V1MODEL)
    check_match_kinds(pipeline, V1MODEL)
    too_high = [g.id for g in pipeline.multicast_groups if g.id > MAX_GROUP_ID]
    if too_high:
        raise TargetError(f"bmv2: multicast group ids up to {max(too_high)}; P4Runtime on BMv2 accepts 1..{MAX_GROUP_ID}")
    spec = pipeline.spec
    run = include_pipeline(pipeline)
    layout = message_layout(run)
    stacked = {h for h in layout.query_headers if spec.header(h).stack_size}
    copies = [Copy(copy_member(f), *split_field(f), spec.field_width(f)) for f in layout.query_fields
              if split_field(f)[0] in stacked]
    intrinsic = intrinsic_keys(run, batched=False)
    check_state(run, "bmv2", batched=mode != "single")
    stateful = state_keys(run, META_PARAM)

    def key_expr(key: ir.Key) -> str:
        if key.field in intrinsic:
            return intrinsic[key.field]
        if key.field in stateful:
            return stateful[key.field]
        if not is_meta(key.field) and split_field(key.field)[0] in stacked:
            return f"{META_PARAM}.{copy_member(key.field)}"
        return field_expression(key.field, meta=META_PARAM)

    for t in run.tables:
        n = len(run.entries_of(t.name))
        if n > t.size:
            raise ResourceError(f"bmv2: table {t.name} has {n} entries but size {t.size}")
    members = metadata_members(run, [Member(bits(c.width), c.member) for c in copies])
    leaves = {t.name: f"{META_PARAM}.{MATCHED} = 1w1;" for t in run.tables if t.role == "leaf"}
    instance = options.instance.rsplit(".", 1)
    context = dict(
        name=run.name, spec_path=spec.path, headers_type=options.headers_type, control=CONTROL,
        metadata_type=METADATA_TYPE, meta=META_PARAM, instance=options.instance, user_control=instance[0],
        instance_name=instance[1], looked_at=LOOKED_AT, matched=MATCHED,
        metadata_struct=struct_decl(METADATA_TYPE, members),
        zero=[f"{META_PARAM}.{m.name} = {literal(0, int(m.type[4:-1]))};" for m in members],
        reads=headers_read(run), stacked=stacked,
        metadata_reads=sorted({intrinsic[k.field] for t in run.tables for k in t.keys if k.field in intrinsic}),
        actions=action_decls(run, V1MODEL, meta=META_PARAM),
        tables=[table_decl(t, run, key_expr) for t in chained_tables(run)],
        looked_at_condition=looked_at_condition(run), valid_condition=guard_condition(run),
        copies=copies, first_only=mode == "first",
        apply_lines=apply_statements(run, on_hit=leaves),
        default_lines=apply_statements(run, order=run.default_control),
        groups=[g.id for g in run.multicast_groups],
        state_decls=state.declarations(run),
        state_lines=state.apply_lines(run, V1MODEL.query_metadata, meta=META_PARAM),
    )
    text = render_template(__file__, "control.p4.j2", **context)
    program = Bmv2Program(text, mode, layout, {t.name: t.size for t in run.tables})
    info = {
        "target": V1MODEL.name,
        "architecture": V1MODEL.architecture,
        "mode": "include",
        "batch": mode,
        "control": CONTROL,
        "instance": options.instance,
        "headers_type": options.headers_type,
        "metadata_type": METADATA_TYPE,
        "reads": {h: [f for f, _ in fs] for h, fs in context["reads"].items()},
        "multicast_groups": context["groups"],
        "table_sizes": program.sizes,
    }
    return {
        CONTROL_FILE: text,
        "entries.p4rt.json": one_update_per_line(write_request(run, program, options.instance)),
        "commands.txt": "\n".join(commands(run, program, options.instance)) + "\n",
        "bmv2.json": json.dumps(info, indent=2) + "\n",
    }


def apply_call(options: IncludeOptions) -> str:
    """The statement the user's ingress runs."""
    return f"{options.instance.rsplit('.', 1)[1]}.apply(hdr, meta.{META_PARAM}, standard_metadata);"


def table_prefix(options: IncludeOptions) -> str:
    """What every table name in the entries starts with (P4Info: the instance path)."""
    return options.instance
