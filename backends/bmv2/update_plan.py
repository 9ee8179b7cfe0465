"""What to write to move a switch from the entries it holds to the ones wanted, and how to undo it.

Pure functions over the JSON entities of ``entries.p4rt.json`` (see :mod:`backends.bmv2.p4runtime`),
independent of any gRPC client, so that the install logic is tested without a switch. Standard
library only: the installer imports this module from p4runtime-shell's own virtualenv.

* :func:`diff` gives the minimal plan: an entity is identified as P4Runtime identifies it (a table
  entry by table, match and priority; a multicast group by id); one operation per identity that is
  missing (INSERT), surplus (DELETE) or different (MODIFY), none for equal ones.
* :func:`apply_plan` writes the plan in batches through a ``write`` callback that reports, per
  update, an error or None. P4Runtime servers like BMv2's apply a batch update by update
  (CONTINUE_ON_ERROR: the others of a failing batch may have been applied), so on the first refusal
  every update that was applied, in this batch and earlier ones, is undone in reverse order with
  its inverse (INSERT <-> DELETE, MODIFY back to the previous value). The result names the refused
  update and the reason.

* :func:`apply_steps` writes a hitless plan (``hitless.p4rt.json``, :mod:`backends.bmv2.hitless`):
  steps strictly in order, each step's updates in batches that may land in any order; on a refusal
  the written steps are undone last first, so the switch passes back through the same states.

Phases: multicast-group inserts and modifies come first (a table entry never names a group that
does not exist yet), then table deletes, modifies and inserts (deletes first, so that a nearly full
table has room), then multicast-group deletes. A batch never mixes phases, because a server may
apply the updates of one batch in any order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

Entity = dict[str, Any]
INSERT, MODIFY, DELETE = "INSERT", "MODIFY", "DELETE"


def _canonical_hex(text: str) -> str:
    value = int(text, 16)
    return "0x" + value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big").hex()


def normalize(obj: Any) -> Any:
    """Byte strings (``"0x..."``) in canonical form, recursively, so that equal values compare equal."""
    if isinstance(obj, dict):
        return {k: normalize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [normalize(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("0x"):
        return _canonical_hex(obj)
    return obj


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def kind(entity: Entity) -> str:
    if "table_entry" in entity:
        return "table"
    if "packet_replication_engine_entry" in entity:
        return "multicast"
    raise ValueError(f"unsupported entity {sorted(entity)}")


def entity_key(entity: Entity) -> tuple:
    """How P4Runtime identifies an entity: (table, match set, priority) or the multicast group id."""
    if kind(entity) == "table":
        te = normalize(entity["table_entry"])
        matches = tuple(sorted(_dumps(m) for m in te.get("match", [])))
        return ("table", te["table_name"], matches, int(te.get("priority", 0)))
    group = entity["packet_replication_engine_entry"]["multicast_group_entry"]
    return ("multicast", int(group["multicast_group_id"]))


def entity_value(entity: Entity) -> str:
    """What a MODIFY can change: the action of a table entry, the replicas of a group."""
    if kind(entity) == "table":
        return _dumps(normalize(entity["table_entry"].get("action", {})))
    group = entity["packet_replication_engine_entry"]["multicast_group_entry"]
    replicas = sorted((int(r.get("egress_port", 0)), int(r.get("instance", 0))) for r in group.get("replicas", []))
    return _dumps(replicas)


@dataclass(frozen=True)
class Op:
    """One update. ``previous`` is the entity before a MODIFY or DELETE (what a rollback restores)."""

    type: str
    entity: Entity
    previous: Entity | None = None

    @property
    def phase(self) -> int:
        table = kind(self.entity) == "table"
        if not table:
            return 4 if self.type == DELETE else 0
        return {DELETE: 1, MODIFY: 2, INSERT: 3}[self.type]


def inverse(op: Op) -> Op:
    """The update that undoes ``op``."""
    if op.type == INSERT:
        return Op(DELETE, op.entity, op.entity)
    if op.type == DELETE:
        return Op(INSERT, op.previous if op.previous is not None else op.entity)
    return Op(MODIFY, op.previous, op.entity)


def diff(current: Iterable[Entity], desired: Iterable[Entity]) -> list[Op]:
    """The minimal plan from ``current`` to ``desired``, ordered by phase (see the module docstring).

    Raises ValueError when ``desired`` names one identity twice (the switch would refuse it).
    """
    have: dict[tuple, Entity] = {}
    for e in current:
        have[entity_key(e)] = e
    want: dict[tuple, Entity] = {}
    for e in desired:
        k = entity_key(e)
        if k in want:
            raise ValueError(f"two entities with the same identity: {describe(e)}")
        want[k] = e
    ops: list[Op] = []
    for k, e in want.items():
        if k not in have:
            ops.append(Op(INSERT, e))
        elif entity_value(have[k]) != entity_value(e):
            ops.append(Op(MODIFY, e, have[k]))
    for k, e in have.items():
        if k not in want:
            ops.append(Op(DELETE, e, e))
    return sorted(ops, key=lambda op: op.phase)


def batches(ops: list[Op], size: int) -> list[list[Op]]:
    """Consecutive batches of at most ``size`` updates, never mixing phases."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    out: list[list[Op]] = []
    for op in ops:
        if out and len(out[-1]) < size and out[-1][-1].phase == op.phase:
            out[-1].append(op)
        else:
            out.append([op])
    return out


