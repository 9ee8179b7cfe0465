"""Include mode on Tofino: only the subscription control, for a TNA program of the user's own.

The TNA counterpart of :mod:`backends.bmv2.include` (Camus's deployment mode: the user keeps their
parser, routing and deparser, and adds the subscriptions as one control). ``p4sub compile --target
tofino --emit control`` writes (:func:`render_include`):

* ``p4sub_control.p4``: ``struct p4sub_metadata_t`` and ``control P4subIngress(inout <H> hdr, inout
  p4sub_metadata_t p4sub, in ingress_intrinsic_metadata_t ig_intr_md, inout
  ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md, inout ingress_intrinsic_metadata_for_tm_t
  ig_tm_md)`` with the tables (laid out by :func:`backends.tofino.layout.plan`, as in a whole
  program), actions and apply block (guard, default path, groups);
* ``entries.bfrt.json``: the entries and PRE records, tables named under the user's instance
  (``pipe.SwitchIngress.p4sub.leaf_actions`` for ``P4subIngress() p4sub;`` declared in
  ``SwitchIngress``, actions ``SwitchIngress.p4sub.forward``: :mod:`backends.tofino.bfrt`);
* ``resources.json``: the estimate of :mod:`backends.tofino.resources` for the control's tables
  alone (the user's own tables share the chip: it is a lower bound);
* ``tofino.json``: the facts (mode ``include``, the instance path, the headers the control reads).

Why this parameter list: the control must read the ingress port (``ig_intr_md.ingress_port``,
when a rule tests it, or the MAC timestamp), and decide a claimed packet's fate, which TNA spreads
over two structs: ``ig_tm_md`` (``ucast_egress_port``, ``mcast_grp_a`` and ``rid``) and
``ig_dprsr_md`` (``drop_ctl``). It takes nothing else (no parser metadata, no egress), and the
list is the same for every rule set, so that the user's apply call never changes with the rules.

The contract is BMv2's (docs/tofino.md, "Include mode"): the control sets ``p4sub.looked_at`` and
``p4sub.matched`` on every packet and writes the intrinsic metadata only for packets it claims; a
leaf miss is ``NoAction``. Refused, with what to compile instead: port-bitmap delivery (it needs an
egress table and a bridged header in the user's egress), several messages per packet (union mode
replicates the tables per message and adds egress keep tables and a bridged header: parts of a
whole program), recirculation (the user's parser would have to recognise the second pass), and
``--default drop`` (the CLI: unclaimed packets are the user's program's to drop).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from backends.common.controls import action_decls, apply_statements, chained_tables
from backends.common.headers import struct_decl
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
from backends.common.templates import render_template
from backends.tofino.bfrt import document
from backends.tofino.fold import fold_miss_tables
from backends.tofino.layout import Layout, TableLayout, TofinoOptions, match_kind_counts, plan
from backends.tofino.program import table_text
from backends.tofino.resources import Estimate, estimate
from backends.tofino.target import TOFINO1, Target, facts
from compiler import ir
from compiler.base import ResourceError, TargetError

DEFAULT_INSTANCE = "SwitchIngress.p4sub"
ENTRIES_FILE = "entries.bfrt.json"
RESOURCES_FILE = "resources.json"
INFO_FILE = "tofino.json"
# The control's own names for TNA's ingress metadata (Intel's examples use the same).
INTR_MD = "ig_intr_md"
DPRSR_MD = "ig_dprsr_md"
TM_MD = "ig_tm_md"


@dataclass(frozen=True)
class IncludeOptions:
    """``headers_type``: the user's headers struct type; ``instance``: where the user instantiates the
    control, as ``<control>.<instance name>`` (the BF Runtime prefix of its tables and actions, after
    ``pipe.``); ``tofino``: the layout choices (``batch``: ``auto``/``single`` for scalar query
    headers, ``first`` for a queried stack; ``fold_misses``, ``points_as_exact``, ``headroom``)."""

    headers_type: str = "headers"
    instance: str = DEFAULT_INSTANCE
    tofino: TofinoOptions = field(default_factory=TofinoOptions)


@dataclass(frozen=True)
class Rendered:
    """Everything include mode writes ({name: text}), and the layout and estimate behind it."""

    files: dict[str, str]
    layout: Layout
    estimate: Estimate
    mode: str


def instance_path(text: str) -> str:
    """The ``--instance`` argument checked: ``SwitchIngress.p4sub`` (dotted P4 identifiers, at least two).

    bf-p4c names an object declared in a control instantiated as ``P4subIngress() p4sub;`` inside
    ``SwitchIngress`` by the pipe, the instance path, then its own ``@name``: BF Runtime table
    ``pipe.SwitchIngress.p4sub.leaf_actions``, action ``SwitchIngress.p4sub.forward``; keys keep
    their ``@name`` (``add_order.price``, ``meta.p4sub_state``) and ``NoAction`` stays ``NoAction``.
    """
    check_instance(text, DEFAULT_INSTANCE)
    if text.split(".", 1)[0] == TOFINO1.pipe_prefix:
        raise TargetError(f"--instance {text!r}: give the path inside the pipe ({text.split('.', 1)[1]}); BF Runtime "
                          f"names start with the pipe's name, {TOFINO1.pipe_prefix}, by themselves")
    return text


def control_target(target: Target) -> Target:
    """``target`` with the control's parameter names, so that the shared action renderer spells
    ``forward`` as ``ig_tm_md.ucast_egress_port = port;`` and ``drop_packet`` as ``ig_dprsr_md.drop_ctl``."""
    return replace(target, ingress_md=INTR_MD, ingress_dprsr_md=DPRSR_MD, ingress_tm_md=TM_MD)


def check_include(pipeline: ir.Pipeline, options: IncludeOptions) -> str:
    """Refuse what an included TNA control cannot do; returns the batch mode (``single`` or ``first``)."""
    check_headers_type(options.headers_type)
    instance_path(options.instance)
    tofino = options.tofino
    if pipeline.delivery.is_bitmap:
        raise TargetError("tofino include mode: port-bitmap delivery needs an egress table that drops the copies "
                          "whose port bit is clear, and a bridged header to carry the bitmap there, which are your "
                          "program's egress and deparser; compile with --delivery groups")
    if tofino.allow_recirculation:
        raise TargetError("tofino include mode: --allow-recirculation needs the ingress parser to recognise the "
                          "second pass, which is your program's parser; compile without it, or use a whole program "
                          "(--emit program)")
    if tofino.network_up_ports is not None:
        raise TargetError("tofino include mode: the network stage of a routed switch drops copies in the egress, "
                          "which is your program's; render routed switches as whole programs")
    layout = message_layout(pipeline)
    if layout.stack is None:
        if tofino.batch not in ("auto", "single"):
            raise TargetError(f"tofino include mode: --batch {tofino.batch} needs a queried header stack; the tables "
                              f"query only scalar headers")
        return "single"
    if tofino.batch == "first" or (tofino.batch == "auto" and layout.depth == 1):
        return "first"
    raise TargetError(f"tofino include mode evaluates one message per packet, and the tables query header stack "
                      f"{layout.stack}[{layout.depth}]: compile with --batch first (element 0 only), or use a whole "
                      "program (--emit program), which evaluates every message (--batch union, split or auto)")


def _key_expression(pipeline: ir.Pipeline, target: Target):
    """A key's P4 expression inside the control: ``hdr.h.f`` (element 0 of a stack), ``p4sub.<member>``
    for p4sub's metadata, ``ig_intr_md.ingress_port`` for the port."""
    spec = pipeline.spec
    intrinsic = facts(target).query_metadata

    def expr(key: ir.Key) -> str:
        if key.field in intrinsic:
            return intrinsic[key.field]
        if is_meta(key.field):
            return field_expression(key.field, meta=META_PARAM)
        inst = spec.header(split_field(key.field)[0])
        return field_expression(key.field, index=0 if inst is not None and inst.stack_size else None)
    return expr


