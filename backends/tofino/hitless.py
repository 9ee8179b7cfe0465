"""A hitless update as BF Runtime batches (issue 16 item 2; ``p4sub install --target tofino --hitless``).

The plan is :func:`compiler.incremental.hitless.plan` on the pipelines the Tofino layout renders (after
the batch-mode rewrite and, where made, the folding of miss tables), so that every write is one of
the records ``entries.bfrt.json`` holds: an IR entry becomes the records of its key encodings (a
range as its prefix cover: pieces that never overlap, at the entry's priority, so that within a
step they may land in any order as the plan's proof needs), a multicast group its ``$pre.node``
and ``$pre.mgid`` records (the node before the group that names it; the group before its node
when deleted). Old and new must render the same program but for the numbers the layout derives
from the entries (table sizes grown by prefix covers, ``@entries_with_ranges``): the switch keeps
running the old program, so every table of it must hold the plan's peak, in entries and in the TCAM
rows its range entries take; otherwise the update is a new program and cannot be hitless.

A step becomes bfrt_grpc batches of one table and one kind each (:func:`backends.tofino.updates.batches`);
batches of one step may go in any order, steps go one after the other. Tested against the tests'
stand-ins: the in-memory one and, through the SDE's own client, the BF Runtime server stand-in;
not against a switch.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from backends.tofino import build, options_from_args, updates
from backends.tofino.bfrt import PRE_MGID, PRE_NODE, entry_json, pre_records
from backends.tofino.layout import Layout, TofinoOptions, _render_entries, _rows, entries_with_ranges
from backends.tofino.ranges import nibbles
from compiler import ir
from compiler.base import TargetError
from compiler.incremental import hitless

KINDS = {hitless.INSERT: "add", hitless.MODIFY: "modify", hitless.DELETE: "delete"}


def hitless_steps(old: ir.Pipeline, new: ir.Pipeline,
                  options: TofinoOptions = TofinoOptions()) -> tuple[list[tuple[str, list[updates.Op]]], hitless.Plan]:
    """(steps as (phase, BF Runtime writes), the IR plan) from ``old`` on the switch to ``new``."""
    r_old, r_new = build(old, options), build(new, options)
    if _shape(r_old.program.text) != _shape(r_new.program.text):
        raise hitless.HitlessError("the new pipeline renders another Tofino program (key encodings, table sizes or "
                                   "stages differ): it cannot be installed hitlessly on the running one")
    plan = hitless.plan(r_old.batched.pipeline, r_new.batched.pipeline)
    layout = r_new.layout
    stepped = [t.name for t in layout.tables if t.keys and t.keys[0].encoding == "steps"]
    if stepped:  # a stepped entry's priority and pieces depend on its neighbours, not on itself alone
        raise hitless.HitlessError(f"table {stepped[0]} is a code table rendered as priority steps "
                                   "(backends/tofino/slices.py): its entries cannot be written one by one")
    target = layout.target
    tables = {t.name: t for t in layout.tables}

    def records(item: ir.Entry | ir.MulticastGroup) -> tuple[list[dict], list[dict]]:
        if isinstance(item, ir.MulticastGroup):
            nodes_and_mgid = pre_records((item,))
            return nodes_and_mgid[:1], nodes_and_mgid[1:]
        t = tables[item.table]
        return [entry_json(e, t, layout.pipeline, target) for e in _render_entries([item], t.groups)], []

    _check_room(r_old.layout, plan)

    steps: list[tuple[str, list[updates.Op]]] = []
    for s in plan.steps:
        first: list[updates.Op] = []
        second: list[updates.Op] = []
        for w in s.writes:
            now = records(w.item)
            before = records(w.previous) if w.previous is not None else ([None] * len(now[0]), [None] * len(now[1]))
            pairs = [list(zip(now[0], before[0])), list(zip(now[1], before[1]))]
            if w.op == hitless.DELETE:  # the PRE group goes before the node it names
                pairs.reverse()
            first += [updates.Op(KINDS[w.op], r, b) for r, b in pairs[0]]
            second += [updates.Op(KINDS[w.op], r, b) for r, b in pairs[1]]
        steps += [(s.phase, ops) for ops in (first, second) if ops]
    old_records = r_old.entries["pre"] + r_old.entries["entries"]
    new_records = r_new.entries["pre"] + r_new.entries["entries"]
    wrong = updates.differences(new_records, updates.apply(old_records, [op for _, ops in steps for op in ops]))
    if wrong:
        raise hitless.HitlessError("the plan does not reach entries.bfrt.json (records outside the subscription "
                                   "states change): " + "; ".join(wrong[:3]))
    return steps, plan


_NUMBERS = re.compile(r"(size = |@entries_with_ranges\()\d+")


def _shape(program: str) -> str:
    """The program without the numbers the layout derives from the entries."""
    return _NUMBERS.sub(r"\1N", program)


def _check_room(running: Layout, plan: hitless.Plan) -> None:
    """Every table of the running program holds the plan's peak, in entries and in TCAM rows."""
    target = running.target
    count = {t.name: len(t.entries) for t in running.tables}
    rows = {t.name: sum(_rows(e, t.keys, target) for e in t.entries) for t in running.tables}
    peak_count, peak_rows = dict(count), dict(rows)
    for step in plan.steps:
        for w in step.writes:
            if w.is_group or w.op == hitless.MODIFY:
                continue
            t = running.table(w.item.table)
            sign = 1 if w.op == hitless.INSERT else -1
            pieces = _render_entries([w.item], t.groups)
            count[t.name] += sign * len(pieces)
            rows[t.name] += sign * sum(_rows(e, t.keys, target) for e in pieces)
        for name in count:
            peak_count[name] = max(peak_count[name], count[name])
            peak_rows[name] = max(peak_rows[name], rows[name])
    for t in running.tables:
        n = entries_with_ranges(t, target)
        worst = 1  # the most rows one entry can take, as bf-p4c counts them for @entries_with_ranges
        for key in t.range_keys:
            worst *= min(2 * nibbles(key.width, target.nibble_bits) - 1, target.multirange_row_limit)
        reserved = t.size if n is None else n * worst + (t.size - n)
        if peak_count[t.name] > t.size or (n is not None and peak_rows[t.name] > reserved):
            raise hitless.HitlessError(
                f"table {t.name} of the running program holds {t.size} entries ({reserved} TCAM rows); the update "
                f"needs {peak_count[t.name]} entries ({peak_rows[t.name]} rows) at its peak, old and new side by side")


