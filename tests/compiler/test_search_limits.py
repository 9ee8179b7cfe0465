"""A search that always answers: ``--budget time=,memory=`` (compiler.base.limits), the best layout
found kept when a bound runs out, and the error that names what missed and which rules cost most
(compiler.rule_cost). Issue 26 item 4.

The bound is a deadline or a ceiling; what the tests hold is what happens at it, which they bring
about deterministically (a deadline already past, a checkpoint that trips on its n-th call), never
by timing a run.
"""

from __future__ import annotations

import time
from dataclasses import replace as dataclasses_replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import compile as compile_module
from compiler import oracle
from compiler import rules as ast
from compiler.base import P4subError, limits
from compiler.compile import Budget, CompileOptions, compile_rules, parse_budget
from compiler.rule_cost import costliest, rule_costs
from compiler.rules import check_rules
from p4sub import main
from runtime.model import Model
from tests.compiler.specs import make_spec
from tests.compiler.test_fit import ATTRS, SPEC, siena_rule

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")


# -- the budget's words ---------------------------------------------------------------------------

def test_time_and_memory_join_the_budget():
    b = parse_budget("entries=10,time=2.5,memory=1.5G")
    assert (b.entries, b.seconds, b.memory) == (10, 2.5, int(1.5 * (1 << 30)))
    assert parse_budget("memory=512M").memory == 512 << 20 and parse_budget("memory=4096").memory == 4096
    assert parse_budget("memory=2gb").memory == 2 << 30
    assert Budget().seconds is None and Budget().memory is None


@pytest.mark.parametrize("text", ["time=0", "time=-3", "time=abc", "time=inf", "time=nan", "memory=0", "memory=lots",
                                  "memory=-1G", "memory=4X", "speed=3"])
def test_a_bad_bound_is_refused_with_what_was_expected(text):
    with pytest.raises(P4subError, match="expected"):
        parse_budget(text)


def test_the_command_line_refuses_a_bad_bound_with_exit_2(capsys, tmp_path):
    assert main(["compile", ITCH, ITCH_RULES, "--budget", "time=soon", "-o", str(tmp_path / "o")]) == 2
    assert "time='soon'" in capsys.readouterr().err and not (tmp_path / "o").exists()


# -- the bound itself -----------------------------------------------------------------------------

def test_a_checkpoint_is_free_without_a_bound_and_raises_once_the_deadline_has_passed():
    limits.checkpoint()
    with limits.bounded(0.05, None):
        limits.checkpoint()
        time.sleep(0.1)
        with pytest.raises(limits.OutOfBudget, match="time budget of 0.05 s") as caught:
            limits.checkpoint()
        assert caught.value.kind == "time"
    limits.checkpoint()  # the bound ends with its block


def test_a_grace_lets_the_target_judge_a_found_layout_past_the_deadline_and_no_further():
    with limits.bounded(0.01, None):
        time.sleep(0.02)
        with pytest.raises(limits.OutOfBudget):
            limits.checkpoint()
        with limits.grace(100):  # 100 x 0.01 s: a second ahead of it
            limits.checkpoint()
        with pytest.raises(limits.OutOfBudget):
            limits.checkpoint()  # the deadline is back


def test_a_nested_bound_keeps_the_outer_one():
    with limits.bounded(60, None):
        with limits.bounded(0.001, None):
            time.sleep(0.01)
            limits.checkpoint()  # the inner bound did not replace the outer minute
        assert 0 < limits.remaining() <= 60


def test_memory_past_the_ceiling_trips_the_next_checkpoint(monkeypatch):
    """The watcher reads resident memory (here a stand-in that grows past the ceiling)."""
    resident = [100 << 20]
    monkeypatch.setattr(limits, "resident_bytes", lambda: resident[0])
    with limits.bounded(None, 128 << 20):
        limits.checkpoint()
        resident[0] = 140 << 20  # past the ceiling, below 1.5 times it
        deadline = time.monotonic() + 5
        with pytest.raises(limits.OutOfBudget, match="memory ceiling of 128 MB was reached") as caught:
            while time.monotonic() < deadline:
                limits.checkpoint()
                time.sleep(0.01)
        assert caught.value.kind == "memory"


