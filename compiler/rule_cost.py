"""Which rules make a layout big: the ones a refusal should name.

A field table has an entry (or a TCAM range, or a code) per threshold that some rule puts on that
field; a threshold only one rule uses exists because of that rule, and removing or widening the rule
removes it. So a rule's cost here is the thresholds it alone contributes, field by field. This is a
cause a user can act on (relax the rule, share the bound with other rules, coarsen the field), not
an exact share of the entries: how many entries a threshold costs depends on the paths through the
diagram that reach it, which only building it tells.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from compiler.intervals import comparison_intervals
from compiler.rules import TypedRules, comparisons


@dataclass(frozen=True)
class RuleCost:
    index: int
    own: dict[str, int]  # field -> thresholds only this rule puts on it

    @property
    def total(self) -> int:
        return sum(self.own.values())


def rule_costs(typed: TypedRules) -> list[RuleCost]:
    """Every rule's own thresholds, costliest first (ties in file order)."""
    cuts_of: list[dict[str, set[int]]] = []
    users: dict[str, Counter] = {}
    for rule in typed.rules.rules:
        mine: dict[str, set[int]] = {}
        for cmp in comparisons(rule.filter):
            info = typed.fields.get(cmp.attribute.name)
            if info is None:
                continue  # state variables and aggregates: not a field table's thresholds
            cuts = mine.setdefault(cmp.attribute.name, set())
            top = (1 << info.width) - 1
            for lo, hi in comparison_intervals(cmp, info):
                # A value where the comparison's truth changes; the domain's ends are none.
                cuts.update(c for c in (lo, hi + 1) if 0 < c <= top)
        for name, cuts in mine.items():
            users.setdefault(name, Counter()).update(cuts)
        cuts_of.append(mine)
    costs = [RuleCost(i, {f: n for f, cuts in mine.items() if (n := sum(1 for c in cuts if users[f][c] == 1))})
             for i, mine in enumerate(cuts_of)]
    return sorted(costs, key=lambda c: (-c.total, c.index))


def costliest(typed: TypedRules, count: int = 5) -> str:
    """The ``count`` costliest rules in words (location, rule, own thresholds), or "" when no rule
    has a threshold of its own."""
    costs = rule_costs(typed)
    shown = [c for c in costs[:count] if c.total]
    if not shown:
        return ""
    rules = typed.rules.rules
    parts = []
    for c in shown:
        rule = rules[c.index]
        where = f"{rule.location}" if rule.location else f"rule {c.index + 1}"
        text = str(rule).rstrip(";")
        text = text if len(text) <= 80 else text[:77] + "..."
        own = ", ".join(f"{n} on {f}" for f, n in sorted(c.own.items(), key=lambda kv: -kv[1]))
        parts.append(f"{where} ({text}: {own})")
    fields: Counter = Counter()
    for c in costs:
        fields.update(c.own)
    spread = ", ".join(f"{f} {n}" for f, n in fields.most_common(3))
    alike = sum(1 for c in costs if c.total == shown[0].total)
    head = (f"{alike} rules add {shown[0].total} each, for example " if alike > len(shown)
            else "the rules with most of their own: ")
    return f"thresholds only one rule uses, by field: {spread}; " + head + "; ".join(parts)
