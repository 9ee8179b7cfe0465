"""Which P4 version a spec file is written in: P4_14 or P4_16.

A marker decides first (Camus's files start with ``/* -*- P4_16 -*- */``, emacs-style); then
the content: P4_14 declares ``header_type T {``, instances ``header T name;`` and parser
functions ``parser name {`` without parameters, none of which is P4_16; P4_16 declares ``header
T {``, structs, ``transition``, ``const``, ``typedef``, parsers with parameters. A file with
neither (only ``#include "..."`` lines, as a spec joining Camus's ``spec_header.p4`` and
``spec_parser.p4`` is) is decided by the files it includes. Nothing at all (only pragmas) reads
as P4_16, whose reader takes pragma-only specs.
"""

from __future__ import annotations

import re
from pathlib import Path

from compiler.base import P4subError, read_text

P4_14, P4_16 = "P4_14", "P4_16"

_MARKER = re.compile(r"-\*-\s*(P4_14|P4_16)\s*-\*-")
_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"', re.S)
_P4_14 = re.compile(r"""
    \bheader_type\s+\w+\s*\{
  | ^[ \t]*parser\s+\w+\s*\{
  | ^[ \t]*(?:header|metadata)\s+\w+\s+\w+\s*(?:\[[^\]\n]*\])?\s*;
  | ^[ \t]*(?:control|field_list|field_list_calculation|calculated_field|action_profile|action_selector)\s+\w+\s*\{
""", re.M | re.X)
_P4_16 = re.compile(r"""
    ^[ \t]*(?:header|struct|header_union)\s+\w+\s*\{
  | \btransition\b
  | ^[ \t]*(?:const|typedef)\s
  | \b(?:parser|control)\s+\w+\s*(?:<[^>]*>)?\s*\(
""", re.M | re.X)
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


def detect_version(text: str, path: str, depth: int = 0) -> str:
    """``P4_14`` or ``P4_16`` for the text of ``path`` (see the module docstring)."""
    marker = _MARKER.search(text)
    if marker:
        return marker.group(1)
    code = _COMMENTS_AND_STRINGS.sub("", text)
    p4_14 = _P4_14.search(code) is not None
    if _P4_16.search(code) is not None:
        return P4_16
    if p4_14:
        return P4_14
    if depth < 8:
        base = Path(path).parent if path and not path.startswith("<") else Path(".")
        for name in _QUOTED_INCLUDE.findall(text):
            try:
                included = read_text(base / name, "included file")
            except P4subError:
                continue
            if detect_version(included, str(base / name), depth + 1) == P4_14:
                return P4_14
    return P4_16


def p4_14_evidence(text: str) -> str | None:
    """The first P4_14-only construct in ``text`` (for telling a P4_16 reader's user why it failed)."""
    match = _P4_14.search(_COMMENTS_AND_STRINGS.sub("", text))
    return match.group().strip() if match else None
