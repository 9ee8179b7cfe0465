"""Network rule files: subscriptions whose actions name hosts (``add_order.stock == GOOGL: fwd(h12, h40);``).

The subscription grammar's ``fwd`` takes port numbers, and a network rule names hosts of a
topology instead. Rather than a second grammar (and a second set of error messages), the filters
go through the one front end, :func:`compiler.rules.parser.parse_rules`, unchanged: this module finds the
action list of each rule (after the last ``:`` outside parentheses, strings and comments), reads
the ``fwd(HOST, ...)`` groups itself, and hands the parser the same text with each such group
blanked to ``drop`` plus spaces (newlines kept). Every character of every filter keeps its offset,
line and column, so a type error found later still points at the user's text; the fast path of the
parser still applies to flat files. The rule's ``fwd`` is then rebuilt with host ids
(``topology.node_id(host)``) as its ports.

Network rules route packets to hosts, so they may only ``fwd`` (and ``drop``); user-action calls
have no switch to run on and are refused.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from compiler import rules as ast
from compiler.base import P4subError, ParseError, SourceLocation, read_text
from compiler.network.topology import Topology
from compiler.rules import parse_rules

_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<comment>\#[^\n]*|//[^\n]*)|(?P<string>"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)|(?P<number>[0-9][0-9A-Za-z_]*)|(?P<punct>.)""",
    re.S,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class _FwdGroup:
    """One ``fwd(...)`` of an action list: its span in the text and the host tokens it names."""

    start: int
    end: int
    hosts: list[_Tok]


@dataclass
class _Region:
    """The action list of one rule: where its fwd groups are and whether the user wrote ``drop``."""

    groups: list[_FwdGroup]
    user_drop: bool


def parse_network_rules(text: str, topology: Topology, path: str = "<rules>") -> ast.RuleSet:
    """Parse a network rule file; each rule's ``fwd`` ports are the ids of the hosts it names.

    Unknown hosts, port numbers in ``fwd`` and user actions are :class:`ParseError`\\ s at the
    offending token's ``FILE:LINE:COL``; syntax errors in filters are the parser's own.
    """
    newlines = [i for i, c in enumerate(text) if c == "\n"]

    def loc(offset: int) -> SourceLocation:
        line = bisect.bisect_left(newlines, offset)
        start = newlines[line - 1] + 1 if line else 0
        return SourceLocation(path, line + 1, offset - start + 1)

    chars = list(text)
    regions: list[_Region] = []
    for start, end in _rule_chunks(text):
        colon = _last_top_level_colon(text, start, end)
        if colon is None:
            regions.append(_Region([], False))  # not a rule; the parser will say why
            continue
        region = _scan_actions(text, colon + 1, end, loc)
        for group in region.groups:
            _blank(chars, group, text, loc)
        regions.append(region)
    parsed = parse_rules("".join(chars), path)
    if len(parsed.rules) != len(regions):  # the parser accepted what the chunking did not split alike
        raise ParseError("cannot match rules to their action lists; put one ';' after each rule", loc(0))
    ids = {name: topology.node_id(name) for name in topology.hosts()}
    out: list[ast.Rule] = []
    for rule, region in zip(parsed.rules, regions):
        for action in rule.actions:
            if isinstance(action, ast.Call):
                raise ParseError(f"network rules route to hosts: user action {action.name!r} has no switch to run on",
                                 action.location or rule.location)
            if isinstance(action, ast.Forward):
                raise ParseError("network rules name hosts in fwd, e.g. fwd(h1, h2); port numbers belong to "
                                 "per-switch rule files", action.location or rule.location)
        hosts: set[int] = set()
        fwd_loc = None
        for group in region.groups:
            fwd_loc = fwd_loc or loc(group.start)
            for tok in group.hosts:
                if tok.text not in ids:
                    what = ("a switch; fwd names hosts" if tok.text in topology.graph
                            else f"not a host of {topology.name or 'the topology'}")
                    raise ParseError(f"fwd names {tok.text!r}, which is {what}", loc(tok.start))
                hosts.add(ids[tok.text])
        actions: list[ast.Action] = [ast.Forward(tuple(sorted(hosts)), fwd_loc)] if hosts else []
        if region.user_drop or not hosts:
            actions.append(ast.Drop(next((a.location for a in rule.actions if isinstance(a, ast.Drop)), None)))
        out.append(ast.Rule(rule.filter, tuple(actions), rule.location))
    return ast.RuleSet(tuple(out), path)


