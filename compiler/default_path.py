"""What a switch does with packets no subscription looks at (``p4sub compile --default``).

Subscriptions read some headers (ITCH orders, DNS queries, an IPv4 destination). A packet that
carries none of them (ARP, plain IP to another protocol) is not the subscriptions' business: Camus
sent such packets through the switch's normal forwarding. The choices:

* ``drop`` (the default): they are dropped, as before;
* ``fwd(PORT)``: they leave on PORT (an uplink, a router, a host that handles the rest);
* ``table``: they go through tables the user fills at run time, an L2/L3 forwarding hook:
  ``p4sub_default_l2`` on the Ethernet destination (exact; a miss drops), then, when the spec has
  IPv4, ``p4sub_default_l3`` on its validity and destination (LPM; a hit overrides the L2 decision).
  Actions ``forward``, ``multicast``, ``drop_packet``. A spec with neither header gets one keyless
  ``p4sub_default`` whose default action the user sets.

A packet the subscriptions look at (it carries a header some rule reads) but that no rule matches is
still dropped: nobody subscribed to it. The IR holds the choice as tables in
``Pipeline.default_control``, run instead of ``control`` for packets that carry none of
``Pipeline.queried``; the model, ``verify`` and both backends read it from there.
"""

from __future__ import annotations

import dataclasses
import re

from compiler import ir
from compiler.base import P4subError
from compiler.rules import validity
from compiler.spec import Spec
from compiler.tables import GROUP_WIDTH, PORT_WIDTH

TABLE = "p4sub_default"
KINDS = ("drop", "fwd(PORT)", "table")


@dataclasses.dataclass(frozen=True)
class Default:
    kind: str = "drop"  # drop | fwd | table
    port: int | None = None

    def __str__(self) -> str:
        return f"fwd({self.port})" if self.kind == "fwd" else self.kind


def parse_default(text: str, port_bits: int = PORT_WIDTH) -> Default:
    """``drop``, ``fwd(PORT)`` or ``table``."""
    t = text.strip()
    if t in ("drop", "table"):
        return Default(t)
    m = re.fullmatch(r"fwd\(\s*(\d+)\s*\)", t)
    if m:
        port = int(m.group(1))
        if port >= 1 << port_bits:
            raise P4subError(f"--default {text}: port {port} is out of range (ports are {port_bits}-bit)")
        return Default("fwd", port)
    raise P4subError(f"--default {text!r}: expected one of {', '.join(KINDS)}")


def default_of(pipeline: ir.Pipeline) -> Default:
    """The choice a compiled pipeline was made with (to compile an update the same way)."""
    table = next((t for t in pipeline.tables if t.name in pipeline.default_control), None)
    if table is None:
        return Default()
    if table.actions == ("forward",):
        return Default("fwd", table.default_args[0])
    return Default("table")


def _dst_field(spec: Spec, words: tuple[str, ...], width: int) -> tuple[str, str] | None:
    """(header, field) of a scalar header named like ``words`` with a ``width``-bit destination field."""
    for inst in spec.headers:
        if inst.stack_size or not any(w in inst.name.lower() for w in words):
            continue
        htype = spec.header_types.get(inst.type_name)
        for f in htype.fields if htype else ():
            if f.width == width and f.name.lower().replace("_", "") in ("dstaddr", "dst", "dstmac", "daddr"):
                return inst.name, f.name
    return None


def add_default(pipeline: ir.Pipeline, default: Default, queried: tuple[str, ...]) -> ir.Pipeline:
    """``pipeline`` with ``queried`` recorded and the default path's tables and actions added."""
    tables: list[ir.Table] = []
    if default.kind == "fwd":
        tables.append(ir.Table(TABLE, (), ("forward",), "forward", (default.port,), size=1, role="default"))
    elif default.kind == "table":
        hooks = []
        eth = _dst_field(pipeline.spec, ("ethernet", "eth"), 48)
        if eth:
            hooks.append((f"{TABLE}_l2", (ir.Key(f"{eth[0]}.{eth[1]}", 48, "exact"),)))
        ip = _dst_field(pipeline.spec, ("ipv4", "ip"), 32)
        if ip:
            hooks.append((f"{TABLE}_l3", (ir.Key(validity.field_name(ip[0]), 1, "exact"),
                                          ir.Key(f"{ip[0]}.{ip[1]}", 32, "lpm"))))
        for i, (name, keys) in enumerate(hooks or [(TABLE, ())]):
            # The first table drops what it does not know; a later hit decides instead (L3 over L2).
            tables.append(ir.Table(name, keys, ("forward", "multicast", "drop_packet", "NoAction"),
                                   "drop_packet" if i == 0 else "NoAction", size=1024, role="default"))
    have = {a.name for a in pipeline.actions}
    needed = [
        ir.Action("forward", (ir.Param("port", PORT_WIDTH),), (ir.Primitive("set_egress_port", ("port",)),)),
        ir.Action("multicast", (ir.Param("group", GROUP_WIDTH),), (ir.Primitive("set_mcast_group", ("group",)),)),
        ir.Action("drop_packet", (), (ir.Primitive("drop"),)),
    ]
    used = {a for t in tables for a in t.actions}
    actions = pipeline.actions + tuple(a for a in needed if a.name in used and a.name not in have)
    return dataclasses.replace(pipeline, tables=pipeline.tables + tuple(tables), actions=actions, queried=queried,
                               default_control=tuple(t.name for t in tables))
