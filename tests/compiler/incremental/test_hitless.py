"""Hitless update plans (compiler/incremental/hitless.py, issue 16 item 2): the planned writes are
applied one at a time, each step's writes in a random order (a switch applies a batch in any
order), to a table-state model of this file's own; after every write, every packet's outputs must
be exactly what the oracle (compiler/oracle.py) gives for the old rules or for the new rules.

The model here shares no code with the planner or the reference switch: it walks the control's
tables over a dict of entries and, where two entries tie (equal priority, both matching: old and
new range entries side by side), follows every one of them, so that the check holds whichever a
switch picks. At the end the switch must hold exactly the new pipeline's entries and groups.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ir, oracle
from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules, like
from compiler.incremental import Incremental, hitless
from compiler.rules import validity
from compiler.rules.typecheck import check_rules
from compiler.tables import TableOptions
from tests.compiler.incremental.test_incremental import _base, _itch, m_rule, qty_rule
from tests.compiler.test_compile_property import SPEC, packet

LAYOUTS = [("groups", None), ("bitmap", 1), ("bitmap", 2), ("auto", None)]


# -- the independent switch model ------------------------------------------------------------------
def _hit(m: ir.Match, v: int, width: int) -> bool:
    if isinstance(m, ir.Exact):
        return m.value == v
    if isinstance(m, ir.Range):
        return m.lo <= v <= m.hi
    if isinstance(m, ir.Ternary):
        return (v ^ m.value) & m.mask == 0
    return m.prefix_len == 0 or v >> (width - m.prefix_len) == m.value >> (width - m.prefix_len)


def _rank(t: ir.Table, e: ir.Entry) -> int:
    if t.needs_priority:
        return e.priority
    return sum(m.prefix_len for m in e.matches if isinstance(m, ir.Lpm))


def outcomes(p: ir.Pipeline, entries: dict, groups: dict, pkt: dict[str, int]) -> set[frozenset[int]]:
    """Every port set a switch holding ``entries`` and ``groups`` may deliver ``pkt`` to."""
    tables = {t.name: t for t in p.tables}
    actions = {a.name: a for a in p.actions}
    by_table: dict[str, list[ir.Entry]] = defaultdict(list)
    for e in entries.values():
        by_table[e.table].append(e)
    assert all(pkt.get(validity.field_name(h), 1) for h in p.guard_headers())

    def value(field: str, meta: dict) -> int:
        if field.startswith("meta."):
            return meta.get(field, 0)
        return pkt.get(field, 1 if validity.is_validity(field) else 0)

    def run(action: str, args: tuple, st_: tuple) -> tuple:
        meta, port, group, dropped = dict(st_[0]), *st_[1:]
        a = actions[action]
        bound = {q.name: v for q, v in zip(a.params, args)}
        for prim in a.body:
            if prim.op == "set_meta":
                meta[prim.args[0]] = bound[prim.args[1]]
            elif prim.op == "or_meta":
                meta[prim.args[0]] = meta.get(prim.args[0], 0) | bound[prim.args[1]]
            elif prim.op == "set_egress_port":
                port, dropped = bound[prim.args[0]], False
            elif prim.op == "set_mcast_group":
                group = bound[prim.args[0]]
            elif prim.op == "drop":
                dropped = True
        return meta, port, group, dropped

    def apply(name: str, st_: tuple) -> list[tuple]:
        t = tables[name]
        hits = [e for e in by_table[name]
                if all(_hit(m, value(k.field, st_[0]), k.width) for m, k in zip(e.matches, t.keys))]
        if not hits:
            return apply(t.on_miss, st_) if t.on_miss else [run(t.default_action, t.default_args, st_)]
        top = max(_rank(t, e) for e in hits)
        return [run(a, args, st_) for a, args in {(e.action, e.args) for e in hits if _rank(t, e) == top}]

    states = [({}, -1, 0, False)]
    for name in p.control:
        states = [out for s in states for out in apply(name, s)]
    results = set()
    for meta, port, group, dropped in states:
        if p.delivery.is_bitmap:
            bits = 0
            for f in p.delivery.fields:
                bits |= meta.get(f, 0)
            results.add(p.delivery.ports_of(bits))
        elif group:
            results.add(frozenset(groups.get(group, ())))
        else:
            results.add(frozenset([port]) if port >= 0 and not dropped else frozenset())
    return results


def lanes_changed(old: ir.Pipeline, new: ir.Pipeline) -> int:
    lane = {t.name: t.lane for t in new.tables}
    return len({lane[e.table] for e in set(old.entries) ^ set(new.entries)})


def check_plan(old: ir.Pipeline, new: ir.Pipeline, old_rules: ast.RuleSet, new_rules: ast.RuleSet,
               packets: list[dict[str, int]], rnd: random.Random, mid: ir.Pipeline | None = None) -> hitless.Plan:
    """Apply the plan (through ``mid`` when given) write by write and check every packet after each."""
    plan = hitless.plan(old, new) if mid is None else hitless.plan_through(old, mid, new)
    want_old = [oracle.evaluate(check_rules(old_rules, SPEC), p).ports for p in packets]
    want_new = [oracle.evaluate(check_rules(new_rules, SPEC), p).ports for p in packets]
    strict = lanes_changed(old, new) <= 1
    entries = {hitless.entry_key(e): e for e in old.entries}
    groups = {g.id: tuple(g.ports) for g in old.multicast_groups}

    def check(where: str) -> None:
        for pkt, a, b in zip(packets, want_old, want_new):
            for got in outcomes(new, entries, groups, pkt):
                if strict:
                    assert got in (a, b), (where, pkt, got, a, b)
                else:  # lanes flip one by one: no port that both want is missed, none that neither wants is added
                    assert a & b <= got <= a | b, (where, pkt, got, a, b)

    check("before")
    for i, step in enumerate(plan.steps):
        writes = list(step.writes)
        rnd.shuffle(writes)
        for j, w in enumerate(writes):
            hitless.apply(entries, groups, w)
            check(f"step {i} ({step.phase}) write {j}: {w.op} {w.item}")
    assert entries == {hitless.entry_key(e): e for e in new.entries}
    assert groups == {g.id: tuple(g.ports) for g in new.multicast_groups}
    return plan


one_update = st.tuples(st.lists(m_rule, max_size=3), st.integers(0, 3), st.integers(0, 1000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(m_rule, max_size=6), st.lists(one_update, min_size=1, max_size=3),
       st.lists(packet, min_size=1, max_size=10), st.sampled_from(LAYOUTS), st.booleans(),
       st.sampled_from(["range", "ternary"]), st.randoms(use_true_random=False))
def test_every_write_of_an_incremental_update_leaves_each_packet_old_or_new(rules, ops, packets, layout, base,
                                                                            encoding, rnd) -> None:
    rules = (_base() if base else []) + rules
    options = CompileOptions(delivery=layout[0], lanes=layout[1],
                             tables=TableOptions(range_encoding=encoding, min_state_bits=10, headroom=3.0))
    inc = Incremental.compile(SPEC, ast.RuleSet(tuple(rules)), options)
    current = list(rules)
    for add, k, where in ops:
        gone = [current.pop(where % len(current)) for _ in range(min(k, len(current)))]
        current += add
        old, old_rules = inc.pipeline(), inc.rule_set()
        added = inc.update(add=add)  # the rules added first, then the removed ones taken away
        mid = inc.pipeline()
        removed = inc.update(remove=gone)
        new = inc.pipeline()
        if added.program_changed or removed.program_changed:
            with pytest.raises(hitless.HitlessError):
                hitless.plan_through(old, mid, new)
            continue
        several = lanes_changed(old, new) > 1
        check_plan(old, new, old_rules, inc.rule_set(), packets, rnd, mid if several else None)


def test_a_rule_moved_between_lanes_is_planned_through_the_added_rules() -> None:
    """The case hypothesis found: in bitmap layout with two lanes, a rule replaced by one that lands
    in the other lane. The direct plan may flip the old rule's lane first (a packet both versions
    send to port 1 goes nowhere); through the pipeline of the old rules plus the added one, every
    write leaves each packet with at least what both versions want."""
    from compiler.rules.values import encode_string

    sym, tag = encode_string("AB", 32), encode_string("AB", 16)
    mk = lambda s, ports: ast.Rule(ast.And((ast.Comparison(ast.Field("m.sym"), "==", ast.String(s)),  # noqa: E731
                                            ast.Not(ast.Comparison(ast.Field("m.tag"), "==", ast.String("A"))))),
                                   (ast.Forward(ports),))
    base = [ast.Rule(ast.And((ast.Comparison(ast.Field("m.sym"), "==", ast.String("AB")),
                              ast.Comparison(ast.Field("m.tag"), "==", ast.String("A")))), (ast.Forward((1,)),))] * 4
    options = CompileOptions(delivery="bitmap", lanes=2, tables=TableOptions(min_state_bits=10, headroom=3.0))
    inc = Incremental.compile(SPEC, ast.RuleSet(tuple(base)), options)
    inc.update(add=[mk("B", (1, 2))])
    old, old_rules = inc.pipeline(), inc.rule_set()
    inc.update(add=[mk("B", (1,))])
    mid = inc.pipeline()
    inc.update(remove=[mk("B", (1, 2))])
    packets = [{"m.sym": sym, "m.tag": tag, "m.px": 0, "m.qty": 0, "m.big": 0, "ip.dst": 0},
               {"m.sym": encode_string("B", 32), "m.tag": tag, "m.px": 0, "m.qty": 0, "m.big": 0, "ip.dst": 0}]
    check_plan(old, inc.pipeline(), old_rules, inc.rule_set(), packets, random.Random(0), mid)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(qty_rule, min_size=1, max_size=10), st.lists(qty_rule, min_size=1, max_size=10),
       st.lists(packet, min_size=1, max_size=10), st.sampled_from([("groups", None), ("bitmap", 1)]),
       st.randoms(use_true_random=False))
def test_a_full_recompile_with_every_state_renumbered_is_installed_hitlessly(old_rules, new_rules, packets, layout,
                                                                             rnd) -> None:
    """A range root (m.qty first) and a full compile of other rules on the old program: state ids
    come out in any order, so most changed states need a shadow id and a restore."""
    options = CompileOptions(delivery=layout[0], lanes=layout[1], field_order=("m.qty", "m.px"),
                             tables=TableOptions(min_state_bits=10, headroom=4.0))
    old = compile_rules(SPEC, ast.RuleSet(tuple(old_rules)), options).pipeline
    new = compile_rules(SPEC, ast.RuleSet(tuple(new_rules)), like(old, options)).pipeline
    if not hitless.same_program(old, new):
        with pytest.raises(hitless.HitlessError):
            hitless.plan(old, new)
        return
    check_plan(old, new, ast.RuleSet(tuple(old_rules)), ast.RuleSet(tuple(new_rules)), packets, rnd)


def test_itch_like_changes_need_no_restore_and_few_writes() -> None:
    """An incremental ITCH-shaped update: the changed stock's states go to shadow ids, the root
    entry is modified once, and the switch ends on the new pipeline."""
    rules = _itch(300, 1) + _base()
    inc = Incremental.compile(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(delivery="groups"))
    rnd = random.Random(3)
    pkts = [{**p, "m.sym": p["m.sym"]} for p in _packets(40, rnd)]
    for extra in _itch(6, 7):
        old, old_rules = inc.pipeline(), inc.rule_set()
        inc.update(add=[extra])
        plan = check_plan(old, inc.pipeline(), old_rules, inc.rule_set(), pkts, rnd)
        assert sum(len(s.writes) for s in plan.steps if s.phase == "root") <= 2


def _packets(n: int, rnd: random.Random) -> list[dict[str, int]]:
    from compiler.rules.values import encode_string
    from tests.compiler.test_compile_property import SYMS

    return [{"m.sym": encode_string(rnd.choice(SYMS), 32), "m.tag": rnd.randrange(1 << 16),
             "m.px": rnd.randrange(0, 16000), "m.qty": rnd.randrange(256), "m.big": rnd.randrange(1 << 64),
             "ip.dst": rnd.randrange(1 << 32)} for _ in range(n)]


def test_tables_without_room_for_both_versions_are_a_clear_error() -> None:
    """Tables sized to exactly their entries cannot hold a changed state's shadow beside the old one."""
    rules = _itch(40, 1)
    options = CompileOptions(delivery="groups", tables=TableOptions(headroom=1.0, min_size=1))
    inc = Incremental.compile(SPEC, ast.RuleSet(tuple(rules)), options)
    old = inc.pipeline()
    update = inc.update(remove=rules[:10])
    assert update.incremental and not update.program_changed and update.delta.size
    with pytest.raises(hitless.HitlessError, match="no room for the old and new entries side by side"):
        hitless.plan(old, inc.pipeline())


