"""Delivery trees carry stateless rules only: a stateful rule is refused where a tree is planned.

The header-stack and VT programs (backends ``stack_program``, ``vt_program``) classify at the
ingress switch into receiver sets and keep no counter registers, so a rule testing ``rate`` or
``avg(...)`` there had no program to run it (issue 27: a traceback in the backend, or without a
target a plan whose counters nothing updates). Route stateful rules with the default filter
delivery, where each rule's last hop counts and judges (docs/compiler.md, "Where state lives").
"""

from __future__ import annotations

from compiler import rules as ast
from compiler.base import CompileError
from compiler.stateful import is_stateful


def refuse_state(rules: ast.RuleSet, delivery: str) -> None:
    """CompileError at the first comparison of ``rules`` that reads a counter, naming ``delivery``."""
    for rule in rules.rules:
        for cmp in ast.comparisons(rule.filter):
            if is_stateful(cmp.attribute):
                raise CompileError(
                    f"{cmp.attribute} reads a counter: stateful rules are routed only with the default "
                    f"--delivery filters ({delivery} programs keep no counters); route them without --delivery",
                    cmp.location)
