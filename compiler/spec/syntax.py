"""The P4 spec subset's syntax: the lark parser, syntax-error messages, raw declarations.

:mod:`compiler.spec.reader` is the public face. This module turns text into raw declarations that
remember where they came from (:class:`ToRaw`), and lark's failures into
:class:`~compiler.base.errors.ParseError` (labelled by matching small broken examples, the way lark's
``error_reporting_lalr`` example does) or, when the parse stopped at a construct outside the
subset (a control, an ``if``, a function), into a :class:`~compiler.base.errors.SpecError` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from compiler.base import P4subError, ParseError, SourceLocation, SpecError, character_name
from compiler.spec import expr as ex
from grammar import grammar_text

SUPPORTED = "p4sub reads headers, structs, consts, typedefs and one parser"

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
def lark_parser() -> Lark:
    return Lark(
        grammar_text("p4spec"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        start=["start", "expr"],
    )


def parse_text(text: str) -> Any:
    return lark_parser().parse(text, start="start")


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


def syntax_error(exc: UnexpectedInput, text: str, path: str) -> P4subError:
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
                parse_text(example)
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
    return f"unexpected character {character_name(char)}"


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
    names = {t.name: f"'{t.pattern.value}'" for t in lark_parser().terminals if t.pattern.type == "str"}
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
class RawPath:
    parts: tuple[Any, ...]  # str for a name, an expression for an index
    location: SourceLocation

    def names(self) -> list[str]:
        return [p for p in self.parts if isinstance(p, str)]


@dataclass
class RawRef:
    path: RawPath
    location: SourceLocation


@dataclass
class RawCall:
    path: RawPath
    args: list[Any]
    location: SourceLocation
    type_arg: "RawType | None" = None


@dataclass
class RawCast:
    type: "RawType"
    operand: Any
    location: SourceLocation


@dataclass
class RawOther:
    """An expression the subset parses only to reject it (``==``, ``&&``, ``true``)."""

    what: str
    location: SourceLocation


@dataclass
class RawType:
    kind: str  # bit, int, int_inf, varbit, bool, named
    width: Any
    name: str
    location: SourceLocation


@dataclass
class RawArg:
    kind: str  # expr, keyword, string
    key: str
    value: Any
    location: SourceLocation


@dataclass
class RawAnnotation:
    name: str
    args: list[RawArg] | None
    pragma: bool
    location: SourceLocation


@dataclass
class RawDirective:
    text: str
    location: SourceLocation


@dataclass
class RawConst:
    type: RawType
    name: str
    value: Any
    location: SourceLocation


@dataclass
class RawTypedef:
    type: RawType
    name: str
    location: SourceLocation


@dataclass
class RawMember:
    type: RawType
    name: str
    size: Any  # None, or the stack size expression
    location: SourceLocation


@dataclass
class RawCompound:
    kind: str  # header, struct
    name: str
    members: list[RawMember]
    annotations: list[RawAnnotation]
    location: SourceLocation
    preceding: list[RawAnnotation] = field(default_factory=list)


@dataclass
class RawParam:
    direction: str
    type: RawType
    name: str
    location: SourceLocation


@dataclass
class RawStatement:
    kind: str  # call, assign
    path: RawPath
    args: list[Any]
    location: SourceLocation


@dataclass
class RawKeysetElement:
    kind: str  # value, mask, range, default, dontcare
    value: Any
    mask: Any
    location: SourceLocation


@dataclass
class RawCase:
    elements: list[RawKeysetElement]
    is_tuple: bool
    target: str
    target_location: SourceLocation
    location: SourceLocation


@dataclass
class RawTransition:
    keys: list[Any] | None  # None for a direct transition
    target: str
    cases: list[RawCase]
    location: SourceLocation


@dataclass
class RawState:
    name: str
    statements: list[RawStatement]
    transition: RawTransition | None
    location: SourceLocation


@dataclass
class RawParser:
    name: str
    generic: bool
    params: list[RawParam]
    states: list[RawState]
    annotations: list[RawAnnotation]
    location: SourceLocation


@v_args(meta=True)
class ToRaw(Transformer):
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
        return RawDirective(str(items[0]), self._loc(meta))

    def annotation(self, meta, items):
        token, args = items
        return RawAnnotation(str(token)[1:], args, False, self._loc(meta))

    def pragma(self, meta, items):
        _, name, args = items
        return RawAnnotation(str(name), args, True, self._loc(meta))

    def annotation_args(self, meta, items):
        return [i for i in items if i is not None]

    def arg_expr(self, meta, items):
        return RawArg("expr", "", items[0], self._loc(meta))

    def arg_keyword(self, meta, items):
        return RawArg("keyword", str(items[0]), items[1], self._loc(meta))

    def arg_string(self, meta, items):
        return RawArg("string", "", _unquote(str(items[0])), self._loc(meta))

    def const_decl(self, meta, items):
        type_, name, value = items
        return RawConst(type_, str(name), value, self._loc(meta))

    def typedef_decl(self, meta, items):
        type_, name = items
        return RawTypedef(type_, str(name), self._loc(meta))

    def header_decl(self, meta, items):
        return self._compound("header", meta, items)

    def struct_decl(self, meta, items):
        return self._compound("struct", meta, items)

    def _compound(self, kind, meta, items):
        name, *body = items
        members = [m for m in body if isinstance(m, RawMember)]
        annotations = [a for a in body if isinstance(a, RawAnnotation)]
        return RawCompound(kind, str(name), members, annotations, self._loc(meta))

    def member(self, meta, items):
        type_, name = items
        return RawMember(type_, str(name), None, self._tloc(name))

    def stack_member(self, meta, items):
        type_, size, name = items
        return RawMember(type_, str(name), size, self._tloc(name))

    def bit_type(self, meta, items):
        return RawType("bit", items[0], "", self._loc(meta))

    def bit1_type(self, meta, items):
        return RawType("bit", ex.Num(1), "", self._loc(meta))

    def int_type(self, meta, items):
        return RawType("int", items[0], "", self._loc(meta))

    def int_inf_type(self, meta, items):
        return RawType("int_inf", None, "", self._loc(meta))

    def varbit_type(self, meta, items):
        return RawType("varbit", items[0], "", self._loc(meta))

    def bool_type(self, meta, items):
        return RawType("bool", None, "", self._loc(meta))

    def named_type(self, meta, items):
        return RawType("named", None, str(items[0]), self._loc(meta))

    def parser_decl(self, meta, items):
        name, type_params, *rest = items
        params = [p for p in rest if isinstance(p, RawParam)]
        states = [s for s in rest if isinstance(s, RawState)]
        annotations = [a for a in rest if isinstance(a, RawAnnotation)]
        return RawParser(str(name), type_params is not None, params, states, annotations, self._loc(meta))

    def type_params(self, meta, items):
        return True

    def param(self, meta, items):
        *_annotations, direction, type_, name = items
        return RawParam(direction or "", type_, str(name), self._tloc(name))

    def dir_in(self, meta, items):
        return "in"

    def dir_out(self, meta, items):
        return "out"

    def dir_inout(self, meta, items):
        return "inout"

    def state_decl(self, meta, items):
        name, *body = items
        statements = [s for s in body if isinstance(s, RawStatement)]
        transition = next((t for t in body if isinstance(t, RawTransition)), None)
        return RawState(str(name), statements, transition, self._tloc(name))

    def call_statement(self, meta, items):
        path, *args = items
        return RawStatement("call", path, [a for a in args if a is not None], self._loc(meta))

    def assign_statement(self, meta, items):
        path, value = items
        return RawStatement("assign", path, [value], self._loc(meta))

    def transition_direct(self, meta, items):
        return RawTransition(None, str(items[0]), [], self._tloc(items[0]))

    def transition_select(self, meta, items):
        keys = [i for i in items if not isinstance(i, RawCase) and i is not None]
        cases = [i for i in items if isinstance(i, RawCase)]
        return RawTransition(keys, "", cases, self._loc(meta))

    def select_case(self, meta, items):
        keyset, target = items
        if isinstance(keyset, list):
            elements, is_tuple = keyset, True
        else:
            elements, is_tuple = [keyset], False
        return RawCase(elements, is_tuple, str(target), self._tloc(target), self._loc(meta))

    def keyset_tuple(self, meta, items):
        return list(items)

    def ks_value(self, meta, items):
        return RawKeysetElement("value", items[0], None, self._loc(meta))

    def ks_mask(self, meta, items):
        return RawKeysetElement("mask", items[0], items[1], self._loc(meta))

    def ks_range(self, meta, items):
        return RawKeysetElement("range", items[0], items[1], self._loc(meta))

    def ks_default(self, meta, items):
        return RawKeysetElement("default", None, None, self._loc(meta))

    def ks_dontcare(self, meta, items):
        return RawKeysetElement("dontcare", None, None, self._loc(meta))

    # -- expressions --------------------------------------------------------------------------
    def number(self, meta, items):
        token = items[0]
        return _number(str(token), self._tloc(token))

    def boolean(self, meta, items):
        return RawOther("boolean constants", self._loc(meta))

    def logical(self, meta, items):
        return RawOther("comparisons and logical operators", self._loc(meta))

    def lnot(self, meta, items):
        return RawOther("logical operators", self._loc(meta))

    def ref(self, meta, items):
        return RawRef(items[0], self._loc(meta))

    def call(self, meta, items):
        path, *args = items
        return RawCall(path, [a for a in args if a is not None], self._loc(meta))

    def generic_call(self, meta, items):
        path, type_arg = items
        return RawCall(path, [], self._loc(meta), type_arg)

    def path(self, meta, items):
        parts = tuple(str(i) if isinstance(i, Token) else i for i in items)
        return RawPath(parts, self._loc(meta))

    def cast(self, meta, items):
        type_, operand = items
        return RawCast(type_, operand, self._loc(meta))

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


_NUMBER = re.compile(r"(?:([0-9]+)([ws]))?(.*)", re.S)
#: Decimal literals longer than this are refused before int() (which stops at 4300 digits): no
#: bit<65536> value needs more.
MAX_LITERAL_DIGITS = 4000


def _number(text: str, location: SourceLocation) -> ex.Num:
    width_text, kind, digits = _NUMBER.fullmatch(text).groups()
    digits = digits.replace("_", "")
    if len(digits) > MAX_LITERAL_DIGITS or len(width_text or "") > 10:
        raise SpecError(f"a literal of {len(digits):,} digits; p4sub reads literals of up to {MAX_LITERAL_DIGITS} "
                        "digits", location)
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


def path_text(path: RawPath) -> str:
    out = ""
    for part in path.parts:
        if isinstance(part, str):
            out += ("." if out else "") + part
        elif isinstance(part, ex.Num):
            out += f"[{part.value}]"
        else:
            out += "[...]"
    return out


def type_text(type_: RawType) -> str:
    if type_.kind == "named":
        return type_.name
    if type_.kind in ("bit", "int", "varbit"):
        width = type_.width.value if isinstance(type_.width, ex.Num) and type_.width.width is None else "..."
        return f"{type_.kind}<{width}>"
    return {"int_inf": "int", "bool": "bool"}.get(type_.kind, type_.kind)
