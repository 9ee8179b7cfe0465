"""Read a protocol spec (a small subset of P4_16, ``grammar/p4spec.lark``) into a :class:`~compiler.spec.Spec`.

Two passes. A lark LALR parser and a transformer turn the text into raw declarations that remember
where they came from; :class:`_Builder` then resolves types, consts and typedefs in declaration
order (as P4 does), finds the headers struct, builds the parse graph and checks the ``@query_*``
annotations against it. Every problem becomes a :class:`~compiler.errors.P4subError` with
``file:line:col``: syntax errors are :class:`ParseError` (labelled by matching small broken
examples, the way lark's ``error_reporting_lalr`` example does), everything else
:class:`SpecError`; semantic errors are collected and reported together.

What a spec may hold is documented in ``docs/spec-files.md``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from compiler import spec_expr as ex
from compiler.errors import P4subError, ParseError, SourceLocation, SpecError, raise_all
from compiler.spec import (
    Advance,
    Counter,
    Extract,
    FieldDef,
    HeaderInstance,
    HeaderType,
    ParserState,
    QueryField,
    SelectCase,
    Spec,
    UserAction,
)
from grammar import grammar_text

SUPPORTED = "p4sub reads headers, structs, consts, typedefs and one parser"
QUERY_FIELD_KINDS = {
    "query_field": None,
    "query_field_exact": "exact",
    "query_field_range": "range",
    "query_field_lpm": "lpm",
    "query_field_ternary": "ternary",
}
QUERY_ANNOTATIONS = (*QUERY_FIELD_KINDS, "query_counter", "query_action")
#: Standard P4_16 annotations that say nothing about packet layout; accepted and ignored.
IGNORED_ANNOTATIONS = ("name", "hidden", "noWarn", "deprecated", "brief", "description")
HEADERS_NAMES = ("headers", "headers_t")
END_STATES = ("accept", "reject")
MAX_SCALE = 38

# Words that start something outside the subset, and how to call it in a message.
_UNSUPPORTED_WORDS = {
    "control": "control blocks",
    "action": "actions",
    "table": "tables",
    "extern": "extern declarations",
    "apply": "apply blocks",
    "header_union": "header unions",
    "enum": "enums",
    "error": "error declarations",
    "match_kind": "match_kind declarations",
    "package": "package declarations",
    "type": "type declarations",
    "if": "if statements",
    "else": "if statements",
    "switch": "switch statements",
    "return": "return statements",
    "exit": "exit statements",
    "value_set": "parser value sets",
    "for": "loops",
    "while": "loops",
    "varbit": "varbit types",
    "tuple": "tuples",
    "abstract": "abstract methods",
    "register": "registers",
    "counter": "counters",
    "meter": "meters",
    "Register": "registers",
    "Counter": "counters",
    "Meter": "meters",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        grammar_text("p4spec"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        start=["start", "expr"],
    )


def _parse_start(text: str) -> Any:
    return _parser().parse(text, start="start")


# ------------------------------------------------------------------------------------------------
# public API


def read_spec(path: str | Path) -> Spec:
    """Read and check a spec file; a missing or unreadable file is a P4subError naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise P4subError(f"{path}: no such spec file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: spec file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise P4subError(f"{path}: cannot read spec file: {exc.strerror or exc}") from None
    return parse_spec(text, str(path))


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Parse and check the text of a spec file. Raises ParseError or SpecError (or an ErrorList of them)."""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ParseError("spec file contains a NUL byte (is it a binary file?)", SourceLocation(path, line, 1))
    try:
        tree = _parse_start(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, path) from None
    except LarkError as exc:  # lark's other failures on odd input must not escape as tracebacks
        raise ParseError(f"cannot parse spec: {exc}", SourceLocation(path, 1, 1)) from None
    try:
        items = _ToRaw(path).transform(tree)
        return _Builder(path).build(items)
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4subError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise SpecError("expressions are nested too deeply", SourceLocation(path, 1, 1)) from None
        raise
    except RecursionError:
        raise SpecError("expressions are nested too deeply", SourceLocation(path, 1, 1)) from None


@lru_cache(maxsize=4096)
def parse_expression(text: str, path: str = "<expression>") -> ex.Expr:
    """Read back an expression :func:`compiler.spec_expr.render` wrote (e.g. ``Advance.expression``).

    Field references stay as written (``mold_msg.last.msg_len``); constants must already be
    literals, which is how the reader stores them. Results are cached: the trees are immutable.
    """
    try:
        tree = _parser().parse(text, start="expr")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, path) from None
    except LarkError as exc:
        raise ParseError(f"cannot parse expression: {exc}", SourceLocation(path, 1, 1)) from None
    try:
        raw = _ToRaw(path).transform(tree)
        return _Builder(path).plain_expression(raw)
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4subError):
            raise exc.orig_exc from None
        raise
    except RecursionError:
        raise SpecError("expression is nested too deeply", SourceLocation(path, 1, 1)) from None


# ------------------------------------------------------------------------------------------------
# syntax errors

# Small broken specs and what is wrong with them; lark picks the label whose example fails the same way.
_ERROR_EXAMPLES: dict[str, list[str]] = {
    "missing ';'": [
        "header h_t { bit<8> a bit<8> b; }",
        "header h_t { bit<8> a }",
        "const bit<8> X = 1 const bit<8> Y = 2;",
        "const bit<8> X = 1",
        "typedef bit<8> t_t typedef bit<8> u_t;",
        "struct s_t { h_t a h_t b; }",
        "parser P(packet_in p, out h hdr) { state start { p.extract(hdr.a) transition accept; } }",
        "parser P(packet_in p, out h hdr) { state start { p.extract(hdr.a) } }",
        "parser P(packet_in p, out h hdr) { state start { transition accept } }",
        "parser P(packet_in p, out h hdr) { state start { transition select(hdr.a.b) { 1: x } } }",
    ],
    "unclosed '{' (missing '}')": [
        "header h_t { bit<8> a;",
        "struct s_t { h_t a;",
        "parser P(packet_in p, out h hdr) { state start { transition accept; }",
        "parser P(packet_in p, out h hdr) { state start { transition accept;",
        "parser P(packet_in p, out h hdr) { state start { transition select(hdr.a.b) { 1: x; }",
        "header h_t { bit<8> a; header g_t { bit<8> b; }",
        "struct s_t { h_t a; header g_t { bit<8> b; }",
        "parser P(packet_in p, out h hdr) { state start { transition accept; } header g_t { bit<8> b; }",
    ],
    "unclosed '('": [
        "parser P(packet_in p, out h hdr) { state start { p.extract(hdr.a; transition accept; } }",
        "parser P(packet_in p, out h hdr { }",
        "const bit<8> X = (1 + 2;",
        "@query_field(a.b header h_t { }",
    ],
    "a field needs a type and a name, e.g. 'bit<8> ttl;'": [
        "header h_t { ttl; }",
        "header h_t { bit<8>; }",
        "struct s_t { h_t; }",
    ],
    "a width is written bit<N>": [
        "header h_t { bit<> a; }",
        "header h_t { bit<8 a; }",
        "const bit<8 X = 1;",
    ],
    "a select case is 'value: state;' (or 'default: state;')": [
        "parser P(packet_in p, out h hdr) { state start { transition select(hdr.a.b) { 1 x; } } }",
        "parser P(packet_in p, out h hdr) { state start { transition select(hdr.a.b) { 1: ; } } }",
        "parser P(packet_in p, out h hdr) { state start { transition select(hdr.a.b) { : x; } } }",
    ],
    "a parser contains only states: 'state name { ... }'": [
        "parser P(packet_in p, out h hdr) { start { transition accept; } }",
        "parser P(packet_in p, out h hdr) { bit<8> x; }",
    ],
    "the last statement of a state is its transition": [
        "parser P(packet_in p, out h hdr) { state start { transition accept; p.extract(hdr.a); } }",
    ],
    "comparisons ('<', '>', '<=', '>=') are not supported in a spec file": [
        "const bit<8> X = 1 < 2;",
        "const bit<8> X = 1 > 2;",
        "const bit<8> X = 1 >= 2;",
        "const bit<8> X = 1 <= 2;",
    ],
    "a constant needs a type: 'const bit<N> NAME = value;'": [
        "const X = 1;",
    ],
    "extra '}' or a statement outside any block": [
        "header h_t { bit<8> a; } }",
        "parser P(packet_in p, out h hdr) { state start { transition accept; } } }",
    ],
}


def _syntax_error(exc: UnexpectedInput, text: str, path: str) -> P4subError:
    loc = SourceLocation(path, exc.line if exc.line > 0 else 1, exc.column if exc.column > 0 else 1)
    at_end = isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END")
    if at_end:
        lines = text.splitlines() or [""]
        loc = SourceLocation(path, len(lines), len(lines[-1]) + 1)
    if isinstance(exc, UnexpectedCharacters):
        return ParseError(_bad_character(text, exc.pos_in_stream), loc)
    if isinstance(exc, UnexpectedToken) and not at_end and text.startswith("/*", exc.token.start_pos or 0):
        return ParseError("unterminated /* comment", loc)
    if isinstance(exc, UnexpectedToken) and not at_end:
        unsupported = _unsupported(exc, text, path)
        if unsupported is not None:
            return unsupported
    label = _match_example(exc)
    if isinstance(exc, UnexpectedToken):
        found = "end of file" if at_end else repr(str(exc.token))
        detail = f"unexpected {found}; expected {_expected(exc.accepts or exc.expected)}"
    else:
        detail = "unexpected end of file"
    opened = _unclosed_brace(text) if at_end else None
    if opened is not None:
        detail = f"the '{{' at line {opened[0]}, column {opened[1]} is never closed"
    return ParseError(f"{label}: {detail}" if label else detail, loc)


def _unclosed_brace(text: str) -> tuple[int, int] | None:
    """(line, column) of the innermost '{' left open at the end of ``text``, skipping comments and strings."""
    stack: list[int] = []
    for match in re.finditer(r'//[^\n]*|/\*.*?(?:\*/|$)|"(?:\\.|[^"\\\n])*"|[{}]', text, re.S):
        token = match.group()
        if token == "{":
            stack.append(match.start())
        elif token == "}" and stack:
            stack.pop()
    if not stack:
        return None
    pos = stack[-1]
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


@lru_cache(maxsize=1)
def _example_errors() -> tuple[tuple[str, int, frozenset[str], str], ...]:
    """(label, LALR state, accepted tokens, offending token) of every broken example."""
    out = []
    for label, examples in _ERROR_EXAMPLES.items():
        for example in examples:
            try:
                _parse_start(example)
            except UnexpectedInput as err:
                state = getattr(err, "state", None)
                if state is not None:
                    accepts = frozenset(getattr(err, "accepts", None) or getattr(err, "expected", None) or ())
                    out.append((label, state.position, accepts, str(getattr(err, "token", ""))))
    return tuple(out)


def _match_example(exc: UnexpectedInput) -> str | None:
    """The label of the broken example that fails like ``exc``.

    Like lark's ``match_examples``, but looser: lark compares the whole parser stack, which
    differs between the first item of a list (a file's first declaration, a parser's first state)
    and later ones. Here an example matches on the LALR state and the tokens it would accept, or
    failing that on the accepted tokens alone; an example failing on the same token wins.
    """
    state = getattr(exc, "state", None)
    if state is None:
        return None
    accepts = frozenset(getattr(exc, "accepts", None) or getattr(exc, "expected", None) or ())
    token = str(getattr(exc, "token", ""))
    examples = [e for e in _example_errors() if e[2] == accepts]
    for tier in ([e for e in examples if e[1] == state.position], examples):
        if tier:
            exact = [label for label, _, _, tok in tier if tok == token]
            return exact[0] if exact else tier[0][0]
    return None


def _bad_character(text: str, pos: int) -> str:
    if text.startswith("/*", pos):
        return "unterminated /* comment"
    if text.startswith('"', pos):
        return "unterminated string (strings end on the same line)"
    char = text[pos] if 0 <= pos < len(text) else "?"
    return f"unexpected character {char!r}"


def _unsupported(exc: UnexpectedToken, text: str, path: str) -> SpecError | None:
    """Name the unsupported construct when the parse stopped at one (a control, an if, a function...)."""
    token = exc.token
    word = str(token)
    expected = set(exc.accepts or exc.expected)
    if token.type == "DIRECTIVE":
        return SpecError("preprocessor directives may only stand between top-level declarations",
                         _tok_loc(path, token))
    if word in _UNSUPPORTED_WORDS:
        return SpecError(f"{_UNSUPPORTED_WORDS[word]} ('{word}') are not supported in a spec file ({SUPPORTED})",
                         _tok_loc(path, token))
    first, first_loc = _statement_start(text, token.start_pos or 0, path)
    if first in _UNSUPPORTED_WORDS:
        return SpecError(f"{_UNSUPPORTED_WORDS[first]} ('{first}') are not supported in a spec file ({SUPPORTED})",
                         first_loc)
    names = ("NAME", "BIT", "INT", "BOOL", "VARBIT")
    if "PARSER" in expected and "HEADER" in expected and token.type in names:  # top level, not a declaration
        return SpecError(
            f"'{word}' does not start a declaration p4sub knows: functions, instantiations and everything other "
            f"than const, typedef, header, struct and parser are not supported in a spec file ({SUPPORTED})",
            _tok_loc(path, token))
    if "STATE" in expected and token.type in ("NAME", "BIT", "INT", "BOOL", "VARBIT", "CONST"):
        return SpecError(
            f"only states may appear in a parser; local declarations, value sets and instantiations ('{word}') "
            f"are not supported in a spec file ({SUPPORTED})", _tok_loc(path, token))
    return None


def _statement_start(text: str, pos: int, path: str) -> tuple[str, SourceLocation]:
    """The first word of the statement or declaration the error is in (after the last ';', '{' or '}')."""
    start = max(text.rfind(c, 0, pos) for c in ";{}") + 1
    match = re.compile(r"\s*(?:(?://[^\n]*|/\*.*?\*/)\s*)*([A-Za-z_]\w*)", re.S).match(text, start, pos + 1)
    if not match:
        return "", SourceLocation(path, 1, 1)
    begin = match.start(1)
    line = text.count("\n", 0, begin) + 1
    column = begin - (text.rfind("\n", 0, begin) + 1) + 1
    return match.group(1), SourceLocation(path, line, column)


_TOKEN_NAMES = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "ANNOTATION": "an annotation",
    "DIRECTIVE": "a # directive", "EQOP": "'=='", "$END": "end of file",
}


@lru_cache(maxsize=1)
def _token_names() -> dict[str, str]:
    """What to call each terminal in a message: its text for punctuation and keywords."""
    names = {t.name: f"'{t.pattern.value}'" for t in _parser().terminals if t.pattern.type == "str"}
    return {**names, **_TOKEN_NAMES}


def _expected(names: Iterable[str]) -> str:
    table = _token_names()
    words = sorted({table.get(n, n.lower()) for n in names})
    return ", ".join(words[:8]) + (", ..." if len(words) > 8 else "") if words else "something else"


def _tok_loc(path: str, token: Token) -> SourceLocation:
    return SourceLocation(path, token.line or 1, token.column or 1)


# ------------------------------------------------------------------------------------------------
# raw declarations (the transformer's output; only this module sees them)


@dataclass
class _Path:
    parts: tuple[Any, ...]  # str for a name, an expression for an index
    location: SourceLocation

    def names(self) -> list[str]:
        return [p for p in self.parts if isinstance(p, str)]


@dataclass
class _RawRef:
    path: _Path
    location: SourceLocation


@dataclass
class _RawCall:
    path: _Path
    args: list[Any]
    location: SourceLocation
    type_arg: "_Type | None" = None


@dataclass
class _RawCast:
    type: "_Type"
    operand: Any
    location: SourceLocation


@dataclass
class _RawOther:
    """An expression the subset parses only to reject it (``==``, ``&&``, ``true``)."""

    what: str
    location: SourceLocation


@dataclass
class _Type:
    kind: str  # bit, int, int_inf, varbit, bool, named
    width: Any
    name: str
    location: SourceLocation


@dataclass
class _Arg:
    kind: str  # expr, keyword, string
    key: str
    value: Any
    location: SourceLocation


@dataclass
class _Annotation:
    name: str
    args: list[_Arg] | None
    pragma: bool
    location: SourceLocation


@dataclass
class _Directive:
    text: str
    location: SourceLocation


@dataclass
class _Const:
    type: _Type
    name: str
    value: Any
    location: SourceLocation


@dataclass
class _Typedef:
    type: _Type
    name: str
    location: SourceLocation


@dataclass
class _Member:
    type: _Type
    name: str
    size: Any  # None, or the stack size expression
    location: SourceLocation


@dataclass
class _Compound:
    kind: str  # header, struct
    name: str
    members: list[_Member]
    annotations: list[_Annotation]
    location: SourceLocation
    preceding: list[_Annotation] = field(default_factory=list)


@dataclass
class _Param:
    direction: str
    type: _Type
    name: str
    location: SourceLocation


@dataclass
class _Statement:
    kind: str  # call, assign
    path: _Path
    args: list[Any]
    location: SourceLocation


@dataclass
class _KeysetElement:
    kind: str  # value, mask, range, default, dontcare
    value: Any
    mask: Any
    location: SourceLocation


@dataclass
class _Case:
    elements: list[_KeysetElement]
    is_tuple: bool
    target: str
    target_location: SourceLocation
    location: SourceLocation


@dataclass
class _Transition:
    keys: list[Any] | None  # None for a direct transition
    target: str
    cases: list[_Case]
    location: SourceLocation


@dataclass
class _State:
    name: str
    statements: list[_Statement]
    transition: _Transition | None
    location: SourceLocation


@dataclass
class _Parser:
    name: str
    generic: bool
    params: list[_Param]
    states: list[_State]
    annotations: list[_Annotation]
    location: SourceLocation


@v_args(meta=True)
class _ToRaw(Transformer):
    """Parse tree to raw declarations; every node keeps its SourceLocation."""

    def __init__(self, file: str) -> None:
        super().__init__()
        self.file = file  # not "path": that is a grammar rule this transformer handles

    def _loc(self, meta) -> SourceLocation:
        if getattr(meta, "empty", True):
            return SourceLocation(self.file, 1, 1)
        return SourceLocation(self.file, meta.line, meta.column)

    def _tloc(self, token: Token) -> SourceLocation:
        return _tok_loc(self.file, token)

    def start(self, meta, items):
        return [i for i in items if i is not None and not isinstance(i, Token)]

    def directive(self, meta, items):
        return _Directive(str(items[0]), self._loc(meta))

    def annotation(self, meta, items):
        token, args = items
        return _Annotation(str(token)[1:], args, False, self._loc(meta))

    def pragma(self, meta, items):
        _, name, args = items
        return _Annotation(str(name), args, True, self._loc(meta))

    def annotation_args(self, meta, items):
        return [i for i in items if i is not None]

    def arg_expr(self, meta, items):
        return _Arg("expr", "", items[0], self._loc(meta))

    def arg_keyword(self, meta, items):
        return _Arg("keyword", str(items[0]), items[1], self._loc(meta))

    def arg_string(self, meta, items):
        return _Arg("string", "", _unquote(str(items[0])), self._loc(meta))

    def const_decl(self, meta, items):
        type_, name, value = items
        return _Const(type_, str(name), value, self._loc(meta))

    def typedef_decl(self, meta, items):
        type_, name = items
        return _Typedef(type_, str(name), self._loc(meta))

    def header_decl(self, meta, items):
        return self._compound("header", meta, items)

    def struct_decl(self, meta, items):
        return self._compound("struct", meta, items)

    def _compound(self, kind, meta, items):
        name, *body = items
        members = [m for m in body if isinstance(m, _Member)]
        annotations = [a for a in body if isinstance(a, _Annotation)]
        return _Compound(kind, str(name), members, annotations, self._loc(meta))

    def member(self, meta, items):
        type_, name = items
        return _Member(type_, str(name), None, self._tloc(name))

    def stack_member(self, meta, items):
        type_, size, name = items
        return _Member(type_, str(name), size, self._tloc(name))

    def bit_type(self, meta, items):
        return _Type("bit", items[0], "", self._loc(meta))

    def bit1_type(self, meta, items):
        return _Type("bit", ex.Num(1), "", self._loc(meta))

    def int_type(self, meta, items):
        return _Type("int", items[0], "", self._loc(meta))

    def int_inf_type(self, meta, items):
        return _Type("int_inf", None, "", self._loc(meta))

    def varbit_type(self, meta, items):
        return _Type("varbit", items[0], "", self._loc(meta))

    def bool_type(self, meta, items):
        return _Type("bool", None, "", self._loc(meta))

    def named_type(self, meta, items):
        return _Type("named", None, str(items[0]), self._loc(meta))

    def parser_decl(self, meta, items):
        name, type_params, *rest = items
        params = [p for p in rest if isinstance(p, _Param)]
        states = [s for s in rest if isinstance(s, _State)]
        annotations = [a for a in rest if isinstance(a, _Annotation)]
        return _Parser(str(name), type_params is not None, params, states, annotations, self._loc(meta))

    def type_params(self, meta, items):
        return True

    def param(self, meta, items):
        *_annotations, direction, type_, name = items
        return _Param(direction or "", type_, str(name), self._tloc(name))

    def dir_in(self, meta, items):
        return "in"

    def dir_out(self, meta, items):
        return "out"

    def dir_inout(self, meta, items):
        return "inout"

    def state_decl(self, meta, items):
        name, *body = items
        statements = [s for s in body if isinstance(s, _Statement)]
        transition = next((t for t in body if isinstance(t, _Transition)), None)
        return _State(str(name), statements, transition, self._tloc(name))

    def call_statement(self, meta, items):
        path, *args = items
        return _Statement("call", path, [a for a in args if a is not None], self._loc(meta))

    def assign_statement(self, meta, items):
        path, value = items
        return _Statement("assign", path, [value], self._loc(meta))

    def transition_direct(self, meta, items):
        return _Transition(None, str(items[0]), [], self._tloc(items[0]))

    def transition_select(self, meta, items):
        keys = [i for i in items if not isinstance(i, _Case) and i is not None]
        cases = [i for i in items if isinstance(i, _Case)]
        return _Transition(keys, "", cases, self._loc(meta))

    def select_case(self, meta, items):
        keyset, target = items
        if isinstance(keyset, list):
            elements, is_tuple = keyset, True
        else:
            elements, is_tuple = [keyset], False
        return _Case(elements, is_tuple, str(target), self._tloc(target), self._loc(meta))

    def keyset_tuple(self, meta, items):
        return list(items)

    def ks_value(self, meta, items):
        return _KeysetElement("value", items[0], None, self._loc(meta))

    def ks_mask(self, meta, items):
        return _KeysetElement("mask", items[0], items[1], self._loc(meta))

    def ks_range(self, meta, items):
        return _KeysetElement("range", items[0], items[1], self._loc(meta))

    def ks_default(self, meta, items):
        return _KeysetElement("default", None, None, self._loc(meta))

    def ks_dontcare(self, meta, items):
        return _KeysetElement("dontcare", None, None, self._loc(meta))

    # -- expressions --------------------------------------------------------------------------
    def number(self, meta, items):
        token = items[0]
        return _number(str(token), self._tloc(token))

    def boolean(self, meta, items):
        return _RawOther("boolean constants", self._loc(meta))

    def logical(self, meta, items):
        return _RawOther("comparisons and logical operators", self._loc(meta))

    def lnot(self, meta, items):
        return _RawOther("logical operators", self._loc(meta))

    def ref(self, meta, items):
        return _RawRef(items[0], self._loc(meta))

    def call(self, meta, items):
        path, *args = items
        return _RawCall(path, [a for a in args if a is not None], self._loc(meta))

    def generic_call(self, meta, items):
        path, type_arg = items
        return _RawCall(path, [], self._loc(meta), type_arg)

    def path(self, meta, items):
        parts = tuple(str(i) if isinstance(i, Token) else i for i in items)
        return _Path(parts, self._loc(meta))

    def cast(self, meta, items):
        type_, operand = items
        return _RawCast(type_, operand, self._loc(meta))

    def neg(self, meta, items):
        return ex.Unary("-", items[0], self._loc(meta))

    def bnot(self, meta, items):
        return ex.Unary("~", items[0], self._loc(meta))

    def _binary(op):  # noqa: N805 - builds the operator methods below
        def method(self, meta, items):
            items = [i for i in items if not isinstance(i, Token)]
            return ex.Binary(op, items[0], items[-1], self._loc(meta))

        return method

    add = _binary("+")
    sub = _binary("-")
    mul = _binary("*")
    div = _binary("/")
    mod = _binary("%")
    shl = _binary("<<")
    shr = _binary(">>")
    band = _binary("&")
    bxor = _binary("^")
    bor = _binary("|")
    del _binary


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


_NUMBER = re.compile(r"(?:(\d+)([ws]))?(.*)", re.S)


def _number(text: str, location: SourceLocation) -> ex.Num:
    width_text, kind, digits = _NUMBER.fullmatch(text).groups()
    digits = digits.replace("_", "")
    lower = digits.lower()
    if lower.startswith(("0x", "0b", "0o")):
        value = int(digits, 0)
    elif lower.startswith("0d"):
        value = int(digits[2:], 10)
    else:
        value = int(digits, 10)
    if width_text is None:
        return ex.Num(value, None, location)
    width = int(width_text)
    if kind == "s":
        raise SpecError(f"signed literal {text!r}: signed values are not supported in a spec file", location)
    if not 0 < width <= ex.MAX_WIDTH:
        raise SpecError(f"literal {text!r} has width {width}; widths go from 1 to {ex.MAX_WIDTH}", location)
    if value >= 1 << width:
        raise SpecError(f"literal {text!r}: {value} does not fit in {width} bits", location)
    return ex.Num(value, width, location)


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
        self.annotations: list[_Annotation] = []
        self.parsers: list[_Parser] = []
        self.guards = 0
        # set once the headers struct is known
        self.instances: dict[str, HeaderInstance] = {}
        self.hdr_param = ""
        self.packet_param = ""
        self.other_params: list[str] = []

    def error(self, message: str, location: SourceLocation | None) -> None:
        self.errors.append(SpecError(message, location))

    # -- top level ------------------------------------------------------------------------------
    def build(self, items: list[Any]) -> Spec:
        pending: list[_Annotation] = []
        for item in items:
            if isinstance(item, _Annotation):
                self.annotations.append(item)
                pending.append(item)
                continue
            if isinstance(item, _Directive):
                self._directive(item)
                continue
            if isinstance(item, _Const):
                self._const(item)
            elif isinstance(item, _Typedef):
                self._typedef(item)
            elif isinstance(item, _Compound):
                item.preceding = pending
                self.annotations.extend(item.annotations)
                self._compound(item)
            elif isinstance(item, _Parser):
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
        headers_struct = self._headers_struct(parser)
        states: dict[str, ParserState] = {}
        if parser is not None and headers_struct:
            states = self._parser(parser)
        query_fields, counters, actions = self._annotations()
        raise_all(self.errors)
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
            query_fields=query_fields,
            counters=counters,
            actions=actions,
        )

    def _declare(self, name: str, location: SourceLocation) -> bool:
        if name in self.declared:
            self.error(f"duplicate declaration of {name!r} (first declared at {self.declared[name]})", location)
            return False
        self.declared[name] = location
        return True

    def _directive(self, item: _Directive) -> None:
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
    def _const(self, item: _Const) -> None:
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

    def _typedef(self, item: _Typedef) -> None:
        width = self._bit_width(item.type, f"typedef {item.name}")
        if not self._declare(item.name, item.location) or not width:
            return
        self.typedefs[item.name] = width

    def _bit_width(self, type_: _Type, what: str, *, allow_int: bool = False) -> int | None | bool:
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
        self.error(f"{what}: {_type_text(type_)} is not supported in a spec file (use bit<N>)", type_.location)
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

    def _compound(self, item: _Compound) -> None:
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
                    fields.append(FieldDef(member.name, width, _type_text(type_), member.location))
                continue
            if member.size is not None:
                if not header_type:
                    self.error(f"struct {item.name}: stack {member.name!r} must be of a header type, not "
                               f"{_type_text(type_)}", member.location)
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
                    fields.append(FieldDef(member.name, width, _type_text(type_), member.location))
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
    def _headers_struct(self, parser: _Parser | None) -> str:
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
                names = ", ".join(f"{p.name} ({_type_text(p.type)})" for p in outs) or "none"
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
    def _parser(self, parser: _Parser) -> dict[str, ParserState]:
        raw_states: dict[str, _State] = {}
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

    def _statement(self, raw: _Statement) -> Extract | Advance | None:
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
        if not isinstance(arg, _RawRef):
            self.error("packet.extract takes a header of the headers struct, e.g. hdr.ethernet", location)
            return None
        parts = arg.path.parts
        text = _path_text(arg.path)
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
            return Advance(bits)
        return Advance(None, ex.render(expr))

    def _transition(self, raw: _State) -> tuple[list[str], list[SelectCase]]:
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
        if isinstance(raw, _RawCall) and raw.type_arg is not None:
            names = raw.path.names()
            if names != [self.packet_param, "lookahead"] or len(raw.path.parts) != 2:
                self.error(f"{_path_text(raw.path)}<...>() is not supported; select keys are header fields or "
                           f"{self.packet_param}.lookahead<bit<N>>()", location)
                return None
            if raw.type_arg.kind != "bit":
                self.error(f"lookahead<{_type_text(raw.type_arg)}> is not supported; look ahead a bit<N> value",
                           location)
                return None
            width = self._width(raw.type_arg.width, "lookahead")
            return (f"lookahead:{width}", width) if width else None
        if not isinstance(raw, _RawRef) or not raw.path.parts or raw.path.parts[0] != self.hdr_param:
            if isinstance(raw, _RawRef) and raw.path.parts and raw.path.parts[0] in self.other_params:
                self.error(f"select on {_path_text(raw.path)}: parser metadata is not supported in a spec file; "
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

    def _case(self, case: _Case, widths: list[int], keys: list[str]) -> SelectCase | None:
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

    def _header_ref(self, raw: _RawRef) -> ex.Ref:
        """``hdr.h.f`` / ``hdr.s.last.f`` / ``hdr.s[2].f`` to the Spec's ``h.f`` / ``s.last.f`` / ``s[2].f``."""
        parts = list(raw.path.parts[1:])
        text = _path_text(raw.path)
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
        if isinstance(raw, _RawRef):
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
                raise SpecError(f"{_path_text(raw.path)}: parser metadata is not supported in a spec file; use header "
                                f"fields", raw.location)
            raise SpecError(f"{_path_text(raw.path)} is not a constant", raw.location)
        if isinstance(raw, _RawCall):
            if raw.type_arg is not None and raw.path.names() == [self.packet_param, "lookahead"] and header_refs:
                raise SpecError("packet.lookahead may only be a select key", raw.location)
            raise SpecError(f"calls in expressions ({_path_text(raw.path)}(...)) are not supported in a spec file",
                            raw.location)
        if isinstance(raw, _RawOther):
            raise SpecError(f"{raw.what} are not supported in a spec file's expressions", raw.location)
        if isinstance(raw, _RawCast):
            if raw.type.kind != "bit":
                raise SpecError(f"cast to {_type_text(raw.type)} is not supported; cast to bit<N>", raw.location)
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
        if isinstance(raw, _RawRef):
            return ex.Ref(_path_text(raw.path), raw.location)
        if isinstance(raw, _RawCall) and raw.type_arg is not None and raw.type_arg.kind == "bit" \
                and raw.path.names() == ["packet", "lookahead"]:
            return ex.Lookahead(self._width_value(raw.type_arg.width, "lookahead"), raw.location)
        if isinstance(raw, _RawCast) and raw.type.kind == "bit":
            return ex.Cast(self._width_value(raw.type.width, "cast"), self.plain_expression(raw.operand), raw.location)
        if isinstance(raw, ex.Unary):
            return ex.Unary(raw.op, self.plain_expression(raw.operand), raw.location)
        if isinstance(raw, ex.Binary):
            return ex.Binary(raw.op, self.plain_expression(raw.left), self.plain_expression(raw.right), raw.location)
        return self._resolve(raw, header_refs=False)

    # -- annotations --------------------------------------------------------------------------------
    def _annotations(self) -> tuple[dict[str, QueryField], dict[str, Counter], dict[str, UserAction]]:
        fields: dict[str, QueryField] = {}
        counters: dict[str, Counter] = {}
        actions: dict[str, UserAction] = {}
        for ann in self.annotations:
            try:
                if ann.name in QUERY_FIELD_KINDS:
                    qf = self._query_field(ann)
                    if qf.name in fields:
                        raise SpecError(f"{qf.name} is annotated twice (first at {fields[qf.name].location})",
                                        ann.location)
                    fields[qf.name] = qf
                elif ann.name == "query_counter":
                    counter = self._query_counter(ann)
                    if counter.name in counters:
                        raise SpecError(f"duplicate counter {counter.name!r} (first at "
                                        f"{counters[counter.name].location})", ann.location)
                    counters[counter.name] = counter
                elif ann.name == "query_action":
                    action = self._query_action(ann)
                    if action.name in actions:
                        raise SpecError(f"duplicate action {action.name!r} (first at {actions[action.name].location})",
                                        ann.location)
                    actions[action.name] = action
                elif ann.name == "headers" and not ann.pragma:
                    if ann.args:
                        raise SpecError("@headers takes no arguments", ann.location)
                elif ann.name in IGNORED_ANNOTATIONS and not ann.pragma:
                    pass
                else:
                    raise SpecError(self._unknown_annotation(ann), ann.location)
            except SpecError as exc:
                self.errors.append(exc)
        return fields, counters, actions

    def _unknown_annotation(self, ann: _Annotation) -> str:
        spelled = f"@pragma {ann.name}" if ann.pragma else f"@{ann.name}"
        if ann.pragma:
            return (f"{spelled} is not supported in a spec file (@pragma is read for query_field..., query_counter"
                    f"){_did_you_mean(ann.name, QUERY_ANNOTATIONS)}")
        known = [*QUERY_ANNOTATIONS, "headers"]
        return (f"unknown annotation {spelled}{_did_you_mean(ann.name, known)} (a spec file reads @query_field, "
                f"@query_field_exact/_range/_lpm/_ternary, @query_counter, @query_action and @headers; it ignores "
                f"{', '.join('@' + a for a in IGNORED_ANNOTATIONS)})")

    def _query_field(self, ann: _Annotation) -> QueryField:
        spelled = f"@{ann.name}"
        args = ann.args or []
        if not args or args[0].kind != "expr" or not isinstance(args[0].value, _RawRef):
            raise SpecError(f"{spelled} needs the field it makes queryable: {spelled}(header.field)", ann.location)
        ref = args[0].value
        parts = ref.path.parts
        if not all(isinstance(p, str) for p in parts) or len(parts) != 2:
            text = _path_text(ref.path)
            if len(parts) == 3 and parts[0] in (self.hdr_param or "hdr", "hdr") and all(isinstance(p, str) for p in parts):
                raise SpecError(f"{spelled}({text}): name the header instance without the '{parts[0]}.' prefix: "
                                f"{spelled}({parts[1]}.{parts[2]})", ref.location)
            raise SpecError(f"{spelled}({text}): a query field is header.field (the header instance name, then the "
                            f"field)", ref.location)
        inst_name, field_name = parts
        inst = self.instances.get(inst_name)
        if inst is None:
            by_type = [i.name for i in self.instances.values() if i.type_name == inst_name]
            if by_type:
                raise SpecError(f"{spelled}({inst_name}.{field_name}): {inst_name} is a header type; query fields name "
                                f"the instance: {by_type[0]}.{field_name}", ref.location)
            raise SpecError(f"{spelled}({inst_name}.{field_name}): unknown header instance {inst_name!r}"
                            f"{_did_you_mean(inst_name, self.instances)}", ref.location)
        htype = self.header_types[inst.type_name]
        fdef = htype.field(field_name)
        if fdef is None:
            raise SpecError(f"{spelled}({inst_name}.{field_name}): header {inst_name} ({inst.type_name}) has no field "
                            f"{field_name!r}{_did_you_mean(field_name, [f.name for f in htype.fields])}", ref.location)
        name = f"{inst_name}.{field_name}"
        scale, is_string, width = 0, False, None
        for arg in args[1:]:
            if arg.kind == "expr" and isinstance(arg.value, _RawRef) and _path_text(arg.value.path) == "string":
                is_string = True
            elif arg.kind == "expr" and isinstance(arg.value, ex.Num):
                width = arg.value.value
            elif arg.kind == "keyword" and arg.key in ("scale", "width") and isinstance(arg.value, ex.Num):
                if arg.key == "scale":
                    scale = arg.value.value
                else:
                    width = arg.value.value
            else:
                raise SpecError(f"{spelled}({name}, ...): unknown argument; expected a width (e.g. {fdef.width}), "
                                f"scale=N or string", arg.location)
        if width is not None and width != fdef.width:
            raise SpecError(f"{spelled}({name}, {width}): width {width} does not match the declared width of {name} "
                            f"(bit<{fdef.width}> in {inst.type_name})", ann.location)
        if not 0 <= scale <= MAX_SCALE:
            raise SpecError(f"{spelled}({name}, scale={scale}): scale is a number of decimal digits, 0 to {MAX_SCALE}",
                            ann.location)
        if is_string and scale:
            raise SpecError(f"{spelled}({name}): a field cannot be both a string and scaled", ann.location)
        if is_string and fdef.width % 8:
            raise SpecError(f"{spelled}({name}, string): a string field needs a whole number of bytes; {name} is "
                            f"{fdef.width} bits", ann.location)
        return QueryField(name, fdef.width, QUERY_FIELD_KINDS[ann.name], scale, is_string, ann.location)

    def _query_counter(self, ann: _Annotation) -> Counter:
        usage = "@query_counter(name, window_us, slots)"
        args = ann.args or []
        positional = [a for a in args if a.kind != "keyword"]
        keywords = {a.key: a for a in args if a.kind == "keyword"}
        if len(positional) != 3 or set(keywords) - {"width"}:
            raise SpecError(f"{usage} takes a name, a window in microseconds and a number of slots", ann.location)
        name_arg, *numbers = positional
        if not (name_arg.kind == "expr" and isinstance(name_arg.value, _RawRef) and len(name_arg.value.path.parts) == 1):
            raise SpecError(f"{usage}: the first argument is the counter's name", name_arg.location)
        name = _path_text(name_arg.value.path)
        values = []
        for arg, what in zip(numbers, ("window_us", "slots")):
            if not (arg.kind == "expr" and isinstance(arg.value, ex.Num)) or arg.value.value <= 0:
                raise SpecError(f"{usage}: {what} must be a positive integer", arg.location)
            values.append(arg.value.value)
        width = 32
        if "width" in keywords:
            arg = keywords["width"]
            if not isinstance(arg.value, ex.Num) or not 0 < arg.value.value <= 64:
                raise SpecError(f"{usage}: width must be 1 to 64 bits", arg.location)
            width = arg.value.value
        if name in self.instances:
            raise SpecError(f"counter {name!r} has the name of a header instance", ann.location)
        return Counter(name, values[0], values[1], width, ann.location)

    def _query_action(self, ann: _Annotation) -> UserAction:
        usage = "@query_action(name, width, ...)"
        args = ann.args or []
        if not args or args[0].kind != "expr" or not isinstance(args[0].value, _RawRef) or \
                len(args[0].value.path.parts) != 1:
            raise SpecError(f"{usage}: the first argument is the action's name", ann.location)
        name = _path_text(args[0].value.path)
        if name in ("fwd", "drop"):
            raise SpecError(f"{usage}: {name!r} is built in", ann.location)
        widths = []
        for arg in args[1:]:
            if not (arg.kind == "expr" and isinstance(arg.value, ex.Num)) or not 0 < arg.value.value <= ex.MAX_WIDTH:
                raise SpecError(f"{usage}: argument widths are positive integers (bits)", arg.location)
            widths.append(arg.value.value)
        return UserAction(name, tuple(widths), ann.location)


def _walk(expr: ex.Expr) -> Iterable[ex.Expr]:
    yield expr
    for child in (getattr(expr, "operand", None), getattr(expr, "left", None), getattr(expr, "right", None)):
        if child is not None:
            yield from _walk(child)


def _path_text(path: _Path) -> str:
    out = ""
    for part in path.parts:
        if isinstance(part, str):
            out += ("." if out else "") + part
        elif isinstance(part, ex.Num):
            out += f"[{part.value}]"
        else:
            out += "[...]"
    return out


def _type_text(type_: _Type) -> str:
    if type_.kind == "named":
        return type_.name
    if type_.kind in ("bit", "int", "varbit"):
        width = type_.width.value if isinstance(type_.width, ex.Num) and type_.width.width is None else "..."
        return f"{type_.kind}<{width}>"
    return {"int_inf": "int", "bool": "bool"}.get(type_.kind, type_.kind)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
