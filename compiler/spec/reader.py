"""Read a protocol spec (a small subset of P4_16, ``grammar/p4spec.lark``) into a :class:`~compiler.spec.Spec`.

Two passes. :mod:`compiler.spec.syntax` parses the text (lark, LALR) into raw declarations that
remember where they came from, or raises a labelled :class:`~compiler.base.errors.ParseError`;
:class:`_Builder` then resolves types, consts and typedefs in declaration order (as P4 does),
finds the headers struct, builds the parse graph and checks the ``@query_*`` annotations against
it (:mod:`compiler.spec.annotations`). Every problem is a :class:`~compiler.base.errors.P4subError`
with ``file:line:col``; semantic errors (:class:`~compiler.base.errors.SpecError`) are collected and
reported together.

Specs as users have them go through the same builder: a whole P4_16 program has what a spec
does not need blanked out first (:mod:`compiler.spec.skip`, with notes); a P4_14 spec
(:mod:`compiler.spec.version` decides) is preprocessed and translated into the same raw
declarations (:mod:`compiler.spec.p4_14`); a file of ``@pragma query_*`` lines alone gets header
types made up from the pragmas.

What a spec may hold is documented in ``docs/spec-files.md``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from lark.exceptions import LarkError, UnexpectedInput, VisitError

from compiler.base import P4subError, ParseError, SourceLocation, SpecError, raise_all, read_text, strip_bom
from compiler.spec import expr as ex
from compiler.spec.annotations import AnnotationContext, read_annotations, synthesize_headers
from compiler.spec.model import Advance, Extract, FieldDef, HeaderInstance, HeaderType, ParserState, SelectCase, Spec
from compiler.spec.p4_14 import read_p4_14
from compiler.spec.skip import Declaration, blank, choose_parser, skip_declarations
from compiler.spec.skip import notes as skip_notes
from compiler.spec.syntax import (
    SUPPORTED,
    RawAnnotation,
    RawCall,
    RawCase,
    RawCast,
    RawCompound,
    RawConst,
    RawDirective,
    RawOther,
    RawParser,
    RawRef,
    RawState,
    RawStatement,
    RawType,
    RawTypedef,
    ToRaw,
    lark_parser,
    parse_text,
    path_text,
    syntax_error,
    type_text,
)
from compiler.spec.version import P4_14, detect_version, p4_14_evidence

HEADERS_NAMES = ("headers", "headers_t")
END_STATES = ("accept", "reject")


# ------------------------------------------------------------------------------------------------
# public API


def read_spec(path: str | Path) -> Spec:
    """Read and check a spec file; a missing or unreadable file is a P4subError naming it."""
    return parse_spec(read_text(path, "spec file", SpecError), str(path))


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Parse and check the text of a spec file. Raises ParseError or SpecError (or an ErrorList of them)."""
    text = strip_bom(text)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ParseError("spec file contains a NUL byte (is it a binary file?)", SourceLocation(path, line, 1))
    if detect_version(text, path) == P4_14:
        return _guarded(path, lambda: _read_p4_14(text, path))
    try:
        return _guarded(path, lambda: _read_p4_16(text, path))
    except ParseError as exc:
        evidence = p4_14_evidence(text)
        if evidence is None:
            raise
        raise ParseError(f"{exc.message} (the file also holds P4_14, e.g. '{evidence}', but reads as P4_16 because "
                         f"of its P4_16 declarations; write a spec in one version, or mark a P4_14 one with a "
                         f"'// -*- P4_14 -*-' line)", exc.location) from None


def _read_p4_14(text: str, path: str) -> Spec:
    """A P4_14 spec: its declarations become the raw ones of P4_16, checked by the same builder."""
    program = read_p4_14(text, path)
    builder = _Builder(path)
    builder.version = P4_14
    builder.full_program = program.skipped_any
    builder.notes = program.notes
    builder.metadata_names = program.metadata_names
    spec = builder.build(program.items)
    return replace(spec, includes=tuple(program.includes), constants={**program.constants, **spec.constants})


def _guarded(path: str, read: Callable[[], Spec]) -> Spec:
    """Run a reader; lark's wrapped errors and deep recursion become P4subErrors, not tracebacks."""
    try:
        return read()
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4subError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise SpecError("expressions are nested too deeply", SourceLocation(path, 1, 1)) from None
        raise
    except RecursionError:
        raise SpecError("expressions are nested too deeply", SourceLocation(path, 1, 1)) from None


def _raw_items(text: str, path: str) -> list[Any]:
    try:
        tree = parse_text(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text, path) from None
    except LarkError as exc:  # lark's other failures on odd input must not escape as tracebacks
        raise ParseError(f"cannot parse spec: {exc}", SourceLocation(path, 1, 1)) from None
    return ToRaw(path).transform(tree)


