"""Run a spec's parse graph on raw packet bytes, bit-exactly, the way a P4 parser would.

This is the reference the BMv2 and replay work compare against, so it follows P4_16 semantics
rather than any one target's shortcuts:

* headers are extracted big-endian at any bit offset; ``extract(h.next)`` fills a stack from
  index 0, ``h.last`` is the element extracted most recently;
* ``select`` tries its cases in order and takes the first whose values match under their masks;
  no match is the P4 error ``NoMatch``;
* running out of bytes in ``extract``, ``advance`` or ``lookahead`` is ``PacketTooShort``,
  extracting into a full stack or reading ``.last`` of an empty one is ``StackOutOfBounds``.

A packet that stops early is not an exception: :class:`ParsedPacket` carries a ``status`` (and
keeps the headers extracted before the stop, as v1model does). Reading a field of a header that
was never extracted gives 0 (P4 leaves it undefined; BMv2 gives 0).

Build a :class:`ParseGraph` once per spec and call :meth:`ParseGraph.parse` per packet;
:func:`parse_packet` does both for one-off use. Cost is linear in the packet and the number of
states visited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from compiler.base import SpecError
from compiler.rules import validity
from compiler.spec import Advance, Extract, HeaderType, Spec, parse_expression
from compiler.spec import expr as ex

ACCEPT = "accept"
REJECT = "reject"
PACKET_TOO_SHORT = "packet_too_short"
NO_MATCH = "no_match"
STACK_OUT_OF_BOUNDS = "stack_out_of_bounds"
PARSER_LOOP = "parser_loop"
EXPRESSION_ERROR = "expression_error"
#: Every status a parse can end with; only ``accept`` means the parser finished normally.
STATUSES = (ACCEPT, REJECT, PACKET_TOO_SHORT, NO_MATCH, STACK_OUT_OF_BOUNDS, PARSER_LOOP, EXPRESSION_ERROR)

# A Spec field name: h.f, s.last.f or s[2].f
_FIELD_REF = re.compile(r"(\w+)(?:\[(\d+)\]|\.(last))?\.(\w+)")


@dataclass(frozen=True)
class HeaderValue:
    """One extracted header: instance name, stack index (None for a plain header), field values."""

    name: str
    index: int | None
    type_name: str
    fields: Mapping[str, int]
    bit_offset: int
    width: int

    def __getitem__(self, field_name: str) -> int:
        return self.fields[field_name]

    @property
    def label(self) -> str:
        return self.name if self.index is None else f"{self.name}[{self.index}]"


@dataclass(frozen=True)
class ParsedPacket:
    """The outcome of running a parse graph on one packet.

    ``extracted`` lists every header in extraction order (stack elements included);
    ``headers`` maps plain headers and ``stacks`` maps stacks to their elements in index order.
    ``payload_bit_offset`` is where the parser stopped; ``skipped_bits`` counts the bits
    ``advance`` passed over (they are in no header, so :func:`deparse` cannot emit them).
    ``states`` is the path taken, ``status`` one of :data:`STATUSES` and ``message`` says why
    parsing stopped when it did not accept.
    """

    data: bytes
    extracted: tuple[HeaderValue, ...]
    headers: Mapping[str, HeaderValue]
    stacks: Mapping[str, tuple[HeaderValue, ...]]
    status: str
    message: str
    states: tuple[str, ...]
    payload_bit_offset: int
    skipped_bits: int = 0

    @property
    def ok(self) -> bool:
        return self.status == ACCEPT

    @property
    def payload_offset(self) -> int:
        """Byte offset of the unparsed payload (whole when every header and advance is whole bytes)."""
        return self.payload_bit_offset // 8

    @property
    def payload(self) -> bytes:
        """The bytes after the parser's cursor (bit-shifted and zero-padded if the cursor is mid-byte)."""
        writer = _BitWriter()
        _copy_bits(writer, self.data, self.payload_bit_offset)
        return writer.finish()

    def valid(self, name: str) -> bool:
        return name in self.headers or bool(self.stacks.get(name))

    def row(self, fields: Iterable[str], metadata: Mapping[str, int] | None = None) -> dict[str, int]:
        """A reference-model row of this packet: each field's value (0 when its header was not
        extracted) and each validity field ``h.$valid`` as the parser left ``hdr.h.isValid()``.

        Intrinsic metadata fields (``standard_metadata.ingress_port``) are not in the packet's bytes:
        they come from ``metadata`` (the port the caller sends the packet in on), 0 when not given
        (port 0, as a switch's first port)."""
        out = {}
        for ref in fields:
            if metadata is not None and ref in metadata:
                out[ref] = metadata[ref]
            elif validity.is_validity(ref):
                out[ref] = int(self.valid(validity.header_of_validity(ref)))
            else:
                v = self.value(ref)
                out[ref] = 0 if v is None else v
        return out

    def value(self, ref: str) -> int | None:
        """``ipv4.ttl``, ``add_order[0].price`` or ``add_order.last.price``; None when not extracted."""
        match = _FIELD_REF.fullmatch(ref)
        if not match:
            return None
        name, index, last, field_name = match.groups()
        if index is None and last is None:
            header = self.headers.get(name)
        else:
            stack = self.stacks.get(name, ())
            position = len(stack) - 1 if last else int(index)
            header = stack[position] if 0 <= position < len(stack) else None
        return header.fields.get(field_name) if header is not None else None