def test_memory_far_past_the_ceiling_stops_a_step_that_never_checks(monkeypatch):
    resident = [100 << 20]
    monkeypatch.setattr(limits, "resident_bytes", lambda: resident[0])
    with pytest.raises(limits.OutOfBudget, match="stopped there"):
        with limits.bounded(None, 128 << 20):
            resident[0] = 200 << 20  # past 1.5 times the ceiling
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # no checkpoint: only the watcher's signal ends this
                time.sleep(0.01)


# -- the search keeps what it found ---------------------------------------------------------------

def _tripping_lanes(monkeypatch, trip_on: set[int]) -> None:
    """compile's lane search runs out of time on the calls numbered in ``trip_on`` (from 1)."""
    real = compile_module.choose_lanes
    calls = []

    def choose(*args, **kwargs):
        calls.append(1)
        if len(calls) in trip_on:
            raise limits.OutOfBudget("time", "the time budget of 1 s ran out")
        return real(*args, **kwargs)
    monkeypatch.setattr(compile_module, "choose_lanes", choose)


def _delivered(compiled, pkts) -> list[frozenset[int]]:
    model = Model(compiled.pipeline)
    return model.run({f: np.array([p[f] for p in pkts], dtype=np.uint64) for f in model.inputs},
                     rows=len(pkts)).port_sets()


def _dropped(compiled) -> int:
    return compiled.stats.get("approximation", {}).get("dropped_constraints", 0)