def _read_p4_16(text: str, path: str) -> Spec:
    """A P4_16 spec, or a whole program: what a spec does not need is skipped first, with notes."""
    program = skip_declarations(text, path)
    body = program.text
    notes = skip_notes(program.skipped)
    if len(program.parsers) > 1:
        body, parser_notes = _one_parser(body, program.parsers, path)
        notes += parser_notes
    builder = _Builder(path)
    builder.full_program = bool(notes)
    builder.notes = notes
    return builder.build(_raw_items(body, path))


def _one_parser(text: str, parsers: list[Declaration], path: str) -> tuple[str, list[tuple[SourceLocation, str]]]:
    """Keep the parser whose out parameter is the headers struct; blank the others (with a note).

    The structs are read from the program without its parsers, so that a parser p4sub will not
    read (an egress parser with externs in it) cannot stop the choice.
    """
    without = text
    for parser in parsers:
        without = blank(without, parser.start, parser.end)
    items = _raw_items(without, path)
    header_names = {i.name for i in items if isinstance(i, RawCompound) and i.kind == "header"}
    header_structs: dict[str, bool] = {}
    previous: Any = None
    for item in items:
        if isinstance(item, RawCompound) and item.kind == "struct" and any(
                m.type.kind == "named" and m.type.name in header_names for m in item.members):
            marked = any(a.name == "headers" for a in item.annotations) or \
                (isinstance(previous, RawAnnotation) and previous.name == "headers")
            header_structs[item.name] = marked
        previous = item
    chosen, error = choose_parser(parsers, header_structs, HEADERS_NAMES)
    if error is not None:
        raise error
    if chosen is None:
        return text, []  # none writes a headers struct: the builder says so
    notes = []
    for parser in parsers:
        if parser is not chosen:
            text = blank(text, parser.start, parser.end)
            notes.append((parser.location, f"skipped parser {parser.name} (p4sub reads one parser: {chosen.name}, "
                                           f"whose out parameter is the headers struct)"))
    return text, notes


@lru_cache(maxsize=4096)
def parse_expression(text: str, path: str = "<expression>") -> ex.Expr:
    """Read back an expression :func:`compiler.spec.expr.render` wrote (e.g. ``Advance.expression``).

    Field references stay as written (``mold_msg.last.msg_len``); constants must already be
    literals, which is how the reader stores them. Results are cached: the trees are immutable.
    """
    try:
        tree = lark_parser().parse(text, start="expr")
    except UnexpectedInput as exc:
        raise syntax_error(exc, text, path) from None
    except LarkError as exc:
        raise ParseError(f"cannot parse expression: {exc}", SourceLocation(path, 1, 1)) from None
    try:
        raw = ToRaw(path).transform(tree)
        return _Builder(path).plain_expression(raw)
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4subError):
            raise exc.orig_exc from None
        raise
    except RecursionError:
        raise SpecError("expression is nested too deeply", SourceLocation(path, 1, 1)) from None


# ------------------------------------------------------------------------------------------------
# the builder: raw declarations to a checked Spec


@dataclass
class _Struct:
    """A struct as declared: its bit fields, header members (instances) and nested structs."""

    name: str
    bit_fields: list[FieldDef]
    instances: list[HeaderInstance]
    others: list[tuple[str, str, SourceLocation]]  # (member, what it is, where)
    location: SourceLocation
    marked_headers: bool


