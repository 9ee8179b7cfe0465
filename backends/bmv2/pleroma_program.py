"""One switch's PLEROMA flows as a v1model program and its entries (``templates/pleroma.p4.j2``).

PLEROMA switches do no content filtering of their own: the publisher writes an event's dz into the
IPv6 destination (``ff0e::/16 | dz << (112 - |dz|)``, S1 §III-B) and every switch matches prefixes
of it. A flow ``(ingress port, dz) -> ports`` becomes an entry of ``MyIngress.pleroma_flows``
(ingress port exact, ``hdr.ipv6.dst_addr`` lpm with prefix ``16 + |dz|``) whose action sends to
the one port or to the multicast group of the port set (groups shared by equal port sets). The
entries are written both ways BMv2 takes them, as the other BMv2 programs are:
``entries.p4rt.json`` (the P4Runtime write request, :mod:`backends.bmv2.p4runtime`) and
``commands.txt`` (``simple_switch_CLI``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from backends.bmv2.cli_commands import multicast_commands, table_add
from backends.bmv2.p4runtime import FORMAT, multicast_group_entry, table_entry
from backends.common.templates import render_template
from compiler import ir
from compiler.pleroma import ipv6_prefix

PROGRAM = "program.p4"
ENTRIES = "entries.p4rt.json"
COMMANDS = "commands.txt"
CONTROL = "MyIngress"
TABLE = ir.Table("pleroma_flows", (ir.Key("standard_metadata.ingress_port", 9, "exact"),
                                   ir.Key("hdr.ipv6.dst_addr", 128, "lpm")),
                 ("pleroma_port", "pleroma_group", "drop"), "drop")
ACTIONS = {"pleroma_port": ir.Action("pleroma_port", (ir.Param("port", 9),)),
           "pleroma_group": ir.Action("pleroma_group", (ir.Param("group", 16),))}


def flow_entries(flows: Mapping[int, Mapping[str, frozenset[int]]]
                 ) -> tuple[list[ir.Entry], tuple[ir.MulticastGroup, ...]]:
    """The flows of one switch (``ingress -> dz -> ports``) as entries and multicast groups."""
    groups: dict[frozenset[int], int] = {}
    entries = []
    for ingress, table in sorted(flows.items()):
        for dz, ports in sorted(table.items(), key=lambda kv: (len(kv[0]), kv[0])):
            address, length = ipv6_prefix(dz)
            matches = (ir.Exact(ingress), ir.Lpm(address, length))
            if len(ports) == 1:
                entries.append(ir.Entry(TABLE.name, matches, "pleroma_port", (next(iter(ports)),)))
            else:
                gid = groups.setdefault(frozenset(ports), len(groups) + 1)
                entries.append(ir.Entry(TABLE.name, matches, "pleroma_group", (gid,)))
    return entries, tuple(ir.MulticastGroup(g, tuple(sorted(p))) for p, g in groups.items())


def render(switch: str, flows: Mapping[int, Mapping[str, frozenset[int]]], out: Path) -> list[Path]:
    """Write ``program.p4``, ``entries.p4rt.json`` and ``commands.txt`` for one switch into ``out``."""
    entries, groups = flow_entries(flows)
    table = ir.Table(TABLE.name, TABLE.keys, TABLE.actions, TABLE.default_action, size=max(1024, len(entries)))
    out.mkdir(parents=True, exist_ok=True)
    program = render_template(__file__, "pleroma.p4.j2", switch=switch, flows=len(entries), size=table.size)
    updates = [{"type": "INSERT", "entity": {"table_entry": table_entry(e, table, ACTIONS[e.action], CONTROL)}}
               for e in entries]
    updates += [{"type": "INSERT", "entity": {"packet_replication_engine_entry": multicast_group_entry(g)}}
                for g in groups]
    commands = [table_add(e, table, CONTROL, None) for e in entries] + multicast_commands(groups)
    paths = [out / PROGRAM, out / ENTRIES, out / COMMANDS]
    paths[0].write_text(program, encoding="utf-8")
    paths[1].write_text(json.dumps({"format": FORMAT, "updates": updates}, indent=1) + "\n", encoding="utf-8")
    paths[2].write_text("\n".join(commands) + "\n", encoding="utf-8")
    return paths


def read_flows(path: Path) -> dict[int, dict[str, frozenset[int]]]:
    """A switch's flows (``ingress -> dz -> ports``) read back from the ``entries.p4rt.json`` that
    :func:`render` wrote: what netsim runs for a PLEROMA network directory is what BMv2 would install.

    Refuses (a :class:`P4subError` naming the file) anything :func:`render` would not have written:
    another table or action, an address outside ``ff0e::/16``, a group never defined.
    """
    from compiler.base import P4subError, read_text

    space, space_len = ipv6_prefix("")  # ff0e::/16: every dz lies in it
    dz_bits = 128 - space_len

    def bad(why: str) -> P4subError:
        return P4subError(f"{path}: {why} (not a PLEROMA switch's entries; rerun p4sub eval pleroma --programs)")

    try:
        doc = json.loads(read_text(path, "entries file"))
        updates = doc["updates"]
        groups: dict[int, frozenset[int]] = {}
        rows: list[tuple[int, int, int, str, int]] = []
        table, port_action, group_action = (f"{CONTROL}.{TABLE.name}", f"{CONTROL}.pleroma_port",
                                            f"{CONTROL}.pleroma_group")
        for u in updates:
            entity = u["entity"]
            if "packet_replication_engine_entry" in entity:
                g = entity["packet_replication_engine_entry"]["multicast_group_entry"]
                groups[int(g["multicast_group_id"])] = frozenset(int(r["egress_port"]) for r in g["replicas"])
                continue
            e = entity["table_entry"]
            if e["table_name"] != table:
                raise bad(f"an entry of table {e['table_name']}")
            match = {m["field_name"]: m for m in e["match"]}
            ingress = int(match["standard_metadata.ingress_port"]["exact"]["value"], 16)
            lpm = match["hdr.ipv6.dst_addr"]["lpm"]
            address, length = int(lpm["value"], 16), int(lpm["prefix_len"])
            action = e["action"]["action"]
            arg = int(action["params"][0]["value"], 16)
            if action["action_name"] not in (port_action, group_action):
                raise bad(f"action {action['action_name']}")
            rows.append((ingress, address, length, action["action_name"], arg))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise bad(f"unreadable entries ({type(exc).__name__}: {exc})") from None
    flows: dict[int, dict[str, frozenset[int]]] = {}
    for ingress, address, length, action, arg in rows:
        if not space_len <= length <= 128 or address >> dz_bits != space >> dz_bits:
            raise bad(f"address {address:#x}/{length} is not in ff0e::/16")
        bits = length - space_len
        dz = format(address >> (dz_bits - bits) & ((1 << bits) - 1), f"0{bits}b") if bits else ""
        if action == group_action and arg not in groups:
            raise bad(f"multicast group {arg} is used but never created")
        flows.setdefault(ingress, {})[dz] = groups[arg] if action == group_action else frozenset({arg})
    return flows
