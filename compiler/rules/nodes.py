"""The typed AST of the subscription language, and its printer.

Every node is a dataclass that remembers where it came from (``location``, excluded from
equality), so that an error found passes later still prints ``FILE:LINE:COL``. ``str(node)`` prints
the node back as source text that parses to an equal node.

Nodes are values: nothing assigns to a node once it is built (they are hashed, shared between
rules and switches, and used as keys of the compile's memos). They are not ``frozen=True``
dataclasses all the same: a 100,000-rule file makes three million of them, and a frozen
dataclass's ``__init__`` (every field through ``object.__setattr__``) takes 3.4 times as long as a
plain slotted one's (263 against 77 ns on CPython 3.11: ``__setattr__`` overridden on the class
turns off the interpreter's specialised slot store). :func:`guard_writes` puts the frozen check
back for the test suite (tests/conftest.py), which fails on any second assignment. Nodes have
slots (smaller, quicker to read); Rule keeps a dict for its cached hash.
"""

from __future__ import annotations

import ipaddress
from dataclasses import FrozenInstanceError, dataclass, field
from decimal import Decimal
from typing import Iterator, Union

from compiler.base import SourceLocation

Loc = SourceLocation | None


def _loc() -> Loc:
    return field(default=None, compare=False, repr=False)


#: A node class: slotted, compared and hashed by its fields but the location (see the module's docstring).
_node = dataclass(slots=True, unsafe_hash=True)


# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------


@_node
class Number:
    """An integer (decimal or hex) or a decimal fraction such as ``50.25`` for fixed-point fields."""

    value: int | Decimal
    hex: bool = False
    location: Loc = _loc()

    def __str__(self) -> str:
        if isinstance(self.value, Decimal):
            return format(self.value, "f")
        return hex(self.value) if self.hex else str(self.value)


@_node
class String:
    """A string constant: double-quoted, or a bare identifier (``stock == GOOGL``) as in Camus."""

    value: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@_node
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


@_node
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


@_node
class Field:
    """A packet field ``header.field`` (header instance name from the spec)."""

    name: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return self.name


@_node
class StateVar:
    """A state variable (a spec ``@query_counter``) named without a header."""

    name: str
    location: Loc = _loc()

    def __str__(self) -> str:
        return self.name


@_node
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


@_node
class Comparison:
    """``attribute OP constant``; ``constant OP attribute`` is stored flipped."""

    attribute: Attribute
    op: str
    value: Constant
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"{self.attribute} {self.op} {self.value}"


@_node
class And:
    items: tuple["Filter", ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return " and ".join(_wrap(i, Or) for i in self.items)


@_node
class Or:
    items: tuple["Filter", ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return " or ".join(str(i) for i in self.items)


@_node
class Not:
    item: "Filter"
    location: Loc = _loc()

    def __str__(self) -> str:
        return "not " + _wrap(self.item, (And, Or))


@_node
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


@_node
class Forward:
    """``fwd(p, ...)``: the ports of all ``fwd`` actions of a rule, merged and sorted."""

    ports: tuple[int, ...]
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"fwd({', '.join(map(str, self.ports))})"


@_node
class Drop:
    location: Loc = _loc()

    def __str__(self) -> str:
        return "drop"


@_node
class Call:
    """A user action (declared in the spec with ``@query_action``) with constant arguments."""

    name: str
    args: tuple[Constant | Attribute, ...] = ()
    location: Loc = _loc()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


Action = Union[Forward, Drop, Call]


@dataclass(eq=True)
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
            self.__dict__["_hash"] = h
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


NODES = (Number, String, IPAddress, MACAddress, Field, StateVar, Aggregate, Comparison, And, Or, Not, Const,
         Forward, Drop, Call, Rule)


def _is_set(node, name: str) -> bool:
    try:
        return name in object.__getattribute__(node, "__dict__")  # Rule (its defaults are class attributes)
    except AttributeError:  # a slotted node: an unset slot cannot be read
        try:
            object.__getattribute__(node, name)
        except AttributeError:
            return False
        return True


def _write_once(self, name: str, value) -> None:
    if not _is_set(self, name):  # the constructor (or unpickling) sets it
        object.__setattr__(self, name, value)
        return
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a {type(self).__name__}: AST nodes are values")


def _no_delete(self, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a {type(self).__name__}: AST nodes are values")


def guard_writes(classes: tuple[type, ...] = NODES) -> None:
    """Refuse any assignment to a field of a built node (and any deletion), as ``frozen=True`` would.

    For the test suite: the check makes every store a Python call, which is what the nodes avoid
    (see the module's docstring)."""
    for cls in classes:
        cls.__setattr__ = _write_once
        cls.__delattr__ = _no_delete
