"""Two rule files diffed by their lines, parsing only the lines that changed.

``compile --update`` on 100,000 rules spent seconds parsing both files to find the one rule that
changed. A rule file whose every rule sits on lines of its own can be diffed as a multiset of lines:
no token of the language crosses a line end (a string stops at one, a comment runs to one), and the
grammar is a sequence of ``rule ;``, so a file whose lines each hold whole terminated rules parses to
the concatenation of its lines' rules, whatever the order of the lines. The diff is then the lines
only one file has, each parsed alone (at its own line number, so an error names the right place).

:func:`line_structured` says whether a parsed file has that shape: every line that holds anything but
blanks and comments starts with a rule (its first token is where a rule is located), so each rule ends
on the line it starts on. The old file was checked when it was compiled; the new file's changed lines
are checked here, together with their ``;`` (a rule left unterminated is legal only last). Whatever
this cannot vouch for returns None, and the caller parses the whole files as before: never a guess.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from compiler.base import P4subError
from compiler.rules import nodes as ast
from compiler.rules.parser import parse_rules


def content(line: str) -> bool:
    """Whether a line holds a token (not only blanks and comments)."""
    s = line.strip()
    return bool(s) and not s.startswith("#") and not s.startswith("//")


def line_structured(lines: list[str], rules: ast.RuleSet) -> bool:
    """Whether every content line of a file (``lines``, its rules ``rules``) begins with a rule."""
    starts = {(r.location.line, r.location.column) for r in rules.rules if r.location is not None}
    if len(starts) != len(rules.rules):
        return False
    for i, line in enumerate(lines, 1):
        if content(line) and (i, len(line) - len(line.lstrip()) + 1) not in starts:
            return False
    return True


def terminated(line: str) -> bool:
    """A line that certainly ends with a ``;`` (no comment after it to read around)."""
    return line.rstrip().endswith(";")


@dataclass
class LineDiff:
    added: list[ast.Rule]
    removed: list[ast.Rule]
    added_lines: int
    removed_lines: int
    last_terminated: bool  # the new file's last content line certainly ends with ';'


def diff_lines(old_text: str, new_text: str, new_path: str, *, old_last_terminated: bool) -> LineDiff | None:
    """The rules added and removed from ``old_text`` (a line-structured file, as :func:`line_structured`
    found it when compiled) to ``new_text``; None when the new file's changed lines cannot be vouched for
    (the caller then parses both files). A syntax error in a changed line is not raised here either: the
    full parse reports it as it would have."""
    old_lines, new_lines = old_text.split("\n"), new_text.split("\n")
    old_count, new_count = _content_count(old_lines), _content_count(new_lines)
    removed = old_count - new_count
    added = new_count - old_count
    old_last = next((line for line in reversed(old_lines) if content(line)), None)
    new_last_index = next((i for i in range(len(new_lines) - 1, -1, -1) if content(new_lines[i])), None)
    if old_last is not None and not old_last_terminated:
        # The old file's last rule may lack its ';': its line may stay only where it is, last.
        at_end = new_last_index is not None and new_lines[new_last_index] == old_last
        if new_count[old_last] > (1 if at_end else 0):
            return None
    # The changed lines of the new file (as many copies of each as were added, the last ones), each at
    # its own line number, every other line blank.
    left = dict(added)
    padded = [""] * len(new_lines)
    for i in range(len(new_lines) - 1, -1, -1):
        line = new_lines[i]
        if left.get(line, 0) > 0:
            left[line] -= 1
            padded[i] = line
    for i, line in enumerate(padded):  # every changed line but the file's last must end its rules with ';'
        if line and i != new_last_index and not terminated(line):
            return None
    try:
        new_rules = parse_rules("\n".join(padded), new_path) if added else ast.RuleSet(())
    except P4subError:
        return None
    if not line_structured(padded, new_rules):
        return None
    # The removed lines, parsed alone (their rules are the ones the old file had there).
    gone = list(removed)
    try:
        old_rules = parse_rules("\n".join(gone), "<old rules>") if gone else ast.RuleSet(())
    except P4subError:
        return None
    if not line_structured(gone, old_rules):
        return None
    by_line_new = _rules_by_line(new_rules)
    by_line_old = _rules_by_line(old_rules)
    add: Counter = Counter()
    for i, line in enumerate(padded, 1):
        if line:
            add.update(by_line_new.get(i, ()))
    remove: Counter = Counter()
    for i, line in enumerate(gone, 1):
        for r in by_line_old.get(i, ()):
            remove[r] += removed[line]
    # A rule only respelled (blanks, spelling) is both removed and added: it is no change.
    net_add, net_remove = add - remove, remove - add
    last_terminated = new_last_index is None or terminated(new_lines[new_last_index]) or (
        not padded[new_last_index] and old_last_terminated)
    return LineDiff(list(net_add.elements()), list(net_remove.elements()), sum(added.values()),
                    sum(removed.values()), last_terminated)


def _content_count(lines: list[str]) -> Counter:
    """How often each content line occurs (counted whole, then the few distinct blank and comment
    lines dropped: a call per line cost more than the count)."""
    count = Counter(lines)
    for line in [line for line in count if not content(line)]:
        del count[line]
    return count


def _rules_by_line(rules: ast.RuleSet) -> dict[int, list[ast.Rule]]:
    out: dict[int, list[ast.Rule]] = {}
    for r in rules.rules:
        out.setdefault(r.location.line, []).append(r)
    return out
