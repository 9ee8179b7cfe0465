"""Tokens of a P4_14 spec, after a small C-like preprocessor.

P4_14 specs lean on the C preprocessor: Camus's demo splits headers and parser over two files,
guards them with ``#ifndef``/``#define``/``#endif`` and names values with ``#define
ETHERTYPE_IPV4 0x0800``. :class:`Preprocessor` does what those specs need and no more:

* ``#include "file"`` is followed, relative to the including file; ``#include <file>`` (a
  target's system header) is recorded and not followed;
* ``#ifdef``, ``#ifndef``, ``#if`` (a number or ``defined(NAME)``), ``#elif``, ``#else``,
  ``#endif``, so include guards work however often a file is included;
* ``#define NAME VALUE`` (object-like): NAME is replaced by VALUE's tokens, as cpp does;
  ``#undef``; ``#error`` stops; ``#warning`` becomes a note; ``#pragma``/``#line`` are ignored;
* ``//`` and ``/* */`` comments.

Every token keeps the :class:`~compiler.base.errors.SourceLocation` of the text the user wrote (the
use of a macro, not its definition), so later errors point at the right file, line and column.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from compiler.base import InputError, P4subError, ParseError, SourceLocation, SpecError, read_text

MAX_INCLUDE_DEPTH = 40
#: Tokens one use of a macro may expand to, and all uses together beyond the tokens written: a spec's
#: macros name values; a #define chain that doubles at each level reaches 2^40 tokens (issue 27).
MAX_MACRO_TOKENS = 100_000
MAX_EXPANDED_TOKENS = 1_000_000

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<directive>^[ \t]*\#(?:[^\n\\]|\\\n|\\.)*)
  | (?P<string>"(?:\\.|[^"\\\n])*")
  | (?P<annotation>@[A-Za-z_]\w*)
  | (?P<number>[0-9]+'(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*)|0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<punct>\S)
""", re.S | re.X | re.M)


@dataclass(frozen=True)
class Tok:
    """A token: ``kind`` is name, number, string, annotation or punct; ``text`` as written."""

    kind: str
    text: str
    location: SourceLocation


@dataclass
class _Define:
    tokens: list[Tok] | None  # None: a function-like macro
    location: SourceLocation


@dataclass
class _Branch:
    """One level of #if nesting: is this branch read, has one been read, where it opened."""

    active: bool
    taken: bool
    opened: SourceLocation
    word: str


@dataclass
class Preprocessed:
    """The tokens of a P4_14 spec and what the preprocessor learnt on the way."""

    tokens: list[Tok]
    includes: list[str] = field(default_factory=list)
    constants: dict[str, int] = field(default_factory=dict)
    notes: list[tuple[SourceLocation, str]] = field(default_factory=list)
    expanded: int = 0  # tokens macros added beyond the ones written (bounded by MAX_EXPANDED_TOKENS)


