"""The v1model VT program of one switch (``p4sub route ... --delivery vt --target bmv2``) and its entries.

:func:`render_vt` renders ``templates/vt.p4.j2`` for one switch of a
:class:`~compiler.delivery.vt.combined.VtPlan` and writes its state both ways BMv2 takes it:
``entries.p4rt.json`` (P4Runtime write request) and ``commands.txt`` (``simple_switch_CLI``).
Every switch runs the same VT pipeline; a host-facing switch also evaluates the subscriptions and
pushes the receiver set's labels (the edge half is the chapter-3 combined program's,
:func:`backends.bmv2.stack_program.edge_context`).

Control-plane objects (names as in P4Info):

* ``MyIngress.check_tree``: ``meta.vt_cur`` (tree label) -> ``vt_tree(mask)``, one per VT on the switch;
* ``MyIngress.check_hop`` / ``MyIngress.check_stop``: ``meta.vt_cur`` (hop / stop label of one of
  the switch's links) -> ``vt_hop(port)`` / ``vt_stop(port)``;
* ``MyIngress.vt_push``: ``meta.p4sub_rset`` -> ``vt_push_stack(count, l0 .. l{N-1})`` (edges);
* ``MyEgress.vt_host_port``: ``standard_metadata.egress_port`` -> ``vt_strip``;
* ``MyEgress.remove_entry``: const entries, index -> pop that label;
* ``MyIngress.extract_port``: const entries, lowest set bit of the ports to serve -> that port;
* clone session ``p`` for every port ``p`` (one replica: port ``p``): the copy to port ``p``;
* counter ``MyIngress.vt_drops`` (index = position in ``VT_DROP_REASONS``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backends.bmv2.cli_commands import table_add
from backends.bmv2.p4runtime import FORMAT, table_entry
from backends.bmv2.stack_program import edge_commands, edge_context, edge_updates, entries_text
from backends.bmv2.target import V1MODEL
from backends.common.headers import HEADERS_STRUCT, METADATA_STRUCT, Member, bits, struct_decl
from backends.common.templates import render_template
from compiler import ir
from compiler.base import TargetError, write_files
from compiler.delivery import RSET_META
from compiler.delivery.vt import VT_DROP_REASONS, VtPlan, VtSwitchPlan, push_words

PROGRAM = "program.p4"
ENTRIES = "entries.p4rt.json"
COMMANDS = "commands.txt"
INFO = "bmv2.json"
INGRESS, EGRESS = V1MODEL.ingress_control, V1MODEL.egress_control
TREE, HOP, STOP = 0x4000, 0x8000, 0xC000
#: Metadata that must survive recirculation (Listing 5.2; the dissertation leaves the list open).
PRESERVED = ("vt_index", "vt_remaining", "vt_stopped", "vt_in_port", "vt_send", "vt_phase")
#: P4Runtime replica instance of a clone session's copy.
CLONE_INSTANCE = 1


def tree_size(plan: VtPlan) -> int:
    return max(64, plan.max_rules or 0, max((len(s.trees) for s in plan.switches.values()), default=0))


def link_size(sp: VtSwitchPlan) -> int:
    return max(64, len(sp.links))


def host_size(sp: VtSwitchPlan) -> int:
    return max(64, len(sp.host_ports))


def push_size(plan: VtPlan) -> int:
    return max(64, len(plan.receiver_sets))


def vt_tables(plan: VtPlan, sp: VtSwitchPlan) -> tuple[list[tuple[ir.Table, ir.Action, str]], list[ir.Entry]]:
    """The VT program's control-plane tables (with their action and control) and this switch's entries."""
    cur = (ir.Key("meta.vt_cur", 16, "exact"),)
    port = ir.Param("port", V1MODEL.port_width)
    tables = [
        (ir.Table("check_tree", cur, ("vt_tree", "NoAction"), "NoAction", size=tree_size(plan)),
         ir.Action("vt_tree", (ir.Param("mask", plan.mask_width),)), INGRESS),
        (ir.Table("check_hop", cur, ("vt_hop", "NoAction"), "NoAction", size=link_size(sp)),
         ir.Action("vt_hop", (port,)), INGRESS),
        (ir.Table("check_stop", cur, ("vt_stop", "NoAction"), "NoAction", size=link_size(sp)),
         ir.Action("vt_stop", (port,)), INGRESS),
        (ir.Table("vt_host_port", (ir.Key("standard_metadata.egress_port", V1MODEL.port_width, "exact"),),
                  ("vt_strip", "NoAction"), "NoAction", size=host_size(sp)), ir.Action("vt_strip"), EGRESS),
    ]
    entries = [ir.Entry("check_tree", (ir.Exact(TREE | t),), "vt_tree", (m,)) for t, m in sp.trees]
    entries += [ir.Entry("check_hop", (ir.Exact(HOP | e),), "vt_hop", (p,)) for e, p in sp.links]
    entries += [ir.Entry("check_stop", (ir.Exact(STOP | e),), "vt_stop", (p,)) for e, p in sp.links]
    entries += [ir.Entry("vt_host_port", (ir.Exact(p),), "vt_strip") for p in sp.host_ports]
    if sp.ingress:
        width = next(m.width for m in plan.pipeline.metadata if m.name == RSET_META)
        push = ir.Action("vt_push_stack", (ir.Param("count", 16),)
                         + tuple(ir.Param(f"l{i}", 16) for i in range(plan.max_labels)))
        tables.append((ir.Table("vt_push", (ir.Key(RSET_META, width, "exact"),), ("vt_push_stack", "NoAction"),
                                "NoAction", size=push_size(plan)), push, INGRESS))
        entries += [ir.Entry("vt_push", (ir.Exact(p.rsid),), "vt_push_stack", push_words(plan, p)) for p in sp.pushes]
    return tables, entries


#: p4c-bm2-ss limits a shift amount to 8 bits, and the program sets a port's bit by ``1 << (port - 1)``.
MAX_SHIFT_PORT = 256


def program_text(plan: VtPlan, sp: VtSwitchPlan) -> str:
    """``program.p4`` for switch ``sp``."""
    if max(sp.ports, default=0) > MAX_SHIFT_PORT:
        raise TargetError(f"bmv2: switch {sp.name} has port {max(sp.ports)}: the VT program sets a port's bitmap bit "
                          f"with a shift, and p4c-bm2-ss limits shift amounts to 8 bits (ports 1..{MAX_SHIFT_PORT})")
    unused = {"no-subscriber" if not sp.ingress else "not-a-stack"}
    reasons = [{"name": r, "const": r.upper().replace("-", "_"), "index": i} for i, r in enumerate(VT_DROP_REASONS)
               if r not in unused]
    keep = "@field_list(1)"
    w = plan.mask_width
    members = [Member(bits(16), "vt_index", keep), Member(bits(w), "vt_remaining", keep),
               Member(bits(w), "vt_stopped", keep), Member(bits(V1MODEL.port_width), "vt_in_port", keep),
               Member(bits(w), "vt_send", keep), Member(bits(1), "vt_phase", keep),
               Member(bits(16), "vt_cur"), Member(bits(1), "vt_remove"), Member(bits(V1MODEL.port_width), "vt_port"),
               Member(bits(16), "vt_parse_left")]
    context: dict[str, Any] = dict(
        switch=sp.name, switch_id=sp.switch_id, n=plan.max_labels, reasons=reasons, n_reasons=len(VT_DROP_REASONS),
        H=HEADERS_STRUCT, M=METADATA_STRUCT, edge=sp.ingress, w=w, tree_size=tree_size(plan), link_size=link_size(sp),
        host_size=host_size(sp),
        header_types=[], spec_members=[], parser_states=[], emits=[], copies=[],
    )
    if sp.ingress:
        edge, edge_members = edge_context(plan.pipeline, push_size(plan))
        members += edge_members
        context.update(edge)
    context["metadata_struct"] = struct_decl(METADATA_STRUCT, members)
    return render_template(__file__, "vt.p4.j2", **context)


def write_request(plan: VtPlan, sp: VtSwitchPlan) -> dict[str, Any]:
    """``entries.p4rt.json``: clone sessions, the VT entries, and on an ingress switch the subscription entries."""
    tables, entries = vt_tables(plan, sp)
    by_name = {t.name: (t, a, c) for t, a, c in tables}
    updates: list[dict[str, Any]] = [
        {"type": "INSERT", "entity": {"packet_replication_engine_entry": {"clone_session_entry": {
            "session_id": p, "replicas": [{"egress_port": p, "instance": CLONE_INSTANCE}]}}}}
        for p in sp.ports
    ]
    for e in entries:
        t, a, control = by_name[e.table]
        updates.append({"type": "INSERT", "entity": {"table_entry": table_entry(e, t, a, control)}})
    if sp.ingress:
        updates += edge_updates(plan.pipeline)
    return {"format": FORMAT, "pipeline": f"p4sub-vt-{sp.name}",
            "controls": {"ingress": INGRESS, "egress": EGRESS}, "updates": updates}


def cli_commands(plan: VtPlan, sp: VtSwitchPlan) -> list[str]:
    """The same state as ``simple_switch_CLI`` commands."""
    tables, entries = vt_tables(plan, sp)
    by_name = {t.name: (t, c) for t, _, c in tables}
    out = [f"mirroring_add {p} {p}" for p in sp.ports]
    for e in entries:
        t, control = by_name[e.table]
        out.append(table_add(e, t, control, None))
    if sp.ingress:
        out += edge_commands(plan.pipeline)
    return out


def render_vt(plan: VtPlan, switch: str) -> dict[str, str]:
    """Every file of one switch, as {name: text}, without writing anything."""
    sp = plan.switches[switch]
    text = program_text(plan, sp)
    request = write_request(plan, sp)
    entries = entries_text(request)
    info = {
        "target": V1MODEL.name, "architecture": V1MODEL.architecture, "mode": "virtual-trees",
        "strategy": plan.strategy, "max_rules": plan.max_rules, "switch": sp.name, "switch_id": sp.switch_id,
        "edge": sp.ingress, "controls": {"ingress": INGRESS, "egress": EGRESS}, "max_labels": plan.max_labels,
        "label_bytes": 2, "mask_bits": plan.mask_width, "drop_reasons": list(VT_DROP_REASONS), "preserved_metadata": list(PRESERVED),
        "check_tree_entries": len(sp.trees), "links": len(sp.links), "clone_sessions": len(sp.ports),
        "recirculations_per_packet": "labels + copies - 1",
    }
    return {PROGRAM: text, ENTRIES: entries, COMMANDS: "\n".join(cli_commands(plan, sp)) + "\n",
            INFO: json.dumps(info, indent=2) + "\n"}


def emit_vt(plan: VtPlan, switch: str, out_dir: str | Path) -> list[Path]:
    return write_files(render_vt(plan, switch), out_dir)
