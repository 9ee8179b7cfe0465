"""A hitless update as P4Runtime writes: ``hitless.p4rt.json`` (issue 16 item 2).

:func:`compiler.incremental.hitless.plan` orders IR writes so that a packet is always forwarded as
by the old pipeline or as by the new one; this module spells them as P4Runtime updates (the JSON
entities of ``entries.p4rt.json``, :mod:`backends.bmv2.p4runtime`) and adds what the BMv2 program
keeps beside the IR: in a batched mode (``union``, ``prune``) every multicast group has an entry in
``p4sub_group_ports`` (its ports, for the per-port pruning), written with the group, and the union
group (all ports any rule forwards to) grows before the root flips and shrinks after the old
states are gone.

The document holds ``before`` (the entities the switch must hold for the plan to apply),
``after`` (what it holds at the end: the new ``entries.p4rt.json``) and ``steps``: each a list of
updates that may be written in one batch (any order), the steps strictly one after the other.
``backends/bmv2/p4rt_client.py --plan`` applies it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from backends.bmv2 import update_plan
from backends.bmv2.p4runtime import entities, multicast_group_entry, table_entry
from backends.bmv2.program import PORTS_ACTION, PORTS_TABLE, Bmv2Options, Bmv2Program, build_program, port_bitmap
from backends.bmv2.target import UNION_GROUP, V1MODEL
from compiler import ir
from compiler.base import P4subError, read_text
from compiler.incremental import hitless

FORMAT = "p4sub.p4runtime-hitless/1"
OPS = {hitless.INSERT: update_plan.INSERT, hitless.MODIFY: update_plan.MODIFY, hitless.DELETE: update_plan.DELETE}


def options_of(out: Path) -> Bmv2Options:
    """How OUT's program was rendered (its ``bmv2.json``): the batching mode and the table sizes."""
    path = out / "bmv2.json"
    try:
        info = json.loads(read_text(path, "bmv2.json"))
        return Bmv2Options(batch=info["mode"], table_sizes=dict(info.get("table_sizes", {})))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise P4subError(f"{path}: not the bmv2.json of `p4sub compile --target bmv2` ({exc})") from None


class _Renderer:
    def __init__(self, pipeline: ir.Pipeline, program: Bmv2Program) -> None:
        self.tables = {t.name: t for t in pipeline.tables}
        self.actions = {a.name: a for a in pipeline.actions}
        self.program = program
        self.ports_table = next((t for t in program.extra_tables if t.name == PORTS_TABLE), None)
        self.ports_action = next((a for a in program.extra_actions if a.name == PORTS_ACTION), None)

    def entities(self, item: ir.Entry | ir.MulticastGroup) -> list[dict[str, Any]]:
        """The entity of an IR entry; a group's, and its ``p4sub_group_ports`` entry in a batched mode."""
        if isinstance(item, ir.Entry):
            return [{"table_entry": table_entry(item, self.tables[item.table], self.actions[item.action],
                                                V1MODEL.ingress_control)}]
        out = [{"packet_replication_engine_entry": multicast_group_entry(item)}]
        if self.ports_table is not None:
            e = ir.Entry(PORTS_TABLE, (ir.Exact(item.id),), PORTS_ACTION, (port_bitmap(item.ports),))
            out.append({"table_entry": table_entry(e, self.ports_table, self.ports_action,
                                                   self.program.control_of(self.ports_table))})
        return out

    def updates(self, w: hitless.Write) -> list[update_plan.Op]:
        now = self.entities(w.item)
        before = self.entities(w.previous) if w.previous is not None else [None] * len(now)
        return [update_plan.Op(OPS[w.op], e, p) for e, p in zip(now, before)]


def hitless_request(old: ir.Pipeline, new: ir.Pipeline, options: Bmv2Options = Bmv2Options(),
                    mid: ir.Pipeline | None = None) -> dict[str, Any]:
    """The whole ``hitless.p4rt.json`` from ``old`` (on the switch) to ``new``, through ``mid`` when
    given (:func:`compiler.incremental.hitless.plan_through`); HitlessError when the update cannot be
    hitless (see :func:`compiler.incremental.hitless.plan`)."""
    old_program, new_program = build_program(old, options), build_program(new, options)
    if mid is not None:
        plan = hitless.plan_through(old, mid, new, reserved_groups=(UNION_GROUP,))
    else:
        plan = hitless.plan(old, new, reserved_groups=(UNION_GROUP,))
        lanes = hitless.changed_lanes(old, new)
        if len(lanes) > 1:  # the direct plan: say what it keeps, and how to keep more
            print(f"warning: the update changes {len(lanes)} lanes, which flip one by one: a rule that stays in its "
                  "lane loses no packet, but one that moves to another lane may miss packets while they flip; "
                  "`compile --update` from the output the switch holds writes the pipeline to plan through "
                  f"({hitless.MID}), or update in two steps (the added rules first, then the removed ones gone)",
                  file=sys.stderr)
    render = _Renderer(new, new_program)
    steps = [(s.phase, [op for w in s.writes for op in render.updates(w)]) for s in plan.steps]
    before = entities(old, old_program)
    after = entities(new, new_program)
    steps = _union_group(steps, before, after)
    _check_ports_table(steps, before, new_program)
    return {"format": FORMAT, "pipeline": new.name, "counts": plan.counts(), "before": before, "after": after,
            "steps": [{"phase": phase, "updates": [_json(op) for op in ops]} for phase, ops in steps]}


