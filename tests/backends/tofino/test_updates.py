"""Update planning: a plan turns the old entries into the new ones, in a safe order, undoably."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.tofino import updates

TABLES = ["pipe.SwitchIngress.a", "pipe.SwitchIngress.b", "pipe.SwitchIngress.leaf"]


@st.composite
def records(draw):
    out = {}
    for _ in range(draw(st.integers(0, 12))):
        table = draw(st.sampled_from(TABLES + ["$pre.node", "$pre.mgid"]))
        k = draw(st.integers(0, 5))
        key = {"$MGID" if table == "$pre.mgid" else "k": {"value": k}}
        rec = {"table_name": table, "key": key, "data": {"x": draw(st.integers(0, 2))}}
        if not table.startswith("$pre"):
            rec["action"] = draw(st.sampled_from(["SwitchIngress.set_state", "SwitchIngress.forward"]))
        out[(table, k)] = rec
    return list(out.values())


@settings(max_examples=100, deadline=None)
@given(records(), records(), st.integers(1, 4))
def test_applying_the_plan_to_the_old_entries_gives_exactly_the_new_ones(old, new, size):
    ops = updates.plan(old, new, TABLES)
    assert updates.differences(new, updates.apply(old, ops)) == []
    flat = [op for batch in updates.batches(ops, size) for op in batch]
    assert flat == ops
    for batch in updates.batches(ops, size):
        assert len(batch) <= size and len({(op.kind, op.record["table_name"]) for op in batch}) == 1


@settings(max_examples=100, deadline=None)
@given(records(), records(), st.integers(0, 30))
def test_undoing_a_prefix_of_the_plan_restores_the_old_entries(old, new, cut):
    ops = updates.plan(old, new, TABLES)[:cut]
    middle = updates.apply(old, ops)
    back = updates.apply(middle, [updates.inverse(op) for op in reversed(ops)])
    assert updates.differences(old, back) == []


def test_order_groups_first_downstream_adds_first_upstream_deletes_first():
    old = [{"table_name": TABLES[0], "key": {"k": {"value": 1}}, "action": "a", "data": {}},
           {"table_name": TABLES[2], "key": {"k": {"value": 1}}, "action": "a", "data": {}},
           {"table_name": "$pre.mgid", "key": {"$MGID": {"value": 9}}, "data": {}},
           {"table_name": "$pre.node", "key": {"$MULTICAST_NODE_ID": {"value": 9}}, "data": {}}]
    new = [{"table_name": TABLES[0], "key": {"k": {"value": 2}}, "action": "a", "data": {}},
           {"table_name": TABLES[2], "key": {"k": {"value": 2}}, "action": "a", "data": {}},
           {"table_name": "$pre.mgid", "key": {"$MGID": {"value": 1}}, "data": {}},
           {"table_name": "$pre.node", "key": {"$MULTICAST_NODE_ID": {"value": 1}}, "data": {}}]
    ops = [(op.kind, op.record["table_name"]) for op in updates.plan(old, new, TABLES)]
    assert ops == [("add", "$pre.node"), ("add", "$pre.mgid"), ("add", TABLES[2]), ("add", TABLES[0]),
                   ("delete", TABLES[0]), ("delete", TABLES[2]), ("delete", "$pre.mgid"), ("delete", "$pre.node")]


def test_same_key_with_new_data_is_a_modify():
    old = [{"table_name": TABLES[1], "key": {"k": {"value": 1}}, "action": "a", "data": {"x": 1}}]
    new = [{"table_name": TABLES[1], "key": {"k": {"value": 1}}, "action": "a", "data": {"x": 2}}]
    (op,) = updates.plan(old, new, TABLES)
    assert op.kind == "modify" and op.before == old[0]
    assert updates.differences(new, old) == [f"different {TABLES[1]} " + '{"k": {"value": 1}}: '
                                             '{"action": "a", "data": {"x": 1}} instead of {"action": "a", "data": {"x": 2}}']
