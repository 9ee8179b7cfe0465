"""One error hierarchy for everything a user can get wrong.

Every error a user can cause is a :class:`P4subError`; the CLI catches it once, prints it as
``FILE:LINE:COL: message`` and exits with status 2. Anything else escaping is a bug in p4sub.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable

#: A message quotes the user's text; a word longer than this (a 1 MB identifier) is shown by its ends.
LONGEST_WORD = 256
_LONG_WORD = re.compile(r"\S{%d,}" % (LONGEST_WORD + 1))


@dataclass(order=True, slots=True, unsafe_hash=True)
class SourceLocation:
    """Where a construct came from, so that errors found late still point at the user's text.

    A value like the AST nodes that carry it, and for the same reason not ``frozen=True``
    (compiler/rules/nodes.py: every AST node has one; tests/conftest.py guards it against writes)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class P4subError(Exception):
    """An error in the user's input (or environment) with an optional source location."""

    def __init__(self, message: str, location: SourceLocation | None = None) -> None:
        message = shorten(message)
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


def shorten(message: str) -> str:
    """``message`` with each word longer than :data:`LONGEST_WORD` characters cut to its ends and its
    length, so that an error quoting a huge token stays readable (issue 27)."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:100]}...[{len(m.group()):,} characters]...{m.group()[-40:]}",
                          message)


def character_name(char: str) -> str:
    """``char`` as an error names it: quoted, and with its Unicode name when it is invisible or not
    ASCII (a zero-width space pasted into a rule shows as nothing in an editor)."""
    if char.isascii() and char.isprintable():
        return repr(char)
    name = unicodedata.name(char, "")
    invisible = unicodedata.category(char) in ("Cf", "Cc", "Zs", "Zl", "Zp", "Co", "Cn") and char != " "
    return (f"{char!r} (U+{ord(char):04X}" + (f" {name}" if name else "")
            + (", invisible" if invisible else "") + ")")


class ParseError(P4subError):
    """Syntax error in a rule file, spec file or topology file."""


class SpecError(P4subError):
    """A P4 spec file uses something outside the supported subset or is inconsistent."""


class TypeCheckError(P4subError):
    """A rule does not fit the spec (unknown field, constant too wide, wrong operator, ...)."""


class CompileError(P4subError):
    """The compiler cannot produce a pipeline (DNF too large, state space too wide, ...)."""


class ResourceError(P4subError):
    """A pipeline does not fit the target's resources.

    ``codes``, when the target can tell: per compressed field, how many thresholds its code table
    could hold so that the rest would fit (the compile then keeps that many, :mod:`compiler.coarsen`).
    """

    def __init__(self, message: str, location: SourceLocation | None = None, *,
                 codes: dict[str, int] | None = None) -> None:
        super().__init__(message, location)
        self.codes = dict(codes or {})


class TargetError(P4subError):
    """A target (switch, toolchain, SDE) is missing or refused what we sent."""


class ErrorList(P4subError):
    """Several errors found in one pass; all are reported, not only the first."""

    def __init__(self, errors: Iterable[P4subError], limit: int = 50, more: int = 0) -> None:
        self.errors = list(errors)
        shown = self.errors[:limit]
        text = "\n".join(str(e) for e in shown)
        hidden = len(self.errors) - len(shown) + more  # ``more``: found but not kept, to save memory
        if hidden:
            text += f"\n... and {hidden} more error{'s' if hidden > 1 else ''}"
        super().__init__(text, shown[0].location if shown else None)

    def __str__(self) -> str:
        return self.message


def raise_all(errors: list[P4subError], more: int = 0) -> None:
    """Raise the collected errors: one as itself, several as an :class:`ErrorList` (``more``: errors
    counted but not kept, said as "... and N more")."""
    if len(errors) == 1 and not more:
        raise errors[0]
    if errors:
        raise ErrorList(errors, more=more)
