"""The typed AST of the subscription language, and its printer.

Every node is a frozen dataclass that remembers where it came from (``location``, excluded from
equality), so that an error found passes later still prints ``FILE:LINE:COL``. Nodes have slots (a
100,000-rule file holds millions of them: smaller, and compiler/fastparse.py builds them through the
slots' setters, twice as fast as the frozen ``__init__``); Rule keeps a dict for its cached hash. ``str(node)``
prints the node back as source text that parses to an equal node.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Iterator, Union

from compiler.errors import SourceLocation

Loc = SourceLocation | None


def _loc() -> Loc:
    return field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Number:
    """An integer (decimal or hex) or a decimal fraction such as ``50.25`` for fixed-point fields."""

    value: int | Decimal
    hex: bool = False
    location: Loc = _loc()

    def __str__(self) -> str:
        if isinstance(self.value, Decimal):
            return format(self.value, "f")
        return hex(self.value) if self.hex else str(self.value)


@dataclass(frozen=True, slots=True)
class String:
    """A string constant: double-quoted, or a bare identifier (``stock == GOOGL``) as in Camus."""

    value: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class IPAddress:
    """An IPv4 or IPv6 address with a prefix length (32/128 for a plain address)."""

    version: int
    value: int
    prefix_len: int
    location: Loc = _loc()

    @property
    def width(self) -> int:
        return 32 if self.version == 4 else 128

    def __str__(self) -> str:
        addr = ipaddress.ip_address(self.value) if self.version == 4 else ipaddress.IPv6Address(self.value)
        return str(addr) if self.prefix_len == self.width else f"{addr}/{self.prefix_len}"


@dataclass(frozen=True, slots=True)
class MACAddress:
    """A 48-bit Ethernet address."""

    value: int
    location: Loc = _loc()

    def __str__(self) -> str:
        raw = self.value.to_bytes(6, "big")
        return ":".join(f"{b:02x}" for b in raw)


Constant = Union[Number, String, IPAddress, MACAddress]


# ---------------------------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """A packet field ``header.field`` (header instance name from the spec)."""

    name: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class StateVar:
    """A state variable (a spec ``@query_counter``) named without a header."""

    name: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``count(v)``, ``sum(v)``, ``avg(h.f)``: an aggregate over a tumbling window."""

    function: str
    argument: Field | StateVar
    location: Loc = _loc()

    @property
    def name(self) -> str:
        """The name the compiler uses for the value this aggregate produces."""
        return f"{self.function}({self.argument})"

    def __str__(self) -> str:
        return self.name


Attribute = Union[Field, StateVar, Aggregate]

AGGREGATES = ("count", "sum", "avg")


# ---------------------------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------------------------

OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "prefix")
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True, slots=True)
class Comparison:
    """``attribute OP constant``; ``constant OP attribute`` is stored flipped."""

    attribute: Attribute
    op: str
    value: Constant
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"{self.attribute} {self.op} {self.value}"


@dataclass(frozen=True, slots=True)
class And:
    items: tuple["Filter", ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return " and ".join(_wrap(i, Or) for i in self.items)


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple["Filter", ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return " or ".join(str(i) for i in self.items)


@dataclass(frozen=True, slots=True)
class Not:
    item: "Filter"
    location: Loc = _loc()

    def __str__(self) -> str:
        return "not " + _wrap(self.item, (And, Or))


@dataclass(frozen=True, slots=True)
class Const:
    """``true`` or ``false``."""

    value: bool
    location: Loc = _loc()

    def __str__(self) -> str:
        return "true" if self.value else "false"


Filter = Union[Comparison, And, Or, Not, Const]


def _wrap(item: Filter, kinds: type | tuple[type, ...]) -> str:
    return f"({item})" if isinstance(item, kinds) else str(item)


# ---------------------------------------------------------------------------------------------
# Actions and rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Forward:
    """``fwd(p, ...)``: the ports of all ``fwd`` actions of a rule, merged and sorted."""

    ports: tuple[int, ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"fwd({', '.join(map(str, self.ports))})"


@dataclass(frozen=True, slots=True)
class Drop:
    location: Loc = _loc()

    def __str__(self) -> str:
        return "drop"


@dataclass(frozen=True, slots=True)
class Call:
    """A user action (declared in the spec with ``@query_action``) with constant arguments."""

    name: str
    args: tuple[Constant | Attribute, ...] = ()
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


Action = Union[Forward, Drop, Call]


@dataclass(frozen=True)
class Rule:
    """``filter : actions``. ``actions`` hold at most one Forward (ports merged), in source order otherwise."""

    filter: Filter
    actions: tuple[Action, ...]
    location: Loc = _loc()

    @property
    def ports(self) -> tuple[int, ...]:
        for a in self.actions:
            if type(a) is Forward:
                return a.ports
        return ()

    def __hash__(self) -> int:
        # Cached: rule multisets (``compile --update`` diffs 100k-rule files) hash each rule several
        # times, and the dataclass hash walks the whole filter each time.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.filter, self.actions))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        # String hashes differ between processes: a pickled rule must not carry its cached hash.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __str__(self) -> str:
        return f"{self.filter} : {', '.join(map(str, self.actions))};"


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    path: str = field(default="<rules>", compare=False)

    def __str__(self) -> str:
        return "\n".join(str(r) for r in self.rules) + ("\n" if self.rules else "")

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


def comparisons(f: Filter) -> Iterator[Comparison]:
    """Every comparison in a filter, left to right."""
    if isinstance(f, Comparison):
        yield f
    elif isinstance(f, (And, Or)):
        for item in f.items:
            yield from comparisons(item)
    elif isinstance(f, Not):
        yield from comparisons(f.item)
