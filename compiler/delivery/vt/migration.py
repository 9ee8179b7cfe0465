"""Replacing installed VTs without misrouting a packet (dissertation §5.4, §6.3).

The order is the dissertation's: **install new, inform publishers, delete old**. New VTs get new
ids (:class:`~compiler.delivery.vt.installed.VtTable` never reuses one), so at every moment each
VT id a publisher may put in a header names exactly the links it named when the publisher
learnt it: before the publishers are told, they use the old VTs, which are still installed; after,
the new ones, which already are; the old ones go only when nobody uses them any more.

Publishers' knowledge is a :class:`Views` object (publisher -> the VT ids it encodes with). A
migration step replaces one old VT by its successor (or retires one, or adds one), so a switch
needs room for one extra entry at a time; :func:`migrate` runs the steps and calls ``check``
after every phase of every step (the tests deliver notifications there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from compiler.base import P4subError
from compiler.delivery.vt.installed import VirtualTree, VtTable


@dataclass
class Views:
    """What each publisher knows is installed: publisher -> VT ids."""

    known: dict[str, set[int]] = field(default_factory=dict)

    def of(self, table: VtTable, publisher: str) -> dict[int, frozenset[int]]:
        """The publisher's view as the encoder takes it (VT id -> links), from the table's VTs."""
        return {t: table.trees[t].edges for t in sorted(self.known.get(publisher, ())) if t in table.trees}

    def inform(self, publishers: Iterable[str], add: Iterable[int] = (), remove: Iterable[int] = ()) -> None:
        add, remove = set(add), set(remove)
        for p in publishers:
            ids = self.known.setdefault(p, set())
            ids -= remove
            ids |= add


@dataclass(frozen=True)
class Step:
    """Replace VT ``old`` (``None``: add only) by a VT on ``new`` links (``None``: retire only)."""

    old: int | None
    new: frozenset[int] | None
    origin: str = ""


def migrate(table: VtTable, views: Views, steps: Iterable[Step], publishers: Iterable[str], *,
            check: Callable[[str], None] | None = None) -> list[VirtualTree]:
    """Run ``steps`` in order; returns the VTs installed. ``check(phase)`` runs after each phase
    ("installed", "informed", "deleted"). A step whose new VT does not fit raises before anything
    of it changes (the old VT stays and keeps working)."""
    publishers = list(publishers)
    out = []
    for step in steps:
        if step.old is not None and step.old not in table.trees:
            raise P4subError(f"cannot migrate VT {step.old}: it is not installed")
        vt = None
        if step.new is not None:
            vt = table.install(step.new, step.origin)
            if vt is None:
                raise P4subError(f"no room for the successor of VT {step.old}: a switch on it is full "
                                 "(a migration needs one free entry per switch it touches)")
            out.append(vt)
        if check:
            check("installed")
        views.inform(publishers, add=[vt.vt_id] if vt else [], remove=[step.old] if step.old is not None else [])
        if check:
            check("informed")
        if step.old is not None:
            table.delete(step.old)
        if check:
            check("deleted")
    return out
