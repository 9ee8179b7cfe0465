"""``pipeline.json``: the IR written as JSON and read back, checked on the way in.

:func:`to_json` and :func:`from_json` walk the dataclasses of :mod:`compiler.ir.nodes` by their
type hints, so a field added there is serialised without a change here; :func:`load` hands the
parsed JSON to :mod:`compiler.ir.check` before building anything from it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path
from typing import Any, Callable, Union

from compiler.base import InputError, P4subError, read_text
from compiler.ir import check as ir_check
from compiler.ir.nodes import READABLE_VERSIONS, Entry, Exact, Pipeline, Range


def to_json(obj: Any) -> Any:
    """A dataclass tree as JSON-ready data; members of a Union carry ``"kind": ClassName``."""
    cls = type(obj)
    if cls in (int, str, float, bool) or obj is None:
        return obj
    if cls is Entry:  # most of a large pipeline: written without the generic walk (same JSON)
        return {"table": obj.table, "matches": [_match_json(m) for m in obj.matches], "action": obj.action,
                "args": obj.args, "priority": obj.priority}
    if cls in (list, tuple):
        if set(map(type, obj)) <= _PLAIN:  # a port list, a key's values: json writes them as they are
            return obj
        return [to_json(x) for x in obj]
    if cls is dict:
        return {str(k): to_json(v) for k, v in obj.items()}
    names = _field_names(cls)
    out = {"kind": cls.__name__} if cls.__name__ in _TAGGED else {}
    for name in names:
        out[name] = to_json(getattr(obj, name))
    return out


def _match_json(m: Any) -> dict:
    cls = type(m)
    if cls is Exact:
        return {"kind": "Exact", "value": m.value}
    if cls is Range:
        return {"kind": "Range", "lo": m.lo, "hi": m.hi}
    return to_json(m)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def from_json(cls: Any, data: Any) -> Any:
    """Inverse of :func:`to_json`, guided by the type hints of ``cls``."""
    return _converter(cls)(data)


@functools.cache
def _converter(cls: Any) -> Callable[[Any], Any]:
    """The function that builds a ``cls`` from its JSON, made once per type: reading the type hints
    for every node of a 100k-filter pipeline was most of :func:`load`'s time."""
    origin = typing.get_origin(cls)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(cls) if a is not type(None)]
        by_kind = {getattr(o, "__name__", ""): _converter(o) for o in options}
        first = _converter(options[0])

        def union(data: Any) -> Any:
            if data is None:
                return None
            if isinstance(data, dict) and "kind" in data:
                return by_kind[data["kind"]](data)
            return first(data)
        return union
    if origin is tuple:
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            if args[0] is int:
                return tuple
            item = _converter(args[0])
            return lambda data: tuple(item(x) for x in data)
        items = [_converter(a) for a in args]
        return lambda data: tuple(c(x) for c, x in zip(items, data))
    if origin is dict:
        kt, vt = (_converter(a) for a in typing.get_args(cls))
        return lambda data: {kt(k): vt(v) for k, v in data.items()}
    if origin is list:
        (vt,) = (_converter(a) for a in typing.get_args(cls))
        return lambda data: [vt(x) for x in data]
    if dataclasses.is_dataclass(cls):
        fields = [(name, _converter(hint)) for name, hint in _hints(cls)]
        return lambda data: cls(**{name: c(data[name]) for name, c in fields if name in data})
    if cls is int:
        return lambda data: int(data) if isinstance(data, str) else data
    return _identity


def _identity(data: Any) -> Any:
    return data


_PLAIN = {int, str}

_TAGGED = {"Exact", "Lpm", "Ternary", "Range", "Extract", "Advance"}


def save(pipeline: Pipeline, path: str | Path) -> None:
    Path(path).write_text(json.dumps(to_json(pipeline), separators=(",", ":")) + "\n", encoding="utf-8")


def load(path: str | Path) -> Pipeline:
    """Read ``pipeline.json`` (a file, or a directory that holds one), checked by :mod:`compiler.ir.check`:
    a damaged file is a P4subError naming the file and the JSON path of what is wrong."""
    path = Path(path)
    if path.is_dir():
        path = path / "pipeline.json"
    try:
        text = read_text(path, "pipeline file")
    except InputError as exc:
        if exc.reason == "no such file":
            raise P4subError(f"{path}: no such file (run `p4sub compile` first)") from None
        raise
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise P4subError(f"{path}: not a pipeline.json: {exc}") from None
    if not isinstance(data, dict):
        raise P4subError(f"{path}: not a pipeline.json: the top level is not a JSON object")
    if data.get("format_version") not in READABLE_VERSIONS:
        raise P4subError(f"{path}: pipeline format {data.get('format_version')!r}; this p4sub reads "
                         f"{', '.join(map(str, READABLE_VERSIONS))}")
    ir_check.check_schema(data, str(path))
    pipeline = from_json(Pipeline, data)
    ir_check.check_references(pipeline, str(path))
    return pipeline
