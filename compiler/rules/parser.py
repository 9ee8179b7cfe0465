"""Parse subscription rule files (``grammar/subscription.lark``) into the typed AST of :mod:`compiler.rules`.

One LALR parser, built once. Syntax errors become :class:`~compiler.base.errors.ParseError` with the file,
line and column and a label a user can act on ("missing ':' before the actions"), found the way lark's
``error_reporting_lalr`` example does it: by matching the error against small broken examples.
"""

from __future__ import annotations

import gc
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from compiler.base import P4subError, ParseError, SourceLocation, character_name, raise_all, read_text, strip_bom
from compiler.rules import build as rule_build
from compiler.rules import fastparse
from compiler.rules import nodes as ast
from compiler.rules.fastparse import MAX_NESTING
from compiler.rules.values import MAX_NUMBER_DIGITS
from grammar import grammar_text


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(grammar_text("subscription"), parser="lalr", propagate_positions=True, maybe_placeholders=True)


# Small broken rules and what is wrong with them; lark picks the label whose example fails the same way.
_ERROR_EXAMPLES: dict[str, list[str]] = {
    "missing ':' between the filter and the actions": [
        "a.b == 1 fwd(1);",
        "a.b == 1 drop;",
        "a.b == 1;",
    ],
    "missing ';' between two rules": [
        "a.b == 1: fwd(1) a.b == 2: fwd(2);",
        "a.b == 1: drop a.c == 2: drop;",
        "a.b == 1: fwd(1) x == 2: fwd(2);",
    ],
    "unclosed parenthesis": [
        "(a.b == 1: fwd(1);",
        "(a.b == 1 and (a.c == 2): fwd(1);",
        "a.b == 1: fwd(1;",
        "a.b == 1: fwd(1, 2;",
    ],
    "a comparison needs an operator and a constant (e.g. h.f == 1)": [
        "a.b: fwd(1);",
        "a.b ==: fwd(1);",
        "a.b == : fwd(1);",
        "a.b and a.c == 1: fwd(1);",
        "a.b == 1 and : fwd(1);",
    ],
    "missing actions after ':' (e.g. fwd(1) or drop)": [
        "a.b == 1: ;",
        "a.b == 1:",
    ],
    "fwd takes port numbers, e.g. fwd(1, 2)": [
        "a.b == 1: fwd();",
        "a.b == 1: fwd(x);",
        'a.b == 1: fwd("x");',
    ],
    "missing filter before ':'": [
        ": fwd(1);",
    ],
}


def parse_rules(text: str, path: str = "<rules>") -> ast.RuleSet:
    """Parse the text of a rule file. Raises ParseError with the location of the first syntax error.

    The hand-written parser (compiler/rules/fastparse.py) reads every valid file, in every spelling, into
    the AST the grammar would build; the grammar reads only what that parser could not vouch for (a
    rule whose meaning is an error, text from a syntax error on), so that every error is worded
    and located by the grammar, as if it had read the whole file. The garbage collector is paused
    meanwhile: it would walk the growing AST again and again and cost more than the parsing.
    """
    text = strip_bom(text)
    if not text.isascii():
        _refuse_non_ascii_digits(text, path)
    collecting = gc.isenabled()
    gc.disable()
    try:
        fast = fastparse.parse(text, path)
        if not fast.stopped and not fast.doubtful:
            return ast.RuleSet(tuple(fast.rules), path)
        return _with_grammar(text, path, fast)
    finally:
        if collecting:
            gc.enable()


def _with_grammar(text: str, path: str, fast: fastparse.Parsed) -> ast.RuleSet:
    """Have the grammar read the rules the fast parser left to it, in a copy of the text where every
    other rule is blanked out (newlines kept, so lines and columns stay), and put them in place.

    The grammar's errors are what it would report on the whole file: the blanked rules are valid
    rules without errors, so they would add none, and when the fast parser stopped, the text from
    the rule before the stop on is kept whole, so lark reaches the stop in the state the whole file
    would have put it in (after some rule's ';')."""
    kept = list(fast.doubtful)  # indices into fast.rules of the rules the grammar reads
    spans = [fast.spans[i] for i in kept]
    if fast.stopped:  # the last rule read, then all the rest
        last = len(fast.rules) - 1
        if kept and kept[-1] == last:
            kept.pop()
            spans.pop()
        if last >= 0:
            kept.append(last)
        spans.append((fast.stop_from, len(text)))
    pieces, at = [], 0
    for start, end in spans:
        pieces.append(_blank(text[at:start]))
        pieces.append(text[start:end])
        at = end
    pieces.append(_blank(text[at:]))
    read = _grammar_rules("".join(pieces), text, path).rules
    out = list(fast.rules)
    for slot, rule in zip(kept, read):
        out[slot] = rule
    out.extend(read[len(kept):])
    return ast.RuleSet(tuple(out), path)


def _blank(text: str) -> str:
    return "\n".join(" " * len(line) for line in text.split("\n"))


