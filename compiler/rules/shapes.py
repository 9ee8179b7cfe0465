"""The Rule of a usual rule, built by Python code compiled once for each shape of rule.

compiler/rules/fastparse.py reads the usual rule with one regular-expression match: for each of its
slots (an atom: a comparison or ``true``/``false``) the groups hold the ``and``/``or`` before it,
the ``not``s and ``(``s before it, its operands and operator, or its ``true``/``false``, and the
``)``s after it; then the actions. The Rule the match stands for depends only on some of them: the
joins, the text of the ``not``/``(`` runs, which atoms are ``true``/``false``, the kinds of the
operands (a constant, a field, an aggregate, a bare name), the ``)`` runs and the kinds of the
actions. That is the rule's *shape*; the names, operators, constants and offsets only fill the
tree in. A file of 100,000 rules has a handful of shapes. :class:`Layout` says where a regex puts
each group (``USUAL``: _RULE's field-against-constant slots; ``OPERANDS``: _OPERAND_RULE's).

So the parentheses are matched once per shape, here, by the algorithm of the grammar's
transformer (``and`` binds tighter than ``or``; a parenthesised ``and``/``or`` flattened into a
parent of its kind; a node made of several operands located at the first token of its first
operand, a ``(`` or a ``not`` included), the comparisons oriented as rule_build.orient does, and
the result is written out as a straight-line Python function that makes the nodes from the match's
groups: no loop, no stack, no test but the constant's kind. Interpreting the groups rule by rule
cost about twice as much as making the nodes; a shape's builder costs about a third of a
millisecond to compile.

Shapes that the match cannot stand for (a ``)`` with no ``(``, a ``(`` never closed, nesting
deeper than fastparse lets the match read, two constants or two attributes compared: the grammar
words that error) have no builder: fastparse reads such rules token by token. So do rules once
:data:`MAX_SHAPES` shapes are known (a file written to have a new shape in every rule would
otherwise compile a function a rule).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Callable

from compiler.base import SourceLocation
from compiler.rules import build as rule_build
from compiler.rules import nodes as ast

MAX_SHAPES = 4096
_COMMENT = re.compile(r"(?:#|//)[^\n]*")
_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}  # else prefix, in any case

Offset = tuple[int, int]  # (group number, characters into the group): where a token starts
Builder = Callable[..., "ast.Rule | None"]
# The kinds of operand ("lit" a constant, "field", "agg" an aggregate, "var" a bare name), and the
# group each starts with.
_ROLE = {"lit": "lit", "field": "field", "agg": "fn", "var": "var"}


@dataclass(frozen=True, eq=False)
class Layout:
    """Where a regex of the usual rule puts each slot's groups, and what its shape holds per slot.

    ``roles`` gives each group's place among its slot's ``slot_groups`` (from 1): ``join`` (the
    and/or before the slot), ``prefix`` (the not/'(' run), ``truth``, ``closes`` (the ')' run),
    ``op``, and per operand (``l_`` left, ``r_`` right) the groups of the kinds it may be:
    ``lit``, ``field``, ``fn`` and ``arg`` (an aggregate), ``var``. A shape holds per slot its join,
    prefix, truth and closes, then, where ``kinds`` is None, the two operands' kinds; where
    ``kinds`` is given, every comparison is of those kinds."""

    slot_groups: int
    roles: dict[str, int]
    kinds: tuple[str, str] | None = None
    tables: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))  # builders by shape: on several lines, on one

    @property
    def per_slot(self) -> int:
        return 4 if self.kinds else 6

    def group(self, slot: int, role: str) -> int:
        return self.slot_groups * slot + self.roles[role]

    def slots(self, shape: tuple) -> int:
        return (len(shape) - 7) // self.per_slot

    def operands(self, shape: tuple, slot: int) -> tuple[str, str]:
        if self.kinds:
            return self.kinds
        at = self.per_slot * slot + 4
        return shape[at], shape[at + 1]


#: _RULE's slots: ``h.f OP constant`` or true/false.
USUAL = Layout(7, {"join": 1, "prefix": 2, "l_field": 3, "op": 4, "r_lit": 5, "truth": 6, "closes": 7}, ("field", "lit"))
#: _OPERAND_RULE's slots: ``operand OP operand``, either operand of any kind.
OPERANDS = Layout(15, {"join": 1, "prefix": 2, "l_lit": 3, "l_field": 4, "l_fn": 5, "l_arg": 6, "l_var": 7, "op": 8,
                       "r_lit": 9, "r_field": 10, "r_fn": 11, "r_arg": 12, "r_var": 13, "truth": 14, "closes": 15})


def action_groups(layout: Layout, slots: int) -> tuple[int, int, int]:
    """The group numbers (from 1) of the first action's ``fwd``, of the second's, and of the text of
    any more actions, after ``slots`` slots (each action: ``fwd``, its ports, ``drop``, a user
    action's name, its arguments)."""
    first = layout.slot_groups * slots + 1
    return first, first + 5, first + 10


def own_slots(shape: tuple) -> tuple:
    """A USUAL shape without the slots the rule leaves empty (the shape of a regex of as many slots
    as the rule has atoms: compiler/rules/fastparse.py's _shape_regex)."""
    n = 1
    while n < USUAL.slots(shape) and shape[4 * n] is not None:
        n += 1
    return shape[:4 * n] + shape[-7:]


def shape_of(slots: int) -> Callable[[tuple], tuple]:
    """The function from a USUAL match's groups (``m.groups()``) to its shape: per slot, the join,
    the ``not``/``(`` run, the ``true``/``false`` and the ``)`` run; then per action (two) its
    ``fwd``, ``drop`` and user action's name, and whether more actions follow (an empty group
    among them)."""
    first, second, more = action_groups(USUAL, slots)
    return itemgetter(*(USUAL.group(k, role) - 1 for k in range(slots) for role in ("join", "prefix", "truth", "closes")),
                      *(w + i for w in (first, second) for i in (-1, 1, 2)), more)


def operand_kind(groups: tuple, slot: int, side: str) -> str | None:
    """The kind of an OPERANDS match's operand (None in a true/false slot)."""
    for kind in ("lit", "field", "agg", "var"):
        if groups[OPERANDS.group(slot, f"{side}_{_ROLE[kind]}") - 1] is not None:
            return kind
    return None


def operands_shape(groups: tuple, slots: int) -> tuple:
    """The shape of an OPERANDS match of ``slots`` slots, with only the slots the rule fills."""
    out: list = []
    for k in range(slots):
        join = groups[OPERANDS.group(k, "join") - 1]
        if k and join is None:
            break
        out += [join, groups[OPERANDS.group(k, "prefix") - 1], groups[OPERANDS.group(k, "truth") - 1],
                groups[OPERANDS.group(k, "closes") - 1], operand_kind(groups, k, "l"), operand_kind(groups, k, "r")]
    first, second, more = action_groups(OPERANDS, slots)
    return (*out, *(groups[w + i] for w in (first, second) for i in (-1, 1, 2)), groups[more])


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


def _left(layout: Layout, shape: tuple, slot: int) -> Offset:
    """Where a slot's atom starts: its true/false, or its left operand."""
    if shape[layout.per_slot * slot + 2] is not None:
        return layout.group(slot, "truth"), 0
    return layout.group(slot, "l_" + _ROLE[layout.operands(shape, slot)[0]]), 0


def tree(layout: Layout, shape: tuple, max_depth: int) -> tuple[_Node, Offset] | None:
    """The filter a shape stands for and the rule's location, or None if the match cannot stand
    for it (unbalanced parentheses, deeper than ``max_depth`` as fastparse counts lark's tree, a
    comparison of two attributes or two constants: the grammar words those errors)."""
    first: Offset = (layout.group(0, "prefix"), 0) if shape[1] else _left(layout, shape, 0)
    ors: list[_Node] = []
    ands: list[_Node] = []
    or_start = and_start = first
    opened: list[tuple] = []  # the groups around the innermost one, each with the nots before its '('
    depth = 0
    for k in range(layout.slots(shape)):
        join, prefix, truth, closes = shape[layout.per_slot * k:layout.per_slot * k + 4]
        if k and join is None:  # no slot k: the rule has k atoms
            break
        prefix_group = layout.group(k, "prefix")
        if join and join[0] not in "aA&^∧":  # or: and binds tighter
            ors.append(_junction("and", ands, and_start))
            ands = []
        nots: list[Offset] = []
        for i, c in enumerate(_COMMENT.sub(lambda c: " " * len(c.group()), prefix or "")):
            if c == "(":
                if not ands:
                    and_start = nots[0] if nots else (prefix_group, i)
                    if not ors:
                        or_start = and_start
                depth += 2 + len(nots)
                if depth > max_depth:
                    return None
                opened.append((ors, ands, or_start, and_start, nots))
                ors, ands, nots = [], [], []
            elif c in "!¬nN":  # the first character of a not
                nots.append((prefix_group, i))
        if truth is None:
            left, right = layout.operands(shape, k)
            if left == right == "lit" or (left in ("field", "agg") and right in ("field", "agg")):
                return None  # two constants, or two attributes (a bare name may be a string)
            item = _Node("cmp", slot=k, at=_left(layout, shape, k))
        else:
            item = _Node("const", slot=k, at=_left(layout, shape, k), value=truth[0] in "tT")
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


def source(layout: Layout, shape: tuple, root: _Node, first: Offset, oneline: bool) -> str:
    """``build(m, g, s, path, line, before, loc, lit, act, more)``: the Rule of a match ``m`` (its
    groups ``g``, its ``start`` method ``s``); locations made as ``loc(offset)`` or, for a rule on
    one line, directly from its line and the offset of the line's start (``before``). None where a
    constant, an aggregate or an action is one the grammar must read: ``lit`` (a constant), ``act``
    (an action, after its groups' offset) and ``more`` (the actions after the second) return None
    for those."""
    slots = layout.slots(shape)
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

    def attribute(slot: int, side: str, kind: str) -> str:
        """The code of an attribute operand; its node's name."""
        n = f"x{next(counter)}"
        if kind == "agg":
            fn, arg = layout.group(slot, f"{side}_fn"), layout.group(slot, f"{side}_arg")
            lines.extend([f"f = g[{fn - 1}].lower()", "if f not in AGGREGATES: return None", f"a = g[{arg - 1}]",
                          f"{n} = Aggregate(f, (Field if '.' in a else StateVar)(a, {location((arg, 0))}), {location((fn, 0))})"])
        else:
            group = layout.group(slot, f"{side}_{kind}")
            lines.append(f"{n} = {'Field' if kind == 'field' else 'StateVar'}(g[{group - 1}], {location((group, 0))})")
        return n

    def constant(slot: int, side: str, kind: str) -> str:
        """The code of a constant operand (a bare name is a string); its node's name."""
        n = f"v{next(counter)}"
        group = layout.group(slot, f"{side}_{kind}")
        value_at = location((group, 0))
        if kind == "var":
            lines.append(f"{n} = String(g[{group - 1}], {value_at})")
            return n
        lines.extend([
            f"t = g[{group - 1}]",
            f"if t[0] == '\"' and '\\\\' not in t: {n} = String(t[1:-1], {value_at})",
            f"elif t.isdigit() and len(t) <= MAX_DIGITS: {n} = Number(int(t), False, {value_at})",
            f"elif t.count('.') == 1 and t[0].isdigit() and len(t) <= MAX_DIGITS: {n} = Number(Decimal(t), False, {value_at})",
            "else:",
            f"    {n} = lit(t, {value_at})",
            f"    if {n} is None: return None",
        ])
        return n

    def comparison(node: _Node) -> str:
        """rule_build.orient, decided here from the operands' kinds: ``attribute OP constant``, a bare
        name facing an attribute a string, ``constant OP attribute`` turned round."""
        k = node.slot
        left, right = layout.operands(shape, k)
        flipped = left == "lit" or (left == "var" and right in ("field", "agg"))
        if flipped:
            value, attr = constant(k, "l", left), attribute(k, "r", right)
        else:
            attr, value = attribute(k, "l", left), constant(k, "r", right)
        n = f"n{next(counter)}"
        op = f"OPS.get(g[{layout.group(k, 'op') - 1}], 'prefix')"
        if flipped:
            lines.extend([f"o = {op}", "if o == 'prefix': return None"])
            op = "FLIPPED[o]"
        lines.append(f"{n} = Comparison({attr}, {op}, {value}, {location(node.at)})")
        return n

    def emit(node: _Node) -> str:
        if node.kind == "cmp":
            return comparison(node)
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
    first_group, second_group, more_group = action_groups(layout, slots)
    kinds = shape[-7:-1]
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


_NAMESPACE = {"Decimal": Decimal, "Location": SourceLocation, "String": ast.String, "Number": ast.Number,
              "Comparison": ast.Comparison, "Field": ast.Field, "StateVar": ast.StateVar, "Aggregate": ast.Aggregate,
              "AGGREGATES": ast.AGGREGATES, "FLIPPED": ast.FLIPPED, "Const": ast.Const, "Not": ast.Not, "And": ast.And,
              "Or": ast.Or, "OPS": _OPS, "Forward": ast.Forward, "Drop": ast.Drop, "Call": ast.Call, "Rule": ast.Rule,
              "merge": rule_build.merge_actions}


def compile_builder(layout: Layout, shape: tuple, oneline: bool, max_depth: int, max_digits: int) -> Builder | None:
    """The builder of a shape (see :func:`source`), or None if the match cannot stand for it."""
    made = tree(layout, shape, max_depth)
    if made is None:
        return None
    namespace = dict(_NAMESPACE, MAX_DIGITS=max_digits)
    exec(compile(source(layout, shape, *made, oneline), f"<rule shape {known()}>", "exec"), namespace)
    return namespace["build"]


def known() -> int:
    """How many shapes have been met (with a builder or without)."""
    return sum(len(table) for layout in (USUAL, OPERANDS) for table in layout.tables)


def builder(layout: Layout, shape: tuple, oneline: bool, max_depth: int, max_digits: int) -> Builder | None:
    """The builder of a shape, compiled on first use; None also once MAX_SHAPES shapes are known.
    (Look the shape up in ``layout.tables[oneline]`` first: this is the slow way.)"""
    table = layout.tables[oneline]
    if shape in table:
        return table[shape]
    if known() >= MAX_SHAPES:
        return None
    made = table[shape] = compile_builder(layout, shape, oneline, max_depth, max_digits)
    return made
