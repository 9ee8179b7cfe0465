"""The change between two pipelines' entries and multicast groups: ``delta.json``.

An entry is identified as P4Runtime and BF Runtime identify it: by table, match and priority. A
delta lists entries to add (identity new), to modify (identity kept, action or arguments changed:
``previous`` is the old entry, for rollback) and to delete; groups likewise by id. This is exactly
what the backends' update planners (:mod:`backends.bmv2.update_plan`, :mod:`backends.tofino.updates`)
compute by diffing what a switch holds against a new pipeline; the incremental compile computes it
from the nodes it changed, without a diff over all entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from compiler import ir

FORMAT = 1


def entry_key(e: ir.Entry) -> tuple:
    """How P4Runtime and BF Runtime identify an entry: table, match, priority."""
    return e.table, e.matches, e.priority


@dataclass
class Delta:
    added: list[ir.Entry] = field(default_factory=list)
    modified: list[tuple[ir.Entry, ir.Entry]] = field(default_factory=list)  # (previous, new)
    deleted: list[ir.Entry] = field(default_factory=list)
    groups_added: list[ir.MulticastGroup] = field(default_factory=list)
    groups_modified: list[tuple[ir.MulticastGroup, ir.MulticastGroup]] = field(default_factory=list)
    groups_deleted: list[ir.MulticastGroup] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Writes it takes: one per entry or group changed."""
        return (len(self.added) + len(self.modified) + len(self.deleted) + len(self.groups_added)
                + len(self.groups_modified) + len(self.groups_deleted))

    def counts(self) -> dict[str, int]:
        return {"entries_added": len(self.added), "entries_modified": len(self.modified),
                "entries_deleted": len(self.deleted), "groups_added": len(self.groups_added),
                "groups_modified": len(self.groups_modified), "groups_deleted": len(self.groups_deleted)}

    def to_json(self) -> dict:
        """Phases in a safe order for a switch that applies them one by one: groups that entries
        will name first, then entry deletes, modifies and adds, then groups no entry names."""
        return {
            "format": FORMAT,
            "groups": {"add": ir.to_json(self.groups_added),
                       "modify": [{"previous": ir.to_json(a), "group": ir.to_json(b)} for a, b in self.groups_modified],
                       "delete": ir.to_json(self.groups_deleted)},
            "entries": {"delete": ir.to_json(self.deleted),
                        "modify": [{"previous": ir.to_json(a), "entry": ir.to_json(b)} for a, b in self.modified],
                        "add": ir.to_json(self.added)},
        }

    @classmethod
    def from_json(cls, data: dict) -> "Delta":
        entry = lambda x: ir.from_json(ir.Entry, x)  # noqa: E731
        group = lambda x: ir.from_json(ir.MulticastGroup, x)  # noqa: E731
        e, g = data["entries"], data["groups"]
        return cls([entry(x) for x in e["add"]], [(entry(m["previous"]), entry(m["entry"])) for m in e["modify"]],
                   [entry(x) for x in e["delete"]], [group(x) for x in g["add"]],
                   [(group(m["previous"]), group(m["group"])) for m in g["modify"]], [group(x) for x in g["delete"]])


def diff_entries(old: Iterable[ir.Entry], new: Iterable[ir.Entry]) -> tuple[list, list, list]:
    """(added, modified as (previous, new), deleted) from ``old`` to ``new``."""
    before = {entry_key(e): e for e in old}
    added, modified = [], []
    for e in new:
        k = entry_key(e)
        prev = before.pop(k, None)
        if prev is None:
            added.append(e)
        elif (prev.action, prev.args) != (e.action, e.args):
            modified.append((prev, e))
    return added, modified, list(before.values())


def diff_groups(old: Iterable[ir.MulticastGroup], new: Iterable[ir.MulticastGroup]) -> tuple[list, list, list]:
    before = {g.id: g for g in old}
    added, modified = [], []
    for g in new:
        prev = before.pop(g.id, None)
        if prev is None:
            added.append(g)
        elif tuple(prev.ports) != tuple(g.ports):
            modified.append((prev, g))
    return added, modified, list(before.values())


def diff_pipelines(old: ir.Pipeline, new: ir.Pipeline) -> Delta:
    """The delta by diffing every entry and group (what the full-compile fallback reports)."""
    return Delta(*diff_entries(old.entries, new.entries), *diff_groups(old.multicast_groups, new.multicast_groups))


def same_program(old: ir.Pipeline, new: ir.Pipeline) -> bool:
    """Whether ``new`` installs on ``old``'s program as entry and group changes only."""
    def program(p: ir.Pipeline) -> ir.Pipeline:
        return ir.Pipeline(p.spec, p.metadata, p.actions, p.tables, p.control, (), (), p.registers, p.field_order, 0,
                           p.attributes, p.name, p.format_version, p.delivery, p.lanes, p.guard, p.queried,
                           p.default_control)
    return program(old) == program(new)


def save(delta: Delta, path: str | Path, info: dict | None = None) -> None:
    Path(path).write_text(json.dumps({**delta.to_json(), **(info or {})}, separators=(",", ":")) + "\n",
                          encoding="utf-8")


def load(path: str | Path) -> Delta:
    return Delta.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
