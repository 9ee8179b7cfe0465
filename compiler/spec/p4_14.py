"""Read a P4_14 spec into the raw declarations the P4_16 reader's builder checks.

P4_14 says the same things as a P4_16 spec in other words, so the translation is direct and the
builder in :mod:`compiler.spec.reader` does every check once for both:

=====================================================  =====================================================
P4_14                                                  P4_16 equivalent
=====================================================  =====================================================
``header_type T { fields { f : 16; } }``               ``header T { bit<16> f; }`` (a ``struct`` when only
                                                       ``metadata`` instances use it)
``header T h;`` / ``header T s[4];``                   members of the headers struct, in the order the parse
                                                       graph extracts them (P4_14's deparse order)
``metadata T m;``                                      not a header: not in the headers struct
``parser p { extract(h); extract(s[next]); ... }``     ``state p { pkt.extract(hdr.h); pkt.extract(hdr.s.next); }``
``return q;`` / ``return ingress;``                    ``transition q;`` / ``transition accept;``
``return select(latest.f, h.g) { ... }``               ``transition select(hdr.h.f, hdr.h.g) { ... }``
``0x0102 mask 0xff00 : q;`` (one value for all keys)   ``(0x01 &&& 0xff, _) : q;`` (split per key)
``v1, v2 : q;``                                        ``v1: q; v2: q;``
``current(8, 16)``                                     ``pkt.lookahead<bit<24>>()`` masked to its low 16 bits
``parse_error e``                                      ``reject``
``@pragma query_field(h.f)``                           ``@pragma query_field(h.f)``
=====================================================  =====================================================

``latest`` is the header the state extracted last (``s.last`` for a stack). Declarations a spec
does not need (actions, tables, controls, field lists, checksums, registers, counters, meters,
blackboxes, ...) are skipped with one note per kind; ``set_metadata`` and value sets are errors
that say what to write instead. Errors here start with ``P4_14:``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable

from compiler.base import ParseError, SourceLocation, SpecError
from compiler.spec import expr as ex
from compiler.spec.metadata import INTRINSIC_METADATA
from compiler.spec.p4_14_lex import Tok, number_value, preprocess
from compiler.spec.skip import Declaration
from compiler.spec.skip import notes as skip_notes
from compiler.spec.syntax import (
    RawAnnotation,
    RawArg,
    RawCall,
    RawCase,
    RawCompound,
    RawKeysetElement,
    RawMember,
    RawParam,
    RawParser,
    RawPath,
    RawRef,
    RawState,
    RawStatement,
    RawTransition,
    RawType,
)

# Top-level P4_14 declarations a spec does not need, and what to call them in a note.
SKIPPED = {
    "action": "action", "table": "table", "control": "control", "field_list": "field_list",
    "field_list_calculation": "field_list_calculation", "calculated_field": "calculated_field",
    "register": "register", "counter": "counter", "meter": "meter", "primitive_action": "primitive_action",
    "blackbox": "blackbox", "blackbox_type": "blackbox_type", "action_profile": "action_profile",
    "action_selector": "action_selector", "parser_exception": "parser_exception",
    "parser_value_set": "parser_value_set", "extern": "extern", "extern_type": "extern_type",
}
WHY = "a P4_14 spec needs only header types, header instances and the parser"
P4_16_WORDS = ("struct", "const", "typedef", "state", "transition", "package", "enum", "error", "match_kind")
PACKET, HDR = "packet", "hdr"


@dataclass
class _HeaderType:
    name: str
    fields: list[tuple[str, int, SourceLocation]]
    location: SourceLocation


@dataclass
class _Instance:
    kind: str  # header, metadata
    type_name: str
    name: str
    size: int | None
    location: SourceLocation


@dataclass
class _Key:
    ref: Any  # RawRef or RawCall (lookahead)
    width: int | None  # bits of the key the case values cover; None when unknown (the builder reports why)
    text: str
    location: SourceLocation


@dataclass
class _Case:
    values: list[tuple[int, int | None, SourceLocation]] | None  # (value, mask or None); None for default
    target: str
    target_location: SourceLocation
    location: SourceLocation


@dataclass
class _Function:
    name: str
    statements: list[RawStatement]
    keys: list[_Key] | None  # None: return STATE;
    target: str
    target_location: SourceLocation
    cases: list[_Case]
    location: SourceLocation


@dataclass
class P4_14Program:
    """Raw declarations for the builder, and what else the P4_14 reader found."""

    items: list[Any]
    includes: list[str] = field(default_factory=list)
    constants: dict[str, int] = field(default_factory=dict)
    notes: list[tuple[SourceLocation, str]] = field(default_factory=list)
    metadata_names: dict[str, str] = field(default_factory=dict)
    skipped_any: bool = False


def read_p4_14(text: str, path: str) -> P4_14Program:
    """Preprocess and parse a P4_14 spec into raw declarations (see the module docstring)."""
    pre = preprocess(text, path)
    reader = _Reader(pre.tokens, path)
    reader.parse()
    program = reader.program()
    program.includes = pre.includes
    program.constants = pre.constants
    program.notes = pre.notes + program.notes
    return program


class _Reader:
    def __init__(self, tokens: list[Tok], path: str) -> None:
        self.tokens = tokens
        self.path = path
        self.pos = 0
        self.header_types: dict[str, _HeaderType] = {}
        self.instances: dict[str, _Instance] = {}
        self.functions: list[_Function] = []
        self.annotations: list[RawAnnotation] = []
        self.skipped: list[Declaration] = []
        self.ignored_pragmas: dict[str, SourceLocation] = {}
        self.order: list[Any] = []  # header types and annotations, in source order

    # -- token access ---------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Tok | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self, what: str) -> Tok:
        tok = self.peek()
        if tok is None:
            raise ParseError(f"P4_14: unexpected end of file; expected {what}", self._end())
        self.pos += 1
        return tok

    def expect(self, text: str, context: str) -> Tok:
        tok = self.peek()
        if tok is None or tok.text != text:
            found = "end of file" if tok is None else repr(tok.text)
            raise ParseError(f"P4_14: expected '{text}' {context}, found {found}", tok.location if tok else self._end())
        self.pos += 1
        return tok

    def name(self, context: str) -> Tok:
        tok = self.next(f"a name {context}")
        if tok.kind != "name":
            raise ParseError(f"P4_14: expected a name {context}, found {tok.text!r}", tok.location)
        return tok

    def number(self, context: str) -> tuple[int, SourceLocation]:
        tok = self.next(f"a number {context}")
        value = number_value(tok) if tok.kind == "number" else None
        if value is None:
            if tok.text == "-":
                raise SpecError(f"P4_14: negative values are not supported ({context})", tok.location)
            raise ParseError(f"P4_14: expected a number {context}, found {tok.text!r}", tok.location)
        return value, tok.location

    def _end(self) -> SourceLocation:
        return self.tokens[-1].location if self.tokens else SourceLocation(self.path, 1, 1)

    # -- top level ------------------------------------------------------------------------------
    def parse(self) -> None:
        while self.peek() is not None:
            tok = self.peek()
            if tok.text == ";":
                self.pos += 1
            elif tok.kind == "annotation":
                self._pragma()
            elif tok.text == "header_type":
                self._header_type()
            elif tok.text in ("header", "metadata"):
                self._instance()
            elif tok.text == "parser":
                self._function()
            elif tok.text in SKIPPED:
                self._skip()
            elif tok.text in P4_16_WORDS:
                raise SpecError(f"P4_14: '{tok.text}' is P4_16; this spec is read as P4_14 (it declares header_type, "
                                f"header instances or parser functions). Write the spec in one version (a "
                                f"'// -*- P4_16 -*-' line forces P4_16)", tok.location)
            else:
                raise SpecError(f"P4_14: {tok.text!r} does not start a declaration p4sub reads (header_type, header, "
                                f"metadata, parser, @pragma; it skips {', '.join(sorted(SKIPPED))})", tok.location)

    def _skip(self) -> None:
        """Skip a declaration by balanced brackets: to its ';' or the '}' closing its first '{'."""
        keyword = self.next("a declaration")
        head: list[str] = []  # the words before the first bracket: the declaration's name
        closers = {"(": ")", "[": "]", "{": "}"}
        stack: list[Tok] = []
        opened = False
        while True:
            tok = self.peek()
            if tok is None:
                where = stack[-1] if stack else keyword
                raise ParseError(f"P4_14: the {keyword.text} declaration at {keyword.location} never ends (the "
                                 f"'{where.text}' at {where.location} is not closed)", self._end())
            self.pos += 1
            if tok.text in closers:
                stack.append(tok)
                opened = True
            elif tok.text in (")", "]", "}"):
                if not stack or closers[stack.pop().text] != tok.text:
                    raise ParseError(f"P4_14: unbalanced '{tok.text}' in the {keyword.text} declaration at "
                                     f"{keyword.location}", tok.location)
                if not stack and tok.text == "}":
                    break
            elif tok.text == ";" and not stack:
                break
            elif not opened and (tok.kind == "name" or tok.text == "."):
                head.append(tok.text)
        words = " ".join(head).replace(" . ", ".").split()
        self.skipped.append(Declaration(SKIPPED[keyword.text], words[-1] if words else "", 0, 0, keyword.location))

    # -- pragmas ----------------------------------------------------------------------------------
    def _pragma(self) -> None:
        """``@pragma NAME ...`` to the end of its line; only ``query_*`` pragmas are read."""
        at = self.next("a pragma")
        if at.text != "@pragma":
            raise SpecError(f"P4_14: {at.text} is a P4_16 annotation; P4_14 writes @pragma {at.text[1:]}(...)",
                            at.location)
        line = [t for t in self.tokens[self.pos:self._line_end(at)]]
        self.pos += len(line)
        if not line or line[0].kind != "name":
            raise SpecError("P4_14: @pragma needs a name", at.location)
        name = line[0].text
        if not name.startswith("query_"):
            self.ignored_pragmas.setdefault(name, at.location)
            return
        args = self._pragma_args(line[1:], name, at)
        ann = RawAnnotation(name, args, True, at.location)
        self.annotations.append(ann)
        self.order.append(ann)

    def _line_end(self, at: Tok) -> int:
        end = self.pos
        while end < len(self.tokens) and (self.tokens[end].location.file, self.tokens[end].location.line) == \
                (at.location.file, at.location.line):
            end += 1
        return end

    def _pragma_args(self, toks: list[Tok], name: str, at: Tok) -> list[RawArg] | None:
        if not toks:
            return None
        if toks[0].text != "(" or toks[-1].text != ")":
            raise SpecError(f"P4_14: @pragma {name} takes its arguments in parentheses: @pragma {name}(...)",
                            toks[0].location)
        pieces: list[list[Tok]] = [[]]
        for tok in toks[1:-1]:
            if tok.text == ",":
                pieces.append([])
            else:
                pieces[-1].append(tok)
        if len(pieces) > 1 and not pieces[-1]:
            pieces.pop()  # a trailing comma: Camus writes query_field_counter(name, )
        if pieces == [[]]:
            return []
        for piece in pieces:
            if not piece:
                raise SpecError(f"P4_14: @pragma {name}: empty argument", at.location)
        return [self._pragma_arg(piece, name) for piece in pieces]

    def _pragma_arg(self, toks: list[Tok], name: str) -> RawArg:
        loc = toks[0].location
        if len(toks) == 1 and toks[0].kind == "string":
            return RawArg("string", "", toks[0].text[1:-1], loc)
        if len(toks) == 1 and toks[0].kind == "number":
            return RawArg("expr", "", ex.Num(number_value(toks[0]), None, loc), loc)
        if len(toks) == 3 and toks[0].kind == "name" and toks[1].text == "=" and toks[2].kind == "number":
            return RawArg("keyword", toks[0].text, ex.Num(number_value(toks[2]), None, toks[2].location), loc)
        parts: list[Any] = []
        i = 0
        while i < len(toks):
            tok = toks[i]
            if tok.kind == "name" and (i == 0 or toks[i - 1].text == "."):
                parts.append(tok.text)
            elif tok.text == "." and i > 0:
                pass
            elif tok.text == "[" and i + 2 < len(toks) and toks[i + 2].text == "]":
                index = toks[i + 1]
                parts.append(ex.Num(number_value(index), None, index.location) if index.kind == "number"
                             else index.text)
                i += 2
            else:
                raise SpecError(f"P4_14: @pragma {name}: cannot read the argument "
                                f"{' '.join(t.text for t in toks)!r}", tok.location)
            i += 1
        return RawArg("expr", "", RawRef(RawPath(tuple(parts), loc), loc), loc)

    # -- header types and instances ---------------------------------------------------------------
    def _header_type(self) -> None:
        keyword = self.next("header_type")
        name = self.name("after header_type")
        self.expect("{", f"after header_type {name.text}")
        self.expect("fields", f"in header_type {name.text} (P4_14 writes header_type T {{ fields {{ f : 8; }} }})")
        self.expect("{", "after fields")
        fields: list[tuple[str, int, SourceLocation]] = []
        while self.peek() is not None and self.peek().text != "}":
            fname = self.name(f"(a field of {name.text})")
            self.expect(":", f"after field {fname.text} (P4_14 writes 'name : width;')")
            if self.peek() is not None and self.peek().text == "*":
                raise SpecError(f"P4_14: variable-length field {name.text}.{fname.text} ('*') is not supported by "
                                f"p4sub; declare the fixed-width fields and leave the variable part unparsed",
                                self.peek().location)
            width, wloc = self.number(f"for the width of {name.text}.{fname.text}")
            if self.peek() is not None and self.peek().text == "(":
                self.pos += 1
                while self.peek() is not None and self.peek().text != ")":
                    attr = self.next("a field attribute")
                    if attr.text == "signed":
                        raise SpecError(f"P4_14: signed field {name.text}.{fname.text} is not supported by p4sub; "
                                        f"declare it unsigned", attr.location)
                self.expect(")", "after the field attributes")
            self.expect(";", f"after field {fname.text}")
            fields.append((fname.text, width, fname.location))
        self.expect("}", f"closing the fields of {name.text}")
        while self.peek() is not None and self.peek().text in ("length", "max_length"):
            attr = self.next("length")
            self.expect(":", f"after {attr.text}")
            value = [self.next(f"the {attr.text}")]
            while self.peek() is not None and self.peek().text != ";":
                value.append(self.next(f"the {attr.text}"))
            self.expect(";", f"after {attr.text}")
            if attr.text == "length" and not (len(value) == 1 and value[0].kind == "number"):
                raise SpecError(f"P4_14: header_type {name.text} has a variable length; variable-length headers are "
                                f"not supported by p4sub (declare the fixed part only)", attr.location)
        self.expect("}", f"closing header_type {name.text}")
        if name.text in self.header_types:
            raise SpecError(f"P4_14: duplicate header_type {name.text} (first at "
                            f"{self.header_types[name.text].location})", name.location)
        htype = _HeaderType(name.text, fields, keyword.location)
        self.header_types[name.text] = htype
        self.order.append(htype)

    def _instance(self) -> None:
        keyword = self.next("header or metadata")
        type_name = self.name(f"(the header_type of a {keyword.text} instance: {keyword.text} T name;)")
        name = self.name(f"(the name of a {keyword.text} instance: {keyword.text} {type_name.text} name;)")
        size = None
        if self.peek() is not None and self.peek().text == "[":
            self.pos += 1
            if keyword.text == "metadata":
                raise SpecError("P4_14: metadata instances cannot be arrays", name.location)
            size, _ = self.number(f"for the size of header stack {name.text}")
            self.expect("]", f"after the size of {name.text}")
        if keyword.text == "metadata" and self.peek() is not None and self.peek().text == "{":
            self._skip_block()  # initial values: not packet layout
        self.expect(";", f"after {keyword.text} {type_name.text} {name.text}")
        if name.text in self.instances:
            raise SpecError(f"P4_14: duplicate instance {name.text} (first at {self.instances[name.text].location})",
                            name.location)
        self.instances[name.text] = _Instance(keyword.text, type_name.text, name.text, size, name.location)

    def _skip_block(self) -> None:
        depth = 0
        while True:
            tok = self.next("'}'")
            depth += {"{": 1, "}": -1}.get(tok.text, 0)
            if depth == 0:
                return

    # -- parser functions ---------------------------------------------------------------------------
    def _function(self) -> None:
        self.next("parser")
        name = self.name("after parser")
        if self.peek() is not None and self.peek().text == "(":
            raise SpecError(f"P4_14: parser {name.text}( looks like P4_16; a P4_14 parser function is "
                            f"'parser {name.text} {{ ... }}'", self.peek().location)
        self.expect("{", f"after parser {name.text}")
        statements: list[RawStatement] = []
        latest: tuple[str, bool] | None = None
        while self.peek() is not None and self.peek().text != "return":
            tok = self.name(f"(a statement of parser {name.text}: extract(h); or return ...;)")
            if tok.text == "set_metadata":
                raise SpecError("P4_14: set_metadata in a parser state is not supported by p4sub; the parse graph "
                                "holds only extracts and transitions (select on the header field itself, or on "
                                "current(offset, width))", tok.location)
            if tok.text != "extract":
                raise SpecError(f"P4_14: {tok.text!r} in parser {name.text} is not supported by p4sub; a parser "
                                f"function holds extract(h); statements and a return", tok.location)
            statements.append(self._extract(tok))
            latest = self._extracted(statements[-1])
        if self.peek() is None:
            raise ParseError(f"P4_14: parser {name.text} has no return statement", self._end())
        self.next("return")
        if self.peek() is not None and self.peek().text == "select":
            function = self._select(name, statements, latest)
        else:
            target, target_loc = self._target(f"after return in parser {name.text}")
            self.expect(";", f"after return {target}")
            function = _Function(name.text, statements, None, target, target_loc, [], name.location)
        self.expect("}", f"closing parser {name.text} (the return statement comes last)")
        if any(f.name == name.text for f in self.functions):
            raise SpecError(f"P4_14: duplicate parser function {name.text}", name.location)
        self.functions.append(function)

    def _extract(self, keyword: Tok) -> RawStatement:
        self.expect("(", "after extract")
        inst = self.name("to extract")
        parts: tuple[Any, ...] = (HDR, inst.text)
        if self.peek() is not None and self.peek().text == "[":
            self.pos += 1
            index = self.next("next")
            if index.text != "next":
                raise SpecError(f"P4_14: extract({inst.text}[{index.text}]) is not supported by p4sub; extract "
                                f"stacks with extract({inst.text}[next])", index.location)
            self.expect("]", "after next")
            parts += ("next",)
        self.expect(")", "after the header to extract")
        self.expect(";", "after extract(...)")
        declared = self.instances.get(inst.text)
        if declared is not None and declared.kind == "metadata":
            raise SpecError(f"P4_14: extract({inst.text}): {inst.text} is a metadata instance; only headers are "
                            f"extracted", inst.location)
        if declared is not None and declared.size is not None and len(parts) == 2:
            raise SpecError(f"P4_14: extract({inst.text}): {inst.text} is a header stack; extract "
                            f"{inst.text}[next]", inst.location)
        if declared is not None and declared.size is None and len(parts) == 3:
            raise SpecError(f"P4_14: extract({inst.text}[next]): {inst.text} is a header, not a stack; extract "
                            f"({inst.text})", inst.location)
        ref = RawRef(RawPath(parts, inst.location), inst.location)
        return RawStatement("call", RawPath((PACKET, "extract"), keyword.location), [ref], keyword.location)

    @staticmethod
    def _extracted(statement: RawStatement) -> tuple[str, bool]:
        parts = statement.args[0].path.parts
        return parts[1], len(parts) == 3

    def _target(self, context: str) -> tuple[str, SourceLocation]:
        tok = self.name(context)
        if tok.text == "parse_error":
            self.name("after parse_error")
            return "reject", tok.location
        return tok.text, tok.location

    def _select(self, name: Tok, statements: list[RawStatement], latest: tuple[str, bool] | None) -> _Function:
        select = self.next("select")
        self.expect("(", "after select")
        keys = [self._key(name.text, latest)]
        while self.peek() is not None and self.peek().text == ",":
            self.pos += 1
            keys.append(self._key(name.text, latest))
        self.expect(")", "closing select(...)")
        self.expect("{", "after select(...)")
        cases: list[_Case] = []
        while self.peek() is not None and self.peek().text != "}":
            cases.append(self._case())
        self.expect("}", "closing the select cases")
        if self.peek() is not None and self.peek().text == ";":
            self.pos += 1
        return _Function(name.text, statements, keys, "", select.location, cases, name.location)

    def _key(self, state: str, latest: tuple[str, bool] | None) -> _Key:
        tok = self.name(f"(a select key in parser {state}: latest.f, h.f or current(offset, width))")
        if tok.text == "current":
            self.expect("(", "after current")
            args = [self.next("the arguments of current(offset, width)")]
            while self.peek() is not None and args[-1].text != ")":
                args.append(self.next("')' closing current(...)"))
            values = [number_value(t) if t.kind == "number" else None for t in args[:-1:2]]
            if len(args) != 4 or args[1].text != "," or None in values:
                raise SpecError("P4_14: current(offset, width) takes two constant numbers (bits from the current "
                                "position); p4sub looks ahead a fixed span, so an expression is not supported",
                                tok.location)
            offset, width = values
            if width <= 0 or offset + width > ex.MAX_WIDTH:
                raise SpecError(f"P4_14: current({offset}, {width}) is not supported: p4sub looks ahead 1 to "
                                f"{ex.MAX_WIDTH} bits from the current position", tok.location)
            lookahead = RawCall(RawPath((PACKET, "lookahead"), tok.location), [], tok.location,
                                RawType("bit", ex.Num(offset + width), "", tok.location))
            return _Key(lookahead, width, f"current({offset}, {width})", tok.location)
        if tok.text == "latest":
            self.expect(".", "after latest")
            fname = self.name("after latest.")
            if latest is None:
                raise SpecError(f"P4_14: latest.{fname.text} in parser {state}, which extracts no header before its "
                                f"select; name the header: h.{fname.text}", tok.location)
            inst, stacked = latest
            parts: tuple[Any, ...] = (HDR, inst, "last", fname.text) if stacked else (HDR, inst, fname.text)
            return self._field_key(parts, f"latest.{fname.text}", tok.location)
        parts = (HDR, tok.text)
        text = tok.text
        if self.peek() is not None and self.peek().text == "[":
            self.pos += 1
            index = self.next("an index or last")
            self.expect("]", "after the stack index")
            if index.text == "next":
                raise SpecError(f"P4_14: {tok.text}[next] can only be extracted; select on {tok.text}[last]",
                                index.location)
            value = number_value(index) if index.kind == "number" else None
            if index.text != "last" and value is None:
                raise SpecError(f"P4_14: {tok.text}[{index.text}]: a stack index is a number or last", index.location)
            parts += ("last",) if index.text == "last" else (ex.Num(value, None, index.location),)
            text += f"[{index.text}]"
        self.expect(".", f"after {text} (a select key is a field: {text}.f)")
        fname = self.name(f"after {text}.")
        declared = self.instances.get(tok.text)
        if (declared is not None and declared.kind == "metadata") or (declared is None and tok.text in INTRINSIC_METADATA):
            raise SpecError(f"P4_14: select on metadata ({tok.text}.{fname.text}) is not supported by p4sub: the "
                            f"parse graph selects on header fields and current(offset, width)", tok.location)
        if declared is not None and declared.size is not None and len(parts) == 2:
            raise SpecError(f"P4_14: {tok.text} is a header stack; name an element: {tok.text}[last].{fname.text} "
                            f"or {tok.text}[i].{fname.text}", tok.location)
        return self._field_key(parts + (fname.text,), f"{text}.{fname.text}", tok.location)

    def _field_key(self, parts: tuple[Any, ...], text: str, location: SourceLocation) -> _Key:
        return _Key(RawRef(RawPath(parts, location), location), self._field_width(parts[1], parts[-1]), text,
                    location)

    def _field_width(self, inst_name: str, field_name: str) -> int | None:
        inst = self.instances.get(inst_name)
        htype = self.header_types.get(inst.type_name) if inst else None
        return next((w for n, w, _ in htype.fields if n == field_name), None) if htype else None

    def _case(self) -> _Case:
        first = self.peek()
        values: list[tuple[int, int | None, SourceLocation]] | None = []
        if first.text == "default":
            self.pos += 1
            values = None
        else:
            while True:
                tok = self.peek()
                if tok is not None and tok.kind == "name":
                    raise SpecError(f"P4_14: {tok.text!r} in a select case is neither a number nor a #define'd "
                                    f"constant (if another file #defines it, write a spec that #includes both; "
                                    f"parser value sets are not supported by p4sub: list the values)", tok.location)
                value, loc = self.number("(a select case value, or default)")
                mask = None
                if self.peek() is not None and self.peek().text == "mask":
                    self.pos += 1
                    mask, _ = self.number("after mask")
                values.append((value, mask, loc))
                if self.peek() is None or self.peek().text != ",":
                    break
                self.pos += 1
        self.expect(":", "in a select case (P4_14 writes 'value : state;')")
        target, target_loc = self._target("(the state a select case goes to)")
        self.expect(";", f"after the select case's state {target}")
        return _Case(values, target, target_loc, first.location)

    # -- to raw declarations -------------------------------------------------------------------------
    def program(self) -> P4_14Program:
        items: list[Any] = []
        header_users = {i.type_name for i in self.instances.values() if i.kind == "header"}
        metadata_users = {i.type_name for i in self.instances.values() if i.kind == "metadata"}
        for thing in self.order:
            if isinstance(thing, RawAnnotation):
                items.append(thing)
                continue
            members = [RawMember(RawType("bit", ex.Num(w, None, loc), "", loc), n, None, loc)
                       for n, w, loc in thing.fields]
            whole_bytes = sum(w for _, w, _ in thing.fields) % 8 == 0
            header = thing.name in header_users or (thing.name not in metadata_users and whole_bytes)
            items.append(RawCompound("header" if header else "struct", thing.name, members, [], thing.location))
        headers = self._deparse_order([i for i in self.instances.values() if i.kind == "header"])
        struct_name = _fresh("headers", set(self.header_types))
        for inst in headers:
            if inst.type_name not in self.header_types:
                raise SpecError(f"P4_14: header {inst.type_name} {inst.name}: unknown header_type {inst.type_name!r}"
                                f"{_did_you_mean(inst.type_name, self.header_types)}", inst.location)
        if headers:
            members = [RawMember(RawType("named", None, i.type_name, i.location), i.name,
                                 ex.Num(i.size, None, i.location) if i.size is not None else None, i.location)
                       for i in headers]
            items.append(RawCompound("struct", struct_name, members, [], headers[0].location))
        if self.functions:
            items.append(self._parser(struct_name))
        notes = skip_notes(self.skipped, WHY)
        if self.ignored_pragmas:
            names = list(self.ignored_pragmas)
            notes.append((next(iter(self.ignored_pragmas.values())),
                          f"ignored {len(names)} pragma{'s' if len(names) > 1 else ''} p4sub does not read: "
                          f"{', '.join(names)} (it reads @pragma query_*)"))
        metadata_names = {i.name: "a P4_14 metadata instance" for i in self.instances.values()
                          if i.kind == "metadata" and i.name not in INTRINSIC_METADATA}
        return P4_14Program(items, notes=notes, metadata_names=metadata_names, skipped_any=bool(self.skipped))

    def _deparse_order(self, headers: list[_Instance]) -> list[_Instance]:
        """Header instances in P4_14's deparse order: as the parse graph extracts them, then the rest.

        P4_14 has no headers struct; its deparser emits headers in the parse graph's topological
        order. The P4_16 headers struct is emitted in member order, so the members follow that
        order (a header file declaring its instances before the parser's would otherwise put them
        first). Reverse post-order of a depth-first walk from ``start`` ignores back edges (loops
        over a stack).
        """
        by_name = {f.name: f for f in self.functions}
        post: list[str] = []
        seen: set[str] = set()
        stack: list[tuple[str, list[str]]] = []

        def successors(name: str) -> list[str]:
            function = by_name[name]
            targets = [function.target] if function.keys is None else [c.target for c in function.cases]
            return [t for t in targets if t in by_name]

        if "start" in by_name:
            seen.add("start")
            stack.append(("start", successors("start")))
        while stack:
            name, todo = stack[-1]
            if todo:
                succ = todo.pop(0)
                if succ not in seen:
                    seen.add(succ)
                    stack.append((succ, successors(succ)))
            else:
                post.append(name)
                stack.pop()
        order: list[str] = []
        for name in reversed(post):
            for statement in by_name[name].statements:
                extracted = statement.args[0].path.parts[1]
                if extracted not in order:
                    order.append(extracted)
        rank = {name: i for i, name in enumerate(order)}
        return sorted(headers, key=lambda i: rank.get(i.name, len(rank)))  # stable: the rest keep their order

    def _parser(self, struct_name: str) -> RawParser:
        if not any(i.kind == "header" for i in self.instances.values()):
            raise SpecError("P4_14: the parser extracts no headers: declare header instances (header T name;)",
                            self.functions[0].location)
        if not any(f.name == "start" for f in self.functions):
            raise SpecError("P4_14: there is no 'parser start' function; P4_14 parsing starts there",
                            self.functions[0].location)
        controls = {d.name for d in self.skipped if d.kind == "control"}
        states = []
        for function in self.functions:
            states.append(RawState(function.name, function.statements, self._transition(function, controls),
                                   function.location))
        location = self.functions[0].location
        params = [RawParam("", RawType("named", None, "packet_in", location), PACKET, location),
                  RawParam("out", RawType("named", None, struct_name, location), HDR, location)]
        return RawParser(_fresh("ParserImpl", set(self.header_types) | {struct_name}), False, params, states, [],
                         location)

    def _transition(self, function: _Function, controls: set[str]) -> RawTransition:
        def target(name: str) -> str:  # a parser returns to a control: ingress, the P4_14 accept
            return "accept" if name == "ingress" or name in controls else name

        if function.keys is None:
            return RawTransition(None, target(function.target), [], function.target_location)
        cases = []
        widths = [k.width for k in function.keys]
        for case in function.cases:
            if case.values is None:
                element = RawKeysetElement("default", None, None, case.location)
                cases.append(RawCase([element], False, target(case.target), case.target_location, case.location))
                continue
            if any(w is None for w in widths):
                continue  # an unknown key: the builder reports it
            for value, mask, loc in case.values:
                elements = _split(value, mask, function.keys, loc)
                cases.append(RawCase(elements, len(elements) > 1, target(case.target), case.target_location,
                                     case.location))
        return RawTransition([k.ref for k in function.keys], "", cases, function.location)


def _split(value: int, mask: int | None, keys: list[_Key], location: SourceLocation) -> list[RawKeysetElement]:
    """A P4_14 case value (over the select keys concatenated) as one keyset element per key."""
    total = sum(k.width for k in keys)
    full = (1 << total) - 1
    for what, number in (("value", value), ("mask", mask)):
        if number is not None and number > full:
            keys_text = ", ".join(k.text for k in keys)
            raise SpecError(f"P4_14: select {what} {number:#x} does not fit the {total} bits of the select keys "
                            f"({keys_text})" + (" concatenated" if len(keys) > 1 else ""), location)
    mask = full if mask is None else mask
    elements = []
    shift = total
    for key in keys:
        shift -= key.width
        ones = (1 << key.width) - 1
        piece_value, piece_mask = (value >> shift) & ones, (mask >> shift) & ones
        lookahead = isinstance(key.ref, RawCall)
        if piece_mask == 0:
            elements.append(RawKeysetElement("dontcare", None, None, location))
        elif piece_mask == ones and not (lookahead and key.ref.type_arg.width.value != key.width):
            elements.append(RawKeysetElement("value", ex.Num(piece_value, None, location), None, location))
        else:  # current(offset, width) looks ahead offset + width bits: the mask keeps the low ones
            elements.append(RawKeysetElement("mask", ex.Num(piece_value & piece_mask, None, location),
                                             ex.Num(piece_mask, None, location), location))
    return elements


def _fresh(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
