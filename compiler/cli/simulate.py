"""``p4sub simulate OUT --packets FILE.jsonl``: run packets through the reference switch model."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from compiler import ir
from compiler.cli import add_command
from compiler.errors import P4subError, SourceLocation
from compiler.values import packet_value
from runtime.model import Model


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "simulate", "run packets (JSON lines of field values) through a compiled pipeline",
                    "p4sub simulate out --packets examples/itch-packets.jsonl")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--packets", required=True, help="JSON lines: one object of field values per line ('-' for stdin)")
    p.set_defaults(func=run)


def read_packets(path: str, pipeline: ir.Pipeline) -> dict[str, list[int]]:
    """Columns of integer field values, one row per non-empty line, with file:line errors."""
    stream = sys.stdin if path == "-" else _open(path)
    fields = _inputs(pipeline)
    widths = {k.field: k.width for t in pipeline.tables for k in t.keys}
    cols: dict[str, list[int]] = {f: [] for f in fields}
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise P4subError(f"not JSON: {exc.msg}", SourceLocation(path, lineno, exc.colno)) from None
        if not isinstance(obj, dict):
            raise P4subError("expected a JSON object of field values", SourceLocation(path, lineno, 1))
        for f in fields:
            if f not in obj:
                raise P4subError(f"packet lacks field {f!r}, which the pipeline matches on", SourceLocation(path, lineno, 1))
            scale = pipeline.attributes.get(f, {}).get("scale", 0)
            try:
                cols[f].append(packet_value(obj[f], widths[f], scale=scale, name=f))
            except P4subError as exc:
                raise P4subError(exc.message, SourceLocation(path, lineno, 1)) from None
    return cols


def _inputs(pipeline: ir.Pipeline) -> list[str]:
    return sorted({k.field for t in pipeline.tables for k in t.keys if not k.field.startswith("meta.")})


def _open(path: str):
    try:
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise P4subError(f"{path}: cannot read packets: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    pipeline = ir.load(args.out)
    cols = read_packets(args.packets, pipeline)
    model = Model(pipeline)
    widths = {k.field: k.width for t in pipeline.tables for k in t.keys}
    arrays = {f: np.array(v, dtype=np.uint64 if widths[f] <= 64 else object) for f, v in cols.items()}
    if not arrays:
        n = sum(1 for line in _open(args.packets) if line.strip()) if args.packets != "-" else 0
        result_sets = [model.run_one({})[0]] * n
    else:
        result_sets = model.run(arrays).port_sets()
    for ports in result_sets:
        print(json.dumps({"ports": sorted(ports)}))
    return 0
