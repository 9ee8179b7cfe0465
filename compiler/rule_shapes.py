"""The filter of a usual rule, built by Python code compiled once for each shape of rule.

compiler/fastparse.py reads the usual rule with one regular-expression match (``_RULE``): for each
of its slots (an atom: ``h.f OP constant`` or ``true``/``false``) the groups hold the ``and``/``or``
before it, the ``not``s and ``(``s before it, its field, operator and constant, or its
``true``/``false``, and the ``)``s after it. The tree the rule stands for depends only on some of
them: the joins, the text of the ``not``/``(`` runs, which atoms are ``true``/``false``, and the
``)`` runs. That is the rule's *shape*; the fields, operators, constants and offsets only fill the
tree in. A file of 100,000 rules has a handful of shapes.

So the parentheses are matched once per shape, here, by the algorithm of the grammar's
transformer (``and`` binds tighter than ``or``; a parenthesised ``and``/``or`` flattened into a
parent of its kind; a node made of several operands located at the first token of its first
operand, a ``(`` or a ``not`` included), and the result is written out as a straight-line Python
function that makes the nodes from the match's groups: no loop, no stack, no test but the
constant's kind. Interpreting the groups rule by rule cost about twice as much as making the
nodes; a shape's builder costs about a third of a millisecond to compile.

Shapes that the match cannot stand for (a ``)`` with no ``(``, a ``(`` never closed, nesting
deeper than fastparse lets the match read) have no builder: fastparse reads such rules token by
token. So do rules once :data:`MAX_SHAPES` shapes are known (a file written to have a new shape in
every rule would otherwise compile a function a rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Callable

from compiler import rule_build
from compiler import rules as ast
from compiler.errors import SourceLocation

SLOT_GROUPS = 7  # each slot's groups: and/or before it, not and '(' before it, field, operator, literal, true/false, ')' after it
MAX_SHAPES = 4096
_COMMENT = re.compile(r"(?:#|//)[^\n]*")
_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}  # else prefix, in any case

Offset = tuple[int, int]  # (group number, characters into the group): where a token starts
Builder = Callable[..., "ast.Rule | None"]


def action_groups(slots: int) -> tuple[int, int, int]:
    """The group numbers (from 1) of the first action's ``fwd``, of the second's, and of the text of
    any more actions, in a match of _RULE of ``slots`` slots (each action: ``fwd``, its ports,
    ``drop``, a user action's name, its arguments)."""
    first = SLOT_GROUPS * slots + 1
    return first, first + 5, first + 10


def slots_of(shape: tuple) -> int:
    return (len(shape) - 7) // 4


def own_slots(shape: tuple) -> tuple:
    """The shape without the slots the rule leaves empty (the shape of a regex of as many slots as
    the rule has atoms: compiler/fastparse.py's _shape_regex)."""
    n = 1
    while n < slots_of(shape) and shape[4 * n] is not None:
        n += 1
    return shape[:4 * n] + shape[-7:]


def shape_of(slots: int) -> Callable[[tuple], tuple]:
    """The function from a match's groups (``m.groups()``) to its shape: per slot, the join, the
    ``not``/``(`` run, the ``true``/``false`` and the ``)`` run; then per action (two) its ``fwd``,
    ``drop`` and user action's name, and whether more actions follow (an empty group among them)."""
    first, second, more = action_groups(slots)
    return itemgetter(*(SLOT_GROUPS * k + i for k in range(slots) for i in (0, 1, 5, 6)),
                      *(w + i for w in (first, second) for i in (-1, 1, 2)), more)


# -- the tree of a shape, at generation time --------------------------------------------------


@dataclass
class _Node:
    kind: str  # "cmp", "const", "not", "and", "or"
    slot: int = 0  # cmp, const: the slot
    at: Offset = (0, 0)  # where the node is located
    items: list["_Node"] = field(default_factory=list)  # not: one; and, or: the operands
    value: bool = False  # const


def _junction(kind: str, items: list[_Node], at: Offset) -> _Node:
    if len(items) == 1:
        return items[0]
    flat: list[_Node] = []
    for item in items:  # a parenthesised operand of the same kind is flattened into it
        flat.extend(item.items if item.kind == kind else (item,))
    return _Node(kind, at=at, items=flat)


def _negated(item: _Node, nots: list[Offset]) -> _Node:
    for at in reversed(nots):
        item = _Node("not", at=at, items=[item])
    return item


def tree(shape: tuple, max_depth: int) -> tuple[_Node, Offset] | None:
    """The filter a shape stands for and the rule's location, or None if the match cannot stand
    for it (unbalanced parentheses, deeper than ``max_depth`` as fastparse counts lark's tree)."""
    first: Offset = (2, 0) if shape[1] else (3, 0) if shape[2] is None else (6, 0)
    ors: list[_Node] = []
    ands: list[_Node] = []
    or_start = and_start = first
    opened: list[tuple] = []  # the groups around the innermost one, each with the nots before its '('
    depth = 0
    for k in range(slots_of(shape)):
        join, prefix, truth, closes = shape[4 * k:4 * k + 4]
        if k and join is None:  # no slot k: the rule has k atoms
            break
        base = SLOT_GROUPS * k
        if join and join[0] not in "aA&^∧":  # or: and binds tighter
            ors.append(_junction("and", ands, and_start))
            ands = []
        nots: list[Offset] = []
        for i, c in enumerate(_COMMENT.sub(lambda c: " " * len(c.group()), prefix or "")):
            if c == "(":
                if not ands:
                    and_start = nots[0] if nots else (base + 2, i)
                    if not ors:
                        or_start = and_start
                depth += 2 + len(nots)
                if depth > max_depth:
                    return None
                opened.append((ors, ands, or_start, and_start, nots))
                ors, ands, nots = [], [], []
            elif c in "!¬nN":  # the first character of a not
                nots.append((base + 2, i))
        if truth is None:
            item = _Node("cmp", slot=k, at=(base + 3, 0))
        else:
            item = _Node("const", slot=k, at=(base + 6, 0), value=truth[0] in "tT")
        if not ands:
            and_start = nots[0] if nots else item.at
            if not ors:
                or_start = and_start
        if depth + len(nots) > max_depth:
            return None
        ands.append(_negated(item, nots))
        for _ in range(_COMMENT.sub("", closes or "").count(")")):
            if not opened:
                return None
            ors.append(_junction("and", ands, and_start))
            item = _junction("or", ors, or_start)
            ors, ands, or_start, and_start, nots = opened.pop()
            depth -= 2 + len(nots)
            ands.append(_negated(item, nots))
    if opened:
        return None
    ors.append(_junction("and", ands, and_start))
    return _junction("or", ors, or_start), first


# -- the builder's source ---------------------------------------------------------------------


def source(shape: tuple, root: _Node, first: Offset, oneline: bool) -> str:
    """``build(m, g, s, path, line, before, loc, lit, act, more)``: the Rule of a match ``m`` (its
    groups ``g``, its ``start`` method ``s``); locations made as ``loc(offset)`` or, for a rule on
    one line, directly from its line and the offset of the line's start (``before``). None where a
    constant or an action is one the grammar must read: ``lit`` (a constant), ``act`` (an action,
    after its groups' offset) and ``more`` (the actions after the second) return None for those."""
    slots = slots_of(shape)
    lines: list[str] = []
    locations: dict[Offset, str] = {}

    def at(offset: str) -> str:
        return f"Location(path, line, {offset} - before)" if oneline else f"loc({offset})"

    def location(where: Offset) -> str:
        if where not in locations:
            group, delta = where
            var = locations[where] = f"l{len(locations)}"
            lines.append(f"{var} = {at(f's({group})' + (f' + {delta}' if delta else ''))}")
        return locations[where]

    counter = iter(range(1 << 30))

    def emit(node: _Node) -> str:
        if node.kind == "cmp":
            g = SLOT_GROUPS * node.slot  # the slot's groups in m.groups(), from 0
            where, value_at = location(node.at), location((node.at[0] + 2, 0))
            v, n = f"v{node.slot}", f"n{next(counter)}"
            lines.extend([
                f"t = g[{g + 4}]",
                f"if t[0] == '\"' and '\\\\' not in t: {v} = String(t[1:-1], {value_at})",
                f"elif t.isdigit() and len(t) <= MAX_DIGITS: {v} = Number(int(t), False, {value_at})",
                f"elif t.count('.') == 1 and t[0].isdigit() and len(t) <= MAX_DIGITS: {v} = Number(Decimal(t), False, {value_at})",
                "else:",
                f"    {v} = lit(t, {value_at})",
                f"    if {v} is None: return None",
                f"{n} = Comparison(Field(g[{g + 2}], {where}), OPS.get(g[{g + 3}], 'prefix'), {v}, {where})",
            ])
            return n
        n = f"n{next(counter)}"
        if node.kind == "const":
            lines.append(f"{n} = Const({node.value}, {location(node.at)})")
        elif node.kind == "not":
            lines.append(f"{n} = Not({emit(node.items[0])}, {location(node.at)})")
        else:
            items = [emit(item) for item in node.items]
            lines.append(f"{n} = {node.kind.capitalize()}(({', '.join(items)},), {location(node.at)})")
        return n

    def action(j: int, w: int, fwd: str | None, drop: str | None, name: str | None) -> str | None:
        """The code of action ``j`` (its 'fwd' in group ``w``): fwd(N), drop and name(N) here, others by act."""
        a = f"a{j}"
        fallback = ["else:", f"    {a} = act(m, {w - 1})", f"    if {a} is None: return None"]
        if fwd is not None:
            lines.extend([f"p = g[{w}]", f"if p.isdigit() and len(p) <= MAX_DIGITS: {a} = Forward((int(p),), {at(f's({w})')})",
                          *fallback])
        elif drop is not None:
            lines.append(f"{a} = Drop({at(f's({w + 2})')})")
        elif name is not None:
            lines.extend([f"p = g[{w + 3}]",
                          f"if p.isdigit() and len(p) <= MAX_DIGITS: "
                          f"{a} = Call(g[{w + 2}], (Number(int(p), False, {at(f's({w + 4})')}),), {at(f's({w + 3})')})",
                          *fallback])
        else:
            return None
        return a

    filt = emit(root)
    first_group, second_group, more_group = action_groups(slots)
    kinds = shape[4 * slots:4 * slots + 6]
    made = [action(0, first_group, *kinds[:3]), action(1, second_group, *kinds[3:])]
    made = [a for a in made if a is not None]
    if shape[-1] is not None:  # more actions
        lines.extend([f"rest = more(m, {more_group})", "if rest is None: return None",
                      f"actions = merge([{', '.join(made)}, *rest])"])
    elif len(made) == 1:
        lines.append(f"actions = ({made[0]},)")
    elif kinds[0] is not None and kinds[3] is None:  # fwd(...) then another kind: what merge makes of them
        lines.append(f"actions = ({made[0]}, {made[1]})")
    else:
        lines.append(f"actions = merge([{', '.join(made)}])")
    lines.append(f"return Rule({filt}, actions, {location(first)})")
    return "def build(m, g, s, path, line, before, loc, lit, act, more):\n" + "".join(f"    {line}\n" for line in lines)


_NAMESPACE = {"Decimal": Decimal, "Location": SourceLocation, "String": ast.String, "Number": ast.Number, "Comparison": ast.Comparison,
              "Field": ast.Field, "Const": ast.Const, "Not": ast.Not, "And": ast.And, "Or": ast.Or, "OPS": _OPS,
              "Forward": ast.Forward, "Drop": ast.Drop, "Call": ast.Call, "Rule": ast.Rule, "merge": rule_build.merge_actions}


def compile_builder(shape: tuple, oneline: bool, max_depth: int, max_digits: int) -> Builder | None:
    """The builder of a shape (see :func:`source`), or None if the match cannot stand for it."""
    made = tree(shape, max_depth)
    if made is None:
        return None
    namespace = dict(_NAMESPACE, MAX_DIGITS=max_digits)
    exec(compile(source(shape, *made, oneline), f"<rule shape {len(_BUILT[0]) + len(_BUILT[1])}>", "exec"), namespace)
    return namespace["build"]


_BUILT: tuple[dict, dict] = ({}, {})  # for rules on several lines, on one line: shape -> builder, for every file read


def built(oneline: bool) -> dict[tuple, Builder | None]:
    """The builders compiled so far (None for a shape without one), to look up before :func:`builder`."""
    return _BUILT[oneline]


def builder(shape: tuple, oneline: bool, max_depth: int, max_digits: int) -> Builder | None:
    """The builder of a shape, compiled on first use; None also once MAX_SHAPES shapes are known."""
    table = _BUILT[oneline]
    if shape in table:
        return table[shape]
    if len(_BUILT[0]) + len(_BUILT[1]) >= MAX_SHAPES:
        return None
    made = table[shape] = compile_builder(shape, oneline, max_depth, max_digits)
    return made