def _grammar_rules(text: str, original: str, path: str) -> ast.RuleSet:
    """The lark grammar's reading of ``text`` (``original`` is the file's text, for error messages)."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, original, path) from None
    _check_tree(tree, path)
    to_ast = _ToAst(path)
    try:
        rules = to_ast.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, P4subError):
            raise exc.orig_exc from None
        raise
    raise_all(to_ast.errors)
    return rules


_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|#[^\n]*|//[^\n]*')
_NON_ASCII_DIGIT = re.compile(r"[^\x00-\x7f]")


def _refuse_non_ascii_digits(text: str, path: str) -> None:
    """A fullwidth or Arabic-Indic digit outside strings and comments is an error at its place:
    Python's int() would read it as the ASCII digit, so it must never reach a number token."""
    code = _STRING_OR_COMMENT.sub(lambda m: " " * len(m.group()), text)
    for m in _NON_ASCII_DIGIT.finditer(code):
        char = m.group()
        if unicodedata.decimal(char, None) is not None:
            line = text.count("\n", 0, m.start()) + 1
            column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            raise ParseError(f"non-ASCII digit {char!r} ({unicodedata.name(char, f'U+{ord(char):04X}')}); numbers "
                             "are written with the ASCII digits 0-9", SourceLocation(path, line, column))


def _check_tree(tree: Tree, path: str) -> None:
    """Refuse, before anything recurses over it, a parse tree nested deeper than :data:`MAX_NESTING`
    (10,000 ``not`` in a row would exhaust Python's stack in every later pass) and numbers of more
    than :data:`~compiler.rules.values.MAX_NUMBER_DIGITS` digits (int() of a million digits fails, and no
    field is that wide). An explicit stack: this walk itself must not recurse."""
    stack: list[tuple[Tree, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ParseError(f"the filter is nested more than {MAX_NESTING} levels deep (not, and, or, parentheses)",
                             _location(path, node) or SourceLocation(path, 1, 1))
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))
            elif isinstance(child, Token) and child.type in ("INT", "HEX", "DECIMAL") and len(child) > MAX_NUMBER_DIGITS:
                raise ParseError(f"a number of {len(child):,} digits; p4sub reads numbers of up to {MAX_NUMBER_DIGITS} "
                                 "digits (no field is wider)", _location(path, child))


def read_rules(path: str | Path) -> ast.RuleSet:
    """Read and parse a rule file; a missing or unreadable file is a P4subError naming it."""
    return parse_rules(read_text(path, "rule file"), str(path))


def _syntax_error(exc: UnexpectedInput, text: str, path: str) -> ParseError:
    loc = SourceLocation(path, exc.line if exc.line > 0 else 1, exc.column if exc.column > 0 else 1)
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        lines = text.splitlines() or [""]
        loc = SourceLocation(path, len(lines), len(lines[-1]) + 1)
    label = None
    try:
        label = exc.match_examples(_parser().parse, _ERROR_EXAMPLES, use_accepts=True)
    except Exception:  # match_examples re-parses examples; never let that hide the real error
        label = None
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else "?"
        detail = f"unexpected character {character_name(char)}"
    elif isinstance(exc, UnexpectedToken):
        found = "end of file" if exc.token.type == "$END" else repr(str(exc.token))
        detail = f"unexpected {found}; expected {_expected(exc.accepts or exc.expected)}"
    else:
        detail = "unexpected end of file"
    return ParseError(f"{label}: {detail}" if label else detail, loc)


_TOKEN_NAMES = {
    "SEMICOLON": "';'", "COLON": "':'", "COMMA": "','", "LPAR": "'('", "RPAR": "')'", "OP": "a comparison operator",
    "PREFIX": "'prefix'", "AND": "'and'", "OR": "'or'", "NOT": "'not'", "DOTTED": "a field (header.field)",
    "NAME": "a name", "INT": "a number", "HEX": "a number", "DECIMAL": "a number", "STRING": "a string",
    "IPV4": "an IPv4 address", "ADDRESS": "an IPv6 or MAC address", "FWD": "'fwd'", "DROP": "'drop'",
    "TRUE": "'true'", "FALSE": "'false'", "SLASH": "'/' (a prefix length)", "$END": "end of file",
}


def _expected(names: set[str]) -> str:
    words = sorted({_TOKEN_NAMES.get(n, n.lower()) for n in names})
    return ", ".join(words[:8]) + (", ..." if len(words) > 8 else "") if words else "something else"


def _location(path: str, item: Tree | Token) -> SourceLocation | None:
    meta = item if isinstance(item, Token) else item.meta
    line = getattr(meta, "line", None)
    return SourceLocation(path, line, getattr(meta, "column", 1)) if line else None


