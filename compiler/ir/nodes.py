"""The Pipeline IR: what a compiled subscription set is, independent of any target.

Plain frozen dataclasses that both backends render and the reference model executes. They hold
facts only (tables, keys, match kinds, entries with priorities, multicast groups); a backend never
computes routing or diagrams, it spells these facts in its architecture's terms.

``pipeline.json`` is this IR serialised by :func:`compiler.ir.serial.to_json`; its ``format_version`` changes whenever
the meaning of a field changes. Conventions: a field reference is ``header.field`` for packet
fields and ``meta.<name>`` for pipeline metadata; entry priorities follow P4Runtime (higher number
wins, only for tables with ternary or range keys); multicast group ids start at 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from compiler.spec import Spec

FORMAT_VERSION = 3
#: Versions this p4sub reads: 1 had no lanes and no port bitmap, 2 no guard (the defaults below mean
#: the same: a version-2 program required every header its tables query). A pipeline with state
#: (``updates``) is version 4, so that a p4sub that cannot compute its keys refuses it.
READABLE_VERSIONS = (1, 2, 3, 4)
STATEFUL_VERSION = 4
STATE = "meta.p4sub_state"
PORTS = "meta.p4sub_ports"


def lane_state(lane: int) -> str:
    """The state metadata of a lane: ``meta.p4sub_state`` for lane 0, ``meta.p4sub_state_l2`` for lane 2."""
    return STATE if lane == 0 else f"{STATE}_l{lane}"


def lane_ports(lane: int) -> str:
    """The port bitmap a lane ORs into: ``meta.p4sub_ports`` for lane 0, ``meta.p4sub_ports_l2`` for lane 2.
    Each lane has its own, so that no two lanes write one field (on Tofino they share stages)."""
    return PORTS if lane == 0 else f"{PORTS}_l{lane}"


def lane_prefix(lane: int) -> str:
    """Prefix of a lane's table and action names (none for lane 0, so one lane is today's pipeline)."""
    return "" if lane == 0 else f"l{lane}_"


@dataclass(frozen=True)
class Key:
    """A table key: a field reference, its width in bits, and a P4 match kind."""

    field: str
    width: int
    match_kind: str


@dataclass(frozen=True)
class Param:
    name: str
    width: int


@dataclass(frozen=True)
class Primitive:
    """One step of an action body.

    ``op`` is one of: ``set_meta`` (args: metadata field, param name), ``or_meta`` (the same, ORed
    into the field), ``set_egress_port`` (param), ``set_mcast_group`` (param), ``drop``, ``user``
    (the user action's name; its params are passed on).
    """

    op: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple[Param, ...] = ()
    body: tuple[Primitive, ...] = ()


@dataclass(frozen=True)
class Table:
    """A match-action table. ``on_miss`` names a table applied when this one misses (P4 ``if (!t.apply().hit)``)."""

    name: str
    keys: tuple[Key, ...]
    actions: tuple[str, ...]
    default_action: str
    default_args: tuple[int, ...] = ()
    size: int = 1024
    on_miss: str | None = None
    role: str = ""  # "field" (a field's state transition), "miss", "code" (domain compression), "leaf"
    attribute: str = ""  # the rule attribute this table tests, for field/miss/code tables
    lane: int = 0  # lanes are independent chains of tables: each reads and writes only its own metadata

    @property
    def needs_priority(self) -> bool:
        return any(k.match_kind in ("ternary", "range") for k in self.keys)


@dataclass(frozen=True)
class Exact:
    value: int


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True)
class Range:
    lo: int
    hi: int


Match = Union[Exact, Lpm, Ternary, Range]


@dataclass(frozen=True)
class Entry:
    """A table entry: one match per key, an action with its arguments, a P4Runtime priority (higher wins)."""

    table: str
    matches: tuple[Match, ...]
    action: str
    args: tuple[int, ...] = ()
    priority: int = 0


@dataclass(frozen=True)
class MulticastGroup:
    """A multicast group: one copy of the packet to each port. Backends choose replication ids."""

    id: int
    ports: tuple[int, ...]


@dataclass(frozen=True)
class Delivery:
    """How the ports a packet gets become copies.

    ``groups``: a leaf names one port (unicast) or one multicast group per distinct port set.
    ``bitmap``: each lane's tables OR port bits into its metadata field of ``fields`` (bit ``i``
    stands for ``ports[i]``); at the end of the ingress the packet's bitmap is the OR of them all
    (kept in ``fields[0]``), a packet whose bitmap is not zero goes to multicast ``group`` (all of
    ``ports``), else it is dropped, and the egress drops each copy whose port's bit is clear (Elmo's
    per-port pruning). Lanes need it: their bitmaps are ORed, where group ids cannot be.
    """

    kind: str = "groups"
    fields: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    group: int = 0

    @property
    def width(self) -> int:
        return max(1, len(self.ports))

    @property
    def is_bitmap(self) -> bool:
        return self.kind == "bitmap"

    def bit(self, port: int) -> int:
        """The bitmap value with only ``port``'s bit set."""
        return 1 << self.ports.index(port)

    def ports_of(self, bitmap: int) -> frozenset[int]:
        return frozenset(p for i, p in enumerate(self.ports) if bitmap >> i & 1)


