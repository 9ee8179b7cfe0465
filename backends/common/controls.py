"""Actions and tables of the IR as P4_16 declarations (shared by every P4 target).

Names follow :mod:`backends.common.names`: every table, action and key carries a ``@name`` so the
P4Info names are the IR's. Target-specific primitives (egress port, multicast group, drop) are
spelled by the :class:`~backends.common.target.TargetFacts`; ``set_meta`` and ``user`` are common:

* ``set_meta(meta.x, p)`` -> ``meta.x = p;``
* ``or_meta(meta.x, p)`` -> ``meta.x = meta.x | p;`` (a port bitmap)
* ``user(name)`` -> ``meta.p4sub_call_<name> = 1;`` and ``meta.p4sub_call_<name>_<param> = <param>;``
  for each parameter. The spec declares a user action's name and argument widths but no body, so
  the program records the call (a flag and the arguments in metadata) for code placed after the
  p4sub pipeline to act on; see :func:`user_call_members`.
"""

from __future__ import annotations

from typing import Callable

from compiler import ir

from backends.common.headers import INDENT, Member, bits
from backends.common.literals import literal
from backends.common.names import META, NO_ACTION, field_expression, identifier, meta_member, name_annotation
from backends.common.target import TargetFacts

KeyExpression = Callable[[ir.Key], str]


def call_flag(name: str) -> str:
    """The metadata member flagging that user action ``name`` was called."""
    return f"p4sub_call_{identifier(name)}"


def call_arg(name: str, param: str) -> str:
    return f"p4sub_call_{identifier(name)}_{identifier(param)}"


def user_call_members(pipeline: ir.Pipeline) -> list[Member]:
    """Metadata members that record user-action calls (a 1-bit flag and one member per argument)."""
    out: list[Member] = []
    for action in pipeline.actions:
        for prim in action.body:
            if prim.op == "user":
                out.append(Member(bits(1), call_flag(prim.args[0])))
                out.extend(Member(bits(p.width), call_arg(prim.args[0], p.name)) for p in action.params)
    return out


def pipeline_metadata_members(pipeline: ir.Pipeline) -> list[Member]:
    """The IR's metadata (``meta.p4sub_state``, ``meta.p4sub_code_*``) as struct members."""
    return [Member(bits(m.width), meta_member(m.name)) for m in pipeline.metadata]


def action_body(action: ir.Action, target: TargetFacts, *, meta: str = META) -> list[str]:
    out: list[str] = []
    for prim in action.body:
        if prim.op == "set_meta":
            out.append(f"{field_expression(prim.args[0], meta=meta)} = {identifier(prim.args[1])};")
        elif prim.op == "or_meta":
            target = field_expression(prim.args[0], meta=meta)
            out.append(f"{target} = {target} | {identifier(prim.args[1])};")
        elif prim.op == "user":
            name = prim.args[0]
            out.append(f"{meta}.{call_flag(name)} = 1w1;")
            out.extend(f"{meta}.{call_arg(name, p.name)} = {identifier(p.name)};" for p in action.params)
        else:
            out.append(target.spell(ir.Primitive(prim.op, tuple(identifier(a) for a in prim.args))))
    return out


def action_decl(action: ir.Action, target: TargetFacts, *, meta: str = META) -> str:
    """``@name("forward") action forward(bit<9> port) { ... }``."""
    params = ", ".join(f"{bits(p.width)} {identifier(p.name)}" for p in action.params)
    head = f"{name_annotation(action.name)} action {identifier(action.name)}({params}) {{"
    body = action_body(action, target, meta=meta)
    return "\n".join([head] + [INDENT + line for line in body] + ["}"])


def action_decls(pipeline: ir.Pipeline, target: TargetFacts, *, meta: str = META) -> list[str]:
    """Every action of the IR except ``NoAction`` (which ``core.p4`` declares)."""
    return [action_decl(a, target, meta=meta) for a in pipeline.actions if a.name != NO_ACTION]


def default_action_call(table: ir.Table, pipeline: ir.Pipeline) -> str:
    """``NoAction()`` or ``set_code_x(8w0)``: the default action with its arguments as sized literals."""
    if table.default_action == NO_ACTION:
        return f"{NO_ACTION}()"
    action = pipeline.action(table.default_action)
    args = list(table.default_args) + [0] * (len(action.params) - len(table.default_args))
    lits = ", ".join(literal(a, p.width) for a, p in zip(args, action.params))
    return f"{identifier(action.name)}({lits})"


def table_decl(table: ir.Table, pipeline: ir.Pipeline, key_expression: KeyExpression, *,
               size: int | None = None, extra: tuple[str, ...] = ()) -> str:
    """A table declaration: keys with ``@name``, actions, default action, size.

    ``key_expression`` maps an IR key to the P4 expression the table matches (a header field,
    metadata, or a copy of a stacked field); ``extra`` lines go after ``size`` (target pragmas).
    """
    lines = [f"{name_annotation(table.name)} table {identifier(table.name)} {{"]
    if table.keys:
        lines.append(f"{INDENT}key = {{")
        for key in table.keys:
            lines.append(f"{INDENT * 2}{key_expression(key)} : {key.match_kind} {name_annotation(key.field)};")
        lines.append(f"{INDENT}}}")
    lines.append(f"{INDENT}actions = {{")
    for name in table.actions:
        lines.append(f"{INDENT * 2}{identifier(name) if name != NO_ACTION else NO_ACTION};")
    lines.append(f"{INDENT}}}")
    lines.append(f"{INDENT}default_action = {default_action_call(table, pipeline)};")
    lines.append(f"{INDENT}size = {size if size is not None else table.size};")
    lines.extend(INDENT + e for e in extra)
    lines.append("}")
    return "\n".join(lines)


def apply_statements(pipeline: ir.Pipeline, *, order: tuple[str, ...] | None = None,
                     on_hit: dict[str, str] | None = None) -> list[str]:
    """The control's apply block for the IR's table order, misses chained:

    ``if (!t.apply().hit) { t_miss.apply(); }`` for a table with ``on_miss`` (recursively), else
    ``t.apply();``, or ``if (t.apply().hit) { S }`` for a table that ``on_hit`` gives a statement
    ``S`` (include mode records that the leaf table claimed the packet).
    """
    def chain(name: str, depth: int) -> list[str]:
        table = pipeline.table(name)
        pad = INDENT * depth
        if on_hit and name in on_hit and not table.on_miss:
            return [f"{pad}if ({identifier(name)}.apply().hit) {{ {on_hit[name]} }}"]
        if not table.on_miss:
            return [f"{pad}{identifier(name)}.apply();"]
        return ([f"{pad}if (!{identifier(name)}.apply().hit) {{"] + chain(table.on_miss, depth + 1)
                + [f"{pad}}}"])

    out: list[str] = []
    for name in order if order is not None else pipeline.control:
        out.extend(chain(name, 0))
    return out


def chained_tables(pipeline: ir.Pipeline) -> list[ir.Table]:
    """Every table the control applies (``control``, their ``on_miss`` chains, then the default path's),
    in apply order."""
    seen: list[ir.Table] = []

    def visit(name: str) -> None:
        table = pipeline.table(name)
        seen.append(table)
        if table.on_miss:
            visit(table.on_miss)

    for name in pipeline.control + pipeline.default_control:
        visit(name)
    return seen
