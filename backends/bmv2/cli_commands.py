"""The pipeline's entries as ``simple_switch_CLI`` commands (``commands.txt``).

For a freshly started switch (``simple_switch_CLI --thrift-port 9090 < commands.txt``):

* ``mc_mgrp_create G``, ``mc_node_create RID P1 P2 ...`` and ``mc_node_associate G HANDLE`` per
  multicast group. BMv2 numbers nodes 0, 1, 2, ... in creation order, which the script relies on:
  it must run on a switch with no multicast nodes yet.
* ``table_set_default T A ARGS`` for tables whose default is not ``NoAction`` (the program declares
  the same default; the command makes the script the complete control-plane state).
* ``table_add T A M1 M2 ... => ARGS [PRIORITY]`` per entry: exact ``v``, LPM ``v/len``, ternary
  ``v&&&mask``, range ``lo->hi``.

Priorities. BMv2's native API picks the matching entry with the *lowest* priority number; the IR
and P4Runtime pick the *highest*. For each table the CLI priority is ``max - p + 1`` where ``max``
is the table's highest P4Runtime priority: order reversed, equal priorities stay equal, the best
entry gets 1.
"""

from __future__ import annotations

from backends.bmv2.program import Bmv2Program
from backends.bmv2.target import REPLICA_INSTANCE, V1MODEL
from backends.common.names import NO_ACTION, p4info_action_name, p4info_table_name
from compiler import ir
from compiler.base import P4subError


def number(value: int) -> str:
    """Decimal below 65536, hex above (stock symbols read better as hex)."""
    return str(value) if value < 65536 else hex(value)


def cli_match(key: ir.Key, match: ir.Match) -> str:
    if isinstance(match, ir.Exact):
        return number(match.value)
    if isinstance(match, ir.Lpm):
        free = key.width - match.prefix_len
        return f"{number((match.value >> free) << free)}/{match.prefix_len}"
    if isinstance(match, ir.Ternary):
        return f"{number(match.value & match.mask)}&&&{number(match.mask)}"
    if isinstance(match, ir.Range):
        return f"{number(match.lo)}->{number(match.hi)}"
    raise P4subError(f"unknown match {match!r}")


def cli_priorities(entries: list[ir.Entry]) -> dict[int, int]:
    """P4Runtime priority (higher wins) -> BMv2 CLI priority (lower wins), for one table's entries."""
    top = max((e.priority for e in entries), default=0)
    return {e.priority: top - e.priority + 1 for e in entries}


def table_add(entry: ir.Entry, table: ir.Table, control: str, cli_priority: int | None) -> str:
    matches = " ".join(cli_match(k, m) for k, m in zip(table.keys, entry.matches))
    args = " ".join(number(a) for a in entry.args)
    line = f"table_add {p4info_table_name(table.name, control)} {p4info_action_name(entry.action, control)} {matches} => {args}"
    line = line.rstrip()
    if cli_priority is not None:
        line += f" {cli_priority}"
    return line


def multicast_commands(groups: tuple[ir.MulticastGroup, ...],
                       node_lines: dict[tuple[int, ...], str] | None = None) -> list[str]:
    """Three commands a group; ``node_lines``: ``mc_node_create`` lines already rendered, by ports."""
    out = []
    known = node_lines or {}
    for handle, g in enumerate(groups):
        out.append(f"mc_mgrp_create {g.id}")
        node = known.get(tuple(g.ports))
        out.append(node if node is not None else
                   f"mc_node_create {REPLICA_INSTANCE} {' '.join(str(p) for p in sorted(set(g.ports)))}".rstrip())
        out.append(f"mc_node_associate {g.id} {handle}")
    return out


def commands(pipeline: ir.Pipeline, program: Bmv2Program, control: str = V1MODEL.ingress_control,
             node_lines: dict[tuple[int, ...], str] | None = None, known: "Known | None" = None) -> list[str]:
    """Every command, multicast groups first. ``control`` prefixes the IR's table and action names:
    ``MyIngress``, or in include mode the control instance's path (``MyIngress.p4sub``). ``node_lines``
    and ``known``: lines already rendered (an update reuses the old output's, backends/bmv2/reuse.py)."""
    out = multicast_commands(program.multicast_groups(pipeline), node_lines)
    for t in pipeline.tables:
        if t.default_action != NO_ACTION:
            args = " ".join(number(a) for a in t.default_args)
            out.append(f"table_set_default {p4info_table_name(t.name, control)} "
                       f"{p4info_action_name(t.default_action, control)} {args}".rstrip())
    by_table: dict[str, list[ir.Entry]] = {}
    for e in pipeline.entries:
        by_table.setdefault(e.table, []).append(e)
    for t in pipeline.tables:
        entries = by_table.get(t.name, [])
        prio = cli_priorities(entries) if t.needs_priority else {}
        lines = known.usable(t.name, max((e.priority for e in entries), default=0)) if known else {}
        for e in entries:
            line = lines.get(id(e))
            out.append(line if line is not None else
                       table_add(e, t, control, prio.get(e.priority) if t.needs_priority else None))
    extra = {t.name: t for t in program.extra_tables}
    lines = known.extras if known else {}
    for e in program.extra_entries:
        line = lines.get(e)
        out.append(line if line is not None else table_add(e, extra[e.table], program.control_of(extra[e.table]), None))
    return out


class Known:
    """``table_add`` lines of an earlier rendering: of the pipeline's entries by identity (an update's
    unchanged entries are the very objects; the earlier pipeline must be kept alive meanwhile), of the
    program's own entries by value; and each table's highest priority then: a line of a table whose
    highest priority changed is not reused (its CLI priority depends on it)."""

    def __init__(self, lines: dict[int, str], extras: dict[ir.Entry, str], tops: dict[str, int]) -> None:
        self.lines = lines
        self.extras = extras
        self.tops = tops

    def usable(self, table: str, top: int) -> dict[int, str]:
        return self.lines if self.tops.get(table) == top else {}


def table_lines(pipeline: ir.Pipeline, program: Bmv2Program, text_lines: list[str]) -> "Known | None":
    """The lines :func:`commands` gave ``pipeline`` (``text_lines``), by entry; None when their
    count is not what the pipeline gives."""
    groups = len(program.multicast_groups(pipeline))
    defaults = sum(1 for t in pipeline.tables if t.default_action != NO_ACTION)
    by_table: dict[str, list[ir.Entry]] = {}
    for e in pipeline.entries:
        by_table.setdefault(e.table, []).append(e)
    ordered = [e for t in pipeline.tables for e in by_table.get(t.name, [])]
    start = 3 * groups + defaults
    if len(text_lines) != start + len(ordered) + len(program.extra_entries):
        return None
    tops = {t.name: max((e.priority for e in by_table.get(t.name, [])), default=0) for t in pipeline.tables}
    return Known(dict(zip(map(id, ordered), text_lines[start:])),
                 dict(zip(program.extra_entries, text_lines[start + len(ordered):])), tops)