def test_another_program_is_refused() -> None:
    old = compile_rules(SPEC, ast.RuleSet(tuple(_itch(5, 1))), CompileOptions(delivery="groups")).pipeline
    new = compile_rules(SPEC, ast.RuleSet(tuple(_itch(50, 2))), CompileOptions(delivery="groups")).pipeline
    with pytest.raises(hitless.HitlessError, match="another program"):
        hitless.plan(old, new)


def test_compile_update_in_several_lanes_keeps_the_pipeline_to_plan_through(tmp_path) -> None:
    """compile --update in two lanes that both adds and removes rules writes the pipeline of the old
    rules plus the added ones (hitless.MID); install --hitless takes it only from the output OUT was
    updated from (cli.install._mid), and the plan through it ends on exactly the new entries."""
    from p4sub import main
    from p4sub.install import _mid
    from tests.backends.bmv2.test_hitless import ITCH_SPEC, rules_text

    old_rules = rules_text(3, 30)
    (tmp_path / "old.sub").write_text("\n".join(old_rules) + "\n")
    (tmp_path / "new.sub").write_text("\n".join(old_rules[10:] + rules_text(4, 10)) + "\n")
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    assert main(["compile", str(ITCH_SPEC), str(tmp_path / "old.sub"), "-o", str(v1), "--target", "none",
                 "--delivery", "bitmap", "--lanes", "2", "--state-bits", "8"]) == 0
    assert main(["compile", "--update", str(v1), str(tmp_path / "new.sub"), "-o", str(v2), "--target", "none"]) == 0
    old, new = ir.load(v1), ir.load(v2)
    assert len(hitless.changed_lanes(old, new)) > 1 and (v2 / hitless.MID).is_file()
    mid = _mid(v2, v1)
    assert mid is not None and _mid(v2, tmp_path) is None
    assert set(old.entries) != set(mid.entries) != set(new.entries)
    plan = hitless.plan_through(old, mid, new)
    entries = {hitless.entry_key(e): e for e in old.entries}
    groups = {g.id: tuple(g.ports) for g in old.multicast_groups}
    for step in plan.steps:
        for w in step.writes:
            hitless.apply(entries, groups, w)
    assert entries == {hitless.entry_key(e): e for e in new.entries}
