"""Fitting a switch: lanes, port bitmaps and budgets keep the pipeline exact, or a proved superset.

The oracle (compiler/oracle.py) and the BDD proof (compiler/verify.py) judge; the model runs the
compiled tables. Rule sets are Siena-like: several attributes, one to four constraints each.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ir, oracle
from compiler import rules as ast
from compiler.compile import Budget, CompileOptions, compile_rules
from compiler.lanes import completion_order, spread
from compiler.verify import verify
from runtime.extra_deliveries import measure
from runtime.model import Model
from tests.compiler.specs import make_spec

ATTRS = [f"s.a{i}" for i in range(6)]
SPEC = make_spec({name: (8, {}) for name in ATTRS})


def constraint(name: str) -> st.SearchStrategy[ast.Comparison]:
    return st.builds(lambda op, v: ast.Comparison(ast.Field(name), op, ast.Number(v)),
                     st.sampled_from(["==", "!=", "<", ">", "<=", ">="]), st.integers(0, 255))


@st.composite
def siena_rule(draw) -> ast.Rule:
    names = draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=4, unique=True))
    parts = tuple(draw(constraint(n)) for n in names)
    ports = tuple(sorted(draw(st.sets(st.integers(1, 6), min_size=1, max_size=2))))
    return ast.Rule(ast.And(parts) if len(parts) > 1 else parts[0], (ast.Forward(ports),))


packets = st.lists(st.fixed_dictionaries({n: st.integers(0, 255) for n in ATTRS}), min_size=1, max_size=30)


def model_sets(pipeline: ir.Pipeline, pkts: list[dict[str, int]]) -> list[frozenset[int]]:
    model = Model(pipeline)
    return model.run({f: np.array([p[f] for p in pkts], dtype=np.uint64) for f in model.inputs},
                     rows=len(pkts)).port_sets()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(siena_rule(), min_size=1, max_size=12), packets, st.integers(1, 5))
def test_lanes_forward_exactly_where_the_rules_say(rules, pkts, lanes):
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(delivery="bitmap", lanes=lanes))
    assert compiled.pipeline.lanes <= lanes
    for pkt, got in zip(pkts, model_sets(compiled.pipeline, pkts)):
        assert got == oracle.evaluate(compiled.typed, pkt).ports
    assert verify(compiled.pipeline, compiled.typed).equivalent


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(siena_rule(), min_size=2, max_size=12), packets, st.data())
def test_a_broken_entry_in_any_lane_is_caught(rules, pkts, data):
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(delivery="bitmap", lanes=3))
    pipeline = compiled.pipeline
    with_ports = [i for i, e in enumerate(pipeline.entries) if e.action.endswith("set_state_ports")]
    if not with_ports:
        return
    i = data.draw(st.sampled_from(with_ports))
    e = pipeline.entries[i]
    ports = e.args[1]
    flipped = ports ^ (1 << data.draw(st.integers(0, pipeline.delivery.width - 1)))
    broken = dataclasses.replace(pipeline, entries=pipeline.entries[:i] + (dataclasses.replace(
        e, args=(e.args[0], flipped)),) + pipeline.entries[i + 1:])
    verdict = verify(broken, compiled.typed)
    # Another lane may deliver the same port to the same packets (then the flip changes nothing);
    # otherwise a sampled packet that tells them apart must make verify fail, and every difference
    # verify reports must be real.
    wrong = [p for p, got in zip(pkts, model_sets(broken, pkts)) if got != oracle.evaluate(compiled.typed, p).ports]
    if wrong:
        assert not verdict.equivalent, f"verify missed a difference on {wrong[0]}"
    for d in verdict.differences:
        port = d.output[1]
        for pkt, missing in ((d.missing, True), (d.extra, False)):
            if pkt is not None:
                assert (port in oracle.evaluate(compiled.typed, pkt).ports) == missing
                assert (port in model_sets(broken, [pkt])[0]) != missing


RING = ast.RuleSet(tuple(ast.Rule(ast.And((ast.Comparison(ast.Field(a), ">", ast.Number(5)),
                                          ast.Comparison(ast.Field(b), "<", ast.Number(9)))), (ast.Forward((p,)),))
                       for p, (a, b) in enumerate(zip(ATTRS, ATTRS[1:] + ATTRS[:1]), 1)))


def test_each_lane_entry_that_decides_a_port_is_caught_when_broken():
    """Every rule has its own port: clearing the bit an entry ORs in loses that port for the packets
    that reach the entry, and verify says which."""
    compiled = compile_rules(SPEC, RING, CompileOptions(delivery="bitmap", lanes=3))
    pipeline = compiled.pipeline
    checked = 0
    for i, e in enumerate(pipeline.entries):
        if not e.action.endswith("set_state_ports"):
            continue
        cleared = dataclasses.replace(e, args=(e.args[0], 0))
        broken = dataclasses.replace(pipeline, entries=pipeline.entries[:i] + (cleared,) + pipeline.entries[i + 1:])
        verdict = verify(broken, compiled.typed)
        assert not verdict.equivalent and not verdict.sound
        lost = {d.output[1] for d in verdict.differences}
        assert lost == set(pipeline.delivery.ports_of(e.args[1]))
        for d in verdict.differences:
            assert d.output[1] not in model_sets(broken, [d.missing])[0]
        checked += 1
    assert checked >= len(RING.rules)


def test_lanes_of_different_tables_share_no_metadata():
    compiled = compile_rules(SPEC, RING, CompileOptions(delivery="bitmap", lanes=3))
    p = compiled.pipeline
    assert p.lanes == 3 and len(p.delivery.fields) == 3
    for t in p.tables:
        for k in t.keys:
            if k.field.startswith("meta."):
                assert k.field == ir.lane_state(t.lane) or k.field.startswith(f"meta.p4sub_code_{ir.lane_prefix(t.lane)}")
        assert t.name.startswith(ir.lane_prefix(t.lane))


# -- lanes split by port (compiler.lanes.port_partition) ---------------------------------------------

OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
       "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


def own_ports(rules: list[ast.Rule], pkt: dict[str, int]) -> frozenset[int]:
    """What ``rules`` (conjunctions of ``field OP number``, as :func:`siena_rule` draws them) give one
    packet, worked out here with no compiler code: the union of the ports of every rule that matches."""
    out: set[int] = set()
    for r in rules:
        parts = r.filter.items if isinstance(r.filter, ast.And) else (r.filter,)
        if all(OPS[c.op](pkt[c.attribute.name], c.value.value) for c in parts):
            for a in r.actions:
                out.update(a.ports)
    return frozenset(out)


@st.composite
def routed_rule(draw) -> ast.Rule:
    """A rule of a routed switch: few ports (1 to 4), often several of them, 1 to 3 constraints."""
    names = draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=3, unique=True))
    parts = tuple(draw(constraint(n)) for n in names)
    ports = tuple(sorted(draw(st.sets(st.integers(1, 4), min_size=1, max_size=3))))
    return ast.Rule(ast.And(parts) if len(parts) > 1 else parts[0], (ast.Forward(ports),))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(routed_rule(), siena_rule()), min_size=1, max_size=14), packets,
       st.sampled_from([None, 1, 2, 3, 4, 6]), st.sampled_from(["port", "auto"]))
def test_lanes_split_by_port_forward_exactly_where_the_rules_say(rules, pkts, lanes, partition):
    """Each lane of a port partition gives only its ports, for the rules that give them: the lanes
    ORed give a packet exactly the union of its matching rules' ports (an oracle of this test's own,
    the model running the tables, and the BDD proof agree)."""
    options = CompileOptions(delivery="bitmap", lanes=lanes, lane_partition=partition)
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), options)
    if lanes is not None:
        assert compiled.pipeline.lanes <= lanes
    if partition == "port" and compiled.pipeline.lanes > 1:
        assert compiled.stats["lane_partition"] == "port"
        grouped = [p for g in compiled.stats["lane_ports"] for p in g]
        assert len(grouped) == len(set(grouped))  # each port in one lane
        assert set(grouped) <= {p for r in rules for a in r.actions for p in a.ports}
    for pkt, got in zip(pkts, model_sets(compiled.pipeline, pkts)):
        assert got == own_ports(rules, pkt)
        assert got == compiled.evaluate(pkt).ports
    assert verify(compiled.pipeline, compiled.typed).equivalent


@settings(max_examples=60, deadline=None)
@given(st.lists(routed_rule(), min_size=1, max_size=14), st.integers(1, 5))
def test_a_port_partition_puts_each_rule_in_the_lane_of_each_port_it_gives_and_nowhere_else(rules, n):
    from compiler import bdd
    from compiler.lanes import lane_cubes, port_partition
    from compiler.rules.typecheck import check_rules

    typed = check_rules(ast.RuleSet(tuple(rules)), SPEC)
    cubes_of = [bdd.rule_cubes(typed, 4096, (i,)) for i in range(len(rules))]
    lanes, groups = port_partition(cubes_of, n)
    assert 1 <= len(lanes) == len(groups) <= n
    # The ports a rule can give (an unsatisfiable rule has no cube, and gives none).
    gives = [{p for _, actions in cubes for _, p in actions} for cubes in cubes_of]
    ports = sorted(p for g in groups for p in g)
    assert ports == sorted(set().union(*gives))  # each port in one group
    for i in range(len(rules)):
        holders = {k for k, lane in enumerate(lanes) if i in lane}
        assert holders == ({k for k, g in enumerate(groups) if gives[i] & set(g)} or {0})  # none: lane 0
    for lane, group in zip(lanes, groups):
        for _, actions in lane_cubes(cubes_of, lane, group):
            assert actions and all(kind == "port" and p in group for kind, p in actions)


def test_a_routed_core_like_switch_compiles_in_few_port_lanes():
    """Many rules that give the same few ports make each other redundant in a lane of those ports:
    every packet gets every port here (each port has ``a0 != 1`` and ``a0 != 2``), which the port
    lanes find at their root; in lanes by hub the rules of other lanes cannot help."""
    rules = [ast.Rule(ast.Comparison(ast.Field("s.a0"), "!=", ast.Number(v)), (ast.Forward((p,)),))
             for p in range(1, 5) for v in (1, 2)]
    rules += [ast.Rule(ast.And((ast.Comparison(ast.Field(a), "<", ast.Number(v)),
                                ast.Comparison(ast.Field(b), ">", ast.Number(255 - v)))), (ast.Forward((v % 4 + 1,)),))
              for v in range(10, 250, 3) for a, b in itertools.pairwise(ATTRS)]
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(delivery="bitmap"))
    assert compiled.stats["total_entries"] <= 4
    assert compiled.lanes.size <= 4
    assert compiled.evaluate({a: 1 for a in ATTRS}).ports == frozenset({1, 2, 3, 4})
    assert verify(compiled.pipeline, compiled.typed).equivalent


def test_hub_spread_puts_each_rule_with_a_hub_it_tests():
    sigs = [frozenset({"a", "b"}), frozenset({"a", "c"}), frozenset({"b", "c"}), frozenset({"d"}), frozenset({"a"})]
    lanes, hubs = spread(sigs, 3)
    assert hubs[0] in ("a", "b", "c") and len(lanes) == len(hubs) <= 3
    placed = sorted(i for lane in lanes for i in lane)
    assert placed == list(range(len(sigs)))
    for lane, hub in zip(lanes, hubs):
        for i in lane:
            assert hub in sigs[i] or not any(h in sigs[i] for h in hubs)


def test_completion_order_closes_rules_before_opening_others():
    sigs = [frozenset({"a", "d"})] * 3 + [frozenset({"b", "c"})] * 3
    order = completion_order(sigs, ["a", "b", "c", "d"])
    assert abs(order.index("a") - order.index("d")) == 1 and abs(order.index("b") - order.index("c")) == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(siena_rule(), min_size=4, max_size=14), packets)
def test_a_budget_too_small_for_the_exact_compile_widens_rules_to_a_proved_superset(rules, pkts):
    typed_rules = ast.RuleSet(tuple(rules))
    exact = compile_rules(SPEC, typed_rules, CompileOptions(delivery="bitmap", lanes=1))
    budget = Budget(entries=max(1, exact.stats["total_entries"] // 3))
    compiled = compile_rules(SPEC, typed_rules, CompileOptions(delivery="bitmap", lanes=1, budget=budget))
    verdict = verify(compiled.pipeline, compiled.typed)
    assert verdict.sound  # never a missed delivery
    assert not compiled.stats["budget_misses"]  # keeping no constraint at all always fits
    if compiled.stats["exact"]:
        assert verdict.equivalent
    else:
        assert compiled.stats["approximation"]["dropped_constraints"] > 0
    for pkt, got in zip(pkts, model_sets(compiled.pipeline, pkts)):
        assert oracle.evaluate(compiled.typed, pkt).ports <= got
    cols = {f: np.array([p[f] for p in pkts], dtype=np.uint64) for f in ATTRS}
    counts = measure(compiled.pipeline, compiled.typed, cols)
    assert counts.missed == 0
    assert counts.extra == sum(len(got - oracle.evaluate(compiled.typed, p).ports)
                               for p, got in zip(pkts, model_sets(compiled.pipeline, pkts)))


def test_exact_refuses_to_widen_when_nothing_fits():
    rules = ast.RuleSet(tuple(ast.Rule(ast.And((ast.Comparison(ast.Field("s.a0"), ">", ast.Number(v)),
                                                 ast.Comparison(ast.Field("s.a1"), "<", ast.Number(255 - v)))),
                                       (ast.Forward((v % 5 + 1,)),)) for v in range(0, 200, 7)))
    import pytest

    from compiler.base.errors import CompileError

    with pytest.raises(CompileError, match="do not fit 3 entries"):
        compile_rules(SPEC, rules, CompileOptions(delivery="bitmap", lanes=1, budget=Budget(entries=3), exact=True))


@settings(max_examples=40, deadline=None)
@given(st.lists(siena_rule(), min_size=1, max_size=10))
def test_each_widening_step_only_drops_constraints_from_the_step_before(rules):
    from compiler import bdd
    from compiler.budget import Selectivity, widenings
    from compiler.rules.typecheck import check_rules

    typed = check_rules(ast.RuleSet(tuple(rules)), SPEC)
    cubes_of = [bdd.rule_cubes(typed, 4096, (i,)) for i in range(len(rules))]
    before = cubes_of
    steps = list(widenings(cubes_of, Selectivity(typed.fields)))
    assert steps[-1][0].step == "keep-0" and all(cube == () for cubes in steps[-1][1] for cube, _ in cubes)
    for widening, after in steps:
        assert len(after) == len(before)
        for old, new in zip(before, after):
            for (old_cube, old_actions), (new_cube, new_actions) in zip(old, new):
                assert set(new_cube) <= set(old_cube) and new_actions == old_actions
        before = after


def test_a_stack_spec_keeps_groups_under_auto_while_they_fit_and_takes_bitmaps_when_they_do_not(tmp_path, capsys):
    """Issue 26 item 2: BMv2 (batched prune) and Tofino (batch mode split) render port bitmaps for
    packets of several messages, so ``auto`` turns to them when the groups layout does not fit (here a
    budget of 10 groups for 54); Tofino's union program does not render them. The bitmap compile is
    proved exact against the rules."""
    import json
    from pathlib import Path

    from compiler.rules import read_rules
    from compiler.rules.typecheck import check_rules
    from compiler.spec import read_spec
    from p4sub import main

    root = Path(__file__).resolve().parents[2]
    spec, rules = str(root / "apps/itch/itch.p4"), str(root / "apps/itch/rules.sub")
    typed = check_rules(read_rules(rules), read_spec(spec))
    for target in ("none", "bmv2", "tofino"):
        assert main(["compile", spec, rules, "--target", target, "-o", str(tmp_path / f"auto-{target}")]) == 0
        assert ir.load(tmp_path / f"auto-{target}").delivery.kind == "groups"
    for target in ("bmv2", "tofino"):
        capsys.readouterr()
        out = tmp_path / f"b-{target}"
        assert main(["compile", spec, rules, "--target", target, "--budget", "groups=10", "-o", str(out)]) == 0
        pipeline = ir.load(out)
        assert pipeline.delivery.is_bitmap and len(pipeline.multicast_groups) == 1
        assert "groups: " in capsys.readouterr().out  # the groups candidate's miss, in the layout notes
        assert verify(pipeline, typed).equivalent
    resources = json.loads((tmp_path / "b-tofino" / "resources.json").read_text())
    assert resources["notes"]["batch_mode"] == "split"
    capsys.readouterr()
    assert main(["compile", spec, rules, "--target", "tofino", "--delivery", "bitmap", "--batch", "union",
                 "-o", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "port-bitmap delivery is rendered for one message per packet or batch mode split" in err
    assert not (tmp_path / "t").exists()


def _widened_ports(cubes: list, pkt: dict[str, int]) -> frozenset[int]:
    """The ports widened cubes give a packet, read straight off their intervals (no diagram, no budget code)."""
    out: set[int] = set()
    for cube, actions in cubes:
        if all(any(lo <= pkt[name] <= hi for lo, hi in s.intervals) for name, s in cube):
            out |= {a[1] for a in actions if a[0] == "port"}
    return frozenset(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(siena_rule(), min_size=1, max_size=10), packets, packets)
def test_every_widening_step_by_coverage_gives_each_packet_at_least_the_rules_ports(rules, sample, pkts):
    from compiler import bdd
    from compiler.budget import Coverage, Selectivity, widenings
    from compiler.rules.typecheck import check_rules

    typed = check_rules(ast.RuleSet(tuple(rules)), SPEC)
    cubes_of = [bdd.rule_cubes(typed, 4096, (i,)) for i in range(len(rules))]
    cols = {f: np.array([p[f] for p in sample], dtype=np.uint64) for f in ATTRS}
    steps = list(widenings(cubes_of, Selectivity(typed.fields, cols), Coverage(cubes_of, cols)))
    assert steps[-1][0].step == "keep-0"
    before = cubes_of
    for widening, after in steps:
        flat = [c for cubes in after for c in cubes]
        for pkt in pkts + sample:
            assert oracle.evaluate(typed, pkt).ports <= _widened_ports(flat, pkt), widening.step
        for old, new in zip(before, after):  # each step widens the one before
            for (old_cube, _), (new_cube, _) in zip(old, new):
                assert set(new_cube) <= set(old_cube)
        before = after


def _first_drop(rules: list[ast.Rule], sample: dict | None) -> tuple[int, str]:
    """(rule, attribute) of the first constraint the widening steps drop."""
    from compiler import bdd
    from compiler.budget import Coverage, Selectivity, widenings
    from compiler.rules.typecheck import check_rules

    typed = check_rules(ast.RuleSet(tuple(rules)), SPEC)
    cubes_of = [bdd.rule_cubes(typed, 4096, (i,)) for i in range(len(rules))]
    coverage = Coverage(cubes_of, sample) if sample else None
    for widening, after in widenings(cubes_of, Selectivity(typed.fields, sample), coverage):
        if widening.dropped:
            for r, (old, new) in enumerate(zip(cubes_of, after)):
                gone = {n for n, _ in old[0][0]} - {n for n, _ in new[0][0]}
                if gone:
                    return r, gone.pop()
    raise AssertionError("nothing dropped")


def test_with_a_sample_the_cheapest_drop_is_the_one_the_subscribers_other_filters_cover():
    """Port 1's second rule covers ``a0 > 100``: dropping ``a1`` from its first rule costs nothing,
    although ``a0`` is the less selective constraint (what the order without a sample drops), and
    port 2's rule of two narrow constraints is cheaper by selectivity."""
    def cmp(name: str, op: str, v: int) -> ast.Comparison:
        return ast.Comparison(ast.Field(name), op, ast.Number(v))

    rules = [ast.Rule(ast.And((cmp("s.a0", ">", 100), cmp("s.a1", ">", 127))), (ast.Forward((1,)),)),
             ast.Rule(ast.And((cmp("s.a2", ">", 250), cmp("s.a3", ">", 250))), (ast.Forward((2,)),)),
             ast.Rule(cmp("s.a0", ">", 100), (ast.Forward((1,)),))]
    rng = np.random.default_rng(3)
    sample = {f: rng.integers(0, 256, 4000).astype(np.uint64) for f in ATTRS}
    assert _first_drop(rules, None) == (1, "s.a3")  # by selectivity: port 2's drop adds 2 % of packets
    assert _first_drop(rules, sample) == (0, "s.a1")  # by coverage: nothing port 1 lacks