class _Stop(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class _FieldRef:
    """A Spec field name resolved once: which instance, which element, which bits."""

    instance: str
    selector: str  # "", "last" or "index"
    index: int
    field_name: str
    width: int


@dataclass(frozen=True)
class _Step:
    kind: str  # extract, advance
    instance: str = ""
    next: bool = False
    type_name: str = ""
    width: int = 0
    stack_size: int | None = None
    bits: int | None = None
    expression: ex.Expr | None = None


@dataclass(frozen=True)
class _State:
    name: str
    steps: tuple[_Step, ...]
    keys: tuple[ex.Expr, ...]
    cases: tuple[tuple[tuple[tuple[int, int] | None, ...], str], ...]


@dataclass
class _Run:
    """Mutable state of one parse."""

    data: bytes
    total_bits: int
    cursor: int = 0
    skipped: int = 0
    extracted: list[HeaderValue] = field(default_factory=list)
    headers: dict[str, HeaderValue] = field(default_factory=dict)
    stacks: dict[str, list[HeaderValue]] = field(default_factory=dict)


class ParseGraph:
    """A spec's parse graph, checked and prepared once, run on many packets."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.layouts: dict[str, tuple[tuple[str, int, int], ...]] = {
            name: _layout(htype) for name, htype in spec.header_types.items()
        }
        self.instances = {inst.name: inst for inst in spec.headers}
        self._refs: dict[str, _FieldRef] = {}
        self.states: dict[str, _State] = {}
        for name, state in spec.parser_states.items():
            self.states[name] = self._prepare(state)
        if spec.parser_states and spec.start_state not in self.states:
            raise SpecError(f"parse graph has no start state {spec.start_state!r}")
        for state in self.states.values():
            for _, target in state.cases:
                if target not in self.states and target not in (ACCEPT, REJECT):
                    raise SpecError(f"state {state.name!r} transitions to undefined state {target!r}")

    # -- preparation -----------------------------------------------------------------------------
    def _prepare(self, state) -> _State:
        steps = []
        for statement in state.statements:
            if isinstance(statement, Extract):
                inst = self.instances.get(statement.header)
                if inst is None or inst.type_name not in self.layouts:
                    raise SpecError(f"state {state.name!r} extracts unknown header {statement.header!r}")
                if statement.next != (inst.stack_size is not None):
                    raise SpecError(f"state {state.name!r}: extract of {statement.header!r} "
                                    f"{'with' if statement.next else 'without'} .next does not fit its declaration")
                width = self.spec.header_types[inst.type_name].width
                steps.append(_Step("extract", inst.name, statement.next, inst.type_name, width, inst.stack_size))
            elif isinstance(statement, Advance):
                if statement.bits is not None:
                    steps.append(_Step("advance", bits=statement.bits))
                else:
                    expr = parse_expression(statement.expression)
                    for ref in ex.refs(expr):
                        self._ref(ref.name)
                    steps.append(_Step("advance", expression=expr))
            else:
                raise SpecError(f"state {state.name!r}: unknown statement {statement!r}")
        keys = []
        for key in state.select_keys:
            if key.startswith("lookahead:"):
                keys.append(ex.Lookahead(int(key.split(":", 1)[1])))
            else:
                expr = ex.Ref(key) if _FIELD_REF.fullmatch(key) else parse_expression(key)
                for ref in ex.refs(expr):
                    self._ref(ref.name)
                keys.append(expr)
        cases = []
        for case in state.cases:
            if not case.is_default and len(case.values) != len(keys):
                raise SpecError(f"state {state.name!r}: a select case has {len(case.values)} values for "
                                f"{len(keys)} keys")
            values = (None,) * len(keys) if case.is_default else tuple(case.values)
            cases.append((values, case.next_state))
        return _State(state.name, tuple(steps), tuple(keys), tuple(cases))

    def _ref(self, name: str) -> _FieldRef:
        ref = self._refs.get(name)
        if ref is not None:
            return ref
        match = _FIELD_REF.fullmatch(name)
        inst = self.instances.get(match.group(1)) if match else None
        if inst is None:
            raise SpecError(f"parse graph reads {name!r}, which is not a header field")
        _, index, last, field_name = match.groups()
        selector = "last" if last else "index" if index is not None else ""
        if (selector != "") != (inst.stack_size is not None):
            raise SpecError(f"parse graph reads {name!r}: stacks need .last or [i], headers neither")
        fdef = self.spec.header_types[inst.type_name].field(field_name)
        if fdef is None:
            raise SpecError(f"parse graph reads {name!r}: {inst.type_name} has no field {field_name!r}")
        ref = _FieldRef(inst.name, selector, int(index or 0), field_name, fdef.width)
        self._refs[name] = ref
        return ref

    # -- running ------------------------------------------------------------------------------------
    def parse(self, data: bytes) -> ParsedPacket:
        """Run the parse graph on one packet; never raises for short or odd packets."""
        data = bytes(data)
        run = _Run(data, len(data) * 8)
        path: list[str] = []
        status, message = ACCEPT, ""
        if not self.states:
            return self._result(run, path, ACCEPT, "")
        name = self.spec.start_state
        no_progress: set[str] = set()  # states entered since the cursor last moved or a header was extracted
        try:
            while name not in (ACCEPT, REJECT):
                if name in no_progress:
                    raise _Stop(PARSER_LOOP, f"state {name!r} entered again without consuming anything")
                no_progress.add(name)
                path.append(name)
                state = self.states[name]
                for step in state.steps:
                    if self._step(run, step):
                        no_progress.clear()
                name = self._select(run, state)
            if name == REJECT:
                status, message = REJECT, f"state {path[-1]!r} transitioned to reject"
        except _Stop as stop:
            status, message = stop.status, stop.message
        return self._result(run, path, status, message)

    def _result(self, run: _Run, path: list[str], status: str, message: str) -> ParsedPacket:
        return ParsedPacket(
            data=run.data,
            extracted=tuple(run.extracted),
            headers=dict(run.headers),
            stacks={name: tuple(elements) for name, elements in run.stacks.items()},
            status=status,
            message=message,
            states=tuple(path),
            payload_bit_offset=run.cursor,
            skipped_bits=run.skipped,
        )

    def _step(self, run: _Run, step: _Step) -> bool:
        """Execute one statement; True when it consumed bits or filled a header."""
        if step.kind == "advance":
            bits = step.bits if step.bits is not None else self._evaluate(run, step.expression)
            if bits < 0:
                raise _Stop(EXPRESSION_ERROR, f"advance by a negative amount ({bits} bits)")
            if run.cursor + bits > run.total_bits:
                raise _Stop(PACKET_TOO_SHORT, f"advance by {bits} bits at bit {run.cursor} runs past the end of "
                                              f"the {len(run.data)}-byte packet")
            run.cursor += bits
            run.skipped += bits
            return bits > 0
        index = None
        if step.next:
            stack = run.stacks.setdefault(step.instance, [])
            if len(stack) >= step.stack_size:
                raise _Stop(STACK_OUT_OF_BOUNDS, f"stack {step.instance} is full ({step.stack_size} elements)")
            index = len(stack)
        if run.cursor + step.width > run.total_bits:
            label = step.instance if index is None else f"{step.instance}[{index}]"
            raise _Stop(PACKET_TOO_SHORT, f"{label} needs {step.width} bits at bit {run.cursor}; the packet has "
                                          f"{run.total_bits - run.cursor} left")
        chunk = _read_bits(run.data, run.cursor, step.width)
        values = {name: (chunk >> (step.width - offset - width)) & ((1 << width) - 1)
                  for name, offset, width in self.layouts[step.type_name]}
        header = HeaderValue(step.instance, index, step.type_name, values, run.cursor, step.width)
        run.cursor += step.width
        run.extracted.append(header)
        if index is None:
            run.headers[step.instance] = header
        else:
            run.stacks[step.instance].append(header)
        return True

    def _select(self, run: _Run, state: _State) -> str:
        if not state.keys:
            return state.cases[0][1] if state.cases else REJECT
        key_values = [self._evaluate(run, key) for key in state.keys]
        for values, target in state.cases:
            if all(v is None or (k & v[1]) == (v[0] & v[1]) for k, v in zip(key_values, values)):
                return target
        shown = ", ".join(f"{key}={value:#x}" for key, value in zip(self.spec.parser_states[state.name].select_keys,
                                                                    key_values))
        raise _Stop(NO_MATCH, f"no select case of state {state.name!r} matches {shown}")

    def _evaluate(self, run: _Run, expr: ex.Expr) -> int:
        try:
            return ex.evaluate(expr, lambda name: self._lookup(run, name), lambda width: self._peek(run, width))
        except SpecError as exc:
            raise _Stop(EXPRESSION_ERROR, exc.message) from None

    def _lookup(self, run: _Run, name: str) -> tuple[int, int]:
        ref = self._ref(name)
        if ref.selector == "":
            header = run.headers.get(ref.instance)
        else:
            stack = run.stacks.get(ref.instance, [])
            if ref.selector == "last":
                if not stack:
                    raise _Stop(STACK_OUT_OF_BOUNDS, f"{name}: stack {ref.instance} is empty")
                header = stack[-1]
            else:
                header = stack[ref.index] if ref.index < len(stack) else None
        return (header.fields[ref.field_name] if header is not None else 0), ref.width

    def _peek(self, run: _Run, width: int) -> int:
        if run.cursor + width > run.total_bits:
            raise _Stop(PACKET_TOO_SHORT, f"lookahead of {width} bits at bit {run.cursor} runs past the end of "
                                          f"the {len(run.data)}-byte packet")
        return _read_bits(run.data, run.cursor, width)

    # -- deparsing ----------------------------------------------------------------------------------
    def deparse(self, parsed: ParsedPacket) -> bytes:
        """Emit the valid headers in headers-struct order, then the unparsed payload.

        This is what a P4 deparser that emits every member of the headers struct produces: stack
        elements come in index order, and bytes skipped by ``advance`` are not emitted. So
        ``deparse(parse(x)) == x`` when the parse accepted, skipped nothing, and extracted headers
        in struct order (see :func:`round_trips`).
        """
        writer = _BitWriter()
        for inst in self.spec.headers:
            if inst.stack_size is None:
                elements: Iterable[HeaderValue] = [parsed.headers[inst.name]] if inst.name in parsed.headers else []
            else:
                elements = parsed.stacks.get(inst.name, ())
            layout = self.layouts[inst.type_name]
            for header in elements:
                for name, _, width in layout:
                    value = header.fields[name]
                    if not 0 <= value < 1 << width:
                        raise ValueError(f"{header.label}.{name} = {value} does not fit in {width} bits")
                    writer.write(value, width)
        _copy_bits(writer, parsed.data, parsed.payload_bit_offset)
        return writer.finish()

    def round_trips(self, parsed: ParsedPacket) -> bool:
        """True when :meth:`deparse` must give back the packet's bytes exactly (see there)."""
        order = {inst.name: i for i, inst in enumerate(self.spec.headers)}
        keys = [(order[h.name], h.index or 0) for h in parsed.extracted]
        unique = {h.label for h in parsed.extracted}
        return parsed.ok and parsed.skipped_bits == 0 and keys == sorted(keys) and len(unique) == len(keys)


def parse_packet(spec: Spec, data: bytes) -> ParsedPacket:
    """Run ``spec``'s parse graph on ``data``; for many packets build a :class:`ParseGraph` once."""
    return ParseGraph(spec).parse(data)


def deparse(spec: Spec, parsed: ParsedPacket) -> bytes:
    """Valid headers in headers-struct order plus the unparsed payload (see :meth:`ParseGraph.deparse`)."""
    return ParseGraph(spec).deparse(parsed)


def _layout(htype: HeaderType) -> tuple[tuple[str, int, int], ...]:
    out, offset = [], 0
    for fdef in htype.fields:
        out.append((fdef.name, offset, fdef.width))
        offset += fdef.width
    return tuple(out)


def _read_bits(data: bytes, start: int, width: int) -> int:
    """The ``width`` bits of ``data`` from bit ``start`` (bit 0 is the MSB of byte 0), big-endian."""
    if width == 0:
        return 0
    first, last = start >> 3, (start + width + 7) >> 3
    chunk = int.from_bytes(data[first:last], "big")
    return (chunk >> (last * 8 - start - width)) & ((1 << width) - 1)


class _BitWriter:
    """Appends big-endian bit fields; whole bytes are flushed at once, so writing is linear."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.pending = 0
        self.pending_bits = 0

    def write(self, value: int, width: int) -> None:
        self.pending = (self.pending << width) | value
        self.pending_bits += width
        whole = self.pending_bits >> 3
        if whole:
            rest = self.pending_bits & 7
            self.out += (self.pending >> rest).to_bytes(whole, "big")
            self.pending &= (1 << rest) - 1
            self.pending_bits = rest

    def write_bytes(self, data: bytes) -> None:
        if self.pending_bits == 0:
            self.out += data
        else:
            for byte in data:
                self.write(byte, 8)

    def finish(self) -> bytes:
        if self.pending_bits:
            self.write(0, 8 - self.pending_bits)
        return bytes(self.out)


def _copy_bits(writer: _BitWriter, data: bytes, start: int) -> None:
    lead = (8 - start % 8) % 8
    if lead:
        available = min(lead, len(data) * 8 - start)
        if available > 0:
            writer.write(_read_bits(data, start, available), available)
        start += lead
    if start < len(data) * 8:
        writer.write_bytes(data[start >> 3:])