def batches(steps: list[tuple[str, list[updates.Op]]], size: int) -> list[list[list[updates.Op]]]:
    """Each step as bfrt_grpc batches (one table, one kind each)."""
    out = []
    for _, ops in steps:
        ordered = sorted(ops, key=lambda op: (op.record["table_name"], op.kind))
        out.append(updates.batches(ordered, size))
    return out


def install(old: ir.Pipeline, new: ir.Pipeline, out: Path, args: argparse.Namespace) -> int:
    """``p4sub install OUT --target tofino --hitless``: plan, then write step by step (rollback: the
    written steps undone, last first)."""
    from backends.tofino.install import _refusal, _Switch, import_client, load_entries, refuse_include_mode

    refuse_include_mode(out)
    doc = load_entries(out)
    steps, plan = hitless_steps(old, new, options_from_args(args))
    size = int(getattr(args, "batch_size", None) or 1000)
    grouped = batches(steps, size)
    counts = ", ".join(f"{k} {v}" for k, v in plan.counts().items())
    if getattr(args, "dry_run", False):
        print(f"dry run: hitless plan ({counts}): {sum(len(ops) for _, ops in steps)} BF Runtime writes in "
              f"{len(steps)} steps, {sum(len(b) for b in grouped)} batches")
        for i, (phase, ops) in enumerate(steps):
            for op in ops:
                print(f"  step {i} {phase}: {op.kind} {op.record['table_name']} {op.record['key']}")
        return 0
    gc = import_client()
    address = getattr(args, "grpc", None) or "127.0.0.1:50052"
    switch = _Switch(gc, address, int(getattr(args, "device_id", 0) or 0),
                     getattr(args, "program_name", None) or doc["p4_name"])
    try:
        written: list[list[updates.Op]] = []
        for step in grouped:
            for batch in step:
                try:
                    switch.write(batch)
                except Exception as exc:
                    _undo(switch, [batch] + [b for s in reversed(written) for b in reversed(s)])
                    raise TargetError(f"the switch refused a {batch[0].kind} of {len(batch)} records in "
                                      f"{batch[0].record['table_name']}: {_refusal(exc)}; what was written was undone") from None
            written.append(step)
        names = [t["table_name"] for t in doc["tables"]] + [PRE_NODE, PRE_MGID]
        wrong = updates.differences(doc["pre"] + doc["entries"], [r for n in names for r in switch.read(n)])
        if wrong:
            raise TargetError("read-back differs from entries.bfrt.json:\n  " + "\n  ".join(wrong[:20]))
        print(f"hitless update written on {address}: {counts}; read back and checked")
        return 0
    finally:
        switch.close()


def _undo(switch: Any, written: list[list[updates.Op]]) -> None:
    for batch in written:
        for op in reversed(batch):
            try:
                switch.write([updates.inverse(op)])
            except Exception:  # a write of the refused batch that never took effect
                pass

