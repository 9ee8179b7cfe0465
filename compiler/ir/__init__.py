"""The Pipeline IR: what a compiled subscription set is, independent of any target.

* :mod:`.nodes` - the plain frozen dataclasses both backends render and the reference model runs;
* :mod:`.serial` - ``pipeline.json``: :func:`save`, and :func:`load`, which checks what it reads
  with :mod:`.check` (schema first, then the references between tables, actions and groups).

Read as ``from compiler import ir`` and ``ir.Pipeline``, ``ir.load(...)``: the names below are its
public face.
"""

from compiler.ir.nodes import (
    FORMAT_VERSION,
    PORTS,
    READABLE_VERSIONS,
    STATE,
    STATEFUL_VERSION,
    Action,
    Delivery,
    Entry,
    Exact,
    Key,
    Lpm,
    Match,
    Metadata,
    MulticastGroup,
    Param,
    Pipeline,
    Primitive,
    Range,
    Register,
    StateRead,
    StateUpdate,
    Table,
    Ternary,
    lane_ports,
    lane_prefix,
    lane_state,
)
from compiler.ir.serial import from_json, load, save, to_json

__all__ = [
    "FORMAT_VERSION", "PORTS", "READABLE_VERSIONS", "STATE", "STATEFUL_VERSION", "Action", "Delivery", "Entry",
    "Exact", "Key", "Lpm", "Match", "Metadata", "MulticastGroup", "Param", "Pipeline", "Primitive", "Range",
    "Register", "StateRead", "StateUpdate", "Table", "Ternary", "from_json", "lane_ports", "lane_prefix",
    "lane_state", "load", "save", "to_json",
]
