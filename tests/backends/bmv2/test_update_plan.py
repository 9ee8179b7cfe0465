"""The install planner: minimal diffs, phased batches, and rollbacks that restore the switch."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.bmv2 import update_plan as up


def entry(table: str, state: int, value: int, arg: int, priority: int = 0) -> dict:
    te = {"table_name": table,
          "match": [{"field_name": "meta.p4sub_state", "exact": {"value": hex(state)}},
                    {"field_name": "h.f", "exact": {"value": hex(value)}}],
          "action": {"action": {"action_name": "MyIngress.set_state", "params": [{"param_name": "s", "value": hex(arg)}]}}}
    if priority:
        te["priority"] = priority
    return {"table_entry": te}


def group(gid: int, ports: list[int]) -> dict:
    return {"packet_replication_engine_entry": {"multicast_group_entry": {
        "multicast_group_id": gid, "replicas": [{"egress_port": p, "instance": 1} for p in ports]}}}


def identity(e: dict) -> str:
    """The test's own notion of identity (independent of update_plan.entity_key)."""
    if "table_entry" in e:
        te = e["table_entry"]
        values = sorted((m["field_name"], int(m["exact"]["value"], 16)) for m in te["match"])
        return f"T|{te['table_name']}|{values}|{te.get('priority', 0)}"
    return f"G|{e['packet_replication_engine_entry']['multicast_group_entry']['multicast_group_id']}"


def payload(e: dict) -> str:
    if "table_entry" in e:
        act = e["table_entry"]["action"]["action"]
        return f"{act['action_name']}|{[int(p['value'], 16) for p in act['params']]}"
    reps = e["packet_replication_engine_entry"]["multicast_group_entry"]["replicas"]
    return str(sorted(r["egress_port"] for r in reps))


class FakeSwitch:
    """A P4Runtime target in miniature: identity-keyed state, per-table capacity, CONTINUE_ON_ERROR
    semantics with updates of a batch applied in a random order, and injectable refusals."""

    def __init__(self, entities=(), capacity: int | None = None, refuse=lambda op: None, seed: int = 0) -> None:
        self.state = {identity(e): e for e in entities}
        self.capacity = capacity
        self.refuse = refuse
        self.rng = random.Random(seed)
        self.batches: list[list[up.Op]] = []

    def snapshot(self) -> dict[str, str]:
        return {k: payload(v) for k, v in self.state.items()}

    def write(self, ops: list[up.Op]) -> list[str | None]:
        self.batches.append(list(ops))
        results: list[str | None] = [None] * len(ops)
        order = list(range(len(ops)))
        self.rng.shuffle(order)
        for i in order:
            op = ops[i]
            k = identity(op.entity)
            reason = self.refuse(op)
            if reason:
                results[i] = reason
            elif op.type == "INSERT":
                if k in self.state:
                    results[i] = "ALREADY_EXISTS"
                elif self.capacity is not None and k.startswith("T|") and sum(
                        1 for x in self.state if x.split("|")[1] == k.split("|")[1]) >= self.capacity:
                    results[i] = "RESOURCE_EXHAUSTED: table is full"
                else:
                    self.state[k] = op.entity
            elif k not in self.state:
                results[i] = "NOT_FOUND"
            elif op.type == "DELETE":
                del self.state[k]
            else:
                self.state[k] = op.entity
        return results


tables = st.sampled_from(["MyIngress.a", "MyIngress.b"])
table_entries = st.builds(entry, tables, st.integers(0, 3), st.integers(0, 3), st.integers(0, 2))
groups = st.builds(group, st.integers(1, 4), st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True))


def unique(entities: list[dict]) -> list[dict]:
    seen = {}
    for e in entities:
        seen.setdefault(identity(e), e)
    return list(seen.values())


entity_sets = st.lists(st.one_of(table_entries, groups), max_size=25).map(unique)


@given(entity_sets, entity_sets)
@settings(max_examples=150, deadline=None)
def test_plan_is_minimal_one_update_per_changed_identity(current, desired):
    ops = up.diff(current, desired)
    have = {identity(e): payload(e) for e in current}
    want = {identity(e): payload(e) for e in desired}
    expected = ({("INSERT", k) for k in want.keys() - have.keys()}
                | {("DELETE", k) for k in have.keys() - want.keys()}
                | {("MODIFY", k) for k in want.keys() & have.keys() if want[k] != have[k]})
    assert sorted((op.type, identity(op.entity)) for op in ops) == sorted(expected)


