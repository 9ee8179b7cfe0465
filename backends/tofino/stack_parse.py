"""Header stacks parsed into fixed elements, for bf-p4c.

A spec extracts a stack element by element with ``.next`` and selects on ``.last`` (ITCH: state
``msgs_k`` extracts ``mold_msg.next`` and selects on ``mold_msg.last.msg_type``, k messages to go).
BMv2 keeps a run-time index per stack. bf-p4c refuses that graph for ITCH: the states reach
different elements on different paths, and it ran out of parser match registers ("Ran out of parser
match registers for hdr.mold_msg[0].msg_type", 1x16b and 2x8b on Tofino 1); with the select moved to
a lookahead, PHV allocation then fails ("add_order[11].timestamp requires strided allocation but has
conflicting constraints"). A parser whose every state extracts one fixed element compiles.

Numbering from the front gives a state as many elements as there are paths to it (``msgs_5`` is
element 0 when the packet holds 5 messages, element 7 when it holds 12). Numbering from the back
does not: an element's index is the number of elements of its stack the longest path from its
state still extracts after it (``msgs_k`` always extracts element ``k - 1``). Along any path the
indices then strictly decrease, so a path never writes an element twice, and a path of n elements
fills n elements at the top of some range; the deparser emits the elements from the highest index
down, which is the wire order. :func:`fix_stack_indices` applies this when it holds for the whole
graph (the graph has no loop, no path extracts more elements than the stack holds, every ``.last``
names an element its own state extracted, and every path deparses in wire order, checked path by
path) and leaves the spec as it was otherwise.

Which element holds which message does not matter to the union program (each message slot has its
own copy of the tables, all alike); ``batch="first"`` evaluates element 0, so for it the parse stops
after the first element of the queried stack (``first_only``), which is then element 0. A fixed
stack is declared with the elements the longest path extracts (one after ``first_only``): bf-p4c
allocates PHV to every declared element, and ITCH's twelve left none for a header-stack edge's
label metadata.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from compiler.spec import Extract, ParserState, SelectCase, Spec

BUILTIN = ("accept", "reject")
#: Paths checked for wire order before giving up (ITCH: 90).
MAX_PATHS = 50_000
_LAST = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.last\.([A-Za-z_][A-Za-z0-9_]*)$")


def _successors(st: ParserState) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.next_state for c in st.cases if c.next_state not in BUILTIN))


def _has_cycle(states: dict[str, ParserState]) -> bool:
    colour: dict[str, int] = {}

    def visit(name: str) -> bool:
        colour[name] = 1
        for nxt in _successors(states[name]):
            if nxt not in states:
                continue
            if colour.get(nxt) == 1 or (nxt not in colour and visit(nxt)):
                return True
        colour[name] = 2
        return False

    return any(name not in colour and visit(name) for name in states)


def first_only(spec: Spec, stack: str) -> Spec:
    """The parse graph stopped right after the first element of ``stack`` (``batch="first"``)."""
    states = {}
    for name, st in spec.parser_states.items():
        cut = next((i for i, s in enumerate(st.statements) if isinstance(s, Extract) and s.header == stack), None)
        if cut is not None:
            st = ParserState(st.name, st.statements[:cut + 1], (), (SelectCase((), "accept", True),), st.location)
        states[name] = st
    return replace(spec, parser_states=states)


def fix_stack_indices(spec: Spec) -> tuple[Spec, bool]:
    """The spec with every ``.next``/``.last`` replaced by a fixed element, numbered from the back;
    ``(spec, False)`` unchanged when that would not parse and deparse every path as the spec does."""
    states = spec.parser_states
    sizes = {h.name: h.stack_size for h in spec.headers if h.stack_size}
    used = {s.header for st in states.values() for s in st.statements if isinstance(s, Extract) and s.next}
    if not used or _has_cycle(states) or not used <= set(sizes):
        return spec, False

    @lru_cache(maxsize=None)
    def remaining(name: str, stack: str) -> int:
        """Elements of ``stack`` the longest path from the start of state ``name`` extracts."""
        if name not in states:
            return 0
        st = states[name]
        own = sum(1 for s in st.statements if isinstance(s, Extract) and s.next and s.header == stack)
        return own + max((remaining(n, stack) for n in _successors(st)), default=0)

    start = spec.start_state or "start"
    if any(remaining(start, s) > sizes[s] for s in used):
        return spec, False
    fixed: dict[str, ParserState] = {}
    for name, st in states.items():
        done: dict[str, int] = {}
        statements = []
        for s in st.statements:
            if isinstance(s, Extract) and s.next:
                index = remaining(name, s.header) - 1 - done.get(s.header, 0)
                done[s.header] = done.get(s.header, 0) + 1
                statements.append(Extract(f"{s.header}[{index}]"))
            else:
                statements.append(s)
        keys = []
        for k in st.select_keys:
            m = _LAST.match(k)
            if m:
                if m.group(1) not in done:  # .last of an element an earlier state extracted: path-dependent
                    return spec, False
                keys.append(f"{m.group(1)}[{remaining(name, m.group(1)) - done[m.group(1)]}].{m.group(2)}")
            else:
                keys.append(k)
        fixed[name] = replace(st, statements=tuple(statements), select_keys=tuple(keys))
    # A stack holds the elements the longest path extracts and no more: bf-p4c gives every declared
    # element PHV, and a parse cut after the first message (first_only) needs one of 12.
    need = {s: max(1, remaining(start, s)) for s in used}
    headers = tuple(replace(h, stack_size=need[h.name]) if h.name in need else h for h in spec.headers)
    new = replace(spec, parser_states=fixed, headers=headers)
    return (new, True) if _deparses_in_wire_order(new, start, sizes) else (spec, False)


_ELEMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]$")


def _deparses_in_wire_order(spec: Spec, start: str, sizes: dict[str, int]) -> bool:
    """Every path's stack elements, emitted as :func:`emit_order` emits them, come out in the order
    the path extracted them (checked on up to :data:`MAX_PATHS` paths; more: False)."""
    from backends.common.parser import emit_groups

    group_of = {h: (g, i) for g, group in enumerate(emit_groups(spec)) for i, h in enumerate(group)}
    paths = 0
    stack: list[tuple[str, tuple[tuple[str, int], ...]]] = [(start, ())]
    while stack:
        name, seen = stack.pop()
        st = spec.parser_states.get(name)
        if st is None:
            paths += 1
            if paths > MAX_PATHS:
                return False
            emitted = sorted(seen, key=lambda e: (group_of[e[0]][0], -e[1], group_of[e[0]][1]))
            if emitted != list(seen) or len(set(seen)) != len(seen):
                return False
            continue
        here = list(seen)
        for s in st.statements:
            m = _ELEMENT.match(s.header) if isinstance(s, Extract) else None
            if m and m.group(1) in sizes:
                here.append((m.group(1), int(m.group(2))))
        for nxt in dict.fromkeys(c.next_state for c in st.cases):
            stack.append((nxt, tuple(here)))
    return True
