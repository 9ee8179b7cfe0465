"""What is wrong with a ``pipeline.json``, said once for every reader (simulate, explain, verify,
replay, netsim, ``compile --like``, the backends' install): :func:`compiler.ir.load` calls
:func:`check_schema` on the parsed JSON and :func:`check_references` on the Pipeline built from it.

Why here: the IR's readers trust it (the reference model indexes actions by name, the backends
render every entry), so a damaged file crashed each of them in its own way. The checks are the
IR's own invariants, derived from the dataclasses' type hints (every value of the declared JSON
type, every required member present, union members tagged with a known ``kind``) and from the
meaning of the fields: names that refer to tables, actions, parameters and metadata exist, arities
match, a key's match kind agrees with its entries' matches, values fit their widths, ``on_miss``
chains end. Each error names the file and the JSON path of the bad value
(``pipeline.json: entries[12].matches[1]: ...``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Union

from compiler.base import P4subError
from compiler.ir.nodes import Entry, Pipeline

#: Widest key, parameter or metadata field accepted (P4 allows wider; no switch matches on it).
MAX_WIDTH = 1 << 16
MATCH_OF_KIND = {"exact": "Exact", "lpm": "Lpm", "ternary": "Ternary", "range": "Range"}
PRIMITIVE_ARITY = {"set_meta": 2, "or_meta": 2, "set_egress_port": 1, "set_mcast_group": 1, "drop": 0, "user": 1}


class _Bad(Exception):
    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what


def _fail(path: str, where: str, what: str) -> P4subError:
    return P4subError(f"{path}: {where or 'the top level'}: {what} (a damaged pipeline.json? compile again)")


# -- schema ----------------------------------------------------------------------------------------


def check_schema(data: Any, path: str) -> None:
    """Raise a P4subError naming ``path`` and the JSON path of the first value that does not have the
    type :class:`compiler.ir.Pipeline` declares for it."""
    try:
        if not isinstance(data, dict):
            raise _Bad("", f"expected an object, got {_kind(data)}")
        for name, hint, required in _fields(Pipeline):
            if name not in data:
                if required:
                    raise _Bad(name, "missing")
            elif name == "entries" and isinstance(data[name], list):
                for i, e in enumerate(data[name]):  # the bulk of the file: a quick look first
                    if not _entry_ok(e):
                        _walk(Entry, e, f"entries[{i}]")
            else:
                _walk(hint, data[name], name)
    except _Bad as bad:
        raise _fail(path, bad.where, bad.what) from None


_MATCH_MEMBERS = {"Exact": ("value",), "Lpm": ("value", "prefix_len"), "Ternary": ("value", "mask"),
                  "Range": ("lo", "hi")}


def _entry_ok(e: Any) -> bool:
    """True when ``e`` is certainly a well-typed Entry (about 20 times faster than :func:`_walk`,
    which then says what is wrong with the others)."""
    if type(e) is not dict or type(e.get("table")) is not str or type(e.get("action")) is not str:
        return False
    matches = e.get("matches")
    if type(matches) is not list:
        return False
    for m in matches:
        if type(m) is not dict:
            return False
        kind = m.get("kind")
        members = _MATCH_MEMBERS.get(kind) if type(kind) is str else None
        if members is None or any(type(m.get(k)) is not int for k in members):
            return False
    args = e.get("args", ())
    return (type(args) is list and all(type(a) is int for a in args)) and type(e.get("priority", 0)) is int


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number"}.get(
        type(data), type(data).__name__)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                 for f in dataclasses.fields(cls))


def _walk(cls: Any, data: Any, where: str) -> None:  # noqa: C901 - one branch per kind of type
    origin = typing.get_origin(cls)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(cls) if a is not type(None)]
        if data is None:
            if len(options) < len(typing.get_args(cls)):
                return
            raise _Bad(where, "null where a value is required")
        tagged = [o for o in options if dataclasses.is_dataclass(o)]
        if len(tagged) > 1:
            if not isinstance(data, dict) or "kind" not in data:
                raise _Bad(where, f"expected an object with a \"kind\" ({', '.join(o.__name__ for o in tagged)}), "
                                  f"got {_kind(data)}")
            target = next((o for o in tagged if o.__name__ == data["kind"]), None)
            if target is None:
                raise _Bad(where, f"unknown kind {str(data['kind'])[:40]!r}; expected one of "
                                  f"{', '.join(o.__name__ for o in tagged)}")
            _walk(target, data, where)
            return
        _walk(options[0], data, where)
        return
    if origin is tuple:
        args = typing.get_args(cls)
        if not isinstance(data, list):
            raise _Bad(where, f"expected an array, got {_kind(data)}")
        if len(args) == 2 and args[1] is Ellipsis:
            for i, item in enumerate(data):
                if args[0] is int:  # ir.from_json keeps these as they are (multicast ports: millions)
                    if type(item) is not int:
                        raise _Bad(f"{where}[{i}]", f"expected an integer, got {_kind(item)}")
                    continue
                _walk(args[0], item, f"{where}[{i}]")
            return
        if len(data) != len(args):
            raise _Bad(where, f"expected an array of {len(args)} items, got {len(data)}")
        for i, (a, item) in enumerate(zip(args, data)):
            _walk(a, item, f"{where}[{i}]")
        return
    if origin in (dict, list):
        expected = dict if origin is dict else list
        if not isinstance(data, expected):
            raise _Bad(where, f"expected {_kind(expected())}, got {_kind(data)}")
        if origin is dict:
            kt, vt = typing.get_args(cls)
            for k, v in data.items():
                _walk(kt, k, f"{where}.{k}")
                _walk(vt, v, f"{where}.{k}" if where else str(k))
        else:
            (vt,) = typing.get_args(cls)
            for i, item in enumerate(data):
                _walk(vt, item, f"{where}[{i}]")
        return
    if dataclasses.is_dataclass(cls):
        if not isinstance(data, dict):
            raise _Bad(where, f"expected an object ({cls.__name__}), got {_kind(data)}")
        for name, hint, required in _fields(cls):
            here = f"{where}.{name}" if where else name
            if name in data:
                _walk(hint, data[name], here)
            elif required:
                raise _Bad(here, "missing")
        return
    if cls is Any:
        return
    if cls is int:
        if isinstance(data, str) and data.isascii() and data.isdigit() and len(data) <= 200:
            return  # written by older versions for wide values; ir.from_json converts it
        if type(data) is not int:
            raise _Bad(where, f"expected an integer, got {_kind(data)}")
        return
    if cls is bool:
        if not isinstance(data, bool):
            raise _Bad(where, f"expected true or false, got {_kind(data)}")
        return
    if cls is str:
        if not isinstance(data, str):
            raise _Bad(where, f"expected a string, got {_kind(data)}")
        return
    if cls is float:
        if type(data) not in (int, float):
            raise _Bad(where, f"expected a number, got {_kind(data)}")


# -- references ----------------------------------------------------------------------------------


def check_references(pipeline: Any, path: str) -> None:
    """Raise a P4subError naming ``path`` and the bad value's JSON path unless every name in the
    pipeline refers to something it declares and every value fits where it goes."""
    try:
        _references(pipeline)
    except _Bad as bad:
        raise _fail(path, bad.where, bad.what) from None


def _width(width: int, where: str) -> None:
    if not 1 <= width <= MAX_WIDTH:
        raise _Bad(where, f"width {width} is not between 1 and {MAX_WIDTH}")


def _fits(value: int, width: int, where: str, what: str = "value") -> None:
    if not 0 <= value < 1 << width:
        raise _Bad(where, f"{what} {value} does not fit in {width} bits")


def _unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise _Bad(f"{where}[{i}].name", f"{name!r} is declared twice")
        seen.add(name)


def _references(p: Any) -> None:  # noqa: C901 - one check after another, in file order
    metadata = {m.name: m.width for m in p.metadata}
    _unique([m.name for m in p.metadata], "metadata")
    for i, m in enumerate(p.metadata):
        _width(m.width, f"metadata[{i}].width")
    actions = {a.name: a for a in p.actions}
    _unique([a.name for a in p.actions], "actions")
    for i, a in enumerate(p.actions):
        params = {q.name for q in a.params}
        for j, q in enumerate(a.params):
            _width(q.width, f"actions[{i}].params[{j}].width")
        for j, prim in enumerate(a.body):
            where = f"actions[{i}].body[{j}]"
            if prim.op not in PRIMITIVE_ARITY:
                raise _Bad(f"{where}.op", f"unknown primitive {prim.op!r}; expected one of {', '.join(PRIMITIVE_ARITY)}")
            if len(prim.args) != PRIMITIVE_ARITY[prim.op]:
                raise _Bad(f"{where}.args", f"{prim.op} takes {PRIMITIVE_ARITY[prim.op]} arguments, has {len(prim.args)}")
            if prim.op in ("set_meta", "or_meta"):
                if prim.args[0] not in metadata:
                    raise _Bad(f"{where}.args[0]", f"{prim.args[0]!r} is not a metadata field of the pipeline")
                if prim.args[1] not in params:
                    raise _Bad(f"{where}.args[1]", f"{prim.args[1]!r} is not a parameter of {a.name}")
            elif prim.op in ("set_egress_port", "set_mcast_group") and prim.args[0] not in params:
                raise _Bad(f"{where}.args[0]", f"{prim.args[0]!r} is not a parameter of {a.name}")
    groups: set[int] = set()
    for i, g in enumerate(p.multicast_groups):
        if not 1 <= g.id < 1 << 32 or g.id in groups:
            raise _Bad(f"multicast_groups[{i}].id", f"group id {g.id} is {'taken' if g.id in groups else 'not positive'}")
        groups.add(g.id)
        # the place of a bad port is only named when there is one (100k ITCH filters: 2M ports)
        bad = next((j for j, port in enumerate(g.ports) if not 0 <= port < 1 << 32), None)
        if bad is not None:
            _fits(g.ports[bad], 32, f"multicast_groups[{i}].ports[{bad}]", "port")
    tables = {t.name: t for t in p.tables}
    _unique([t.name for t in p.tables], "tables")
    for i, t in enumerate(p.tables):
        where = f"tables[{i}]"
        for j, k in enumerate(t.keys):
            _width(k.width, f"{where}.keys[{j}].width")
            if k.match_kind not in MATCH_OF_KIND:
                raise _Bad(f"{where}.keys[{j}].match_kind",
                           f"unknown match kind {k.match_kind!r}; expected one of {', '.join(MATCH_OF_KIND)}")
            if k.field.startswith("meta.") and k.field not in metadata:
                raise _Bad(f"{where}.keys[{j}].field", f"{k.field!r} is not a metadata field of the pipeline")
            if k.field.startswith("meta.") and metadata[k.field] != k.width:
                raise _Bad(f"{where}.keys[{j}].width", f"{k.field} has {metadata[k.field]} bits, the key {k.width}")
        for j, name in enumerate(t.actions):
            if name not in actions:
                raise _Bad(f"{where}.actions[{j}]", f"no action {name!r} in the pipeline")
        if t.default_action not in actions:
            raise _Bad(f"{where}.default_action", f"no action {t.default_action!r} in the pipeline")
        _arguments(actions[t.default_action], t.default_args, f"{where}.default_args", groups)
        if t.on_miss is not None and t.on_miss not in tables:
            raise _Bad(f"{where}.on_miss", f"no table {t.on_miss!r} in the pipeline")
        if not 0 <= t.size < 1 << 32:
            raise _Bad(f"{where}.size", f"size {t.size} is not between 0 and 2^32")
        if t.lane < 0:
            raise _Bad(f"{where}.lane", f"lane {t.lane} is negative")
    for i, t in enumerate(p.tables):  # on_miss chains end
        seen = {t.name}
        nxt = t.on_miss
        while nxt is not None:
            if nxt in seen:
                raise _Bad(f"tables[{i}].on_miss", f"the on_miss chain from {t.name} comes back to {nxt}")
            seen.add(nxt)
            nxt = tables[nxt].on_miss
    for name, control in (("control", p.control), ("default_control", p.default_control)):
        for i, table in enumerate(control):
            if table not in tables:
                raise _Bad(f"{name}[{i}]", f"no table {table!r} in the pipeline")
    for i, e in enumerate(p.entries):
        where = f"entries[{i}]"
        t = tables.get(e.table)
        if t is None:
            raise _Bad(f"{where}.table", f"no table {e.table!r} in the pipeline")
        if len(e.matches) != len(t.keys):
            raise _Bad(f"{where}.matches", f"{len(e.matches)} matches for the {len(t.keys)} keys of {t.name}")
        for j, (k, m) in enumerate(zip(t.keys, e.matches)):
            _match(k, m, f"{where}.matches[{j}]")
        if e.action not in t.actions:
            raise _Bad(f"{where}.action", f"{e.action!r} is not one of {t.name}'s actions ({', '.join(t.actions)})")
        _arguments(actions[e.action], e.args, f"{where}.args", groups)
        if not 0 <= e.priority < 1 << 31:
            raise _Bad(f"{where}.priority", f"priority {e.priority} is not between 0 and 2^31")
    d = p.delivery
    if d.kind not in ("groups", "bitmap"):
        raise _Bad("delivery.kind", f"unknown delivery {d.kind!r}; expected groups or bitmap")
    for i, f in enumerate(d.fields):
        if f not in metadata:
            raise _Bad(f"delivery.fields[{i}]", f"{f!r} is not a metadata field of the pipeline")
    if not 1 <= p.lanes <= 1024:
        raise _Bad("lanes", f"{p.lanes} lanes")
    _spec(p.spec)


def _arguments(action: Any, args: tuple[int, ...], where: str, groups: set[int]) -> None:
    if len(args) != len(action.params):
        raise _Bad(where, f"{action.name} takes {len(action.params)} arguments, {len(args)} given")
    for j, (a, q) in enumerate(zip(args, action.params)):
        _fits(a, q.width, f"{where}[{j}]", f"argument {q.name} =")
    for prim in action.body:
        if prim.op == "set_mcast_group":
            group = args[[q.name for q in action.params].index(prim.args[0])]
            if group and group not in groups:
                raise _Bad(where, f"multicast group {group} is not one of the pipeline's multicast_groups")


def _match(key: Any, m: Any, where: str) -> None:
    kind = type(m).__name__
    if MATCH_OF_KIND[key.match_kind] != kind:
        raise _Bad(where, f"a {kind} match on the {key.match_kind} key {key.field}")
    w = key.width
    if kind == "Exact":
        _fits(m.value, w, where)
    elif kind == "Lpm":
        _fits(m.value, w, where)
        if not 0 <= m.prefix_len <= w:
            raise _Bad(where, f"prefix length {m.prefix_len} on a {w}-bit key")
    elif kind == "Ternary":
        _fits(m.value, w, where)
        _fits(m.mask, w, where, "mask")
    else:
        _fits(m.lo, w, where)
        _fits(m.hi, w, where)
        if m.lo > m.hi:
            raise _Bad(where, f"empty range {m.lo}..{m.hi}")


def _spec(spec: Any) -> None:
    """The spec members the readers follow: header types, parser states, query field widths."""
    for i, h in enumerate(spec.headers):
        if h.type_name not in spec.header_types:
            raise _Bad(f"spec.headers[{i}].type_name", f"no header type {h.type_name!r} in the spec")
        if h.stack_size is not None and not 1 <= h.stack_size <= 1 << 16:
            raise _Bad(f"spec.headers[{i}].stack_size", f"stack size {h.stack_size}")
    for name, ht in spec.header_types.items():
        for j, f in enumerate(ht.fields):
            _width(f.width, f"spec.header_types.{name}.fields[{j}].width")
    states = set(spec.parser_states) | {"accept", "reject"}
    if spec.parser_states and spec.start_state not in states:
        raise _Bad("spec.start_state", f"no parser state {spec.start_state!r}")
    for name, st in spec.parser_states.items():
        for j, case in enumerate(st.cases):
            if case.next_state not in states:
                raise _Bad(f"spec.parser_states.{name}.cases[{j}].next_state", f"no parser state {case.next_state!r}")
        for j, stmt in enumerate(st.statements):
            if type(stmt).__name__ == "Extract" and spec.header(stmt.header) is None:
                raise _Bad(f"spec.parser_states.{name}.statements[{j}]", f"no header {stmt.header!r} to extract")
            if type(stmt).__name__ == "Advance" and stmt.bits is not None and not 0 <= stmt.bits < 1 << 32:
                raise _Bad(f"spec.parser_states.{name}.statements[{j}]", f"advance by {stmt.bits} bits")
    for name, q in spec.query_fields.items():
        _width(q.width, f"spec.query_fields.{name}.width")
        if not 0 <= q.scale <= 64:
            raise _Bad(f"spec.query_fields.{name}.scale", f"scale {q.scale}")
