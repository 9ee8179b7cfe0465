"""Ground truth: evaluate the rules themselves on one message, with no diagram and no interval sets.

This is the oracle that property tests and trace replay compare compiled pipelines against, so it
shares no code with the compiler's normalisation: each comparison is evaluated on the value as the
operator reads, with the constant encoded by :mod:`compiler.rules.values` (the one encoding every part
must agree on).
"""

from __future__ import annotations

from compiler import rules as ast
from compiler.dnf import ActionSet, rule_actions
from compiler.rules import TypedRules, encode_string, scale_decimal
from compiler.spec import QueryField, Spec


def comparison_holds(cmp: ast.Comparison, info: QueryField, value: int) -> bool:
    const = cmp.value
    if isinstance(const, ast.String):
        raw = const.value.encode("ascii")
        field_bytes = value.to_bytes(info.width // 8, "big")
        if cmp.op == "prefix":
            return field_bytes.startswith(raw)
        equal = value == encode_string(const.value, info.width)
        return equal if cmp.op == "==" else not equal
    if isinstance(const, ast.IPAddress) and const.prefix_len < const.width:
        inside = (value >> (const.width - const.prefix_len)) == (const.value >> (const.width - const.prefix_len))
        return inside if cmp.op == "==" else not inside
    if isinstance(const, ast.Number):
        c = scale_decimal(const.value, info.scale) if info.scale else int(const.value)
    else:
        c = const.value
    return {
        "==": value == c, "!=": value != c, "<": value < c, "<=": value <= c, ">": value > c, ">=": value >= c,
    }[cmp.op]


def filter_holds(f: ast.Filter, fields: dict[str, QueryField], values: dict[str, int]) -> bool:
    if isinstance(f, ast.Comparison):
        name = f.attribute.name
        return comparison_holds(f, fields[name], values[name])
    if isinstance(f, ast.Const):
        return f.value
    if isinstance(f, ast.Not):
        return not filter_holds(f.item, fields, values)
    if isinstance(f, ast.And):
        return all(filter_holds(i, fields, values) for i in f.items)
    return any(filter_holds(i, fields, values) for i in f.items)


def headers_read(rule: ast.Rule, spec: Spec | None) -> set[str]:
    """The scalar header instances whose fields the rule compares (a stack's rows are its messages,
    each carrying its element)."""
    out: set[str] = set()
    stack = [rule.filter]
    while stack:
        f = stack.pop()
        if isinstance(f, ast.Comparison):
            if isinstance(f.attribute, ast.Field) and spec is not None:
                inst = spec.header(f.attribute.name.split(".")[0])
                if inst is not None and not inst.stack_size:
                    out.add(inst.name)
        elif isinstance(f, ast.Not):
            stack.append(f.item)
        elif isinstance(f, (ast.And, ast.Or)):
            stack.extend(f.items)
    return out


def evaluate(typed: TypedRules, values: dict[str, int], carried: set[str] | None = None) -> ActionSet:
    """The union of the actions of every rule whose filter holds for ``values`` and whose headers
    the packet carries (``carried``: its valid header instances; None: all of them)."""
    acc = ActionSet()
    for rule in typed.rules:
        if carried is not None and not headers_read(rule, typed.spec) <= carried:
            continue
        if filter_holds(rule.filter, typed.fields, values):
            acc = acc | rule_actions(rule)
    return acc