def test_rules_of_one_attribute_mixed_with_rules_of_several_get_a_flat_lane_of_their_own():
    sigs = ([frozenset({"d"})] * 5 + [frozenset({"a", "b"})] * 4 + [frozenset({"a", "c"})] * 3
            + [frozenset({"e"}), frozenset({"a"}), frozenset()])
    assert None not in spread(sigs, 3)[1]  # only when asked
    lanes, hubs = spread(sigs, 3, flat=True)
    assert hubs[-1] is None and None not in hubs[:-1]
    assert sorted(lanes[-1]) == [0, 1, 2, 3, 4, 12, 13, 14]  # every rule of at most one attribute
    assert set(hubs[:-1]) <= {"a", "b", "c"}  # hubs of the rules of several ("d" is the most tested)
    assert sorted(i for lane in lanes for i in lane) == list(range(len(sigs)))
    assert all(len(sigs[i]) > 1 for lane in lanes[:-1] for i in lane)
    # Rules of one attribute only: no flat lane (every lane is as flat).
    lanes, hubs = spread([frozenset({x}) for x in "abcde"], 3, flat=True)
    assert None not in hubs
    # Rules of one attribute fewer than half: hub lanes as before.
    lanes, hubs = spread([frozenset({"a", "b"})] * 3 + [frozenset({"c"})] * 2, 3, flat=True)
    assert None not in hubs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(siena_rule(), min_size=4, max_size=14), packets, packets)
def test_a_widened_compile_that_chose_its_drops_on_a_sample_is_a_proved_superset(rules, sample, pkts):
    typed_rules = ast.RuleSet(tuple(rules))
    exact = compile_rules(SPEC, typed_rules, CompileOptions(delivery="bitmap", lanes=1))
    budget = Budget(entries=max(1, exact.stats["total_entries"] // 3))
    cols = {f: np.array([p[f] for p in sample], dtype=np.uint64) for f in ATTRS}
    compiled = compile_rules(SPEC, typed_rules, CompileOptions(delivery="bitmap", budget=budget, sample=cols))
    assert verify(compiled.pipeline, compiled.typed).sound  # never a missed delivery
    assert not compiled.stats["budget_misses"]
    for pkt, got in zip(pkts + sample, model_sets(compiled.pipeline, pkts + sample)):
        assert oracle.evaluate(compiled.typed, pkt).ports <= got
