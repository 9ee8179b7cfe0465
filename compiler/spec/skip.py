"""Read a whole P4_16 program as a spec: find the top-level declarations a spec does not need.

A Camus user's spec is often the whole program (headers, parser, controls, a deparser and
``V1Switch(...) main;``). p4sub needs only the headers, structs, consts, typedefs and the parser,
so :func:`skip_declarations` blanks the rest out of the text before the grammar sees it — with
spaces, keeping every newline, so that locations in what is left stay right — and returns one
note per skipped kind. Bodies are skipped by balanced braces, past comments, strings and
directives, so nothing inside a control needs to be in the spec subset.

A program with several parsers (TNA's ingress and egress parsers) keeps the one whose ``out``
parameter is the headers struct: :func:`choose_parser` decides from the declarations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from compiler.base import ParseError, SourceLocation, SpecError

# Top-level words that start a declaration a spec does not need, and what to call it in a note.
SKIPPED_KEYWORDS = {
    "control": "control",
    "action": "action",
    "table": "table",
    "extern": "extern declaration",
    "package": "package declaration",
    "error": "error declaration",
    "match_kind": "match_kind declaration",
}
KEPT_KEYWORDS = ("const", "typedef", "header", "struct", "parser", "header_union", "type", "newtype")
WHY = "a spec needs only headers, structs, consts, typedefs and the parser"

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>"(?:\\.|[^"\\\n])*"?)
  | (?P<directive>^[ \t]*\#[^\n]*)
  | (?P<annotation>@[A-Za-z_]\w*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<punct>[{}()\[\];,])
  | (?P<other>\S)
""", re.S | re.X | re.M)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Declaration:
    """A top-level declaration: what it is, its name, where it is in the text."""

    kind: str
    name: str
    start: int
    end: int
    location: SourceLocation
    out_types: tuple[str, ...] = ()  # parsers: the types of their 'out' parameters


@dataclass
class Skipped:
    """What :func:`skip_declarations` left: the text without the skipped declarations, and notes."""

    text: str
    skipped: list[Declaration] = field(default_factory=list)
    parsers: list[Declaration] = field(default_factory=list)


def _tokens(text: str) -> list[_Token]:
    return [_Token(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)
            if m.lastgroup not in ("comment", "directive")]


def _location(text: str, pos: int, path: str) -> SourceLocation:
    return SourceLocation(path, text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1)


def blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces, newlines kept (locations stay right)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _declaration_end(tokens: list[_Token], i: int) -> int | None:
    """Index of the last token of the declaration starting at ``tokens[i]``; None if the file ends first.

    A declaration ends at a ';' outside brackets, or at the '}' closing its first top-level '{'.
    """
    closers = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    for j in range(i, len(tokens)):
        text = tokens[j].text if tokens[j].kind == "punct" else ""
        if text in closers:
            stack.append(closers[text])
        elif text in (")", "]", "}"):
            if not stack or stack.pop() != text:
                return None  # unbalanced: the grammar reports it
            if not stack and text == "}":
                return j
        elif text == ";" and not stack:
            return j
    return None


def _unbalanced(text: str, tokens: list[_Token], i: int, path: str) -> ParseError:
    """The error for a declaration to skip whose brackets do not balance (outside strings and comments)."""
    closers = {"(": ")", "[": "]", "{": "}"}
    stack: list[_Token] = []
    for token in tokens[i:]:
        if token.kind != "punct":
            continue
        if token.text in closers:
            stack.append(token)
        elif token.text in (")", "]", "}"):
            if not stack or closers[stack.pop().text] != token.text:
                return ParseError(f"unbalanced '{token.text}' in the {tokens[i].text} declaration starting at line "
                                  f"{_location(text, tokens[i].start, path).line} (p4sub skips it, but it must be "
                                  f"well formed)", _location(text, token.start, path))
    opened = _location(text, stack[-1].start, path) if stack else _location(text, tokens[i].start, path)
    lines = text.splitlines() or [""]
    return ParseError(f"unclosed '{stack[-1].text if stack else '{'}' (missing "
                      f"'{closers[stack[-1].text] if stack else '}'}'): the '{stack[-1].text if stack else '{'}' at "
                      f"line {opened.line}, column {opened.column} is never closed",
                      SourceLocation(path, len(lines), len(lines[-1]) + 1))


def _skip_annotation(tokens: list[_Token], i: int) -> int:
    """Index after the annotation at ``tokens[i]`` (``@name``, ``@name(...)``, ``@pragma name(...)``)."""
    j = i + 1
    if tokens[i].text == "@pragma" and j < len(tokens) and tokens[j].kind == "name":
        j += 1
    if j < len(tokens) and tokens[j].text == "(":
        depth = 0
        while j < len(tokens):
            if tokens[j].text == "(":
                depth += 1
            elif tokens[j].text == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
    return j


def _annotation_name(tokens: list[_Token], i: int) -> str:
    if tokens[i].text == "@pragma" and i + 1 < len(tokens):
        return tokens[i + 1].text
    return tokens[i].text[1:]


