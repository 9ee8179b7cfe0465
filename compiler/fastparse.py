"""A fast path for rule files of plain conjunctions, building exactly the AST lark's parser builds.

lark's LALR parser spends about half a millisecond per rule, so a 100,000-rule file took over a
minute before compiling started. Rules of the shape ``h.f OP const (and h.f OP const)* : fwd(...)``
are matched here with regular expressions instead. Comments (``#`` or ``//`` to the end of the
line, outside strings) are blanked out first, space for character, so that a generator's header
line does not send a whole file to the grammar and every location stays where it was. Anything
else - parentheses, ``or``, ``not``, bare names, addresses with colons, numbers of more than
:data:`~compiler.values.MAX_NUMBER_DIGITS` digits, any error - returns None
and the caller uses the grammar, so there is one language and one set of error messages. A
property test holds the two parsers to the same ASTs and source locations. Digits are ASCII
(``[0-9]``, never ``\\d``, which also matches fullwidth and Arabic-Indic digits), as in the grammar.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from decimal import Decimal

from compiler import rules as ast
from compiler.errors import SourceLocation
from compiler.values import MAX_NUMBER_DIGITS

_FIELD = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
_CONST = r'"[^"\\\n;]*"|0[xX][0-9a-fA-F]+|[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?:[ \t\r\n]*/[ \t\r\n]*[0-9]+)?|[0-9]+\.[0-9]+|[0-9]+'
_OP = r"==|!=|<=|>=|<|>|="
_COND = rf"(?P<field>{_FIELD})[ \t\r\n]*(?P<op>{_OP})[ \t\r\n]*(?P<const>{_CONST})"
_AND = r"(?:[ \t\r\n]+and[ \t\r\n]+|[ \t\r\n]*&&[ \t\r\n]*)"
_PORT = r"0[xX][0-9a-fA-F]+|[0-9]+"
_ACTION = rf"fwd[ \t\r\n]*\([ \t\r\n]*(?:{_PORT})(?:[ \t\r\n]*,[ \t\r\n]*(?:{_PORT}))*[ \t\r\n]*\)|drop"
_COND_NOGROUP = re.sub(r"\(\?P<\w+>", "(?:", _COND)
_RULE = re.compile(rf"[ \t\r\n]*(?P<filter>{_COND_NOGROUP}(?:{_AND}{_COND_NOGROUP})*)[ \t\r\n]*:[ \t\r\n]*"
                   rf"(?P<actions>(?:{_ACTION})(?:[ \t\r\n]*,[ \t\r\n]*(?:{_ACTION}))*)[ \t\r\n]*")
_COND_RE = re.compile(_COND)
_ACTION_RE = re.compile(rf"(?P<fwd>fwd)[ \t\r\n]*\((?P<ports>[^)]*)\)|(?P<drop>drop)")
_PORT_RE = re.compile(_PORT)
_KEYWORDS = {"and", "or", "not", "prefix", "true", "false"}
# What the grammar's lexer sees first at a '"', '#' or '/': a whole string (kept) or a comment (blanked).
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|#[^\n]*|//[^\n]*')
_WS = re.compile(r"[ \t\r\n]*")


def parse_flat(text: str, path: str) -> ast.RuleSet | None:
    """The RuleSet of ``text`` when every rule is a plain conjunction, else None."""
    if "#" in text or "//" in text:
        text = _STRING_OR_COMMENT.sub(_blank_comment, text)
    if not text.strip():
        return None
    newlines = [i for i, c in enumerate(text) if c == "\n"] if "\n" in text else []

    def loc(offset: int) -> SourceLocation:
        line = bisect.bisect_left(newlines, offset)
        start = newlines[line - 1] + 1 if line else 0
        return SourceLocation(path, line + 1, offset - start + 1)

    chunks = text.split(";")
    if chunks[-1].strip() == "":
        chunks.pop()
    rules: list[ast.Rule] = []
    offset = 0
    for chunk in chunks:
        m = _RULE.fullmatch(chunk)
        if m is None:
            return None
        rule = _rule(chunk, m, offset, loc)
        if rule is None:
            return None
        rules.append(rule)
        offset += len(chunk) + 1
    return ast.RuleSet(tuple(rules), path)


def _blank_comment(m: re.Match) -> str:
    found = m.group()
    return found if found[0] == '"' else " " * len(found)


def _rule(chunk: str, m: re.Match, offset: int, loc) -> ast.Rule | None:
    cmps = []
    for c in _COND_RE.finditer(chunk, m.start("filter"), m.end("filter")):
        const = _constant(c.group("const"), loc(offset + c.start("const")))
        if const is None:
            return None
        where = loc(offset + c.start("field"))
        op = c.group("op")
        cmps.append(ast.Comparison(ast.Field(c.group("field"), where), "==" if op == "=" else op, const, where))
    filt = cmps[0] if len(cmps) == 1 else ast.And(tuple(cmps), cmps[0].location)
    ports: list[int] = []
    fwd_loc = None
    others: list[ast.Action] = []
    for a in _ACTION_RE.finditer(chunk, m.start("actions"), m.end("actions")):
        where = loc(offset + a.start())
        if a.group("fwd"):
            if any(len(p) > MAX_NUMBER_DIGITS for p in _PORT_RE.findall(a.group("ports"))):
                return None
            ports.extend(int(p, 16) if p[:2].lower() == "0x" else int(p) for p in _PORT_RE.findall(a.group("ports")))
            fwd_loc = fwd_loc or where
        elif ast.Drop() not in others:
            others.append(ast.Drop(where))
    actions = ((ast.Forward(tuple(sorted(set(ports))), fwd_loc),) if ports else ()) + tuple(others)
    return ast.Rule(filt, actions, cmps[0].location)


def _constant(text: str, where: SourceLocation) -> ast.Constant | None:
    if len(text) > MAX_NUMBER_DIGITS and text[0] != '"':
        return None  # the grammar says how long is too long
    if text[0] == '"':
        return ast.String(text[1:-1], where)
    if text[:2].lower() == "0x":
        return ast.Number(int(text, 16), True, where)
    if text.count(".") == 3:
        try:
            net = ipaddress.IPv4Network(_WS.sub("", text), strict=True)
        except ValueError:
            return None  # let the grammar report it
        return ast.IPAddress(4, int(net.network_address), net.prefixlen, where)
    if "." in text:
        return ast.Number(Decimal(text), False, where)
    return ast.Number(int(text), False, where)
