"""What to write to a switch to go from the entries it has to the entries it should have.

Pure planning over BF Runtime records (the dicts of ``entries.bfrt.json``, see
:mod:`backends.tofino.bfrt`), so that it is tested without a switch:

* an entry's identity is its table and key; same key with another action or data is a *modify*;
* order: PRE nodes and groups are added first (entries may point at them), then entries are added
  and modified from the last table of the pipeline to the first (a state becomes reachable only
  after what it leads to is in place), then entries are deleted from the first table to the last
  (nothing routes into a state any more when its entries go), then old groups and nodes;
* the operations are cut into batches; :func:`inverse` gives the operations that undo a batch, which
  the installer applies in reverse when a later batch fails (rollback).

The plan does not make an update atomic: between batches the switch runs a mix of old and new
entries, and the order above only keeps that mix from sending a packet into a state that has no
entries yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

Record = dict[str, Any]


@dataclass(frozen=True)
class Op:
    """One write: ``add``, ``modify`` or ``delete`` of ``record``; ``before`` is what a modify or
    delete replaces (for rollback)."""

    kind: str
    record: Record
    before: Record | None = None


def identity(record: Record) -> tuple[str, str]:
    return record["table_name"], json.dumps(record["key"], sort_keys=True)


def _payload(record: Record) -> str:
    return json.dumps({"action": record.get("action"), "data": record.get("data", {})}, sort_keys=True)


def _is_pre(record: Record) -> bool:
    return record["table_name"].startswith("$pre.")


def plan(old: Iterable[Record], new: Iterable[Record], table_order: list[str]) -> list[Op]:
    """The writes that turn ``old`` into ``new`` (see the module docstring for the order)."""
    old_by = {identity(r): r for r in old}
    new_by = {identity(r): r for r in new}
    rank = {name: i for i, name in enumerate(table_order)}

    def order(ops: list[Op], reverse: bool) -> list[Op]:
        return sorted(ops, key=lambda op: rank.get(op.record["table_name"], len(rank)), reverse=reverse)

    adds = [Op("add", r) for k, r in new_by.items() if k not in old_by]
    mods = [Op("modify", r, old_by[k]) for k, r in new_by.items() if k in old_by and _payload(old_by[k]) != _payload(r)]
    dels = [Op("delete", r, r) for k, r in old_by.items() if k not in new_by]
    pre_node_first = {"$pre.node": 0, "$pre.mgid": 1}
    pre_adds = sorted([o for o in adds + mods if _is_pre(o.record)],
                      key=lambda o: pre_node_first.get(o.record["table_name"], 2))
    pre_dels = sorted([o for o in dels if _is_pre(o.record)],
                      key=lambda o: -pre_node_first.get(o.record["table_name"], 2))
    tab_adds = order([o for o in adds if not _is_pre(o.record)], reverse=True)
    tab_mods = order([o for o in mods if not _is_pre(o.record)], reverse=True)
    tab_dels = order([o for o in dels if not _is_pre(o.record)], reverse=False)
    return pre_adds + tab_adds + tab_mods + tab_dels + pre_dels


def batches(ops: list[Op], size: int) -> list[list[Op]]:
    """Consecutive runs of at most ``size`` operations of the same kind on the same table.

    bfrt_grpc writes a list of keys of one table with one call, so a batch never mixes tables or kinds.
    """
    if size < 1:
        raise ValueError("batch size must be at least 1")
    out: list[list[Op]] = []
    for op in ops:
        last = out[-1] if out else None
        if (last and len(last) < size and last[0].kind == op.kind
                and last[0].record["table_name"] == op.record["table_name"]):
            last.append(op)
        else:
            out.append([op])
    return out


def inverse(op: Op) -> Op:
    """The write that undoes ``op``."""
    if op.kind == "add":
        return Op("delete", op.record, op.record)
    if op.kind == "delete":
        return Op("add", op.before or op.record)
    return Op("modify", op.before, op.record)


def apply(state: Iterable[Record], ops: Iterable[Op]) -> list[Record]:
    """The entries a switch holds after ``ops`` (what tests and dry runs check a plan against)."""
    by = {identity(r): r for r in state}
    for op in ops:
        k = identity(op.record)
        if op.kind == "add":
            if k in by:
                raise KeyError(f"add of an existing entry {k}")
            by[k] = op.record
        elif op.kind == "modify":
            if k not in by:
                raise KeyError(f"modify of a missing entry {k}")
            by[k] = op.record
        else:
            if k not in by:
                raise KeyError(f"delete of a missing entry {k}")
            del by[k]
    return list(by.values())


def differences(expected: Iterable[Record], actual: Iterable[Record]) -> list[str]:
    """What a read-back found wrong: missing, unexpected, or different entries (one line each)."""
    exp = {identity(r): r for r in expected}
    act = {identity(r): r for r in actual}
    out = [f"missing {t} {k}" for (t, k) in exp.keys() - act.keys()]
    out += [f"unexpected {t} {k}" for (t, k) in act.keys() - exp.keys()]
    out += [f"different {t} {k}: {_payload(act[(t, k)])} instead of {_payload(exp[(t, k)])}"
            for (t, k) in exp.keys() & act.keys() if _payload(exp[(t, k)]) != _payload(act[(t, k)])]
    return sorted(out)
