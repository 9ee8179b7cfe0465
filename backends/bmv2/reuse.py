"""The BMv2 files of an updated pipeline, written from the old output's where an entity did not change.

``compile --update`` changes a handful of entries of a pipeline that may hold 40,000 entries and
20,000 multicast groups of 100 ports each: rendering ``entries.p4rt.json`` again (86 MB of JSON) took
5 to 10 s. Every line of that file is one entity, a pure function of the entity and of the program's
table and action declarations, and ``commands.txt``'s ``mc_node_create`` line of a group is a pure
function of its ports. So with the same program (``same_program``: the update installs as entry
changes), the old output's line of every unchanged entity is its line in the new file, and only the
new entities are rendered. The result is byte for byte what :func:`backends.bmv2.render` writes for
the new pipeline (tests/p4sub/test_update_session.py holds it to that).

The old files are used only when OLD_OUT's manifest lists them with the hash they have now, and
when a sample of their lines is what rendering the old pipeline gives; anything else returns False
and the caller renders every file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from backends.bmv2.files import COMMANDS, ENTRIES, INFO, PROGRAM, render_info
from backends.bmv2.cli_commands import commands, table_lines
from backends.bmv2.p4runtime import FORMAT, entry_entity, extra_entity, multicast_group_entry, one_update_per_line_text
from backends.bmv2.program import Bmv2Options, build_program
from backends.bmv2.target import V1MODEL
from compiler import ir
from compiler.base import find_listed

_SEP = (",", ":")


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
    old_program = build_program(old, options)
    control = V1MODEL.ingress_control
    updates = _old_updates(old_out / ENTRIES)
    old_groups, old_extras = old_program.multicast_groups(old), old_program.extra_entries
    if updates is None or len(updates) != len(old_groups) + len(old.entries) + len(old_extras):
        return False
    tables = {t.name: t for t in new.tables}  # the old program's: the caller checked same_program
    actions = {a.name: a for a in new.actions}

    def entry_text(e: ir.Entry) -> str:
        return _line(entry_entity(e, tables, actions, control))

    def group_text(g: ir.MulticastGroup) -> str:
        return _line({"packet_replication_engine_entry": multicast_group_entry(g)})

    def extra_text(e: ir.Entry) -> str:
        return _line(extra_entity(program, e))

    n_groups, n_entries = len(old_groups), len(old.entries)
    kinds = ((old_groups, 0, group_text), (old.entries, n_groups, entry_text),
             (old_extras, n_groups + n_entries, extra_text))
    # A sample of the old lines must be what the old pipeline renders to: else the layout is not the one assumed.
    for items, at, text in kinds:
        for i in {0, len(items) // 2, len(items) - 1} if items else ():
            if updates[at + i] != text(items[i]):
                return False
    # Entries by identity: the session hands the unchanged ones over as the very objects (hashing 40,000
    # entries by value cost more than rendering them); groups by id and ports, the program's entries by value.
    by_id = dict(zip(map(id, old.entries), updates[n_groups:n_groups + n_entries]))
    groups = {g.id: (g.ports, line) for g, line in zip(old_groups, updates)}
    extras = dict(zip(old_extras, updates[n_groups + n_entries:]))

    def group_line(g: ir.MulticastGroup) -> str:
        ports, line = groups.get(g.id, (None, None))
        return line if ports == g.ports else group_text(g)

    lines = [group_line(g) for g in program.multicast_groups(new)]
    lines += [by_id.get(id(e)) or entry_text(e) for e in new.entries]
    lines += [extras.get(e) or extra_text(e) for e in program.extra_entries]
    head = {"format": FORMAT, "pipeline": new.name, "controls": {"ingress": control, "egress": V1MODEL.egress_control}}
    files = {ENTRIES: one_update_per_line_text(head, lines)}
    del by_id, groups, extras, lines
    old_commands = (old_out / COMMANDS).read_text(encoding="utf-8").split("\n")
    if old_commands[-1] != "":
        return False
    old_commands.pop()
    nodes = _old_nodes(old_commands, old_groups)
    table_known = table_lines(old, old_program, old_commands)
    if table_known is None:
        return False
    files[COMMANDS] = "\n".join(commands(new, program, node_lines=nodes, known=table_known)) + "\n"
    stage.mkdir(parents=True, exist_ok=True)
    for name, source in ((PROGRAM, program.text), (INFO, render_info(program))):
        old_text = (old_out / name).read_text(encoding="utf-8")
        if old_text == source:
            os.link(old_out / name, stage / name)  # outputs are replaced whole, never written in place
        else:
            (stage / name).write_text(source, encoding="utf-8")
    for name, text in files.items():
        (stage / name).write_text(text, encoding="utf-8")
    return True


def _line(entity: dict) -> str:
    return json.dumps({"type": "INSERT", "entity": entity}, separators=_SEP)


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


def _old_nodes(lines: list[str], groups) -> dict[tuple[int, ...], str]:
    """Each old group's ``mc_node_create`` line by its ports (the commands start with 3 lines a group)."""
    out: dict[tuple[int, ...], str] = {}
    for i, g in enumerate(groups):
        if i * 3 + 1 >= len(lines) or lines[3 * i] != f"mc_mgrp_create {g.id}":
            return {}
        out[tuple(g.ports)] = lines[3 * i + 1]
    return out