def describe(obj: Op | Entity) -> str:
    """A one-line description of an update or entity, for error messages."""
    if isinstance(obj, Op):
        return f"{obj.type} {describe(obj.entity)}"
    if kind(obj) == "multicast":
        g = obj["packet_replication_engine_entry"]["multicast_group_entry"]
        ports = ",".join(str(r.get("egress_port")) for r in g.get("replicas", []))
        return f"multicast group {g['multicast_group_id']} -> ports [{ports}]"
    te = obj["table_entry"]
    parts = []
    for m in te.get("match", []):
        name = m.get("field_name")
        if "exact" in m:
            parts.append(f"{name}={m['exact']['value']}")
        elif "lpm" in m:
            parts.append(f"{name}={m['lpm']['value']}/{m['lpm']['prefix_len']}")
        elif "ternary" in m:
            parts.append(f"{name}={m['ternary']['value']}&&&{m['ternary']['mask']}")
        elif "range" in m:
            parts.append(f"{name}={m['range']['low']}..{m['range']['high']}")
    act = te.get("action", {}).get("action", {})
    args = ", ".join(f"{p['param_name']}={p['value']}" for p in act.get("params", []))
    prio = f" priority {te['priority']}" if te.get("priority") else ""
    return f"{te['table_name']} [{', '.join(parts)}]{prio} -> {act.get('action_name', '?')}({args})"


Writer = Callable[[list[Op]], list["str | None"]]


@dataclass
class ApplyResult:
    """What :func:`apply_plan` did. On failure ``refused`` is the first refused update and ``reason`` why."""

    ok: bool
    applied: int
    total: int
    refused: Op | None = None
    reason: str | None = None
    rolled_back: bool = False
    rollback_errors: list[str] = field(default_factory=list)
    other_refusals: list[tuple[Op, str]] = field(default_factory=list)

    def summary(self) -> str:
        if self.ok:
            return f"wrote {self.applied} of {self.total} updates"
        text = f"the switch refused {describe(self.refused)}: {self.reason}"
        if self.other_refusals:
            text += f" (and {len(self.other_refusals)} more updates of the same batch)"
        if self.rolled_back:
            text += f"; the {self.applied} updates already written were rolled back"
        else:
            text += ("; ROLLBACK FAILED, the switch is half-written: " + "; ".join(self.rollback_errors))
        return text


def apply_plan(ops: list[Op], write: Writer, batch_size: int = 500) -> ApplyResult:
    """Write ``ops`` in batches; on the first refusal undo everything written (see the module docstring)."""
    done: list[Op] = []
    for batch in batches(ops, batch_size):
        errors = write(batch)
        if len(errors) != len(batch):
            raise ValueError(f"writer returned {len(errors)} results for {len(batch)} updates")
        refused = [(op, err) for op, err in zip(batch, errors) if err is not None]
        done.extend(op for op, err in zip(batch, errors) if err is None)
        if refused:
            rollback = [inverse(op) for op in reversed(done)]
            rb_errors: list[str] = []
            for rb in batches(rollback, batch_size):
                for op, err in zip(rb, write(rb)):
                    if err is not None:
                        rb_errors.append(f"{describe(op)}: {err}")
            return ApplyResult(False, len(done), len(ops), refused[0][0], refused[0][1], not rb_errors, rb_errors,
                               refused[1:])
    return ApplyResult(True, len(done), len(ops))


def hitless_steps(request: dict) -> list[list[Op]]:
    """The steps of a ``hitless.p4rt.json`` document."""
    return [[Op(u["type"], u["entity"], u.get("previous")) for u in s["updates"]] for s in request["steps"]]


def apply_steps(steps: list[list[Op]], write: Writer, batch_size: int = 500) -> ApplyResult:
    """Write ``steps`` one after the other, each in batches of at most ``batch_size``; on the first
    refusal undo what was written, the last step first (see the module docstring)."""
    if batch_size < 1:
        raise ValueError("batch size must be at least 1")
    total = sum(len(s) for s in steps)
    written: list[list[Op]] = []
    for step in steps:
        done: list[Op] = []
        written.append(done)
        for i in range(0, len(step), batch_size):
            batch = step[i:i + batch_size]
            errors = write(batch)
            if len(errors) != len(batch):
                raise ValueError(f"writer returned {len(errors)} results for {len(batch)} updates")
            done.extend(op for op, err in zip(batch, errors) if err is None)
            refused = [(op, err) for op, err in zip(batch, errors) if err is not None]
            if refused:
                rb_errors: list[str] = []
                for ops in reversed(written):
                    undo = [inverse(op) for op in reversed(ops)]
                    for j in range(0, len(undo), batch_size):
                        rb = undo[j:j + batch_size]
                        rb_errors += [f"{describe(op)}: {err}" for op, err in zip(rb, write(rb)) if err is not None]
                return ApplyResult(False, sum(len(d) for d in written), total, refused[0][0], refused[0][1],
                                   not rb_errors, rb_errors, refused[1:])
    return ApplyResult(True, total, total)


def differences(actual: Iterable[Entity], desired: Iterable[Entity]) -> list[str]:
    """What a read-back shows that differs from ``desired`` (empty when the switch holds exactly it)."""
    return [f"{op.type.lower()} needed: {describe(op.entity)}" for op in diff(actual, desired)]
