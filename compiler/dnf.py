"""Rules to disjunctive normal form over canonical per-field interval sets.

A *cube* is a conjunction: at most one :class:`IntervalSet` per attribute (several constraints on
one field are intersected, so ``f > 10 and not (f > 5)`` is found empty here, not compiled into an
entry that over-matches). Negations are pushed to the atoms, where they are exact complements.
The blow-up of distributing ``and`` over ``or`` is guarded: a rule whose DNF would pass ``limit``
cubes is an error that names the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import rules as ast
from compiler.base import CompileError
from compiler.predicates import IntervalSet, atom
from compiler.spec import QueryField

DEFAULT_LIMIT = 4096

Cube = tuple[tuple[str, IntervalSet], ...]  # sorted by attribute name


@dataclass(frozen=True)
class ActionSet:
    """What a packet gets when some rules match: the union of their ports and user-action calls.

    ``drop`` contributes nothing: a packet that no rule forwards anywhere is dropped, so an explicit
    ``drop`` only states that intent (and merging it with another rule's ``fwd`` keeps the ports).
    """

    ports: frozenset[int] = frozenset()
    calls: frozenset[tuple[str, tuple[int, ...]]] = frozenset()

    def __or__(self, other: "ActionSet") -> "ActionSet":
        return ActionSet(self.ports | other.ports, self.calls | other.calls)

    @property
    def is_empty(self) -> bool:
        return not self.ports and not self.calls

    def __str__(self) -> str:
        parts = [f"fwd({', '.join(map(str, sorted(self.ports)))})"] if self.ports else []
        parts += [f"{name}({', '.join(map(str, args))})" for name, args in sorted(self.calls)]
        return ", ".join(parts) or "drop"


def rule_actions(rule: ast.Rule) -> ActionSet:
    if all(type(a) is not ast.Call for a in rule.actions):
        return ActionSet(frozenset(rule.ports))
    calls = frozenset((a.name, tuple(int(x.value) for x in a.args)) for a in rule.actions if isinstance(a, ast.Call))
    return ActionSet(frozenset(rule.ports), calls)


def to_dnf(rule: ast.Rule, fields: dict[str, QueryField], limit: int = DEFAULT_LIMIT) -> list[Cube]:
    """The satisfiable cubes of ``rule.filter`` (duplicates removed, order kept)."""
    flat = _conjunction(rule.filter, fields)
    if flat is not None:
        return [tuple(sorted(flat.items()))] if flat else []
    cubes = _dnf(rule.filter, False, fields, limit, rule)
    seen: dict[Cube, None] = {}
    for cube in cubes:
        seen.setdefault(tuple(sorted(cube.items(), key=lambda kv: kv[0])), None)
    return list(seen)


def _conjunction(f: ast.Filter, fields: dict[str, QueryField]) -> dict | None | bool:
    """Fast path for the common shape, a plain conjunction of comparisons: its cube, False if empty."""
    items = f.items if isinstance(f, ast.And) else (f,)
    cube: dict[str, IntervalSet] = {}
    for item in items:
        if not isinstance(item, ast.Comparison):
            return None
    for item in items:
        name = item.attribute.name
        s = atom(item, fields[name])
        if name in cube:
            s = cube[name].intersect(s)
        if s.is_empty:
            return False
        cube[name] = s
    return cube


def _dnf(f: ast.Filter, negated: bool, fields: dict[str, QueryField], limit: int, rule: ast.Rule) -> list[dict]:
    if isinstance(f, ast.Comparison):
        name = f.attribute.name
        s = atom(f, fields[name])
        s = s.complement() if negated else s
        return [] if s.is_empty else [{name: s}]
    if isinstance(f, ast.Const):
        return [{}] if f.value != negated else []
    if isinstance(f, ast.Not):
        return _dnf(f.item, not negated, fields, limit, rule)
    conjunctive = isinstance(f, ast.And) != negated
    parts = [_dnf(item, negated, fields, limit, rule) for item in f.items]
    if not conjunctive:
        out = [c for part in parts for c in part]
        _guard(len(out), limit, rule)
        return out
    acc: list[dict] = [{}]
    for part in parts:
        _guard(len(acc) * len(part), limit, rule)
        acc = [merged for a in acc for b in part if (merged := _conjoin(a, b)) is not None]
        if not acc:
            return []
    return acc


def _conjoin(a: dict, b: dict) -> dict | None:
    out = dict(a)
    for name, s in b.items():
        if name in out:
            s = out[name].intersect(s)
            if s.is_empty:
                return None
        out[name] = s
    return out


def _guard(size: int, limit: int, rule: ast.Rule) -> None:
    if size > limit:
        raise CompileError(f"this rule expands to more than {limit} conjunctions in disjunctive normal form; "
                           "split it into several rules or raise --dnf-limit", rule.location)
