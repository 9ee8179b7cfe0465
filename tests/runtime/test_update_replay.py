"""Replay across an update (runtime/update_replay.py): messages that arrive while the writes land.

With the hitless plan's writes no message misses a port that both the old and the new rules want,
and every message is delivered exactly as the old or the new rules say; the same update written as
an ordinary install writes its delta (entries modified in place, freed state ids reused) is caught
delivering messages half-updated, which shows the replay can see what it counts.
"""

from __future__ import annotations

import random

import numpy as np

from compiler import rules as ast
from compiler.compile import CompileOptions
from compiler.incremental import Incremental, hitless
from compiler.rules.typecheck import check_rules
from compiler.rules.values import encode_string
from compiler.tables import TableOptions
from runtime.update_replay import delta_writes, replay_across
from tests.compiler.incremental.test_incremental import _itch
from tests.compiler.test_compile_property import SPEC, SYMS


def messages(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = random.Random(seed)
    return {"m.sym": np.array([encode_string(rng.choice(SYMS), 32) for _ in range(n)], dtype=np.uint64),
            "m.px": np.array([rng.randrange(0, 16000) for _ in range(n)], dtype=np.uint64)}


def test_a_replay_across_a_hitless_update_has_no_false_negatives_and_a_plain_one_does() -> None:
    rules = _itch(120, 1)
    inc = Incremental.compile(SPEC, ast.RuleSet(tuple(rules)), CompileOptions(
        delivery="groups", tables=TableOptions(min_state_bits=10)))
    old, old_typed = inc.pipeline(), check_rules(inc.rule_set(), SPEC)
    inc.update(add=_itch(30, 2), remove=rules[:30])
    new, new_typed = inc.pipeline(), check_rules(inc.rule_set(), SPEC)
    cols = messages(6000, 3)
    plan = hitless.plan(old, new)
    writes = [w for s in plan.steps for w in s.writes]
    safe = replay_across(old, new, old_typed, new_typed, cols, writes, start=1000, gap=20)
    assert safe.during > 1000 and safe.writes == len(writes)
    assert safe.false_negatives == 0 and safe.neither == 0, safe
    assert safe.judged_old and safe.judged_new
    plain = replay_across(old, new, old_typed, new_typed, cols, delta_writes(old, new), start=1000, gap=20)
    assert plain.false_negatives > 0 and plain.neither > 0, plain