class _Builder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.errors: list[P4subError] = []
        self.includes: list[str] = []
        self.constants: dict[str, tuple[int, int | None]] = {}
        self.typedefs: dict[str, int] = {}
        self.header_types: dict[str, HeaderType] = {}
        self.structs: dict[str, _Struct] = {}
        self.declared: dict[str, SourceLocation] = {}
        self.annotations: list[RawAnnotation] = []
        self.parsers: list[RawParser] = []
        self.guards = 0
        # set once the headers struct is known
        self.instances: dict[str, HeaderInstance] = {}
        self.hdr_param = ""
        self.packet_param = ""
        self.other_params: list[str] = []
        # set by the P4_14 reader and the whole-program skipper
        self.version = "P4_16"
        self.metadata_names: dict[str, str] = {}
        self.notes: list[tuple[SourceLocation, str]] = []
        self.full_program = False  # declarations were skipped: unneeded types that fail become notes
        self.deferred: list[tuple[RawCompound, list[P4subError]]] = []

    def error(self, message: str, location: SourceLocation | None) -> None:
        self.errors.append(SpecError(message, location))

    # -- top level ------------------------------------------------------------------------------
    def build(self, items: list[Any]) -> Spec:
        pending: list[RawAnnotation] = []
        for item in items:
            if isinstance(item, RawAnnotation):
                self.annotations.append(item)
                pending.append(item)
                continue
            if isinstance(item, RawDirective):
                self._directive(item)
                continue
            before = len(self.errors)
            if isinstance(item, RawConst):
                self._const(item)
            elif isinstance(item, RawTypedef):
                self._typedef(item)
            elif isinstance(item, RawCompound):
                item.preceding = pending
                self.annotations.extend(item.annotations)
                self._compound(item)
            if self.full_program and isinstance(item, (RawConst, RawTypedef, RawCompound)):
                self._defer(item, before)
            if isinstance(item, RawParser):
                self.annotations.extend(item.annotations)
                self._declare(item.name, item.location)
                self.parsers.append(item)
            pending = []
        if self.guards > 0:
            self.error("#ifndef without a matching #endif", SourceLocation(self.path, 1, 1))
        if len(self.parsers) > 1:
            first = self.parsers[0]
            for extra in self.parsers[1:]:
                self.error(f"a spec file holds one parser; {extra.name!r} is a second one (the first is "
                           f"{first.name!r} at {first.location})", extra.location)
        parser = self.parsers[0] if self.parsers else None
        pragma_only = parser is None and not self.header_types and not self.structs and any(
            a.name.startswith("query_") for a in self.annotations)
        if pragma_only:  # Camus's include-mode specs: only @pragma query_* lines
            types, self.instances = synthesize_headers(self.annotations, self.errors)
            raise_all(self.errors)  # a field left out for want of a width would be reported again below
            self.header_types.update(types)
            headers_struct = "headers"
        else:
            headers_struct = self._headers_struct(parser)
            self._settle_deferred(headers_struct)
        states: dict[str, ParserState] = {}
        if parser is not None and headers_struct:
            states = self._parse_graph(parser)
        metadata_names = {name: "a parameter of the parser (metadata)" for name in self.other_params}
        metadata_names.update(self.metadata_names)
        context = AnnotationContext(self.instances, self.header_types, self.hdr_param or "hdr", metadata_names)
        found = read_annotations(self.annotations, context, self.errors)
        raise_all(self.errors)
        notes = [*self.notes, *found.notes]
        return Spec(
            path=self.path,
            includes=tuple(self.includes),
            constants={name: value for name, (value, _) in self.constants.items()},
            typedefs=dict(self.typedefs),
            header_types=dict(self.header_types),
            headers_struct=headers_struct,
            headers=tuple(self.instances.values()),
            parser_name=parser.name if parser else "",
            parser_states=states,
            start_state="start",
            query_fields=found.query_fields,
            counters=found.counters,
            actions=found.actions,
            version=self.version,
            pragma_only=pragma_only,
            default_action=found.default_action,
            default_action_location=found.default_action_location,
            notes=tuple(f"{loc}: note: {message}" for loc, message in sorted(notes, key=lambda n: n[0])),
        )

    def _defer(self, item: RawConst | RawTypedef | RawCompound, before: int) -> None:
        """In a whole program, a declaration p4sub cannot read may be one the spec does not need.

        Its errors are held back: a const or typedef becomes a note at once (a later use is an
        "unknown" error anyway); a header or struct waits until the headers struct is known, and
        is an error only if that struct uses it (:meth:`_settle_deferred`).
        """
        held = [e for e in self.errors[before:] if not e.message.startswith("duplicate")]
        if not held:
            return
        self.errors[before:] = [e for e in self.errors[before:] if e not in held]
        if isinstance(item, RawCompound):
            self.deferred.append((item, held))
            return
        what = "const" if isinstance(item, RawConst) else "typedef"
        self.notes.append((item.location, f"skipped {what} {item.name}: {held[0].message} (a spec needs it only if "
                                          f"the headers or the parser use it)"))

    def _settle_deferred(self, headers_struct: str) -> None:
        used = {headers_struct, *(inst.type_name for inst in self.instances.values())}
        for item, held in self.deferred:
            if item.name in used:
                self.errors.extend(held)
                continue
            self.header_types.pop(item.name, None)
            self.structs.pop(item.name, None)
            self.notes.append((item.location, f"skipped {item.kind} {item.name}: {held[0].message} (the headers "
                                              f"struct does not use it)"))

    def _declare(self, name: str, location: SourceLocation) -> bool:
        if name in self.declared:
            self.error(f"duplicate declaration of {name!r} (first declared at {self.declared[name]})", location)
            return False
        self.declared[name] = location
        return True

    def _directive(self, item: RawDirective) -> None:
        text = item.text.strip()
        match = re.fullmatch(r"#\s*(\w*)\s*(.*?)\s*", text, re.S)
        word, rest = match.groups() if match else ("", "")
        if rest.endswith("\\"):
            self.error("multi-line preprocessor directives are not supported in a spec file", item.location)
        elif word == "include":
            include = re.fullmatch(r'(<[^<>]+>|"[^"]+")(\s*//.*|\s*/\*.*\*/)?', rest)
            if include:
                self.includes.append(include.group(1))
            else:
                self.error(f"malformed #include {rest!r}; write #include <file.p4> or #include \"file.p4\"",
                           item.location)
        elif word == "ifndef" and re.fullmatch(r"\w+", rest):
            self.guards += 1
        elif word == "define" and re.fullmatch(r"\w+", rest):
            pass  # an include guard's #define
        elif word == "endif":
            self.guards -= 1
            if self.guards < 0:
                self.error("#endif without #ifndef", item.location)
                self.guards = 0
        elif word == "define":
            name = rest.split()[0] if rest.split() else "NAME"
            self.error(f"#define with a value is not supported in a spec file; declare a constant instead: "
                       f"const bit<N> {name} = ...;", item.location)
        else:
            self.error(f"preprocessor directive #{word} is not supported in a spec file (only #include and "
                       f"#ifndef/#define/#endif include guards are)", item.location)

    # -- consts, typedefs, types ------------------------------------------------------------------
    def _const(self, item: RawConst) -> None:
        width = self._bit_width(item.type, f"constant {item.name}", allow_int=True)
        try:
            value = self._constant_value(item.value)
        except SpecError as exc:
            self.errors.append(exc)
            return
        if not self._declare(item.name, item.location) or width is False:
            return
        if width is not None:
            if value < 0 or value >= 1 << width:
                self.error(f"constant {item.name} = {value} does not fit in bit<{width}>", item.location)
                return
        self.constants[item.name] = (value, width)

    def _typedef(self, item: RawTypedef) -> None:
        width = self._bit_width(item.type, f"typedef {item.name}")
        if not self._declare(item.name, item.location) or not width:
            return
        self.typedefs[item.name] = width

    def _bit_width(self, type_: RawType, what: str, *, allow_int: bool = False) -> int | None | bool:
        """Width of a bit<N> type (through typedefs); None for P4 ``int``; False after an error."""
        if type_.kind == "bit":
            return self._width(type_.width, what)
        if type_.kind == "int_inf" and allow_int:
            return None
        if type_.kind == "named":
            if type_.name in self.typedefs:
                return self.typedefs[type_.name]
            if type_.name in self.header_types or type_.name in self.structs:
                self.error(f"{what} must be bit<N>; {type_.name} is a header or struct type", type_.location)
            else:
                self.error(f"unknown type {type_.name!r} for {what}{_did_you_mean(type_.name, self.typedefs)}",
                           type_.location)
            return False
        self.error(f"{what}: {type_text(type_)} is not supported in a spec file (use bit<N>)", type_.location)
        return False

    def _width(self, expr: Any, what: str) -> int | bool:
        """A width or stack size; False (after recording the error) when it is not a usable one."""
        try:
            return self._width_value(expr, what)
        except SpecError as exc:
            self.errors.append(exc)
            return False

    def _width_value(self, expr: Any, what: str) -> int:
        width = self._constant_value(expr)
        if not 0 < width <= ex.MAX_WIDTH:
            raise SpecError(f"{what}: {width} is out of range (1 to {ex.MAX_WIDTH})", getattr(expr, "location", None))
        return width

    def _constant_value(self, raw: Any) -> int:
        expr = self._resolve(raw, header_refs=False)
        ex.width_of(expr, lambda name: 0)
        return ex.evaluate(expr)

    def _compound(self, item: RawCompound) -> None:
        if not self._declare(item.name, item.location):
            return
        seen: dict[str, SourceLocation] = {}
        fields: list[FieldDef] = []
        instances: list[HeaderInstance] = []
        others: list[tuple[str, str, SourceLocation]] = []
        for member in item.members:
            if member.name in seen:
                self.error(f"duplicate field {member.name!r} in {item.kind} {item.name} (first at {seen[member.name]})",
                           member.location)
                continue
            seen[member.name] = member.location
            type_ = member.type
            header_type = type_.kind == "named" and type_.name in self.header_types and \
                not self.header_types[type_.name].is_struct
            if item.kind == "header":
                if member.size is not None or header_type or (type_.kind == "named" and type_.name in self.structs):
                    self.error(f"header {item.name}: field {member.name!r} must be bit<N> (headers hold only bit "
                               f"fields; put headers and stacks in a struct)", member.location)
                    continue
                width = self._bit_width(type_, f"field {item.name}.{member.name}")
                if width:
                    fields.append(FieldDef(member.name, width, type_text(type_), member.location))
                continue
            if member.size is not None:
                if not header_type:
                    self.error(f"struct {item.name}: stack {member.name!r} must be of a header type, not "
                               f"{type_text(type_)}", member.location)
                    continue
                size = self._width(member.size, f"stack {item.name}.{member.name}")
                if size:
                    instances.append(HeaderInstance(member.name, type_.name, size, member.location))
            elif header_type:
                instances.append(HeaderInstance(member.name, type_.name, None, member.location))
            elif type_.kind == "named" and type_.name in self.structs:
                others.append((member.name, f"a struct ({type_.name})", member.location))
            else:
                width = self._bit_width(type_, f"field {item.name}.{member.name}")
                if width:
                    fields.append(FieldDef(member.name, width, type_text(type_), member.location))
        if item.kind == "header":
            htype = HeaderType(item.name, tuple(fields), False, item.location)
            if htype.width % 8:
                self.error(f"header {item.name} is {htype.width} bits wide; headers must be a whole number of bytes "
                           f"(BMv2 and Tofino require it)", item.location)
            self.header_types[item.name] = htype
            return
        marked = any(a.name == "headers" for a in item.preceding + item.annotations)
        self.structs[item.name] = _Struct(item.name, fields, instances, others, item.location, marked)
        if not instances and not others:
            self.header_types[item.name] = HeaderType(item.name, tuple(fields), True, item.location)

    # -- the headers struct ---------------------------------------------------------------------------
    def _headers_struct(self, parser: RawParser | None) -> str:
        chosen: _Struct | None = None
        if parser is not None:
            for param in parser.params:
                if param.type.kind == "named" and param.type.name == "packet_in" and not self.packet_param:
                    self.packet_param = param.name
            outs = [p for p in parser.params if p.direction == "out"]
            with_headers = [p for p in outs if p.type.kind == "named" and p.type.name in self.structs
                            and self.structs[p.type.name].instances]
            out = with_headers[0] if with_headers else None
            if parser.generic:
                self.error(f"parser {parser.name} has type parameters; a spec's parser must not be generic",
                           parser.location)
            if not self.packet_param:
                self.error(f"parser {parser.name} has no packet_in parameter", parser.location)
            if out is None:
                names = ", ".join(f"{p.name} ({type_text(p.type)})" for p in outs) or "none"
                self.error(f"parser {parser.name}: no 'out' parameter of a struct type with header members "
                           f"(out parameters: {names}); its type is the headers struct", parser.location)
                return ""
            chosen = self.structs[out.type.name]
            self.hdr_param = out.name
            self.other_params = [p.name for p in parser.params if p.name not in (out.name, self.packet_param)]
            marked = [s for s in self.structs.values() if s.marked_headers and s is not chosen]
            for struct in marked:
                self.error(f"@headers marks struct {struct.name}, but the parser's out parameter is of type "
                           f"{chosen.name}", struct.location)
        else:
            candidates = [s for s in self.structs.values() if s.marked_headers] or \
                [s for s in self.structs.values() if s.name in HEADERS_NAMES] or \
                [s for s in self.structs.values() if s.instances]
            if len(candidates) != 1:
                names = ", ".join(s.name for s in candidates)
                self.error("cannot tell which struct is the headers struct" + (f" ({names})" if names else "") +
                           ": declare a parser whose 'out' parameter has that type, mark the struct @headers, or "
                           "name it 'headers'", SourceLocation(self.path, 1, 1))
                return ""
            chosen = candidates[0]
        for field_def in chosen.bit_fields:
            self.error(f"member {field_def.name!r} of the headers struct {chosen.name} is a bit field; the headers "
                       f"struct holds only headers and header stacks", field_def.location)
        for name, what, location in chosen.others:
            self.error(f"member {name!r} of the headers struct {chosen.name} is {what}; nested structs are not "
                       f"supported (list the headers directly)", location)
        self.instances = {inst.name: inst for inst in chosen.instances}
        return chosen.name

    # -- the parser -----------------------------------------------------------------------------------
    def _parse_graph(self, parser: RawParser) -> dict[str, ParserState]:
        raw_states: dict[str, RawState] = {}
        for state in parser.states:
            if state.name in END_STATES:
                self.error(f"state {state.name!r} is built in and cannot be declared", state.location)
            elif state.name in raw_states:
                self.error(f"duplicate state {state.name!r} (first declared at {raw_states[state.name].location})",
                           state.location)
            else:
                raw_states[state.name] = state
        if "start" not in raw_states:
            self.error(f"parser {parser.name} has no 'start' state", parser.location)
        states: dict[str, ParserState] = {}
        for name, raw in raw_states.items():
            statements = [s for s in (self._statement(st) for st in raw.statements) if s is not None]
            keys, cases = self._transition(raw)
            states[name] = ParserState(name, tuple(statements), tuple(keys), tuple(cases), raw.location)
        known = [*raw_states, *END_STATES]
        for raw in raw_states.values():
            targets = [(raw.transition.target, raw.transition.location)] if raw.transition and raw.transition.keys is None \
                else [(c.target, c.target_location) for c in (raw.transition.cases if raw.transition else [])]
            for target, location in targets:
                if target not in known:
                    self.error(f"transition to undefined state {target!r}{_did_you_mean(target, known)}", location)
        return states

    def _statement(self, raw: RawStatement) -> Extract | Advance | None:
        if raw.kind == "assign":
            self.error(f"assignments in parser states are not supported in a spec file (the parse graph holds only "
                       f"extract, advance and transitions; {SUPPORTED})", raw.location)
            return None
        names = raw.path.names()
        if len(raw.path.parts) != 2 or names[0] != self.packet_param or len(names) != 2:
            what = ".".join(names) or "this call"
            self.error(f"{what}(...) is not supported in a spec file: a state may call only "
                       f"{self.packet_param or 'packet'}.extract and .advance (the parse graph holds extract, advance "
                       f"and transitions; {SUPPORTED})", raw.location)
            return None
        method = names[1]
        if method == "extract":
            if len(raw.args) != 1:
                self.error(f"packet.extract takes one header here; the two-argument (varbit) form is not supported "
                           f"in a spec file", raw.location)
                return None
            return self._extract(raw.args[0], raw.location)
        if method == "advance":
            if len(raw.args) != 1:
                self.error("packet.advance takes one argument (the number of bits to skip)", raw.location)
                return None
            return self._advance(raw.args[0], raw.location)
        if method == "lookahead":
            self.error("packet.lookahead(...) as a statement does nothing; use it as a select key", raw.location)
            return None
        self.error(f"unknown packet method {method!r}; a spec's parser may call extract and advance "
                   f"(and lookahead in a select)", raw.location)
        return None

    def _extract(self, arg: Any, location: SourceLocation) -> Extract | None:
        if not isinstance(arg, RawRef):
            self.error("packet.extract takes a header of the headers struct, e.g. hdr.ethernet", location)
            return None
        parts = arg.path.parts
        text = path_text(arg.path)
        if not parts or parts[0] != self.hdr_param or len(parts) < 2 or not isinstance(parts[1], str):
            self.error(f"cannot extract {text}: it is not a member of the headers struct {self.hdr_param!r} "
                       f"(extract of a non-header)", arg.location)
            return None
        inst = self._instance(parts[1], arg.location)
        if inst is None:
            return None
        rest = parts[2:]
        if inst.stack_size is None:
            if rest:
                self.error(f"cannot extract {text}: {inst.name} is a header, not a stack; extract "
                           f"{self.hdr_param}.{inst.name} (extract of a non-header)", arg.location)
                return None
            return Extract(inst.name, False)
        if rest == ("next",):
            return Extract(inst.name, True)
        self.error(f"cannot extract {text}: {inst.name} is a header stack; extract into "
                   f"{self.hdr_param}.{inst.name}.next", arg.location)
        return None

    def _advance(self, arg: Any, location: SourceLocation) -> Advance | None:
        try:
            expr = self._resolve(arg, header_refs=True)
            width = ex.width_of(expr, self._ref_width)
        except SpecError as exc:
            self.errors.append(exc)
            return None
        if any(isinstance(node, ex.Lookahead) for node in _walk(expr)):
            self.error("packet.advance cannot depend on packet.lookahead", location)
            return None
        if width not in (None, 32):
            self.error(f"packet.advance takes bit<32>; this expression is bit<{width}> (cast it: "
                       f"(bit<32>)(...))", location)
            return None
        if ex.is_constant(expr):
            bits = ex.evaluate(expr)
            if bits < 0:
                self.error(f"packet.advance by a negative amount ({bits})", location)
                return None
            if bits >= 1 << 32:  # P4's advance takes bit<32>; the backends render it as one
                self.error(f"packet.advance by {bits} bits: it takes a bit<32> (at most {(1 << 32) - 1})", location)
                return None
            return Advance(bits)
        return Advance(None, ex.render(expr))

    def _transition(self, raw: RawState) -> tuple[list[str], list[SelectCase]]:
        transition = raw.transition
        if transition is None:  # P4_16: a state without a transition goes to reject
            return [], [SelectCase((), "reject", True)]
        if transition.keys is None:
            return [], [SelectCase((), transition.target, True)]
        keys: list[str] = []
        widths: list[int] = []
        for key in transition.keys:
            resolved = self._select_key(key)
            if resolved is None:
                return [], []
            keys.append(resolved[0])
            widths.append(resolved[1])
        cases = []
        for case in transition.cases:
            made = self._case(case, widths, keys)
            if made is not None:
                cases.append(made)
        return keys, cases

    def _select_key(self, raw: Any) -> tuple[str, int] | None:
        location = getattr(raw, "location", None)
        if isinstance(raw, RawCall) and raw.type_arg is not None:
            names = raw.path.names()
            if names != [self.packet_param, "lookahead"] or len(raw.path.parts) != 2:
                self.error(f"{path_text(raw.path)}<...>() is not supported; select keys are header fields or "
                           f"{self.packet_param}.lookahead<bit<N>>()", location)
                return None
            if raw.type_arg.kind != "bit":
                self.error(f"lookahead<{type_text(raw.type_arg)}> is not supported; look ahead a bit<N> value",
                           location)
                return None
            width = self._width(raw.type_arg.width, "lookahead")
            return (f"lookahead:{width}", width) if width else None
        if not isinstance(raw, RawRef) or not raw.path.parts or raw.path.parts[0] != self.hdr_param:
            if isinstance(raw, RawRef) and raw.path.parts and raw.path.parts[0] in self.other_params:
                self.error(f"select on {path_text(raw.path)}: parser metadata is not supported in a spec file; "
                           f"select on header fields or packet.lookahead<bit<N>>()", location)
            else:
                self.error(f"select keys must be header fields ({self.hdr_param}.h.f) or "
                           f"{self.packet_param}.lookahead<bit<N>>(); expressions are not supported", location)
            return None
        try:
            ref = self._header_ref(raw)
        except SpecError as exc:
            self.errors.append(exc)
            return None
        return ref.name, self._ref_width(ref.name)

    def _case(self, case: RawCase, widths: list[int], keys: list[str]) -> SelectCase | None:
        elements = case.elements
        if len(elements) == 1 and elements[0].kind == "default" and not case.is_tuple:
            return SelectCase((None,) * len(widths), case.target, True)
        if len(elements) != len(widths):
            self.error(f"select case has {len(elements)} value(s) for {len(widths)} key(s)", case.location)
            return None
        values: list[tuple[int, int] | None] = []
        for element, width, key in zip(elements, widths, keys):
            if element.kind in ("default", "dontcare"):
                values.append(None)
                continue
            if element.kind == "range":
                self.error("range keysets (lo..hi) are not supported: the parse graph keeps value/mask pairs; list "
                           "the values or use value &&& mask", element.location)
                return None
            all_ones = (1 << width) - 1
            try:
                value = self._constant_value(element.value)
                mask = self._constant_value(element.mask) if element.kind == "mask" else all_ones
            except SpecError as exc:
                self.errors.append(exc)
                return None
            for what, number in (("value", value), ("mask", mask)):
                if not 0 <= number <= all_ones:
                    self.error(f"select {what} {number:#x} does not fit the {width}-bit key {key}", element.location)
                    return None
            values.append((value & mask, mask))
        return SelectCase(tuple(values), case.target, False)

    # -- references and expressions ---------------------------------------------------------------------
    def _instance(self, name: str, location: SourceLocation | None) -> HeaderInstance | None:
        inst = self.instances.get(name)
        if inst is None:
            self.error(f"unknown header instance {name!r}{_did_you_mean(name, self.instances)}", location)
        return inst

    def _ref_width(self, name: str) -> int:
        inst_name, rest = re.match(r"([^.\[]+)(.*)", name).groups()
        field_name = rest.rsplit(".", 1)[-1]
        htype = self.header_types[self.instances[inst_name].type_name]
        return htype.field(field_name).width

    def _header_ref(self, raw: RawRef) -> ex.Ref:
        """``hdr.h.f`` / ``hdr.s.last.f`` / ``hdr.s[2].f`` to the Spec's ``h.f`` / ``s.last.f`` / ``s[2].f``."""
        parts = list(raw.path.parts[1:])
        text = path_text(raw.path)
        if not parts or not isinstance(parts[0], str):
            raise SpecError(f"{text} is not a header field", raw.location)
        inst = self.instances.get(parts[0])
        if inst is None:
            raise SpecError(f"unknown header instance {parts[0]!r}{_did_you_mean(parts[0], self.instances)}",
                            raw.location)
        selector = ""
        rest = parts[1:]
        if inst.stack_size is not None:
            if rest and rest[0] == "last":
                selector, rest = ".last", rest[1:]
            elif rest and not isinstance(rest[0], str):
                index = self._constant_value(rest[0])
                if not 0 <= index < inst.stack_size:
                    raise SpecError(f"index {index} is out of range for stack {inst.name}[{inst.stack_size}]",
                                    raw.location)
                selector, rest = f"[{index}]", rest[1:]
            elif rest and rest[0] == "next":
                raise SpecError(f"{text}: .next can only be extracted; read the element just extracted with .last",
                                raw.location)
            else:
                raise SpecError(f"{text}: {inst.name} is a header stack; name an element: {inst.name}.last or "
                                f"{inst.name}[i]", raw.location)
        htype = self.header_types[inst.type_name]
        if len(rest) != 1 or not isinstance(rest[0], str):
            raise SpecError(f"{text} is not a field of {inst.name} ({inst.type_name})", raw.location)
        if htype.field(rest[0]) is None:
            raise SpecError(f"header {inst.name} ({inst.type_name}) has no field {rest[0]!r}"
                            f"{_did_you_mean(rest[0], [f.name for f in htype.fields])}", raw.location)
        return ex.Ref(f"{inst.name}{selector}.{rest[0]}", raw.location)

    def _resolve(self, raw: Any, *, header_refs: bool) -> ex.Expr:
        """Raw expression to a spec_expr tree: consts become typed literals, hdr.h.f becomes a Ref."""
        if isinstance(raw, ex.Num):
            return raw
        if isinstance(raw, RawRef):
            parts = raw.path.parts
            if len(parts) == 1 and isinstance(parts[0], str):
                name = parts[0]
                if name in self.constants:
                    value, width = self.constants[name]
                    return ex.Num(value, width, raw.location)
                raise SpecError(f"unknown constant {name!r}{_did_you_mean(name, self.constants)}", raw.location)
            if header_refs and parts[0] == self.hdr_param:
                return self._header_ref(raw)
            if header_refs and parts[0] in self.other_params:
                raise SpecError(f"{path_text(raw.path)}: parser metadata is not supported in a spec file; use header "
                                f"fields", raw.location)
            raise SpecError(f"{path_text(raw.path)} is not a constant", raw.location)
        if isinstance(raw, RawCall):
            if raw.type_arg is not None and raw.path.names() == [self.packet_param, "lookahead"] and header_refs:
                raise SpecError("packet.lookahead may only be a select key", raw.location)
            raise SpecError(f"calls in expressions ({path_text(raw.path)}(...)) are not supported in a spec file",
                            raw.location)
        if isinstance(raw, RawOther):
            raise SpecError(f"{raw.what} are not supported in a spec file's expressions", raw.location)
        if isinstance(raw, RawCast):
            if raw.type.kind != "bit":
                raise SpecError(f"cast to {type_text(raw.type)} is not supported; cast to bit<N>", raw.location)
            width = self._width_value(raw.type.width, "cast")
            return ex.Cast(width, self._resolve(raw.operand, header_refs=header_refs), raw.location)
        if isinstance(raw, ex.Unary):
            return ex.Unary(raw.op, self._resolve(raw.operand, header_refs=header_refs), raw.location)
        if isinstance(raw, ex.Binary):
            return ex.Binary(raw.op, self._resolve(raw.left, header_refs=header_refs),
                             self._resolve(raw.right, header_refs=header_refs), raw.location)
        raise SpecError("unsupported expression", getattr(raw, "location", None))

    def plain_expression(self, raw: Any) -> ex.Expr:
        """An expression as the Spec stores it: refs are already ``h.f`` / ``s.last.f`` names."""
        if isinstance(raw, RawRef):
            return ex.Ref(path_text(raw.path), raw.location)
        if isinstance(raw, RawCall) and raw.type_arg is not None and raw.type_arg.kind == "bit" \
                and raw.path.names() == ["packet", "lookahead"]:
            return ex.Lookahead(self._width_value(raw.type_arg.width, "lookahead"), raw.location)
        if isinstance(raw, RawCast) and raw.type.kind == "bit":
            return ex.Cast(self._width_value(raw.type.width, "cast"), self.plain_expression(raw.operand), raw.location)
        if isinstance(raw, ex.Unary):
            return ex.Unary(raw.op, self.plain_expression(raw.operand), raw.location)
        if isinstance(raw, ex.Binary):
            return ex.Binary(raw.op, self.plain_expression(raw.left), self.plain_expression(raw.right), raw.location)
        return self._resolve(raw, header_refs=False)


def _walk(expr: ex.Expr) -> Iterable[ex.Expr]:
    yield expr
    for child in (getattr(expr, "operand", None), getattr(expr, "left", None), getattr(expr, "right", None)):
        if child is not None:
            yield from _walk(child)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
