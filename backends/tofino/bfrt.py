"""Table entries and PRE configuration as BF Runtime JSON (``entries.bfrt.json``).

One record per entry, in the shape ``bfrt_grpc.client`` takes (``Table.make_key`` / ``make_data``):

```json
{"table_name": "pipe.SwitchIngress.field_add_order_price",
 "action": "SwitchIngress.set_state",
 "key": {"$MATCH_PRIORITY": {"value": 16777214},
         "meta.p4sub_state": {"value": 3},
         "add_order.price": {"low": 50001, "high": 100000}},
 "data": {"state": 7}}
```

In include mode (:mod:`backends.tofino.include`) the tables live in the user's instance of the
subscription control, and bf-p4c puts the instance path between the pipe and the name:
``pipe.SwitchIngress.p4sub.field_add_order_price``, action ``SwitchIngress.p4sub.set_state``
(``instance`` below).

A key field is ``{"value"}`` (exact), ``{"value", "mask"}`` (ternary), ``{"low", "high"}`` (range) or
``{"value", "prefix_len"}`` (lpm): the keyword arguments of ``gc.KeyTuple``. Key field names are the
IR's field references, which the program pins with ``@name`` (see :mod:`backends.common.names`);
data field names are the action parameters' P4 identifiers (``state`` is a P4 keyword: ``state_``).

Priorities: the IR follows P4Runtime (a higher number wins); BF Runtime's ``$MATCH_PRIORITY`` is the
opposite (lower wins, 0 .. 2^24 - 1; pipe_mgr's convention, which the SDE's own P4Runtime layer
bridges with ``2^24 - 1 - p``). :func:`bfrt_priority` applies the same conversion, so an entry gets
the priority it would get through P4Runtime on the same switch.

PRE records (``$pre.node`` then ``$pre.mgid``; delete in the reverse order) make one L1 node per
multicast group, with ``$MULTICAST_RID`` = the group id (what egress sees as ``egress_rid``) and the
group's ports as ``$DEV_PORT``; the group points at its node with L1 exclusion ids unused, and says
that it has no ECMP members (empty ``$MULTICAST_ECMP_*`` lists): BF Runtime reads a group back with
every one of its six fields, so a record with only the node fields would never read back equal.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from backends.common.literals import prefix_mask
from backends.common.names import p4info_param_name
from backends.tofino.layout import KeyLayout, Layout, TableLayout
from backends.tofino.target import Target
from compiler import ir
from compiler.base import ResourceError

FORMAT = "p4sub-bfrt/1"
PRE_NODE = "$pre.node"
PRE_MGID = "$pre.mgid"


def bfrt_priority(priority: int, target: Target) -> int:
    """BF Runtime ``$MATCH_PRIORITY`` (lower wins) of a P4Runtime priority (higher wins)."""
    if not 0 <= priority <= target.max_match_priority:
        raise ResourceError(f"priority {priority} is outside 0..{target.max_match_priority}")
    return target.max_match_priority - priority


def control_path(table: TableLayout, target: Target, instance: str | None = None) -> str:
    """The control path a table's objects are declared in: ``SwitchIngress`` (or ``SwitchEgress``)
    in a whole program; the instance path (``SwitchIngress.p4sub``) for the include-mode control,
    which runs in the ingress only."""
    if instance is not None:
        return instance
    return target.ingress_control if table.gress == "ingress" else target.egress_control


def table_name(table: TableLayout, target: Target, instance: str | None = None) -> str:
    """``pipe.SwitchIngress.leaf_actions``; in include mode ``pipe.SwitchIngress.p4sub.leaf_actions``
    (bf-p4c names a nested control's table by the pipe, then the instance path, then its ``@name``)."""
    return f"{target.pipe_prefix}.{control_path(table, target, instance)}.{table.name}"


def action_name(action: str, table: TableLayout, target: Target, instance: str | None = None) -> str:
    """``SwitchIngress.forward``; in include mode ``SwitchIngress.p4sub.forward``; ``NoAction`` as is."""
    if action == "NoAction":
        return action
    return f"{control_path(table, target, instance)}.{action}"


def key_json(match: ir.Match, key: KeyLayout) -> dict[str, int]:
    if isinstance(match, ir.Exact):
        return {"value": match.value}
    if isinstance(match, ir.Ternary):
        return {"value": match.value & match.mask, "mask": match.mask}
    if isinstance(match, ir.Range):
        return {"low": match.lo, "high": match.hi}
    return {"value": match.value & prefix_mask(match.prefix_len, key.width), "prefix_len": match.prefix_len}


def entry_json(entry: ir.Entry, table: TableLayout, pipeline: ir.Pipeline, target: Target,
               instance: str | None = None) -> dict[str, Any]:
    return TableEncoder(table, pipeline, target, instance)(entry)


class TableEncoder:
    """Entries of one table as records: the names, shared by every entry, are worked out once (a
    batched ITCH program has a million entries)."""

    def __init__(self, table: TableLayout, pipeline: ir.Pipeline, target: Target, instance: str | None = None) -> None:
        self.table, self.target = table, target
        self.name = table_name(table, target, instance)
        self.priority = target.match_priority if table.needs_priority else None
        self.keys = tuple((k.name, k) for k in table.keys)
        self.actions: dict[str, tuple[str, tuple[str, ...]]] = {}
        for a in set(table.table.actions) | {table.table.default_action}:
            if a and any(x.name == a for x in pipeline.actions):
                action = pipeline.action(a)
                self.actions[a] = (action_name(a, table, target, instance),
                                   tuple(p4info_param_name(p) for p in action.params))
        self.pipeline, self.instance = pipeline, instance

    def __call__(self, entry: ir.Entry) -> dict[str, Any]:
        key: dict[str, Any] = {}
        if self.priority is not None:
            key[self.priority] = {"value": bfrt_priority(entry.priority, self.target)}
        for match, (name, k) in zip(entry.matches, self.keys):
            key[name] = key_json(match, k)
        found = self.actions.get(entry.action)
        if found is None:  # an action the table does not list: named as the IR names it
            action = self.pipeline.action(entry.action)
            found = (action_name(entry.action, self.table, self.target, self.instance),
                     tuple(p4info_param_name(p) for p in action.params))
        name, params = found
        return {"table_name": self.name, "action": name, "key": key, "data": dict(zip(params, entry.args))}


def pre_records(groups: tuple[ir.MulticastGroup, ...]) -> list[dict[str, Any]]:
    """``$pre.node`` records for every group, then the ``$pre.mgid`` records that use them."""
    nodes = [{"table_name": PRE_NODE, "key": {"$MULTICAST_NODE_ID": {"value": g.id}},
              "data": {"$MULTICAST_RID": g.id, "$MULTICAST_LAG_ID": [], "$DEV_PORT": sorted(g.ports)}}
             for g in groups]
    mgids = [{"table_name": PRE_MGID, "key": {"$MGID": {"value": g.id}},
              "data": {"$MULTICAST_NODE_ID": [g.id], "$MULTICAST_NODE_L1_XID_VALID": [False],
                       "$MULTICAST_NODE_L1_XID": [0], "$MULTICAST_ECMP_ID": [], "$MULTICAST_ECMP_L1_XID_VALID": [],
                       "$MULTICAST_ECMP_L1_XID": []}}
             for g in groups]
    return nodes + mgids


def document(layout: Layout, groups: tuple[ir.MulticastGroup, ...], program_name: str | None,
             instance: str | None = None) -> dict[str, Any]:
    """The whole ``entries.bfrt.json``: the table entries in table order, then the PRE records.

    ``instance``: the include-mode control's instance path (``SwitchIngress.p4sub``), which prefixes
    every table and action name; ``program_name`` is then None (the program is the user's) and the
    document says ``"mode": "include"``. The PRE records are the device's, not the control's: their
    names (``$pre.node``, ``$pre.mgid``) have no instance path.
    """
    target = layout.target
    entries = [record for t in layout.tables for record in map(TableEncoder(t, layout.pipeline, target, instance),
                                                               t.entries)]
    tables = [{"table_name": table_name(t, target, instance), "gress": t.gress, "size": t.size,
               "keys": [{"name": k.name, "match_type": k.match_kind, "width": k.width} for k in t.keys],
               "actions": [action_name(a, t, target, instance) for a in t.table.actions],
               "priority": t.needs_priority}
              for t in layout.tables]
    doc = {"format": FORMAT, "target": target.name, "p4_name": program_name, "tables": tables,
           "entries": entries, "pre": pre_records(groups)}
    if instance is not None:
        doc["mode"], doc["instance"] = "include", instance
    return doc


def dumps(doc: dict[str, Any]) -> Iterator[str]:
    """``entries.bfrt.json`` as text, one table or entry record per line: readable and diffable, and
    written by the C encoder a record at a time (the indenting encoder took 80 s for a million)."""
    yield "{\n"
    for i, (name, value) in enumerate(doc.items()):
        yield f"{',' if i else ''}\n {json.dumps(name)}: " if i else f" {json.dumps(name)}: "
        if isinstance(value, list) and value:
            yield "[\n  " + json.dumps(value[0], separators=(",", ":"))
            for record in value[1:]:
                yield ",\n  " + json.dumps(record, separators=(",", ":"))
            yield "\n ]"
        else:
            yield json.dumps(value)
    yield "\n}\n"