@given(entity_sets, entity_sets, st.integers(1, 7))
@settings(max_examples=150, deadline=None)
def test_applying_the_plan_yields_exactly_the_desired_state(current, desired, batch_size):
    switch = FakeSwitch(current, seed=batch_size)
    result = up.apply_plan(up.diff(current, desired), switch.write, batch_size)
    assert result.ok, result.summary()
    assert switch.snapshot() == {identity(e): payload(e) for e in desired}
    assert up.differences(list(switch.state.values()), desired) == []


@given(entity_sets, entity_sets, st.integers(1, 7), st.integers(0, 40))
@settings(max_examples=200, deadline=None)
def test_a_refused_update_rolls_back_to_the_state_before_the_install(current, desired, batch_size, fail_at):
    ops = up.diff(current, desired)
    if not ops:
        return
    victim = ops[fail_at % len(ops)]
    switch = FakeSwitch(current, refuse=lambda op: "INVALID_ARGUMENT: injected" if op == victim else None,
                        seed=fail_at)
    before = switch.snapshot()
    result = up.apply_plan(ops, switch.write, batch_size)
    assert not result.ok
    assert result.refused == victim and result.reason == "INVALID_ARGUMENT: injected"
    assert result.rolled_back and result.rollback_errors == []
    assert switch.snapshot() == before
    assert up.describe(victim) in result.summary()


def test_capacity_refusal_names_the_entry_and_rolls_back():
    current = [entry("MyIngress.a", 0, v, 1) for v in range(3)]
    desired = current[:1] + [entry("MyIngress.a", 1, v, 2) for v in range(5)]
    switch = FakeSwitch(current, capacity=4)
    before = switch.snapshot()
    result = up.apply_plan(up.diff(current, desired), switch.write, batch_size=2)
    assert not result.ok and "RESOURCE_EXHAUSTED" in result.reason
    assert result.refused.type == "INSERT" and "MyIngress.a" in up.describe(result.refused)
    assert switch.snapshot() == before


def test_phases_are_ordered_and_never_mixed_in_a_batch():
    current = [entry("MyIngress.a", 0, 0, 1), entry("MyIngress.a", 0, 1, 1), group(1, [1]), group(2, [2])]
    desired = [entry("MyIngress.a", 0, 0, 2), entry("MyIngress.a", 0, 2, 1), group(1, [1, 3]), group(3, [4])]
    ops = up.diff(current, desired)
    kinds = [(("G" if "packet_replication_engine_entry" in op.entity else "T"), op.type) for op in ops]
    assert kinds == [("G", "MODIFY"), ("G", "INSERT"), ("T", "DELETE"), ("T", "MODIFY"), ("T", "INSERT"),
                     ("G", "DELETE")] or kinds == [("G", "INSERT"), ("G", "MODIFY"), ("T", "DELETE"),
                                                   ("T", "MODIFY"), ("T", "INSERT"), ("G", "DELETE")]
    for batch in up.batches(ops, 10):
        assert len({op.phase for op in batch}) == 1


def test_equal_values_in_different_byte_forms_are_not_changes():
    a = entry("MyIngress.a", 0, 5, 1)
    b = json.loads(json.dumps(a).replace('"0x5"', '"0x0005"'))
    assert up.diff([a], [b]) == []


def test_duplicate_desired_identities_are_refused():
    with pytest.raises(ValueError):
        up.diff([], [entry("MyIngress.a", 0, 0, 1), entry("MyIngress.a", 0, 0, 2)])


def test_priority_is_part_of_the_identity():
    ops = up.diff([entry("MyIngress.a", 0, 0, 1, priority=1)], [entry("MyIngress.a", 0, 0, 1, priority=2)])
    assert sorted(op.type for op in ops) == ["DELETE", "INSERT"]


def test_inverse_of_inverse_is_the_original():
    ins = up.Op("INSERT", entry("MyIngress.a", 0, 0, 1))
    mod = up.Op("MODIFY", entry("MyIngress.a", 0, 0, 2), entry("MyIngress.a", 0, 0, 1))
    dele = up.Op("DELETE", entry("MyIngress.a", 0, 0, 1), entry("MyIngress.a", 0, 0, 1))
    assert up.inverse(up.inverse(mod)) == mod
    assert up.inverse(ins).type == "DELETE" and up.inverse(up.inverse(ins)).type == "INSERT"
    assert up.inverse(dele) == up.Op("INSERT", dele.previous)
