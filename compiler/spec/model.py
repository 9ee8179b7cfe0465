"""The protocol spec: what a P4 header file tells p4sub about packets and queryable fields.

A :class:`Spec` is read from a small subset of P4_16 (see ``grammar/p4spec.lark`` and
:mod:`compiler.spec.reader`). It is plain frozen data: the compiler, both backends and the
reference model read it, none of them change it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from compiler.base import SourceLocation

MATCH_KINDS = ("exact", "range", "lpm", "ternary")


@dataclass(frozen=True)
class FieldDef:
    """A field of a header or struct type. ``width`` is in bits, ``type_name`` the P4 type as written."""

    name: str
    width: int
    type_name: str = ""
    location: SourceLocation | None = None


@dataclass(frozen=True)
class HeaderType:
    """A ``header`` (or ``struct`` of bit fields) declaration."""

    name: str
    fields: tuple[FieldDef, ...]
    is_struct: bool = False
    location: SourceLocation | None = None

    @property
    def width(self) -> int:
        return sum(f.width for f in self.fields)

    def field(self, name: str) -> FieldDef | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class HeaderInstance:
    """A member of the headers struct: ``hdr.<name>`` of ``type_name``; ``stack_size`` for ``h[N]``."""

    name: str
    type_name: str
    stack_size: int | None = None
    location: SourceLocation | None = None


@dataclass(frozen=True)
class Extract:
    """``packet.extract(hdr.<header>)``; ``next`` is True for ``hdr.<header>.next`` on a stack."""

    header: str
    next: bool = False


@dataclass(frozen=True)
class Advance:
    """``packet.advance(bits)``: skip ``bits`` bits (a constant), or an expression kept as text."""

    bits: int | None
    expression: str = ""


@dataclass(frozen=True)
class SelectCase:
    """One case of ``transition select(...)``: values (with masks) per key, or ``default``.

    ``values`` has one entry per select key; an entry is ``(value, mask)`` with ``mask`` all ones
    for a plain value, or ``None`` for ``_`` / ``default`` on that key.
    """

    values: tuple[tuple[int, int] | None, ...]
    next_state: str
    is_default: bool = False


@dataclass(frozen=True)
class ParserState:
    """A parser state: its extracts/advances in order, then either a direct transition or a select.

    ``select_keys`` are field references as written (``hdr.ipv4.protocol`` becomes ``ipv4.protocol``;
    ``packet.lookahead<bit<N>>()`` becomes ``lookahead:N``). A direct transition is a ``select`` with
    no keys and a single default case. ``accept`` and ``reject`` are the built-in end states.
    """

    name: str
    statements: tuple[Extract | Advance, ...]
    select_keys: tuple[str, ...]
    cases: tuple[SelectCase, ...]
    location: SourceLocation | None = None


@dataclass(frozen=True)
class QueryField:
    """A field that subscriptions may test: ``header.field`` (instance name, then field name).

    ``match_kind`` is the hint from the annotation (``None`` for plain ``@query_field``: the
    compiler chooses). ``scale`` is the number of implied decimal digits of a fixed-point field
    (ITCH prices have 4), so that ``price > 50.25`` means ``price > 502500``. ``is_string``
    marks fields compared with string constants (stored left-aligned, space-padded).
    ``metadata`` marks a field of the target's intrinsic metadata (``standard_metadata.ingress_port``
    on v1model, ``ig_intr_md.ingress_port`` on TNA) rather than of a header: no header instance
    holds it, so a backend reads it from the architecture's metadata instead of the packet.
    """

    name: str
    width: int
    match_kind: str | None = None
    scale: int = 0
    is_string: bool = False
    location: SourceLocation | None = None
    metadata: bool = False

    @property
    def header(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def field_name(self) -> str:
        return self.name.split(".", 1)[1]


@dataclass(frozen=True)
class Counter:
    """``@query_counter(name, window_us, slots)``: a tumbling-window aggregate state variable.

    ``key`` (``key=h.f``) makes the state per key: the key's CRC-32 picks one of ``slots`` cells;
    ``field`` (``field=h.g``) is what ``sum`` and ``avg`` add up. Both are ``header.field``
    references (or intrinsic metadata), None when not given. Semantics: docs/compiler.md,
    "Stateful subscriptions".
    """

    name: str
    window_us: int
    slots: int
    width: int = 32
    location: SourceLocation | None = None
    key: str | None = None
    field: str | None = None


@dataclass(frozen=True)
class UserAction:
    """``@query_action(name, width, ...)``: an action subscriptions may call, with argument widths."""

    name: str
    arg_widths: tuple[int, ...] = ()
    location: SourceLocation | None = None


@dataclass(frozen=True)
class Spec:
    """Everything p4sub needs from a protocol's P4 header definitions.

    ``headers`` are the members of the headers struct (the parser's ``out`` parameter type), in
    declaration order, which is also the order the deparser emits them. ``query_fields`` keep the
    annotation order: it is the default field order of the compiler.

    ``version`` is the P4 dialect the file was read as (``P4_16`` or ``P4_14``). ``pragma_only``
    marks a spec that is nothing but ``@pragma query_*`` lines (Camus's include-mode specs): its
    header types are made up from the pragmas' widths and it has no parser (``parser_states`` is
    empty), so it describes fields for a subscription control that the user's own P4 program
    includes. ``default_action`` (with ``default_action_location``) is the user action named by
    ``@pragma query_default_action(NAME)``: run when no rule matches. ``notes`` are what the reader
    left out of a whole program (controls, tables, ...), as ``file:line:col: note: ...`` lines for
    the CLI to show: not errors, but the user should know what p4sub did not read.
    """

    path: str
    includes: tuple[str, ...] = ()
    constants: dict[str, int] = field(default_factory=dict)
    typedefs: dict[str, int] = field(default_factory=dict)
    header_types: dict[str, HeaderType] = field(default_factory=dict)
    headers_struct: str = ""
    headers: tuple[HeaderInstance, ...] = ()
    parser_name: str = ""
    parser_states: dict[str, ParserState] = field(default_factory=dict)
    start_state: str = "start"
    query_fields: dict[str, QueryField] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    actions: dict[str, UserAction] = field(default_factory=dict)
    version: str = "P4_16"
    pragma_only: bool = False
    default_action: str | None = None
    default_action_location: SourceLocation | None = None
    notes: tuple[str, ...] = ()

    def header(self, name: str) -> HeaderInstance | None:
        return self._header_index.get(name)

    @cached_property
    def _header_index(self) -> dict[str, HeaderInstance]:
        """The header instances by name (the first of a name), built once: ``header`` is asked for
        every comparison of every rule (a linear search was 2 of the 4 s of ``check`` at 100k rules)."""
        index: dict[str, HeaderInstance] = {}
        for h in self.headers:
            index.setdefault(h.name, h)
        return index

    def field_width(self, ref: str) -> int | None:
        """Width of ``header.field`` (instance name), or None when there is no such field.

        Intrinsic metadata fields (``QueryField.metadata``) have no header; their width is the
        query field's.
        """
        if "." not in ref:
            return None
        inst_name, field_name = ref.split(".", 1)
        inst = self.header(inst_name)
        if inst is None:
            qf = self.query_fields.get(ref)
            return qf.width if qf is not None and qf.metadata else None
        htype = self.header_types.get(inst.type_name)
        fdef = htype.field(field_name) if htype else None
        return fdef.width if fdef else None

    def implied_headers(self) -> dict[str, frozenset[str]]:
        """For each header instance the parser extracts, the headers it always extracts before it:
        whenever ``h`` is valid, every header of ``implied_headers()[h]`` is too (an ITCH Add Order
        implies its IPv4 and UDP headers). Forward must-analysis over the parse graph: a state is
        entered with what every path to it extracted."""
        states = self.parser_states
        if self.start_state not in states:
            return {}
        everything = frozenset(h.name for h in self.headers)
        must: dict[str, frozenset[str]] = {self.start_state: frozenset()}
        work = [self.start_state]
        while work:
            name = work.pop()
            state = states[name]
            out = must[name] | {st.header for st in state.statements if isinstance(st, Extract)}
            for case in state.cases:
                nxt = case.next_state
                if nxt not in states:
                    continue  # accept, reject
                new = must.get(nxt, everything) & out
                if must.get(nxt) != new:
                    must[nxt] = new
                    work.append(nxt)
        implied: dict[str, frozenset[str]] = {}
        for name, before in must.items():
            seen = set(before)
            for st in states[name].statements:
                if isinstance(st, Extract):
                    implied[st.header] = implied.get(st.header, frozenset(seen)) & frozenset(seen)
                    seen.add(st.header)
        return {h: hs - {h} for h, hs in implied.items()}

    def all_fields(self) -> list[str]:
        """Every ``header.field`` reference the spec declares (for "did you mean" suggestions)."""
        out = []
        for inst in self.headers:
            htype = self.header_types.get(inst.type_name)
            if htype:
                out.extend(f"{inst.name}.{f.name}" for f in htype.fields)
        return out