@v_args(meta=True)
class _ToAst(Transformer):
    """Parse tree to AST; flattens nested and/or so that printing and parsing agree."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        # Errors that do not stop the walk: a file in the ': N;' form has one per rule, all shown at once.
        self.errors: list[P4subError] = []

    def _loc(self, meta) -> SourceLocation | None:
        return SourceLocation(self.path, meta.line, meta.column) if not meta.empty else None

    def _err(self, message: str, meta) -> ParseError:
        return ParseError(message, self._loc(meta))

    # -- rules ------------------------------------------------------------------------------
    def start(self, meta, items):
        return ast.RuleSet(tuple(r for r in items if r is not None), self.path)

    def rule(self, meta, items):
        filt, actions = items
        return ast.Rule(filt, actions, self._loc(meta))

    def actions(self, meta, items):
        old = [i for i in items if isinstance(i, _OldPort)]
        if old:
            self.errors.append(self._old_actions(items, old[0].location))
            items = [i for i in items if not isinstance(i, _OldPort)]
        return rule_build.merge_actions(items)

    @staticmethod
    def _old_actions(items: list, location: SourceLocation | None) -> ParseError:
        """p4pubsub's first compiler wrote ``filter: 1, 2;``; the error shows the same actions as p4sub writes them."""
        ports: list[int] = []
        others: list[str] = []
        for item in items:
            found = [item.port] if isinstance(item, _OldPort) else list(item.ports) if isinstance(item, ast.Forward) else []
            ports.extend(p for p in found if p not in ports)
            if not isinstance(item, (_OldPort, ast.Forward)):
                others.append(str(item))
        fixed = ", ".join([f"fwd({', '.join(map(str, ports))})"] + others)
        return ParseError("a bare number is not an action (the ': N;' form of p4pubsub's first compiler); "
                          f"write ': {fixed};'", location)

    def fwd(self, meta, items):
        return ast.Forward(tuple(items), self._loc(meta))

    def port(self, meta, items):
        tok = items[0]
        return int(str(tok), 16) if tok.type == "HEX" else int(str(tok))

    def old_port(self, meta, items):
        return _OldPort(int(str(items[0])), self._loc(meta))

    def drop(self, meta, items):
        return ast.Drop(self._loc(meta))

    def call(self, meta, items):
        name, *args = items
        return ast.Call(str(name), tuple(a for a in args if a is not None), self._loc(meta))

    # -- filters ----------------------------------------------------------------------------
    def or_expr(self, meta, items):
        return ast.Or(self._flatten(items, ast.Or), self._loc(meta))

    def and_expr(self, meta, items):
        return ast.And(self._flatten(items, ast.And), self._loc(meta))

    @staticmethod
    def _flatten(items, kind) -> tuple:
        out = []
        for item in items:
            if isinstance(item, Token):
                continue
            out.extend(item.items if isinstance(item, kind) else [item])
        return tuple(out)

    def negation(self, meta, items):
        return ast.Not(items[-1], self._loc(meta))

    def true(self, meta, items):
        return ast.Const(True, self._loc(meta))

    def false(self, meta, items):
        return ast.Const(False, self._loc(meta))

    def comparison(self, meta, items):
        left, op_tok, right = items
        op = str(op_tok).lower()
        oriented = rule_build.orient(left, "==" if op == "=" else op, right)
        if isinstance(oriented, str):
            raise self._err(oriented, meta)
        return ast.Comparison(*oriented, self._loc(meta))

    # -- attributes -------------------------------------------------------------------------
    def field(self, meta, items):
        return ast.Field(str(items[0]), self._loc(meta))

    def name(self, meta, items):
        return ast.StateVar(str(items[0]), self._loc(meta))

    def aggregate(self, meta, items):
        func, arg = items
        func = str(func)
        if func.lower() not in ast.AGGREGATES:
            raise self._err(f"unknown aggregate {func!r}; expected one of {', '.join(ast.AGGREGATES)}", meta)
        return ast.Aggregate(func.lower(), arg, self._loc(meta))

    # -- constants --------------------------------------------------------------------------
    def constant(self, meta, items):  # pragma: no cover - every alternative has an alias
        return items[0]

    def string(self, meta, items):
        return ast.String(rule_build.unescape(str(items[0])[1:-1]), self._loc(meta))

    def hex(self, meta, items):
        return ast.Number(int(str(items[0]), 16), True, self._loc(meta))

    def decimal(self, meta, items):
        return ast.Number(Decimal(str(items[0])), False, self._loc(meta))

    def integer(self, meta, items):
        return ast.Number(int(str(items[0])), False, self._loc(meta))

    def ipv4(self, meta, items):
        return self._checked(rule_build.ipv4(_address_text(items), self._loc(meta)), meta)

    def colon_address(self, meta, items):
        return self._checked(rule_build.colon_address(_address_text(items), self._loc(meta)), meta)

    def _checked(self, node, meta):
        if isinstance(node, str):
            raise self._err(node, meta)
        return node


def _address_text(items: list[Token]) -> str:
    """``addr`` or ``addr/len``: the grammar lets spaces stand around the slash (``10.0.0.0 / 8``)."""
    return "/".join(str(tok) for tok in items)


@dataclass(frozen=True)
class _OldPort:
    """A bare port number in the actions (``: 1;``), kept until ``actions`` can show the whole fwd form."""

    port: int
    location: SourceLocation | None