packets = st.lists(st.fixed_dictionaries({n: st.integers(0, 255) for n in ATTRS}), min_size=1, max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(siena_rule(), min_size=6, max_size=14), st.integers(2, 4), st.booleans(), packets)
def test_a_search_stopped_after_some_steps_returns_a_fitting_superset_no_narrower_than_the_full_search(
        monkeypatch, rules, after, timed, pkts):
    """Without a time bound the bisection keeps the narrowest fitting step it tried; with one, the
    widest step is tried first, so any stop has an answer. Either is a superset that fits."""
    ruleset = ast.RuleSet(tuple(rules))
    exact = compile_rules(SPEC, ruleset, CompileOptions(delivery="bitmap", lanes=1))
    options = CompileOptions(delivery="bitmap", lanes=1, budget=Budget(entries=max(1, exact.stats["total_entries"] // 3)))
    full = compile_rules(SPEC, ruleset, options)
    with monkeypatch.context() as m, limits.bounded(3600 if timed else None, None):
        _tripping_lanes(m, set(range(after + 1, 100)))
        try:
            stopped = compile_rules(SPEC, ruleset, options)
        except limits.OutOfBudget as exc:
            assert not timed or full.stats["exact"]  # timed: the widest step answered before any stop
            assert "before any widening step fitted" in exc.message and "exact layout" in exc.message
            return
    assert not stopped.stats["budget_misses"]
    if "search_stopped" in stopped.stats:
        assert _dropped(stopped) >= _dropped(full)
        assert any(n.startswith("search stopped: the time budget") for n in stopped.stats["layout_notes"])
    elif not timed:  # the search ended within the calls it had: the same answer as without a bound
        assert stopped.stats.get("approximation") == full.stats.get("approximation")
    # Timed and not stopped: the search went from the wide end and may end on another fitting step
    # (a diagram's size is not monotone along the steps: dropping a constraint can grow it).
    for pkt, ports in zip(pkts, _delivered(stopped, pkts)):
        assert oracle.evaluate(stopped.typed, pkt).ports <= ports  # widened, never a missed delivery


def test_an_exact_layout_that_takes_half_the_time_budget_leaves_the_rest_to_the_widening(monkeypatch):
    rules = ast.RuleSet(tuple(ast.Rule(ast.And((ast.Comparison(ast.Field("s.a0"), ">", ast.Number(v)),
                                                 ast.Comparison(ast.Field("s.a1"), "<", ast.Number(255 - v)))),
                                       (ast.Forward((v % 5 + 1,)),)) for v in range(0, 200, 7)))
    options = CompileOptions(delivery="bitmap", lanes=1, budget=Budget(entries=20))
    with monkeypatch.context() as m, limits.bounded(3600, None):
        _tripping_lanes(m, {1})  # the exact layout's share runs out
        got = compile_rules(SPEC, rules, options)
    assert "bitmap exact: not finished in half the time budget" in got.stats["layout_notes"]
    assert not got.stats["budget_misses"] and not got.stats["exact"]
    with monkeypatch.context() as m, limits.bounded(3600, None), pytest.raises(limits.OutOfBudget):
        _tripping_lanes(m, {1})
        compile_rules(SPEC, rules, dataclasses_replace(options, exact=True))  # --exact: nothing else to try


def test_a_bound_that_runs_out_before_anything_fits_names_what_missed_and_the_costliest_rules(capsys, tmp_path):
    out = tmp_path / "o"
    assert main(["compile", ITCH, ITCH_RULES, "--budget", "time=0.000001", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the time budget of 1e-06 s ran out" in err and "no layout fitted yet" in err
    assert "thresholds only one rule uses, by field: add_order." in err and "rules.sub:" in err
    assert "raise --budget time=SECONDS" in err and "Traceback" not in err
    assert not out.exists()


def test_a_memory_ceiling_below_what_the_compile_needs_is_exit_2_and_writes_nothing(tmp_path):
    """As a user runs it (its own process: the watcher's signal goes to that process's main thread)."""
    import subprocess
    import sys

    rules, out = tmp_path / "r.sub", tmp_path / "o"
    assert main(["gen", "rules", "--workload", "itch", "--filters", "1000", "-o", str(rules)]) == 0
    done = subprocess.run([sys.executable, "-m", "p4sub", "compile", ITCH, str(rules), "--budget", "memory=1M",
                           "-o", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the memory ceiling of 1 MB was reached" in done.stderr and "raise --budget memory=SIZE" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


# -- which rules cost most ------------------------------------------------------------------------

SMALL = make_spec({"s.a0": (6, {}), "s.a1": (6, {})})


def _holds(op: str, x: int, c: int) -> bool:
    return {"==": x == c, "!=": x != c, "<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c}[op]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["s.a0", "s.a1"]), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
                                   st.integers(0, 63)), min_size=1, max_size=3), min_size=1, max_size=8))
def test_a_rules_own_thresholds_are_the_points_where_only_its_comparisons_change(spec_rules):
    rules = ast.RuleSet(tuple(
        ast.Rule(ast.And(tuple(ast.Comparison(ast.Field(f), op, ast.Number(c)) for f, op, c in parts))
                 if len(parts) > 1 else ast.Comparison(ast.Field(parts[0][0]), parts[0][1], ast.Number(parts[0][2])),
                 (ast.Forward((1,)),)) for parts in spec_rules))
    costs = {c.index: c.own for c in rule_costs(check_rules(rules, SMALL))}
    # Oracle: walk each field's 64 values; a threshold is a value t (1..63) where a comparison's truth
    # differs between t - 1 and t; it is a rule's own when no other rule has a comparison changing there.
    for field in ("s.a0", "s.a1"):
        changes: dict[int, set[int]] = {}
        for i, parts in enumerate(spec_rules):
            for f, op, c in parts:
                if f == field:
                    for t in range(1, 64):
                        if _holds(op, t - 1, c) != _holds(op, t, c):
                            changes.setdefault(t, set()).add(i)
        for i in range(len(spec_rules)):
            own = sum(1 for who in changes.values() if who == {i})
            assert costs[i].get(field, 0) == own, (field, i, spec_rules, costs)


def test_costliest_names_the_rules_with_most_thresholds_of_their_own():
    rules = ast.RuleSet((
        ast.Rule(ast.Comparison(ast.Field("s.a0"), ">", ast.Number(5)), (ast.Forward((1,)),)),
        ast.Rule(ast.Comparison(ast.Field("s.a0"), ">", ast.Number(5)), (ast.Forward((2,)),)),
        ast.Rule(ast.And((ast.Comparison(ast.Field("s.a0"), "==", ast.Number(9)),
                          ast.Comparison(ast.Field("s.a1"), "<", ast.Number(30)))), (ast.Forward((3,)),)),
    ))
    text = costliest(check_rules(rules, SMALL), count=1)
    assert "rule 3" in text and "s.a0 == 9 and s.a1 < 30" in text
