"""The spec's parse graph as P4_16 parser states, and the deparser's emit list.

A :class:`compiler.spec.ParserState` becomes::

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            8w17: parse_udp;
            8w0x10 &&& 8w0xf0: parse_other;
            default: accept;
        }
    }

Select keys are ``header.field`` references (rendered ``hdr.header.field``; ``h.last.f``,
``h[2].f`` are kept) or ``lookahead:N`` (``packet.lookahead<bit<N>>()``). A case value whose mask
is all ones is written plainly, otherwise as ``value &&& mask``; ``None`` is ``_``.

The deparser emits every member of the headers struct, in declaration order (stacks as a whole:
``packet.emit(hdr.stack)`` emits the valid elements in order). Nothing the parser extracted is left
out of the output: a header that is not to be sent must be made invalid, not forgotten.
"""

from __future__ import annotations

from backends.common.headers import INDENT, ref_width
from backends.common.literals import all_ones, literal
from backends.common.names import HDR, PACKET
from compiler.base import SpecError
from compiler.spec import Advance, Extract, ParserState, SelectCase, Spec

BUILTIN_STATES = ("accept", "reject")


def key_expression(key: str, *, packet: str = PACKET, hdr: str = HDR) -> str:
    """A select key as P4: ``ipv4.protocol`` -> ``hdr.ipv4.protocol``; ``lookahead:16`` -> lookahead."""
    if key.startswith("lookahead:"):
        return f"{packet}.lookahead<bit<{int(key.split(':', 1)[1])}>>()"
    return f"{hdr}.{key}"


def key_width(spec: Spec, key: str) -> int:
    if key.startswith("lookahead:"):
        return int(key.split(":", 1)[1])
    width = ref_width(spec, key)
    if width is None:
        raise SpecError(f"parser select key {key!r} is not a field of the headers struct")
    return width


def _case_value(value: tuple[int, int] | None, width: int) -> str:
    if value is None:
        return "_"
    v, mask = value
    mask &= all_ones(width)
    if mask == all_ones(width):
        return literal(v & mask, width)
    return f"{literal(v & mask, width)} &&& {literal(mask, width)}"


def _statement(stmt: Extract | Advance, *, packet: str, hdr: str) -> str:
    if isinstance(stmt, Extract):
        target = f"{hdr}.{stmt.header}.next" if stmt.next else f"{hdr}.{stmt.header}"
        return f"{packet}.extract({target});"
    if stmt.bits is not None:
        return f"{packet}.advance({literal(stmt.bits, 32)});"
    from compiler.spec import expr as spec_expr
    from compiler.spec import parse_expression

    text = spec_expr.render(parse_expression(stmt.expression), f"{hdr}.")
    if packet != PACKET:
        text = text.replace(f"{PACKET}.lookahead<", f"{packet}.lookahead<")
    return f"{packet}.advance({text});"


def _transition(state: ParserState, spec: Spec, *, packet: str, hdr: str) -> list[str]:
    cases = list(state.cases)
    if not state.select_keys:
        if len(cases) != 1:
            raise SpecError(f"parser state {state.name}: a transition without select needs exactly one target",
                            state.location)
        return [f"transition {cases[0].next_state};"]
    widths = [key_width(spec, k) for k in state.select_keys]
    exprs = [key_expression(k, packet=packet, hdr=hdr) for k in state.select_keys]
    lines = [f"transition select({', '.join(exprs)}) {{"]
    for case in cases:
        lines.append(f"{INDENT}{_case_label(case, widths)}: {case.next_state};")
    lines.append("}")
    return lines


def _case_label(case: SelectCase, widths: list[int]) -> str:
    if case.is_default:
        return "default"
    if len(case.values) != len(widths):
        raise SpecError(f"select case with {len(case.values)} values for {len(widths)} keys")
    parts = [_case_value(v, w) for v, w in zip(case.values, widths)]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def parser_state(state: ParserState, spec: Spec, *, packet: str = PACKET, hdr: str = HDR) -> str:
    """One ``state name { ... }`` block."""
    body = [_statement(s, packet=packet, hdr=hdr) for s in state.statements]
    body += _transition(state, spec, packet=packet, hdr=hdr)
    return "\n".join([f"state {state.name} {{"] + [INDENT + line for line in body] + ["}"])


def parser_states(spec: Spec, *, packet: str = PACKET, hdr: str = HDR) -> list[str]:
    """Every state of the spec's parse graph, ``start`` first, then in the spec's order.

    Raises :class:`SpecError` when the graph has no ``start`` state or a transition names a state
    that does not exist.
    """
    states = spec.parser_states
    start = spec.start_state or "start"
    if start not in states:
        raise SpecError(f"{spec.path}: the parser has no {start!r} state")
    for st in states.values():
        for case in st.cases:
            if case.next_state not in states and case.next_state not in BUILTIN_STATES:
                raise SpecError(f"parser state {st.name}: transition to unknown state {case.next_state!r}",
                                st.location)
    ordered = [states[start]] + [s for n, s in states.items() if n != start]
    rendered = [parser_state(s, spec, packet=packet, hdr=hdr) for s in ordered]
    if start != "start":
        rendered.insert(0, f"state start {{\n{INDENT}transition {start};\n}}")
    return rendered


def emit_groups(spec: Spec) -> list[tuple[str, ...]]:
    """The headers struct's members, with runs of adjacent stacks of equal size grouped together.

    A group of several stacks is a message of several headers (ITCH's ``mold_msg[12]`` block
    header and ``add_order[12]`` body): the parser extracts them alternately, so the deparser must
    emit them element by element, interleaved, not one whole stack after the other.
    """
    groups: list[list[str]] = []
    prev_size: int | None = None
    for h in spec.headers:
        if h.stack_size and h.stack_size == prev_size:
            groups[-1].append(h.name)
        else:
            groups.append([h.name])
        prev_size = h.stack_size
    return [tuple(g) for g in groups]


def emit_statements(spec: Spec, *, packet: str = PACKET, hdr: str = HDR, descending: bool = False) -> list[str]:
    """``packet.emit(hdr.h);`` for every member of the headers struct, in declaration order.

    A lone stack is emitted whole (``emit`` of a stack emits its valid elements in order). Adjacent
    stacks of equal size (see :func:`emit_groups`) are emitted element by element, interleaved:
    ``emit(hdr.a[0]); emit(hdr.b[0]); emit(hdr.a[1]); ...`` (emitting an invalid header emits
    nothing), which reproduces the wire order of messages made of one element of each.
    ``descending``: elements from the highest index down (a parser that numbers them from the back,
    :mod:`backends.tofino.stack_parse`); a lone stack is then emitted element by element too.
    """
    out: list[str] = []
    for group in emit_groups(spec):
        size = spec.header(group[0]).stack_size or 0
        if len(group) == 1 and not (descending and size):
            out.append(f"{packet}.emit({hdr}.{group[0]});")
            continue
        for i in (reversed(range(size)) if descending else range(size)):
            out.extend(f"{packet}.emit({hdr}.{name}[{i}]);" for name in group)
    return out
