"""The network stage of a routed switch on TNA: no copy back where it came from, none up again.

A switch compiled by ``p4sub route`` is one hop of a fabric. Its tables forward by the subscriptions
alone, so on their own they would send a packet back out of the port it came in on (a hairpin), and
from an up port up again (the up ports are one logical port: a packet from the core must only go
down). The stage drops such copies in the egress, as the BMv2 backend's does
(:mod:`backends.bmv2.program`):

* the ingress writes the packet's ingress port (``PortId_t``, 9 bits) and whether that port is an
  up port (1 bit, from the const table ``p4sub_from_up_port``) into the bridged header
  ``p4sub_bridge``. Tofino's egress parses the packet afresh, so metadata reaches it only in bytes
  the ingress deparser puts in front of the packet; the egress parser extracts them and the egress
  deparser does not emit them. A recirculated pass keeps the original port: the first pass saves it
  in the recirculation header (the second pass's ``ingress_port`` is the recirculation port);
* the egress drops (``eg_intr_md_for_dprsr.drop_ctl = 1``) a copy whose ``egress_port`` is that
  ingress port, and, for a packet that came in on an up port, a copy whose port the const table
  ``p4sub_to_up_port`` lists as an up port.

Up ports are matched by two small exact tables with ``const entries`` rather than by chains of
``==`` in ``if`` conditions: a chain becomes gateway rows, of which a Tofino 1 gateway has few, and a
switch may have many up ports. The entries are part of the program (the up ports are fixed when the
switch is compiled), so the control plane installs nothing for the stage.

Why the egress and not the PRE. Tofino's replication engine can prune multicast copies itself:
a copy to port P is suppressed when the L1 node's RID equals ``ig_intr_md_for_tm.rid`` and P is in
the port mask the ``$pre.prune`` table holds for ``ig_intr_md_for_tm.level2_exclusion_id``
(``L2ExclusionId_t``, 9 bits). With the ingress port as the L2 XID, and the BF Runtime entries
``$pre.prune``: ``$MULTICAST_L2_XID`` = p -> ``$DEV_PORT`` = [p] for every port p that is not an up port
and = (all up ports) for every up port, p4sub's groups (node RID = group id = the packet's ``rid``)
would lose hairpin and up-to-up copies before they are made. The egress check is used instead:

* unicast (``forward(port)``) does not pass through the PRE's replication, so a check outside the
  PRE is needed anyway, and one check then covers both paths;
* the program alone is then correct: no control-plane state (``$pre.prune`` entries written and
  updated by the installer, :mod:`backends.tofino.updates`) whose absence would make a fabric loop;
* what it costs: a copy that is dropped in the egress has already taken TM buffer and an egress
  slot (the PRE would not have made it). Per multicast packet that is at most one hairpin copy, and
  up-to-up copies where a rule (or MR's default) sends a packet from above to the up port. A
  deployment that cannot afford them can add the PRE entries above on top of the egress check.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.common.headers import Member, bits
from backends.common.literals import literal
from backends.tofino.layout import KeyLayout, TableLayout
from backends.tofino.target import Target
from compiler import ir
from compiler.base import TargetError

IN_PORT = "p4sub_in_port"
FROM_UP = "p4sub_from_up"
FROM_UP_TABLE = "p4sub_from_up_port"
TO_UP_TABLE = "p4sub_to_up_port"
FROM_UP_ACTION = "p4sub_came_from_up"
TO_UP_ACTION = "p4sub_drop_going_up"


@dataclass(frozen=True)
class NetworkStage:
    """The up ports of one routed switch (empty for the top layer, which has none)."""

    up_ports: tuple[int, ...]

    def bridged(self, target: Target) -> list[Member]:
        """The bridged-header members the stage needs: the ingress port, and the up bit when there are up ports."""
        members = [Member(bits(target.port_width), IN_PORT)]
        if self.up_ports:
            members.append(Member(bits(1), FROM_UP))
        return members

    def tables(self, target: Target) -> tuple[tuple[str, ir.Table], ...]:
        """(gress, table) of the stage's const tables, in the IR's terms (for the resource estimate)."""
        if not self.up_ports:
            return ()
        size, width = len(self.up_ports), target.port_width
        in_port = ir.Key(f"{target.ingress_md}.{target.ingress_port_field}", width, "exact")
        out_port = ir.Key(f"{target.egress_md}.{target.egress_port_field}", width, "exact")
        return (
            ("ingress", ir.Table(FROM_UP_TABLE, (in_port,), (FROM_UP_ACTION, "NoAction"), "NoAction", size=size,
                                 role="network")),
            ("egress", ir.Table(TO_UP_TABLE, (out_port,), (TO_UP_ACTION, "NoAction"), "NoAction", size=size,
                                role="network")),
        )

    def actions(self) -> tuple[ir.Action, ...]:
        """The stage's actions (no parameters: the table entries carry no action data)."""
        return (ir.Action(FROM_UP_ACTION), ir.Action(TO_UP_ACTION, (), (ir.Primitive("drop"),)))

    def table_layouts(self, target: Target) -> tuple[TableLayout, ...]:
        """The const tables as the resource estimate counts them: exact port keys, one entry per up port."""
        out = []
        for gress, table in self.tables(target):
            entries = tuple(ir.Entry(table.name, (ir.Exact(p),), table.actions[0]) for p in self.up_ports)
            keys = tuple(KeyLayout(k.field, k.width, "exact", "exact", "native") for k in table.keys)
            out.append(TableLayout(table.name, table, keys, entries, table.size, 0, gress))
        return tuple(out)


