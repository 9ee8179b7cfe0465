"""The decision diagram as Graphviz, for people: one box per node, edges labelled with intervals."""

from __future__ import annotations

from compiler.bdd import Diagram
from compiler.rules import decode_string


def _value(v: int, width: int, is_string: bool) -> str:
    if is_string and width % 8 == 0:
        return '\\"' + decode_string(v, width) + '\\"'
    return str(v) if v < 1 << 20 else hex(v)


def to_dot(diagram: Diagram) -> str:
    """Graphviz text: inner nodes named by their field, leaves by their actions, edges by intervals."""
    lines = ["digraph p4sub {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    for node in diagram.reachable():
        if node in diagram.leaves:
            lines.append(f'  n{node} [shape=box, style=rounded, label="{diagram.leaves[node]}"];')
            continue
        n = diagram.nodes[node]
        info = diagram.fields[n.level]
        lines.append(f'  n{node} [shape=ellipse, label="{info.name}"];')
        for lo, hi, child in n.edges:
            a, b = _value(lo, info.width, info.is_string), _value(hi, info.width, info.is_string)
            label = a if lo == hi else f"[{a}, {b}]"
            lines.append(f'  n{node} -> n{child} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