def _union_group(steps: list, before: list[dict], after: list[dict]) -> list:
    """The steps with the union group grown before the root flips and shrunk at the end; an error
    for any other difference the plan does not make (it would be a change outside the states)."""
    have = {update_plan.entity_key(e): e for e in before}
    for _, ops in steps:
        for op in ops:
            key = update_plan.entity_key(op.entity)
            if op.type == update_plan.DELETE:
                del have[key]
            else:
                have[key] = op.entity
    rest = update_plan.diff(have.values(), after)
    union = ("multicast", UNION_GROUP)
    other = [op for op in rest if update_plan.entity_key(op.entity) != union]
    if other:
        raise hitless.HitlessError("the update changes entities outside the subscription states: "
                                   + "; ".join(update_plan.describe(op) for op in other[:3]))
    if not rest:
        return steps
    old_union = next((e for e in before if update_plan.entity_key(e) == union), None)
    new_union = next((e for e in after if update_plan.entity_key(e) == union), None)
    ports = set()
    for e in (old_union, new_union):
        if e is not None:
            ports |= {r["egress_port"] for r in e["packet_replication_engine_entry"]["multicast_group_entry"]["replicas"]}
    grown = {"packet_replication_engine_entry": multicast_group_entry(ir.MulticastGroup(UNION_GROUP, tuple(sorted(ports))))}
    grow = update_plan.Op(update_plan.MODIFY, grown, old_union) if old_union else update_plan.Op(update_plan.INSERT, grown)
    shrink = (update_plan.Op(update_plan.MODIFY, new_union, grown) if new_union
              else update_plan.Op(update_plan.DELETE, grown, grown))
    first_root = next((i for i, (phase, _) in enumerate(steps) if phase == "root"), len(steps))
    out = steps[:first_root] + [("union", [grow])] + steps[first_root:]
    if update_plan.entity_value(shrink.entity) != update_plan.entity_value(grown) or shrink.type == update_plan.DELETE:
        out.append(("union", [shrink]))
    return out


def _check_ports_table(steps: list, before: list[dict], program: Bmv2Program) -> None:
    """``p4sub_group_ports`` holds an entry per group, shadow groups too: it must hold the peak."""
    table = next((t for t in program.extra_tables if t.name == PORTS_TABLE), None)
    if table is None:
        return
    name = program.control_of(table) + "." + PORTS_TABLE

    def here(e: dict) -> bool:
        return e.get("table_entry", {}).get("table_name") == name

    count = peak = sum(1 for e in before if here(e))
    for _, ops in steps:
        count += sum(1 if op.type == update_plan.INSERT else -1 for op in ops
                     if here(op.entity) and op.type != update_plan.MODIFY)
        peak = max(peak, count)
    if peak > program.sizes[PORTS_TABLE]:
        raise hitless.HitlessError(f"{PORTS_TABLE} would hold {peak} entries (size {program.sizes[PORTS_TABLE]}) "
                                   "with the shadow groups beside the old ones")


def _json(op: update_plan.Op) -> dict[str, Any]:
    return {"type": op.type, "entity": op.entity, **({"previous": op.previous} if op.previous is not None else {})}


