"""The Tofino backend: a TNA program, BF Runtime entries, the PRE configuration and a resource estimate.

``emit(pipeline, out_dir, options)`` writes into ``out_dir``:

* ``program.p4``: a complete TNA program (``#include <tna.p4>``) for bf-p4c;
* ``entries.bfrt.json``: table entries and ``$pre.node`` / ``$pre.mgid`` records in the shape
  ``bfrt_grpc.client`` takes (:mod:`backends.tofino.bfrt`);
* ``resources.json``: stages, SRAM/TCAM blocks per table, multicast groups, and the percentages
  of Camus Table 1 (:mod:`backends.tofino.resources`).

Everything is checked before anything is written: a pipeline that cannot be rendered, or does not
fit the chip, raises a :class:`~compiler.base.errors.P4subError` and leaves ``out_dir`` alone.

``emit_control(pipeline, out_dir, IncludeOptions(...))`` is include mode (:mod:`backends.tofino.include`):
only the subscription control ``p4sub_control.p4`` for the user's own TNA program, its BF Runtime
entries and PRE records (tables named under the user's instance), and the estimate of its tables.

``compile_options(spec, base)`` is the hook for the compiler: the table options that suit Tofino
(a queried field wider than a range key may be gets the domain-compression encoding instead of
``range``). ``emit`` does not need it to be right: a range key that is too wide is matched as
ternary prefixes (:mod:`backends.tofino.layout`); the options only make the tables smaller.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from backends.common.messages import MessageLayout, message_layout
from backends.common.names import check_key_fields
from backends.common.state import check_state
from backends.tofino import batch as _batch
from backends.tofino import split as _split
from backends.tofino.bfrt import document
from backends.tofino.bfrt import dumps as dumps_entries
from backends.tofino.fold import fold_miss_tables
from backends.tofino.include import IncludeOptions, render_include
from backends.tofino.layout import Layout, TofinoOptions, match_kind_counts, plan
from backends.tofino.network import network_stage
from backends.tofino.program import Program, render
from backends.tofino.resources import Estimate, estimate, lane_ready
from backends.tofino.target import TOFINO1, Target, facts
from compiler import ir
from compiler.base import ResourceError, TargetError, write_files
from compiler.compile import Budget
from compiler.default_path import default_of
from compiler.spec import Spec
from compiler.tables import TableOptions

#: The public face; ``hitless``, ``install``, ``stack_program``, ``target`` and ``vt_program`` are public
#: modules (install and hitless import the BF Runtime client only when called).
__all__ = ["emit", "emit_control", "build", "check_slots_fit", "compile_options", "network_options",
           "options_from_args", "TofinoOptions", "IncludeOptions", "Rendered", "TOFINO1", "Target",
           "bf_p4c", "bfrt_check", "hitless", "install", "stack_program", "target", "vt_program"]

#: The batch modes (``--batch``) in which packets of several messages render with port bitmaps:
#: split, whose pass 2 evaluates one message as the single program does (auto renders split for a
#: bitmap pipeline). Compile's ``auto`` may then choose bitmaps for a header stack when groups do
#: not fit (backends.target_compile_options); routed switches keep groups.
STACK_BITMAP_MODES = ("auto", "split")

PROGRAM_FILE = "program.p4"
ENTRIES_FILE = "entries.bfrt.json"
RESOURCES_FILE = "resources.json"


@dataclass(frozen=True)
class Rendered:
    """Everything ``emit`` writes, built in memory first."""

    program: Program
    layout: Layout
    batched: _batch.Batched
    estimate: Estimate
    entries: dict
    resources: dict


def compile_budget(base: Budget = Budget(), target: Target = TOFINO1) -> Budget:
    """The compile's budget on this target: entries up to what its SRAM could ever hold (the resource
    estimate is the judge below that), its stages and multicast groups."""
    return replace(base, entries=target.entry_budget, stages=target.stages, groups=target.multicast_groups - 1)


def compile_options(spec: Spec, base: TableOptions = TableOptions(), target: Target = TOFINO1) -> TableOptions:
    """Table options for Tofino: fields wider than a range key and not exact/lpm are domain-compressed.

    Compression maps the field to the index of its elementary interval in one code table (the only
    table that matches the wide field, as ternary prefixes) and the state tables then match the small
    code as a native ``range``. Encodings already chosen in ``base`` are kept.
    """
    chosen = dict(base.per_field_encoding)
    for name, info in spec.query_fields.items():
        if name in chosen or info.match_kind in ("exact", "lpm") or info.is_string:
            continue
        if info.width > target.widest_range_key:
            chosen[name] = "compress"
    return replace(base, per_field_encoding=chosen)


def build(pipeline: ir.Pipeline, options: TofinoOptions = TofinoOptions()) -> Rendered:
    """Render and check everything in memory (raises a P4subError when it cannot be done).

    ``options.fold_misses``: ``auto`` folds every miss table into its field table
    (:mod:`backends.tofino.fold`; a wide exact key becomes ternary, TCAM for stages), failing that
    only the narrow ones, failing that none. Each ``if (!t.apply().hit)`` is a branch whose table
    bf-p4c places after it, which chains what would otherwise run side by side: the slots of a message
    stack (ITCH's union: 20 stages and more), the lanes of a bitmap program (Siena 1k in 8 lanes: 32).
    """
    if options.fold_misses == "never":
        return _build(pipeline, options, folded=False)
    if options.fold_misses == "always":
        return _build(fold_miss_tables(pipeline), options, folded=True)
    refused: list[ResourceError] = []
    for candidate in (fold_miss_tables(pipeline, max_exact_width=None), fold_miss_tables(pipeline)):
        if candidate is pipeline:
            break
        try:
            return _build(candidate, options, folded=True)
        except ResourceError as exc:
            refused.append(exc)
    try:
        return _build(pipeline, options, folded=False)
    except ResourceError:
        if refused:  # the narrow fold's reason (its codes are what the compile coarsens by)
            raise refused[-1] from None
        raise


#: A code table is asked to shrink to this share of what would just fit: blocks grow in steps, and
#: the field tables that match the codes shrink with it, but not exactly in proportion.
CODE_HEADROOM = 0.9


def check_slots_fit(pipeline: ir.Pipeline, messages: MessageLayout, options: TofinoOptions) -> None:
    """Refuse at once a batched pipeline whose per-message copies cannot fit the chip's memory.

    One message's tables (with its keep table) are laid out and estimated, then counted
    once per message of a packet: the copies run side by side, so memory is what adds up. When the
    rules compress a field, the ResourceError says how many thresholds its code table could keep for
    the rest to fit (``codes``), which the compile can act on (:mod:`compiler.coarsen`).
    """
    target = options.target
    one = _batch.replicate(pipeline, replace(messages, depth=1))
    layout = plan(one.pipeline, options, one.gress_of)
    est = estimate(layout, check=False)
    depth = messages.depth
    tcam, sram = est.tcam_blocks * depth, est.sram_blocks * depth
    if tcam <= target.tcam_total and sram <= target.sram_total:
        return
    code_tables = [t for t in layout.tables if t.table.role == "code"]
    codes: dict[str, int] = {}
    if code_tables:
        # The share of its thresholds a code table may keep: the share of the short memory the whole
        # message may keep, since what matches the codes shrinks with them (range keys on the codes in
        # TCAM, their exact expansions, the leaf states and so the keep tables in SRAM). The compile
        # asks again while that was not enough.
        keep = min(target.tcam_total / depth / max(1, est.tcam_blocks),
                   target.sram_total / depth / max(1, est.sram_blocks))
        ir_entries = Counter(e.table for e in pipeline.entries)
        for t in code_tables:
            cuts = ir_entries[t.table.name.removesuffix("_m0")]
            codes[t.table.attribute] = max(1, int(cuts * keep * CODE_HEADROOM))
    kind, need, cap = (("TCAM", tcam, target.tcam_total) if tcam > target.tcam_total
                       else ("SRAM", sram, target.sram_total))
    per = est.tcam_blocks if kind == "TCAM" else est.sram_blocks
    big = max(est.tables, key=lambda u: u.tcam_blocks if kind == "TCAM" else u.sram_blocks)
    raise ResourceError(
        f"{depth} messages per packet need {need} {kind} blocks ({per} per message, each with its copy of the "
        f"tables) and {target.name} has {cap}; the largest is {big.name.removesuffix('_m0')} with "
        f"{big.tcam_blocks if kind == 'TCAM' else big.sram_blocks} blocks per message"
        + (f"; its code tables fit with at most {', '.join(f'{n} thresholds on {f}' for f, n in codes.items())}"
           if codes else ""), codes=codes)


def _halved_codes(pipeline: ir.Pipeline) -> dict[str, int]:
    """Half the thresholds of every compressed field: what a batched program whose memory adds up but
    whose copies do not pack into the stages asks of the compile (the code tables' field tables are
    what grows with the thresholds)."""
    counts = Counter(e.table for e in pipeline.entries)
    return {t.attribute: max(1, counts[t.name] // 2) for t in pipeline.tables if t.role == "code" and counts[t.name] > 1}


def _shared_codes(pipeline: ir.Pipeline, layout: Layout) -> dict[str, int]:
    """The thresholds every compressed field may keep when the tables' memory is short: the share of the
    memory the chip has (times :data:`CODE_HEADROOM`), as for the union's copies; empty when the
    memory adds up (the tables do not pack into the stages: halving is then the answer)."""
    target = layout.target
    est = estimate(layout, check=False)
    share = min(target.tcam_total / max(1, est.tcam_blocks), target.sram_total / max(1, est.sram_blocks))
    if share >= 1:
        return {}
    counts = Counter(e.table for e in pipeline.entries)
    return {t.attribute: max(1, int(counts[t.name] * share * CODE_HEADROOM))
            for t in pipeline.tables if t.role == "code" and counts[t.name] > 1}


def _build(pipeline: ir.Pipeline, options: TofinoOptions, folded: bool) -> Rendered:
    if pipeline.spec.pragma_only:
        raise TargetError(f"tofino: {pipeline.spec.path} is a pragma-only spec (only @pragma query_* lines): it has no "
                          "headers or parser to make a whole program from; compile with --emit control to get the "
                          "subscription control to #include in your own TNA program (docs/tofino.md, \"Include mode\")")
    check_key_fields(pipeline, facts(options.target))
    messages = message_layout(pipeline)
    mode = _batch.choose_mode(messages, options.batch)
    check_state(pipeline, "tofino", batched=mode != "single")
    if pipeline.default_control and (mode in ("union", "split") or pipeline.delivery.is_bitmap
                                     or options.network_up_ports is not None):
        raise TargetError(f"tofino: --default {default_of(pipeline)} is rendered for one message per packet on a "
                          "lone switch with --delivery groups (the egress of the other programs expects a bridged "
                          "header on every packet); use --default drop, --delivery groups or --batch first")
    if mode == "union" and options.batch == "auto":
        if pipeline.delivery.is_bitmap:  # the union renders groups only: a bitmap per message is split's
            return _render(pipeline, options, folded, messages, "split")
        return _auto(pipeline, options, folded, messages)
    return _render(pipeline, options, folded, messages, mode)


def _auto(pipeline: ir.Pipeline, options: TofinoOptions, folded: bool, messages: MessageLayout) -> Rendered:
    """Union when it fits the chip (one pass), else split (one copy of the tables, two passes per message).

    Split is rendered first: it is one copy of the single-message tables, which the union copies once per
    message (with keep tables bigger than the leaf), so when split does not fit the union does not
    either and split's refusal is the answer (its thresholds are what the compile coarsens by); and
    when ``depth`` times split's memory is more than the chip has, the union is not tried (at 100k
    ITCH filters laying out its keep table alone took minutes and gigabytes).
    """
    try:
        split = _render(pipeline, options, folded, messages, "split")
    except TargetError:  # split is not rendered for this program (a ResourceError is not caught: see above)
        return _render(pipeline, options, folded, messages, "union")
    target, depth = options.target, messages.depth
    if split.estimate.tcam_blocks * depth > target.tcam_total or split.estimate.sram_blocks * depth > target.sram_total:
        split.resources["notes"]["union_refused"] = (
            f"{depth} copies of the tables need at least {split.estimate.tcam_blocks * depth} TCAM and "
            f"{split.estimate.sram_blocks * depth} SRAM blocks; {target.name} has {target.tcam_total} and "
            f"{target.sram_total}")
        return split
    try:
        return _render(pipeline, options, folded, messages, "union")
    except ResourceError as exc:
        split.resources["notes"]["union_refused"] = str(exc)
        return split


def _render(pipeline: ir.Pipeline, options: TofinoOptions, folded: bool, messages: MessageLayout,
            mode: str) -> Rendered:
    """The program of one batch mode, laid out, estimated and rendered (ResourceError when it does not fit)."""
    if pipeline.delivery.is_bitmap and mode == "union":
        raise TargetError("tofino: port-bitmap delivery is rendered for one message per packet or batch mode split "
                          "(not union); compile with --delivery groups, or --batch split or first")
    if mode == "split" and (options.network_up_ports is not None or options.allow_recirculation):
        raise TargetError("tofino: batch mode split on a routed switch or with --allow-recirculation (not "
                          "rendered); use --batch union or first")
    if pipeline.delivery.is_bitmap and mode == "split":
        # Pass 2 evaluates one message: the single program's bitmap delivery, after the pick.
        batched = _batch.with_bitmap(_split.split(_batch.bitmap_pipeline(pipeline), messages))
    elif pipeline.delivery.is_bitmap:
        batched = _batch.bitmap(pipeline, mode)
    elif mode == "union":
        check_slots_fit(pipeline, messages, options)  # before twelve copies are built and laid out
        batched = _batch.replicate(pipeline, messages)
    elif mode == "split":
        batched = _split.split(pipeline, messages)
    else:
        batched = _batch.single(pipeline, mode)
    layout = plan(batched.pipeline, options, batched.gress_of)
    try:
        est = estimate(layout)
    except ResourceError as exc:
        if mode not in ("union", "split") or exc.codes:
            raise
        codes = _shared_codes(pipeline, layout) if mode == "split" else {}
        raise ResourceError(exc.message, codes=codes or _halved_codes(pipeline)) from None
    pass_of = {t.name: (t.passes[0] if t.passes else 0) for t in est.tables}
    ready = lane_ready(batched.pipeline, {t.name: (t.first_stage, t.last_stage) for t in est.tables
                                          if t.last_stage >= 0}) if batched.bitmap else []
    program = render(layout, batched, messages.stack, messages.depth, messages.query_headers, pass_of, ready)
    stage = network_stage(options.network_up_ports, options.target)
    # bf-p4c names a program after its source file; BF Runtime clients look it up by that name.
    entries = document(layout, batched.groups, Path(PROGRAM_FILE).stem)
    if batched.split_groups:
        nodes, mgids = _split.pre_records(batched.split_groups, options.target)
        pre = entries["pre"]
        entries["pre"] = [r for r in pre if r["table_name"] == "$pre.node"] + nodes + \
            [r for r in pre if r["table_name"] != "$pre.node"] + mgids
    resources = est.to_json()
    resources["notes"] = {
        "miss_tables_folded": folded,
        "batch_mode": mode,
        "message_stack": messages.stack,
        "messages_per_packet": messages.depth if mode in ("union", "split") else 1,
        "parser_stops_at": list(program.stopped_states),
        "recirculates": program.recirculates,
        "bridged_bits": program.bridged_bits,
        # Counters: one Register + RegisterAction each, in one stage before the tables that match them.
        "counter_registers": program.registers,
        "network_stage": (None if stage is None else
                          {"up_ports": list(stage.up_ports), "tables": [t.name for _, t in stage.tables(options.target)]}),
        "match_kinds": match_kind_counts(layout),
        "encodings": {t.name: {k.field: k.encoding for k in t.keys if k.encoding != "native"}
                      for t in layout.tables if any(k.encoding != "native" for k in t.keys)},
    }
    if mode == "split":
        resources["batch"] = _split.cost(pipeline.spec, messages, options.target)
        # The PRE holds the split groups too (one node per copy).
        resources["multicast_groups"] += len(batched.split_groups)
        resources["pre_nodes"] += sum(1 for r in entries["pre"] if r["table_name"] == "$pre.node"
                                      and r["key"]["$MULTICAST_NODE_ID"]["value"] >= _split.SPLIT_NODE)
        resources["multicast_percent"] = round(100.0 * resources["multicast_groups"]
                                               / options.target.multicast_groups, 2)
    elif mode == "union":
        resources["batch"] = {"mode": "union", "passes_per_message": 1, "max_recirculated_copies_per_packet": 0,
                              "copies_of_the_tables": messages.depth}
    return Rendered(program, layout, batched, est, entries, resources)


def emit(pipeline: ir.Pipeline, out_dir: str | Path, options: TofinoOptions = TofinoOptions()) -> Rendered:
    """Write ``program.p4``, ``entries.bfrt.json`` and ``resources.json`` (nothing when a check fails)."""
    return write(build(pipeline, options), out_dir)


def write(rendered: Rendered, out_dir: str | Path) -> Rendered:
    """Write what :func:`build` rendered (the compile CLI builds first to judge the fit)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / PROGRAM_FILE).write_text(rendered.program.text, encoding="utf-8")
    with (out / ENTRIES_FILE).open("w", encoding="utf-8") as f:
        f.writelines(dumps_entries(rendered.entries))
    (out / RESOURCES_FILE).write_text(json.dumps(rendered.resources, indent=2) + "\n", encoding="utf-8")
    return rendered


def emit_control(pipeline: ir.Pipeline, out_dir: str | Path, options: IncludeOptions = IncludeOptions()) -> list[Path]:
    """Include mode: write the subscription control ``p4sub_control.p4``, ``entries.bfrt.json``,
    ``resources.json`` and ``tofino.json`` into ``out_dir`` (nothing when a check fails)."""
    return write_files(render_include(pipeline, options), out_dir)


def network_options(up_ports: tuple[int, ...]) -> TofinoOptions:
    """Options for one switch of a routed network (``p4sub route --target tofino``): adds the network stage.

    The egress then drops copies going back out of the ingress port and, for packets that came in on
    an up port, copies going up again (:mod:`backends.tofino.network`).
    """
    return TofinoOptions(network_up_ports=tuple(up_ports))


def options_from_args(args) -> TofinoOptions:
    """The Tofino choices ``p4sub compile`` exposes: ``--allow-recirculation`` and ``--batch``."""
    return replace(TofinoOptions(), allow_recirculation=bool(getattr(args, "allow_recirculation", False)),
                   batch=getattr(args, "batch", None) or TofinoOptions().batch)