def _classify(tokens: list[_Token], i: int, end: int) -> tuple[str, str] | None:
    """(kind, name) of a declaration to skip, or None to keep it (the grammar then reads or rejects it)."""
    word = tokens[i].text
    names = [t.text for t in tokens[i + 1:end + 1] if t.kind == "name"]
    if word in SKIPPED_KEYWORDS:
        if word == "extern" and tokens[end].text == ";":  # extern function: its name comes before '<' or '('
            before = next((k for k in range(i, end) if tokens[k].text in ("(", "<")), end)
            named = [t.text for t in tokens[i + 1:before] if t.kind == "name"]
            return "extern declaration", named[-1] if named else ""
        return SKIPPED_KEYWORDS[word], names[0] if names and word not in ("error", "match_kind") else ""
    if word == "enum":  # a plain enum is no header field type; a serializable one (enum bit<8> E) may be
        if end - i >= 2 and tokens[i + 1].kind == "name" and tokens[i + 2].text == "{":
            return "enum", tokens[i + 1].text
        return None
    if word == "parser" and tokens[end].text == ";":  # parser Name<H>(...); declares a type, not a parser
        return "parser type declaration", names[0] if names else ""
    if word in KEPT_KEYWORDS or tokens[i].kind != "name":
        return None
    last = tokens[end]
    if last.text == ";" and end - i >= 3 and tokens[end - 1].kind == "name" and tokens[end - 2].text == ")":
        return "instantiation", f"{word}(...) {tokens[end - 1].text}"
    brace = next((k for k in range(i, end) if tokens[k].text == "{"), None)
    if last.text == "}" and brace is not None:
        paren = next((k for k in range(i, brace) if tokens[k].text == "("), None)
        if paren is not None and tokens[brace - 1].text == ")" and tokens[paren - 1].kind == "name":
            return "function", tokens[paren - 1].text
    return None


def _out_types(tokens: list[_Token], i: int, end: int) -> tuple[str, ...]:
    """The types of a parser's ``out`` parameters (``out headers hdr`` gives ``headers``)."""
    out = []
    for k in range(i, end):
        if tokens[k].text == "{":
            break
        if tokens[k].text == "out" and k + 2 <= end and tokens[k + 1].kind == "name":
            out.append(tokens[k + 1].text)
    return tuple(out)


def skip_declarations(text: str, path: str) -> Skipped:
    """Blank out the top-level declarations a spec does not need; see the module docstring."""
    tokens = _tokens(text)
    result = Skipped(text)
    pending: list[tuple[str, int, int]] = []  # annotations before the next declaration: (name, start, end)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "annotation":
            after = _skip_annotation(tokens, i)
            pending.append((_annotation_name(tokens, i), token.start, tokens[after - 1].end))
            i = after
            continue
        if token.text == ";":
            i += 1
            continue
        end = _declaration_end(tokens, i)
        if end is None:
            if token.text in SKIPPED_KEYWORDS:
                raise _unbalanced(text, tokens, i, path)
            break  # the grammar reports it
        location = _location(text, token.start, path)
        if token.text == "parser" and i + 1 < len(tokens) and tokens[end].text == "}":
            result.parsers.append(Declaration("parser", tokens[i + 1].text, token.start, tokens[end].end, location,
                                              _out_types(tokens, i, end)))
        classified = _classify(tokens, i, end)
        if classified is not None:
            kind, name = classified
            result.skipped.append(Declaration(kind, name, token.start, tokens[end].end, location))
            result.text = blank(result.text, token.start, tokens[end].end)
            for ann_name, start, stop in pending:  # its own annotations go with it; @query_* ones are global
                if not ann_name.startswith("query_"):
                    result.text = blank(result.text, start, stop)
        pending = []
        i = end + 1
    return result


def notes(skipped: list[Declaration], why: str = WHY) -> list[tuple[SourceLocation, str]]:
    """One note per skipped kind, at its first declaration: ``skipped 2 controls: A, B (why)``."""
    by_kind: dict[str, list[Declaration]] = {}
    for decl in skipped:
        by_kind.setdefault(decl.kind, []).append(decl)
    out = []
    for kind, decls in by_kind.items():
        named = [d.name for d in decls if d.name]
        if len(decls) == 1:
            what = f"{kind} {named[0]}" if named else kind
        else:
            what = f"{len(decls)} {_plural(kind)}" + (f": {', '.join(named)}" if named else "")
        out.append((decls[0].location, f"skipped {what} ({why})"))
    return out


def _plural(kind: str) -> str:
    return kind + ("es" if kind.endswith(("x", "s")) else "s")


def choose_parser(parsers: list[Declaration], header_structs: dict[str, bool],
                  headers_names: tuple[str, ...]) -> tuple[Declaration | None, SpecError | None]:
    """The parser to read among several: the one whose ``out`` parameter is the headers struct.

    ``header_structs`` maps each struct with header members to whether it is marked ``@headers``.
    When several parsers write such structs, a marked struct, then one named like ``headers``,
    decides; then TNA's ingress parser (the one with an ``out ingress_intrinsic_metadata_t``):
    subscriptions are matched in ingress. Parsers that still tie are an error naming them.
    None, None: no parser writes a headers struct, and the reader's usual checks apply.
    """
    candidates = [p for p in parsers if any(t in header_structs for t in p.out_types)]
    if len(candidates) <= 1:
        return (candidates[0] if candidates else None), None
    for preferred in ([s for s, marked in header_structs.items() if marked],
                      [s for s in header_structs if s in headers_names]):
        narrowed = [p for p in candidates if any(t in preferred for t in p.out_types)]
        if len(narrowed) == 1:
            return narrowed[0], None
        if narrowed:
            candidates = narrowed
            break
    ingress = [p for p in candidates if "ingress_intrinsic_metadata_t" in p.out_types]
    if len(ingress) == 1:
        return ingress[0], None
    listed = ", ".join(f"{p.name} (out {'/'.join(t for t in p.out_types if t in header_structs)}, at {p.location})"
                       for p in candidates)
    return None, SpecError(
        f"{len(candidates)} parsers write a headers struct: {listed}; p4sub reads one parser. Mark the headers "
        f"struct @headers when they write different structs; otherwise give p4sub a spec with only the parser to "
        f"read (the other parsers, e.g. an egress parser, do not change what subscriptions see)",
        candidates[1].location)