def _positions(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\n", text)]


def _loc(path: str, starts: list[int], pos: int) -> SourceLocation:
    line = bisect.bisect_right(starts, pos)
    return SourceLocation(path, line, pos - starts[line - 1] + 1)


def lex(text: str, path: str) -> list[Tok]:
    """The tokens of one file, directives included (kind ``directive``); comments dropped."""
    starts = _positions(text)
    out = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "comment":
            if match.group().startswith("/*") and not match.group().endswith("*/"):
                raise ParseError("P4_14: unterminated /* comment", _loc(path, starts, match.start()))
            continue
        token_text = match.group()
        start = match.start()
        if kind == "directive":
            start += len(token_text) - len(token_text.lstrip())
            token_text = token_text.strip().replace("\\\n", " ")
        if kind == "punct" and token_text == '"':
            raise ParseError("P4_14: unterminated string (strings end on the same line)", _loc(path, starts, start))
        out.append(Tok(kind, token_text, _loc(path, starts, start)))
    return out


class Preprocessor:
    """Runs the directives of a P4_14 spec and its quoted includes; see the module docstring."""

    def __init__(self, read: Callable[[Path], str] | None = None) -> None:
        self.read = read or (lambda p: read_text(p, "included file", SpecError))
        self.defines: dict[str, _Define] = {}
        self.result = Preprocessed([])

    def run(self, text: str, path: str) -> Preprocessed:
        self.result.tokens = self._file(text, path, 0)
        return self.result

    # -- files and directives ------------------------------------------------------------------
    def _file(self, text: str, path: str, depth: int) -> list[Tok]:
        out: list[Tok] = []
        branches: list[_Branch] = []
        guard: str | None = None  # the NAME of an #ifndef NAME nothing has followed yet
        for tok in lex(text, path):
            active = all(b.active for b in branches)
            if tok.kind == "directive":
                guard = self._directive(tok, path, depth, branches, active, guard, out)
                continue
            guard = None
            if active:
                out.extend(self._expand(tok, frozenset()))
        if branches:
            branch = branches[-1]
            raise SpecError(f"P4_14: #{branch.word} at {branch.opened} has no #endif", branch.opened)
        return out

    def _directive(self, tok: Tok, path: str, depth: int, branches: list[_Branch], active: bool,
                   guard: str | None, out: list[Tok]) -> str | None:
        match = re.fullmatch(r"#\s*(\w*)\s*(.*?)\s*", tok.text, re.S)
        word, rest = match.groups() if match else ("", "")
        rest_tokens = [t for t in lex(rest, "") if t.kind != "directive"]
        loc = tok.location
        name = rest_tokens[0].text if rest_tokens and rest_tokens[0].kind == "name" else ""
        if word in ("ifdef", "ifndef"):
            if not name:
                raise SpecError(f"P4_14: #{word} needs a macro name", loc)
            value = (name in self.defines) == (word == "ifdef")
            branches.append(_Branch(active and value, value, loc, word))
            return name if word == "ifndef" and active else None
        if word == "if":
            value = self._condition(rest, loc) if active else False
            branches.append(_Branch(active and value, value, loc, word))
            return None
        if word in ("elif", "else", "endif"):
            if not branches:
                raise SpecError(f"P4_14: #{word} without #if, #ifdef or #ifndef", loc)
            branch = branches[-1]
            if word == "endif":
                branches.pop()
                return None
            outer = all(b.active for b in branches[:-1])
            value = not branch.taken and (word == "else" or (outer and self._condition(rest, loc)))
            branch.active, branch.taken = outer and value, branch.taken or value
            return None
        if not active:
            return None
        if word == "include":
            self._include(rest, path, depth, loc, out)
        elif word == "define":
            self._define(rest, loc, guard)
        elif word == "undef":
            self.defines.pop(name, None)
            self.result.constants.pop(name, None)
        elif word == "error":
            raise SpecError(f"P4_14: #error {rest}", loc)
        elif word == "warning":
            self.result.notes.append((loc, f"#warning {rest}"))
        elif word in ("pragma", "line", ""):
            pass
        else:
            raise SpecError(f"P4_14: preprocessor directive #{word} is not supported by p4sub (it reads #include, "
                            f"#define, #undef, #if/#ifdef/#ifndef/#elif/#else/#endif, #error and #warning)", loc)
        return None

    def _condition(self, rest: str, loc: SourceLocation) -> bool:
        """``#if`` / ``#elif``: a number, a macro that is one, ``defined(NAME)``, ``!`` of those."""
        text = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.defines else "0", rest)
        negate = text.startswith("!")
        text = text.lstrip("!").strip()
        define = self.defines.get(text)
        if define is not None and define.tokens and len(define.tokens) == 1:
            text = define.tokens[0].text
        if not re.fullmatch(r"[0-9]+", text):
            raise SpecError(f"P4_14: #if {rest}: p4sub's preprocessor reads #if with a number, a macro that is one "
                            f"or defined(NAME); write #ifdef/#ifndef", loc)
        return (text.strip("0") != "") != negate  # not int(): the number may have any length

    def _include(self, rest: str, path: str, depth: int, loc: SourceLocation, out: list[Tok]) -> None:
        match = re.fullmatch(r'(<[^<>]+>|"[^"]+")(\s*//.*|\s*/\*.*\*/)?', rest)
        if not match:
            raise SpecError(f"P4_14: malformed #include {rest!r}; write #include \"file.p4\"", loc)
        written = match.group(1)
        self.result.includes.append(written)
        if written.startswith("<"):
            return  # a target's system header: its declarations are not the spec's
        if depth >= MAX_INCLUDE_DEPTH:
            raise SpecError(f"P4_14: #include {written} nested more than {MAX_INCLUDE_DEPTH} deep (a file that includes "
                            f"itself without an include guard?)", loc)
        base = Path(path).parent if path and not path.startswith("<") else Path(".")
        target = Path(os.path.normpath(base / written[1:-1]))
        try:
            text = self.read(target)
        except FileNotFoundError:
            raise SpecError(f"P4_14: #include {written}: no such file ({target})", loc) from None
        except UnicodeDecodeError:
            raise SpecError(f"P4_14: #include {written}: {target} is not UTF-8 text", loc) from None
        except OSError as exc:
            raise SpecError(f"P4_14: #include {written}: cannot read {target}: {exc.strerror or exc}", loc) from None
        except InputError as exc:
            raise SpecError(f"P4_14: #include {written}: {exc.reason} ({target})", loc) from None
        except P4subError as exc:  # not UTF-8: the error is located in the included file
            raise SpecError(f"P4_14: #include {written}: {exc}", loc) from None
        if "\x00" in text:
            raise SpecError(f"P4_14: #include {written}: {target} contains a NUL byte (is it a binary file?)", loc)
        out.extend(self._file(text, str(target), depth + 1))

    def _define(self, rest: str, loc: SourceLocation, guard: str | None) -> None:
        match = re.match(r"([A-Za-z_]\w*)(\()?", rest)
        if not match:
            raise SpecError("P4_14: #define needs a macro name: #define NAME VALUE", loc)
        name = match.group(1)
        if match.group(2):  # NAME( with no space: a function-like macro; an error only where it is used
            self.defines[name] = _Define(None, loc)
            return
        tokens = [replace(t, location=loc) for t in lex(rest[match.end():], "") if t.kind != "directive"]
        self.defines[name] = _Define(tokens, loc)
        if name != guard and len(tokens) == 1 and tokens[0].kind == "number":
            value = number_value(tokens[0])
            if value is not None:
                self.result.constants[name] = value

    def _expand(self, tok: Tok, seen: frozenset[str]) -> list[Tok]:
        """``tok`` with its macros replaced, at most :data:`MAX_MACRO_TOKENS` tokens: a chain of
        defines that doubles at each level (``#define A1 A0 A0``, ...) would otherwise grow as 2^N."""
        out: list[Tok] = []
        self._expand_into(tok, seen, out, tok)
        self.result.expanded += len(out) - 1
        if self.result.expanded > MAX_EXPANDED_TOKENS:
            raise SpecError(f"P4_14: macros expand to more than {MAX_EXPANDED_TOKENS:,} tokens in all (the last was "
                            f"{tok.text}); p4sub's preprocessor stops there", tok.location)
        return out

    def _expand_into(self, tok: Tok, seen: frozenset[str], out: list[Tok], use: Tok) -> None:
        """Depth first with a stack of its own: a chain of 20,000 one-token defines is deep, not large."""
        active = set(seen)  # the macros being expanded (one is not expanded inside itself, as cpp does)
        stack: list[tuple[Iterator[Tok], str | None]] = [(iter((tok,)), None)]
        while stack:
            tokens, name = stack[-1]
            tok = next(tokens, None)
            if tok is None:
                stack.pop()
                active.discard(name)
                continue
            define = self.defines.get(tok.text) if tok.kind == "name" else None
            if define is None or tok.text in active:
                if len(out) >= MAX_MACRO_TOKENS:
                    raise SpecError(f"P4_14: macro {use.text} expands to more than {MAX_MACRO_TOKENS:,} tokens "
                                    f"(defined at {self.defines[use.text].location}; does each level of a #define "
                                    f"chain repeat the one below?); p4sub's preprocessor stops there", use.location)
                out.append(tok)
                continue
            if define.tokens is None:
                raise SpecError(f"P4_14: {tok.text} is a function-like macro (defined at {define.location}); "
                                f"p4sub's preprocessor expands only #define NAME VALUE", tok.location)
            active.add(tok.text)
            stack.append((iter([replace(v, location=use.location) for v in define.tokens]), tok.text))


def number_value(tok: Tok) -> int | None:
    """The value of a P4_14 number token (``0x0800``, ``65``, ``0b101``, ``16'0x800``); None if it is not one."""
    text = tok.text.replace("_", "")
    if "'" in text:
        text = text.split("'", 1)[1]
    try:
        return int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text, 10)
    except ValueError:
        return None


def preprocess(text: str, path: str, read: Callable[[Path], str] | None = None) -> Preprocessed:
    """Lex and preprocess a P4_14 spec (and its quoted includes)."""
    return Preprocessor(read).run(text, path)
