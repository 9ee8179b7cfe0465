"""The pipeline's entries as P4Runtime write requests, in JSON (``entries.p4rt.json``).

The file mirrors the P4Runtime ``WriteRequest`` protobuf (field names as in ``p4runtime.proto``)
with two changes that keep it readable and independent of p4c's id assignment:

* objects are named, not numbered: ``table_name``, ``field_name``, ``action_name``, ``param_name``
  hold the P4Info names (``MyIngress.leaf_actions``, ``add_order.price``, ``MyIngress.forward``,
  ``port``); the installer resolves them to ids with the P4Info p4c wrote;
* byte strings are hex (``"0x0a"``), in P4Runtime 1.3+'s canonical form (shortest big-endian,
  ``0x00`` for zero), instead of the protobuf JSON mapping's base64.

The encoding follows the P4Runtime specification (§9.1): an LPM value has its bits beyond the
prefix zeroed, a ternary value has its bits outside the mask zeroed, and *don't care* matches are
omitted (LPM prefix length 0, ternary mask 0, a range covering the whole field); priority is set
(> 0, higher wins) exactly for tables with a ternary or range key and left out otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from backends.bmv2.program import Bmv2Program
from backends.bmv2.target import REPLICA_INSTANCE, V1MODEL
from backends.common.literals import all_ones, canonical_bytes, prefix_mask
from backends.common.names import p4info_action_name, p4info_key_name, p4info_param_name, p4info_table_name
from compiler import ir
from compiler.base import P4subError

FORMAT = "p4sub.p4runtime-write/1"
MAX_PRIORITY = (1 << 31) - 1


def hexbytes(value: int) -> str:
    """Canonical P4Runtime bytes as hex: ``0`` -> ``"0x00"``, ``0x1ff`` -> ``"0x01ff"``."""
    return "0x" + canonical_bytes(value).hex()


def match_field(key: ir.Key, match: ir.Match) -> dict[str, Any] | None:
    """One ``FieldMatch`` (None for a don't-care match, which P4Runtime requires to be omitted)."""
    top = all_ones(key.width)
    name = p4info_key_name(key)
    kind = key.match_kind

    def fits(v: int) -> int:
        if not 0 <= v <= top:
            raise P4subError(f"value {v} does not fit the {key.width}-bit key {key.field}")
        return v

    if isinstance(match, ir.Exact) and kind == "exact":
        return {"field_name": name, "exact": {"value": hexbytes(fits(match.value))}}
    if isinstance(match, ir.Lpm) and kind == "lpm":
        if not 0 <= match.prefix_len <= key.width:
            raise P4subError(f"prefix length {match.prefix_len} on the {key.width}-bit key {key.field}")
        if match.prefix_len == 0:
            return None
        value = fits(match.value) & prefix_mask(match.prefix_len, key.width)
        return {"field_name": name, "lpm": {"value": hexbytes(value), "prefix_len": match.prefix_len}}
    if isinstance(match, ir.Ternary) and kind == "ternary":
        mask = fits(match.mask)
        if mask == 0:
            return None
        return {"field_name": name, "ternary": {"value": hexbytes(fits(match.value) & mask), "mask": hexbytes(mask)}}
    if isinstance(match, ir.Range) and kind == "range":
        lo, hi = fits(match.lo), fits(match.hi)
        if lo > hi:
            raise P4subError(f"empty range {lo}..{hi} on key {key.field}")
        if lo == 0 and hi == top:
            return None
        return {"field_name": name, "range": {"low": hexbytes(lo), "high": hexbytes(hi)}}
    raise P4subError(f"a {type(match).__name__} match on the {kind} key {key.field}")


def table_entry(entry: ir.Entry, table: ir.Table, action: ir.Action, control: str) -> dict[str, Any]:
    """One ``TableEntry`` in the JSON form described in the module docstring."""
    if len(entry.matches) != len(table.keys):
        raise P4subError(f"entry of {table.name} has {len(entry.matches)} matches for {len(table.keys)} keys")
    if len(entry.args) != len(action.params):
        raise P4subError(f"entry of {table.name}: action {action.name} takes {len(action.params)} arguments, "
                         f"got {len(entry.args)}")
    matches = [m for m in (match_field(k, m) for k, m in zip(table.keys, entry.matches)) if m is not None]
    params = []
    for param, arg in zip(action.params, entry.args):
        if not 0 <= arg <= all_ones(param.width):
            raise P4subError(f"argument {arg} of {action.name} does not fit its {param.width}-bit parameter {param.name}")
        params.append({"param_name": p4info_param_name(param), "value": hexbytes(arg)})
    out: dict[str, Any] = {
        "table_name": p4info_table_name(table.name, control),
        "match": matches,
        "action": {"action": {"action_name": p4info_action_name(action.name, control), "params": params}},
    }
    if table.needs_priority:
        if not 1 <= entry.priority <= MAX_PRIORITY:
            raise P4subError(f"entry of {table.name} (ternary/range keys) needs a priority in 1..{MAX_PRIORITY}, "
                             f"has {entry.priority}")
        out["priority"] = entry.priority
    elif entry.priority:
        raise P4subError(f"entry of {table.name} has priority {entry.priority}, but only tables with ternary or "
                         "range keys take one")
    return out


def multicast_group_entry(group: ir.MulticastGroup) -> dict[str, Any]:
    """A ``PacketReplicationEngineEntry`` holding the group: one replica per port."""
    limit = all_ones(V1MODEL.port_width)
    for p in group.ports:
        if p == V1MODEL.drop_port:
            raise P4subError(f"multicast group {group.id}: port {p} is v1model's drop port, not an egress port "
                             f"(ports 0..{limit - 1})")
        if not 0 <= p < limit:
            raise P4subError(f"multicast group {group.id}: port {p} is not a {V1MODEL.port_width}-bit port")
    return {"multicast_group_entry": {
        "multicast_group_id": group.id,
        "replicas": [{"egress_port": p, "instance": REPLICA_INSTANCE} for p in sorted(set(group.ports))],
    }}


def entities(pipeline: ir.Pipeline, program: Bmv2Program, control: str = V1MODEL.ingress_control) -> list[dict[str, Any]]:
    """Every entity to install, as ``Entity`` JSON: multicast groups first, then table entries.

    ``control`` is the P4Info prefix of the IR's tables: ``MyIngress`` for a whole program, the
    control instance's path (``MyIngress.p4sub``) in include mode."""
    out: list[dict[str, Any]] = [{"packet_replication_engine_entry": multicast_group_entry(g)}
                                 for g in program.multicast_groups(pipeline)]
    tables = {t.name: t for t in pipeline.tables}
    actions = {a.name: a for a in pipeline.actions}
    for e in pipeline.entries:
        out.append(entry_entity(e, tables, actions, control))
    out += extra_entities(program)
    return out


def entry_entity(e: ir.Entry, tables: dict[str, ir.Table], actions: dict[str, ir.Action], control: str) -> dict[str, Any]:
    """One IR entry as an ``Entity`` (its table and action checked)."""
    table = tables.get(e.table)
    if table is None:
        raise P4subError(f"entry for unknown table {e.table}")
    if e.action not in table.actions or e.action not in actions:
        raise P4subError(f"entry of {e.table} uses action {e.action}, not one of {', '.join(table.actions)}")
    return {"table_entry": table_entry(e, table, actions[e.action], control)}


def extra_entities(program: Bmv2Program) -> list[dict[str, Any]]:
    """The entries of the tables the program adds to the IR's (the ports table, the port bits)."""
    return [extra_entity(program, e) for e in program.extra_entries]


def extra_entity(program: Bmv2Program, e: ir.Entry) -> dict[str, Any]:
    table = next(t for t in program.extra_tables if t.name == e.table)
    action = next(a for a in program.extra_actions if a.name == e.action)
    return {"table_entry": table_entry(e, table, action, program.control_of(table))}


def write_request(pipeline: ir.Pipeline, program: Bmv2Program, control: str = V1MODEL.ingress_control) -> dict[str, Any]:
    """The whole ``entries.p4rt.json`` document: INSERT updates for every entity (``control``: see
    :func:`entities`)."""
    return {
        "format": FORMAT,
        "pipeline": pipeline.name,
        "controls": {"ingress": control, "egress": V1MODEL.egress_control},
        "updates": [{"type": "INSERT", "entity": ent} for ent in entities(pipeline, program, control)],
    }


def one_update_per_line(request: dict) -> str:
    """The write request as JSON with one update per line (readable, and diffs stay small)."""
    head = {k: v for k, v in request.items() if k != "updates"}
    return one_update_per_line_text(head, [json.dumps(u, separators=(",", ":")) for u in request["updates"]])


def one_update_per_line_text(head: dict, lines: list[str]) -> str:
    """:func:`one_update_per_line` of a request whose updates are already JSON text, one a line."""
    body = ",\n  ".join(lines)
    return json.dumps(head)[:-1] + (', "updates": [\n  ' + body + "\n]}\n" if lines else ', "updates": []}\n')
