"""The BMv2 files of an updated pipeline, written from the old output's where an entity did not change.

``compile --update`` changes a handful of entries of a pipeline that may hold 40,000 entries and
20,000 multicast groups of 100 ports each: rendering ``entries.p4rt.json`` again (86 MB of JSON) took
5 to 10 s. Every line of that file is one entity, a pure function of the entity and of the program's
table and action declarations, and ``commands.txt``'s ``mc_node_create`` line of a group is a pure
function of its ports. So with the same program (``same_program``: the update installs as entry
changes), the old output's line of every unchanged entity is its line in the new file, and only the
new entities are rendered. The result is byte for byte what :func:`backends.bmv2.render` writes for
the new pipeline (tests/backends/bmv2/test_reuse.py holds it to that).

The old files are used only when OLD_OUT's manifest lists them with the hash they have now, and
when a sample of their lines is what rendering the old pipeline gives; anything else returns False
and the caller renders every file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from backends.bmv2 import COMMANDS, ENTRIES, INFO, PROGRAM, render_info
from backends.bmv2.cli_commands import commands
from backends.bmv2.p4runtime import (FORMAT, entry_entity, extra_entities, multicast_group_entry,
                                     one_update_per_line_text)
from backends.bmv2.program import Bmv2Options, build_program
from backends.bmv2.target import V1MODEL
from compiler import ir
from compiler.base import find_listed

_SEP = (",", ":")
_GROUP = '{"type":"INSERT","entity":{"packet_replication_engine_entry"'


def emit_update(old_out: Path, old: ir.Pipeline, new: ir.Pipeline, delta, stage: Path,
                options: Bmv2Options | None = None) -> bool:
    """Write ``new``'s BMv2 files into ``stage`` from ``old_out``'s (``old``'s render); False when the
    old files cannot be vouched for (nothing is written then)."""
    listed = find_listed(old_out)
    if listed is None:
        return False
    try:
        listed.check([PROGRAM, INFO, ENTRIES, COMMANDS])
    except Exception:  # noqa: BLE001 - any doubt about the old files: render them all
        return False
    options = options or Bmv2Options()
    program = build_program(new, options)
    control = V1MODEL.ingress_control
    updates = _old_updates(old_out / ENTRIES)
    if updates is None:
        return False
    n_groups, n_entries = len(old.multicast_groups), len(old.entries)
    first_entry = n_groups + (1 if n_groups < len(updates) and updates[n_groups].startswith(_GROUP) else 0)
    if len(updates) < first_entry + n_entries:
        return False
    tables = {t.name: t for t in new.tables}  # the old program's: the caller checked same_program
    actions = {a.name: a for a in new.actions}

    def entry_text(e: ir.Entry) -> str:
        return json.dumps({"type": "INSERT", "entity": entry_entity(e, tables, actions, control)}, separators=_SEP)

    def group_text(g: ir.MulticastGroup) -> str:
        return json.dumps({"type": "INSERT", "entity": {"packet_replication_engine_entry":
                                                        multicast_group_entry(g)}}, separators=_SEP)

    # A sample of the old lines must be what the old pipeline renders to: else the layout is not the one assumed.
    for i in {0, n_groups // 2, n_groups - 1} if n_groups else ():
        if updates[i] != group_text(old.multicast_groups[i]):
            return False
    for i in {0, n_entries // 2, n_entries - 1} if n_entries else ():
        if updates[first_entry + i] != entry_text(old.entries[i]):
            return False
    old_group = dict(zip(old.multicast_groups, updates[:n_groups]))
    old_entry = dict(zip(old.entries, updates[first_entry:first_entry + n_entries]))
    lines = [old_group.get(g) or group_text(g) for g in program.multicast_groups(new)]
    lines += [old_entry.get(e) or entry_text(e) for e in new.entries]
    lines += [json.dumps({"type": "INSERT", "entity": ent}, separators=_SEP) for ent in extra_entities(program)]
    head = {"format": FORMAT, "pipeline": new.name, "controls": {"ingress": control, "egress": V1MODEL.egress_control}}
    files = {ENTRIES: one_update_per_line_text(head, lines)}
    nodes = _old_nodes(old_out / COMMANDS, old.multicast_groups)
    files[COMMANDS] = "\n".join(commands(new, program, node_lines=nodes)) + "\n"
    files[INFO] = render_info(program)
    stage.mkdir(parents=True, exist_ok=True)
    for name, source in ((PROGRAM, program.text), (INFO, files.pop(INFO))):
        old_text = (old_out / name).read_text(encoding="utf-8")
        if old_text == source:
            os.link(old_out / name, stage / name)  # outputs are replaced whole, never written in place
        else:
            (stage / name).write_text(source, encoding="utf-8")
    for name, text in files.items():
        (stage / name).write_text(text, encoding="utf-8")
    return True


def _old_updates(path: Path) -> list[str] | None:
    """The update lines of an ``entries.p4rt.json`` that :func:`one_update_per_line` wrote."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "" or lines[-2] != "]}" or not lines[0].endswith('"updates": ['):
        return None
    body = lines[1:-2]
    out = [line[2:-1] for line in body[:-1]]
    if body:
        out.append(body[-1][2:])
    return out


def _old_nodes(path: Path, groups: tuple[ir.MulticastGroup, ...]) -> dict[tuple[int, ...], str]:
    """Each old group's ``mc_node_create`` line by its ports (the commands start with 3 lines a group)."""
    out: dict[tuple[int, ...], str] = {}
    with open(path, encoding="utf-8") as f:
        for g in groups:
            first, node, _ = f.readline(), f.readline(), f.readline()
            if first != f"mc_mgrp_create {g.id}\n" or not node.startswith("mc_node_create "):
                return {}
            out[tuple(g.ports)] = node[:-1]
    return out