def read_network_rules(path: str | Path, topology: Topology) -> ast.RuleSet:
    """Read and parse a network rule file (see :func:`parse_network_rules`)."""
    return parse_network_rules(read_text(path, "rule file"), topology, str(path))


def subscriptions(rules: ast.RuleSet, topology: Topology) -> dict[str, list[ast.Filter]]:
    """Host name -> the filters that forward to it, in rule order (every host present, maybe empty)."""
    out: dict[str, list[ast.Filter]] = {h: [] for h in topology.hosts()}
    for rule in rules:
        for host_id in rule.ports:
            host = topology.host_by_id(host_id)
            if host is None:
                raise P4subError(f"rule forwards to host id {host_id}, which the topology lacks", rule.location)
            out[host].append(rule.filter)
    return out


# ------------------------------------------------------------------------------------------------
# Lexing just enough: rule boundaries, the action list, fwd groups
# ------------------------------------------------------------------------------------------------


def _tokens(text: str, start: int, end: int) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(text, start, end):
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            out.append(_Tok(kind, m.group(), m.start(), m.end()))
    return out


def _rule_chunks(text: str) -> list[tuple[int, int]]:
    """Spans of the rules: text between top-level ``;`` that holds a token (comments and strings skipped)."""
    chunks, depth, start, has_token = [], 0, 0, False
    for tok in _tokens(text, 0, len(text)):
        if tok.text == ";" and depth == 0:
            if has_token:
                chunks.append((start, tok.start))
            start, has_token = tok.end, False
            continue
        has_token = True
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth = max(0, depth - 1)
    if has_token:
        chunks.append((start, len(text)))
    return chunks


def _last_top_level_colon(text: str, start: int, end: int) -> int | None:
    depth, colon = 0, None
    for tok in _tokens(text, start, end):
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth = max(0, depth - 1)
        elif tok.text == ":" and depth == 0:
            colon = tok.start
    return colon


def _scan_actions(text: str, start: int, end: int, loc) -> _Region:
    toks = _tokens(text, start, end)
    groups: list[_FwdGroup] = []
    user_drop = False
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.kind == "name" and tok.text == "drop":
            user_drop = True
        if tok.kind == "name" and tok.text == "fwd" and i + 1 < len(toks) and toks[i + 1].text == "(":
            j = i + 2
            hosts: list[_Tok] = []
            closed = False
            while j < len(toks):
                t = toks[j]
                if t.kind == "number":
                    raise ParseError(f"fwd in a network rule names hosts (e.g. fwd(h1, h2)), not port {t.text}",
                                     loc(t.start))
                if t.kind != "name":
                    break
                hosts.append(t)
                j += 1
                if j < len(toks) and toks[j].text == ",":
                    j += 1
                    continue
                if j < len(toks) and toks[j].text == ")":
                    closed = True
                break
            if not (closed and hosts):
                at = toks[j].start if j < len(toks) else end
                what = "fwd needs at least one host, e.g. fwd(h1)" if not hosts else "expected ',' or ')' in fwd(...)"
                raise ParseError(what, loc(at))
            groups.append(_FwdGroup(tok.start, toks[j].end, hosts))
            i = j + 1
            continue
        i += 1
    return _Region(groups, user_drop)


def _blank(chars: list[str], group: _FwdGroup, text: str, loc) -> None:
    """Turn ``fwd(h1, h2)`` into ``drop`` and spaces, keeping newlines so no later offset moves."""
    span = text[group.start:group.end]
    window = next((k for k in range(len(span) - 3) if "\n" not in span[k:k + 4] and "\r" not in span[k:k + 4]), None)
    if window is None:
        raise ParseError("write 'fwd(' on one line", loc(group.start))
    for k in range(group.start, group.end):
        if chars[k] not in "\r\n":
            chars[k] = " "
    chars[group.start + window:group.start + window + 4] = list("drop")