@dataclass(frozen=True)
class Register:
    """An array of ``size`` cells of ``width`` bits that outlives packets. ``index`` is the field whose
    CRC-32 modulo ``size`` picks a packet's cell ("" for cell 0)."""

    name: str
    width: int
    size: int
    index: str = ""


@dataclass(frozen=True)
class StateRead:
    """A stateful value the tables match: rule attribute ``attribute`` (``count(rate)``) is
    ``function`` (count, sum or avg) of its counter, put in metadata ``field`` before the tables."""

    attribute: str
    function: str
    field: str
    width: int


@dataclass(frozen=True)
class StateUpdate:
    """One counter, updated before any table and then read (docs/compiler.md, "Stateful subscriptions").

    Registers ``end`` (window ends, in microseconds), ``count`` and ``total`` (sums; "" when no rule
    reads a sum or an average) share their cells, picked by ``index`` (a field, "" for one cell).
    A message whose ``when`` headers are all valid updates the cell: a new window when its time is
    at or past the end (end = time + ``window_us``, count = sum = 0), then count + 1 and sum +
    ``value``, modulo 2^``width``.
    """

    counter: str
    window_us: int
    width: int
    size: int
    end: str
    count: str
    total: str = ""
    index: str = ""
    value: str = ""
    when: tuple[str, ...] = ()
    reads: tuple[StateRead, ...] = ()


@dataclass(frozen=True)
class Metadata:
    name: str
    width: int


@dataclass(frozen=True)
class Pipeline:
    """A whole compiled pipeline. ``control`` lists the tables applied in order (each may chain ``on_miss``)."""

    spec: Spec
    metadata: tuple[Metadata, ...]
    actions: tuple[Action, ...]
    tables: tuple[Table, ...]
    control: tuple[str, ...]
    entries: tuple[Entry, ...]
    multicast_groups: tuple[MulticastGroup, ...] = ()
    registers: tuple[Register, ...] = ()
    field_order: tuple[str, ...] = ()
    states: int = 0
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    name: str = "p4sub"
    format_version: int = FORMAT_VERSION
    delivery: Delivery = field(default_factory=Delivery)
    lanes: int = 1
    # Headers that must be valid for the tables to run (compiler.rules.validity); None: every header a
    # table key reads (pipelines of format 1 and 2).
    guard: tuple[str, ...] | None = None
    # Headers some rule reads: a packet that carries none of them is not looked at and goes through
    # ``default_control`` instead of ``control`` (compiler.default_path; empty: dropped). None: the guard.
    queried: tuple[str, ...] | None = None
    default_control: tuple[str, ...] = ()
    # Counters updated before the tables (compiler.stateful); their values are keys like fields.
    updates: tuple[StateUpdate, ...] = ()

    def state_reads(self) -> dict[str, StateRead]:
        """Rule attribute -> the state value that stands for it (empty for a stateless pipeline)."""
        return {r.attribute: r for u in self.updates for r in u.reads}

    def guard_headers(self) -> tuple[str, ...]:
        """The headers a packet must carry to be matched at all."""
        if self.guard is not None:
            return self.guard
        # Intrinsic metadata (standard_metadata.ingress_port) is no header: it is always there.
        return tuple(sorted({k.field.split(".", 1)[0] for t in self.tables for k in t.keys
                             if not k.field.startswith("meta.") and "." in k.field
                             and self.spec.header(k.field.split(".", 1)[0]) is not None}))

    def queried_headers(self) -> tuple[str, ...]:
        """The headers whose presence makes a packet the subscriptions' business (none: every packet is)."""
        return self.queried if self.queried is not None else self.guard_headers()

    def lane_tables(self, lane: int) -> list[Table]:
        return [t for t in self.tables if t.lane == lane]

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    def action(self, name: str) -> Action:
        return next(a for a in self.actions if a.name == name)

    def entries_of(self, table: str) -> list[Entry]:
        return [e for e in self.entries if e.table == table]
