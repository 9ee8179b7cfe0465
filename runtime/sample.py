"""A sample of traffic as field columns, for the compiler's choice of what to widen (``compile --trace``).

A pcap is read through the spec's own parse graph (:mod:`runtime.parse_graph`): one row per message,
every element of a queried header stack in order, so the sample holds what the switch will match.
A JSON-lines file gives field values directly (the format of ``p4sub simulate --packets``). Without a
trace, :func:`uniform` draws values uniformly over each field's domain.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from compiler import validity
from compiler.errors import P4subError, SourceLocation
from compiler.spec import QueryField, Spec
from compiler.values import packet_value

MAX_ROWS = 20_000


def read_sample(path: str, spec: Spec, fields: dict[str, QueryField], rows: int = MAX_ROWS) -> dict[str, np.ndarray]:
    """Columns of the queried ``fields`` from a pcap (``.pcap``/``.pcapng``) or a JSON-lines file."""
    p = Path(path)
    if not p.is_file():
        raise P4subError(f"--trace {path}: not a file" if p.exists() else f"--trace {path}: no such file")
    if p.suffix in (".pcap", ".pcapng", ".cap"):
        return _from_pcap(path, spec, fields, rows)
    return _from_jsonl(path, fields, rows)


def _columns(rows: list[dict[str, int]], fields: dict[str, QueryField]) -> dict[str, np.ndarray]:
    return {f: np.array([r[f] for r in rows], dtype=np.uint64 if info.width <= 64 else object)
            for f, info in fields.items()}


def _from_pcap(path: str, spec: Spec, fields: dict[str, QueryField], limit: int) -> dict[str, np.ndarray]:
    from apps.pcap import PcapReader
    from runtime.parse_graph import parse_packet

    out: list[dict[str, int]] = []
    with PcapReader(path) as reader:
        for record in reader:
            parsed = parse_packet(spec, record.data)
            headers = {f.split(".", 1)[0] for f in fields}
            depth = max((len(parsed.stacks.get(h, ())) for h in headers), default=0)
            for i in range(max(1, depth)):
                row = {}
                for f in fields:
                    h, name = f.split(".", 1)
                    value = parsed.value(f"{h}[{i}].{name}") if h in parsed.stacks else parsed.value(f)
                    if value is None:
                        break
                    row[f] = value
                else:
                    out.append(row)
            if len(out) >= limit:
                break
    if not out:
        raise P4subError(f"--trace {path}: no packet in it carries every queried field ({', '.join(fields)})")
    return _columns(out[:limit], fields)


def jsonl_rows(stream: Iterable[str], path: str, fields: dict[str, tuple[int, int]],
               why: str = "", headers: Iterable[str] = ()) -> Iterator[dict[str, int]]:
    """Rows of integer values from JSON lines (``fields``: name -> (width, scale)), errors at file:line.

    A JSON packet carries a header when it gives at least one of its fields; the fields of a header
    it does not carry read as 0 (a packet lacking a header says so by leaving its fields out), and
    for ``headers``, those whose validity the pipeline tests, the row holds ``h.$valid``. A header
    given in part lacks the fields left out: an error.
    """
    headers = tuple(headers)
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise P4subError(f"not JSON: {exc.msg}", SourceLocation(path, lineno, exc.colno)) from None
        if not isinstance(obj, dict):
            raise P4subError("expected a JSON object of field values", SourceLocation(path, lineno, 1))
        row = {}
        given = {k.split(".", 1)[0] for k in obj if isinstance(k, str)}
        for h in headers:
            row[validity.field_name(h)] = int(h in given)
        absent = {f.split(".", 1)[0] for f in fields} - given
        for f, (width, scale) in fields.items():
            if f.split(".", 1)[0] in absent:
                row[f] = 0
                continue
            if f not in obj:
                raise P4subError(f"packet lacks field {f!r}" + (f", {why}" if why else ""), SourceLocation(path, lineno, 1))
            try:
                row[f] = packet_value(obj[f], width, scale=scale, name=f)
            except P4subError as exc:
                raise P4subError(exc.message, SourceLocation(path, lineno, 1)) from None
        yield row


def _from_jsonl(path: str, fields: dict[str, QueryField], limit: int) -> dict[str, np.ndarray]:
    with open(path, encoding="utf-8") as stream:
        out = list(itertools.islice(jsonl_rows(stream, path, {f: (q.width, q.scale) for f, q in fields.items()}), limit))
    if not out:
        raise P4subError(f"--trace {path}: no packets")
    return _columns(out, fields)


def uniform(fields: dict[str, QueryField], rows: int = MAX_ROWS, seed: int = 0) -> dict[str, np.ndarray]:
    """Values drawn uniformly over each field's domain ("uniform traffic")."""
    rng = np.random.default_rng(seed)
    out = {}
    for f, info in fields.items():
        if info.width <= 64:
            hi = (1 << info.width) - 1
            out[f] = rng.integers(0, hi, rows, dtype=np.uint64, endpoint=True)
        else:
            out[f] = np.array([int.from_bytes(rng.bytes((info.width + 7) // 8), "big") >> (-info.width % 8)
                               for _ in range(rows)], dtype=object)
    return out
