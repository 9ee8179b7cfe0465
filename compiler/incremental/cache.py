"""The incremental session kept beside a compile's output, so that ``compile --update`` need not read it back.

Reading a 100,000-rule pipeline back into lanes (:mod:`compiler.incremental.reconstruct`, then every
rule's cubes seeded into the builder) took 6 s; unpickling the session takes a fraction of that. The
file, ``session.pickle``, holds two pickles: a small header, checked before anything else is read,
then the :class:`~compiler.incremental.session.Incremental` without its rules (:meth:`detach_rules`:
they are read again from the rules' copy when a slow path asks for them).

The header names what the session belongs to: this format and p4sub's version, the SHA-256 of the
``pipeline.json`` and of the rules' copy it was made from, and whether that copy is line-structured
(:mod:`compiler.rules.linediff`). :func:`load` trusts nothing it has not checked: the file must be
listed in the directory's manifest with the hash it has now (as ``install`` checks what it pushes,
so a hand-edited or damaged cache is refused before it is unpickled), and the header's hashes must be
the manifest's hashes of ``pipeline.json`` and the rules' copy (a cache left from another compile,
or copied in, is stale). A cache that fails a check is ignored with a note; the update then reads
the pipeline back as before. Unpickling runs code only of the classes the pickle names: the manifest
check is what keeps a file nobody wrote through p4sub from being loaded.

An update does not pickle the session again (3 s at 100k): its output holds a hard link of the
session it loaded and ``session.journal.json``, the rule changes made since (each update call's added
and removed rules as text) with the entry, state and group counts each gave. Loading replays them
(updates are deterministic) and refuses a replay whose counts differ; the journal names the session
file's hash and header, and its own header ties it to the directory's pipeline.json and rules' copy.
Past :data:`JOURNAL_LIMIT` updates the session is written whole again.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from compiler import __version__
from compiler.base import Listed, P4subError, file_sha256
from compiler.rules import parse_rules

NAME = "session.pickle"
JOURNAL = "session.journal.json"
FORMAT = "p4sub-session/1"
JOURNAL_FORMAT = "p4sub-session-journal/1"
#: Updates a journal holds before an update writes the whole session again (each is replayed on load).
JOURNAL_LIMIT = 8


@dataclass
class Header:
    pipeline_sha256: str
    rules_sha256: str
    line_structured: bool  # every rule of the rules' copy on lines of its own (linediff)
    last_terminated: bool  # its last rule ends with ';'
    format: str = FORMAT
    p4sub: str = __version__


def save(session, path: Path, header: Header) -> None:
    """Write ``session`` (its rules detached) with ``header`` to ``path``."""
    with open(path, "wb") as f:
        pickle.dump(vars(header), f, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(session, f, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass
class Kept:
    """A session as loaded: the session, the header of the directory's rules (the journal's when
    there is one), the base file's own header and hash, and the updates replayed from the journal."""

    session: object
    header: Header
    base: Header
    base_sha256: str
    calls: list[tuple[list[str], list[str]]]


def load(out: Path, listed: Listed | None, rules_name: str) -> Kept | str:
    """The session kept in ``out`` (the journal's updates replayed), or why it is not used (a sentence)."""
    path = out / NAME
    if not path.is_file():
        return f"no {NAME}"
    if listed is None:
        return f"{NAME} is not checked without a manifest"
    files = listed.doc["files"]
    base_sha = files.get(listed.prefix + NAME)
    if base_sha is None:
        return f"{NAME} is not in the manifest"
    if file_sha256(path) != base_sha:
        return f"{NAME} changed since p4sub wrote it"
    journal = None
    if (out / JOURNAL).exists():
        want = files.get(listed.prefix + JOURNAL)
        if want is None or not (out / JOURNAL).is_file() or file_sha256(out / JOURNAL) != want:
            return f"{JOURNAL} is not the one p4sub wrote"
        try:
            journal = json.loads((out / JOURNAL).read_text(encoding="utf-8"))
            current = Header(**journal["header"])
            calls = [(list(a), list(r)) for a, r in journal["calls"]]
            if journal.get("format") != JOURNAL_FORMAT or journal.get("base_sha256") != base_sha:
                return f"{JOURNAL} belongs to another {NAME}"
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return f"{JOURNAL} cannot be read ({type(exc).__name__})"
    try:
        with open(path, "rb") as f:
            raw = pickle.load(f)
            if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("p4sub") != __version__:
                return f"{NAME} was written by another p4sub or format"
            base = Header(**raw)
            if journal is None:
                current, calls = base, []
            elif (journal.get("base_pipeline_sha256"), journal.get("base_rules_sha256")) != (
                    base.pipeline_sha256, base.rules_sha256):
                return f"{JOURNAL} belongs to another {NAME}"
            if current.format != FORMAT or current.p4sub != __version__:
                return f"{JOURNAL} was written by another p4sub or format"
            if current.pipeline_sha256 != files.get(listed.prefix + "pipeline.json"):
                return f"{NAME} belongs to another pipeline.json (stale)"
            if current.rules_sha256 != files.get(listed.prefix + rules_name):
                return f"{NAME} belongs to other rules (stale)"
            session = pickle.load(f)
    except (OSError, EOFError, TypeError, ValueError, AttributeError, ImportError, pickle.UnpicklingError) as exc:
        return f"{NAME} cannot be read ({type(exc).__name__})"
    if calls:
        why = replay(session, calls, journal.get("counts", []))
        if why is not None:
            return why
    return Kept(session, current, base, base_sha, calls)


def replay(session, calls: Sequence[tuple[Sequence[str], Sequence[str]]], counts: Sequence) -> str | None:
    """Make the journal's updates again (they are deterministic: the same calls give the same state);
    each must come out with the entry and state counts it had. None, or why the replay failed."""
    session.detach_rules(_no_rules)
    for i, (add, remove) in enumerate(calls):
        try:
            up = session.update(parse_rules("\n".join(add), "<journal>").rules,
                                parse_rules("\n".join(remove), "<journal>").rules, checked=True)
        except (P4subError, _NoRules) as exc:
            return f"{JOURNAL}: update {i + 1} does not replay ({exc})"
        if not up.incremental:
            return f"{JOURNAL}: update {i + 1} does not replay incrementally"
        if i >= len(counts) or list(counts[i]) != list(session.counts()):
            return f"{JOURNAL}: update {i + 1} replays to another pipeline"
    return None


class _NoRules(Exception):
    pass


def _no_rules():
    """A replayed update never needs the whole rule set (one that would, a full compile, is refused)."""
    raise _NoRules("it needs the whole rule set")


def save_journal(out: Path, kept: Kept, calls: list[tuple[list[str], list[str]]], counts: list, header: Header,
                 base_path: Path) -> None:
    """``out``'s session as ``base_path`` (the session file it was loaded from, hard-linked: outputs are
    replaced whole, never written in place) and the journal of updates made since."""
    os.link(base_path, out / NAME)
    doc = {"format": JOURNAL_FORMAT, "base_sha256": kept.base_sha256,
           "base_pipeline_sha256": kept.base.pipeline_sha256, "base_rules_sha256": kept.base.rules_sha256,
           "header": vars(header), "calls": calls, "counts": counts}
    (out / JOURNAL).write_text(json.dumps(doc) + "\n", encoding="utf-8")