def network_stage(up_ports: tuple[int, ...] | None, target: Target) -> NetworkStage | None:
    """The stage for ``TofinoOptions.network_up_ports`` (None: a lone switch, no stage)."""
    if up_ports is None:
        return None
    ports = tuple(sorted(set(up_ports)))
    bad = [p for p in ports if not 0 <= p < 1 << target.port_width]
    if bad:
        raise TargetError(f"{target.name}: up ports {bad} do not fit PortId_t ({target.port_width} bits)")
    if target.recirculation_port in ports:
        raise TargetError(f"{target.name}: up port {target.recirculation_port} is the recirculation port")
    return NetworkStage(ports)


def ingress_decls(stage: NetworkStage, target: Target, bridge: str) -> list[str]:
    """The ingress action and const table that mark a packet from an up port (none without up ports)."""
    if not stage.up_ports:
        return []
    port = f"{target.ingress_md}.{target.ingress_port_field}"
    return [
        f'@name("{FROM_UP_ACTION}") action {FROM_UP_ACTION}() {{\n    hdr.{bridge}.{FROM_UP} = 1w1;\n}}',
        _const_table(FROM_UP_TABLE, port, FROM_UP_ACTION, stage.up_ports, target),
    ]


def egress_decls(stage: NetworkStage, target: Target) -> list[str]:
    """The egress action and const table that drop a copy going up (none without up ports)."""
    if not stage.up_ports:
        return []
    port = f"{target.egress_md}.{target.egress_port_field}"
    return [
        f'@name("{TO_UP_ACTION}") action {TO_UP_ACTION}() {{\n'
        f"    {target.egress_dprsr_md}.{target.drop_field} = 3w1;\n}}",
        _const_table(TO_UP_TABLE, port, TO_UP_ACTION, stage.up_ports, target),
    ]


def _const_table(name: str, key: str, action: str, ports: tuple[int, ...], target: Target) -> str:
    lines = [f'@name("{name}") table {name} {{',
             f"    key = {{\n        {key} : exact;\n    }}",
             f"    actions = {{\n        {action};\n        NoAction;\n    }}",
             "    const entries = {"]
    lines += [f"        {literal(p, target.port_width)} : {action}();" for p in ports]
    lines += ["    }", "    const default_action = NoAction();", f"    size = {len(ports)};", "}"]
    return "\n".join(lines)