class Pusher:
    """Hitless updates written one after another by a process that keeps the pipeline (``p4sub serve``).

    :func:`hitless_request` renders every entity before and after, for an installer that checks what
    the switch holds: seconds on 100,000 rules. A long-running process knows what it pushed, so each
    update here is planned (:func:`compiler.incremental.hitless.plan`) and only the plan's writes are
    rendered; the program (built once: the update keeps it) gives the ports table, and the union
    group's ports are kept as counts of the leaf entries that name each port, changed by each update's
    delta. ``write(batch)`` is the switch (or the installer's stand-in): a list of
    :class:`~backends.bmv2.update_plan.Op`, an error or None per update, as
    :func:`backends.bmv2.update_plan.apply_steps` expects."""

    def __init__(self, pipeline: ir.Pipeline, write, options: Bmv2Options = Bmv2Options(), batch_size: int = 500) -> None:
        self.program = build_program(pipeline, options)
        self.write = write
        self.batch_size = batch_size
        self.kind: dict[str, tuple[str, int]] = {}  # leaf action -> ("port" | "group", its argument's index)
        for a in pipeline.actions:
            names = [p.name for p in a.params]
            for prim in a.body:
                if prim.op == "set_egress_port" and prim.args[0] in names:
                    self.kind[a.name] = ("port", names.index(prim.args[0]))
                elif prim.op == "set_mcast_group" and prim.args[0] in names:
                    self.kind[a.name] = ("group", names.index(prim.args[0]))
        self.leaf_tables = {t.name for t in pipeline.tables if t.role == "leaf"}
        self.groups = {g.id: tuple(g.ports) for g in pipeline.multicast_groups}
        self.refs: dict[int, int] = {}
        self.uses: dict[int, int] = {}
        for e in pipeline.entries:
            self._count(e, 1)
        self.union = self._union_ports()

    def _count(self, e: ir.Entry, sign: int) -> None:
        if e.table not in self.leaf_tables or e.action not in self.kind:
            return
        what, i = self.kind[e.action]
        if what == "port":
            ports = (e.args[i],)
        else:
            self.refs[e.args[i]] = self.refs.get(e.args[i], 0) + sign
            ports = self.groups[e.args[i]]
        for p in ports:
            self.uses[p] = self.uses.get(p, 0) + sign

    def _union_ports(self) -> tuple[int, ...]:
        return tuple(sorted(p for p, n in self.uses.items() if n > 0))

    def steps(self, old: ir.Pipeline, new: ir.Pipeline, delta) -> list[tuple[str, list[update_plan.Op]]]:
        """The plan's steps as P4Runtime updates; ``delta``: the update's (it moves the union's counts)."""
        plan = hitless.plan(old, new, reserved_groups=(UNION_GROUP,))
        render = _Renderer(new, self.program)
        steps = [(s.phase, [op for w in s.writes for op in render.updates(w)]) for s in plan.steps]
        for e in [*delta.deleted, *(prev for prev, _ in delta.modified)]:
            self._count(e, -1)
        for prev, g in delta.groups_modified:
            n = self.refs.get(g.id, 0)
            for p in prev.ports:
                self.uses[p] -= n
            for p in g.ports:
                self.uses[p] = self.uses.get(p, 0) + n
            self.groups[g.id] = tuple(g.ports)
        for g in delta.groups_added:
            self.groups[g.id] = tuple(g.ports)
        for e in [*delta.added, *(e for _, e in delta.modified)]:
            self._count(e, 1)
        for g in delta.groups_deleted:
            self.groups.pop(g.id, None)
        union = self._union_ports()
        if self.program.union_group is not None and union != self.union:
            old_union = ir.MulticastGroup(UNION_GROUP, self.union) if self.union else None
            grown = ir.MulticastGroup(UNION_GROUP, tuple(sorted(set(self.union) | set(union))))
            entity = {"packet_replication_engine_entry": multicast_group_entry(grown)}
            before = {"packet_replication_engine_entry": multicast_group_entry(old_union)} if old_union else None
            grow = update_plan.Op(update_plan.MODIFY if before else update_plan.INSERT, entity, before)
            first_root = next((i for i, (phase, _) in enumerate(steps) if phase == "root"), len(steps))
            steps = steps[:first_root] + [("union", [grow])] + steps[first_root:]
            if not union:
                steps.append(("union", [update_plan.Op(update_plan.DELETE, entity, entity)]))
            elif union != grown.ports:
                final = {"packet_replication_engine_entry": multicast_group_entry(ir.MulticastGroup(UNION_GROUP, union))}
                steps.append(("union", [update_plan.Op(update_plan.MODIFY, final, entity)]))
        self.union = union
        return steps

    def push(self, old: ir.Pipeline, new: ir.Pipeline, update) -> update_plan.ApplyResult:
        """Plan, render and write one update; a P4subError when the switch refuses it (rolled back)."""
        steps = self.steps(old, new, update.delta)
        result = update_plan.apply_steps([ops for _, ops in steps], self.write, self.batch_size)
        if not result.ok:
            raise P4subError(f"push: {result.summary()}")
        return result