def _table_text(t: TableLayout, layout: Layout) -> str:
    return table_text(t, layout, _key_expression(layout.pipeline, layout.target))


def _laid_out(run: ir.Pipeline, options: TofinoOptions) -> tuple[Layout, Estimate, bool]:
    """The control's tables laid out and estimated; like a whole program, miss tables are folded
    when the unfolded tables do not fit (``fold_misses``)."""
    if options.fold_misses == "always":
        layout = plan(fold_miss_tables(run), options)
        return layout, estimate(layout), True
    try:
        layout = plan(run, options)
        return layout, estimate(layout), False
    except ResourceError:
        folded = fold_miss_tables(run) if options.fold_misses == "auto" else run
        if folded is run:
            raise
        layout = plan(folded, options)
        return layout, estimate(layout), True


def build_include(pipeline: ir.Pipeline, options: IncludeOptions = IncludeOptions()) -> Rendered:
    """Render and check everything include mode writes, in memory (raises a P4subError, writes nothing)."""
    mode = check_include(pipeline, options)
    target = options.tofino.target
    check_key_fields(pipeline, facts(target))
    layout, est, folded = _laid_out(include_pipeline(pipeline), options.tofino)
    run = layout.pipeline
    spec = run.spec
    local = control_target(target)
    tna = facts(local)
    intrinsic = tna.query_metadata
    members = metadata_members(run)
    leaves = {t.name: f"{META_PARAM}.{MATCHED} = 1w1;" for t in run.tables if t.role == "leaf"}
    instance = options.instance.rsplit(".", 1)
    reads = headers_read(run)
    stacked = {h for h in reads if spec.header(h) is not None and spec.header(h).stack_size}
    groups = [g.id for g in run.multicast_groups]
    context = dict(
        name=run.name, spec_path=spec.path, include=target.include, headers_type=options.headers_type,
        control=CONTROL, metadata_type=METADATA_TYPE, meta=META_PARAM, instance=options.instance,
        user_control=instance[0], instance_name=instance[1], bfrt_prefix=f"{target.pipe_prefix}.{options.instance}",
        looked_at=LOOKED_AT, matched=MATCHED, metadata_struct=struct_decl(METADATA_TYPE, members),
        zero=[f"{META_PARAM}.{m.name} = {literal(0, int(m.type[4:-1]))};" for m in members],
        reads=reads, stacked=stacked,
        metadata_reads=sorted({intrinsic[k.field] for t in run.tables for k in t.keys if k.field in intrinsic}),
        intr_md=INTR_MD, intr_md_type=target.ingress_md_type, dprsr_md=DPRSR_MD,
        dprsr_md_type=target.ingress_dprsr_md_type, tm_md=TM_MD, tm_md_type=target.ingress_tm_md_type,
        unicast=f"{TM_MD}.{target.unicast_port_field}", multicast=f"{TM_MD}.{target.multicast_group_field}",
        rid=f"{TM_MD}.{target.rid_field}", drop=f"{DPRSR_MD}.{target.drop_field}",
        actions=action_decls(run, tna, meta=META_PARAM),
        tables=[_table_text(layout.table(t.name), layout) for t in chained_tables(run)],
        looked_at_condition=looked_at_condition(run), valid_condition=guard_condition(run),
        first_only=mode == "first",
        apply_lines=apply_statements(run, on_hit=leaves),
        default_lines=apply_statements(run, order=run.default_control),
        groups=groups,
    )
    text = render_template(__file__, "control.p4.j2", **context)
    entries = document(layout, run.multicast_groups, None, options.instance)
    resources = est.to_json()
    resources["notes"] = {
        "mode": "include",
        "scope": "the control's tables only; your program's own tables share the stages and memory",
        "miss_tables_folded": folded,
        "batch_mode": mode,
        "message_stack": message_layout(run).stack,
        "messages_per_packet": 1,
        "match_kinds": match_kind_counts(layout),
        "encodings": {t.name: {k.field: k.encoding for k in t.keys if k.encoding != "native"}
                      for t in layout.tables if any(k.encoding != "native" for k in t.keys)},
    }
    info = {
        "target": target.name,
        "architecture": "TNA",
        "mode": "include",
        "batch": mode,
        "control": CONTROL,
        "instance": options.instance,
        "bfrt_prefix": context["bfrt_prefix"],
        "headers_type": options.headers_type,
        "metadata_type": METADATA_TYPE,
        "parameters": [f"inout {options.headers_type} hdr", f"inout {METADATA_TYPE} {META_PARAM}",
                       f"in {target.ingress_md_type} {INTR_MD}", f"inout {target.ingress_dprsr_md_type} {DPRSR_MD}",
                       f"inout {target.ingress_tm_md_type} {TM_MD}"],
        "reads": {h: [f for f, _ in fs] for h, fs in reads.items()},
        "metadata_reads": context["metadata_reads"],
        "multicast_groups": groups,
        "table_sizes": {t.name: t.size for t in layout.tables},
    }
    files = {
        CONTROL_FILE: text,
        ENTRIES_FILE: json.dumps(entries, indent=1) + "\n",
        RESOURCES_FILE: json.dumps(resources, indent=2) + "\n",
        INFO_FILE: json.dumps(info, indent=2) + "\n",
    }
    return Rendered(files, layout, est, mode)


def render_include(pipeline: ir.Pipeline, options: IncludeOptions = IncludeOptions()) -> dict[str, str]:
    """Every file include mode writes, as {name: text}; raises a P4subError before anything is written."""
    return build_include(pipeline, options).files


def apply_call(options: IncludeOptions) -> str:
    """The statement the user's ingress runs (with its own names for the intrinsic metadata)."""
    name = options.instance.rsplit(".", 1)[1]
    return f"{name}.apply(hdr, meta.{META_PARAM}, {INTR_MD}, {DPRSR_MD}, {TM_MD});"


def table_prefix(options: IncludeOptions) -> str:
    """What every table name in the entries starts with (BF Runtime: the pipe, then the instance path)."""
    return f"{options.tofino.target.pipe_prefix}.{options.instance}"
