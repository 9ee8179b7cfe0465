"""``p4sub simulate OUT --packets FILE.jsonl``: run packets through the reference switch model."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from compiler import ir
from compiler.cli import add_command
from compiler.errors import P4subError
from runtime.model import Model
from runtime.sample import jsonl_rows


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "simulate", "run packets (JSON lines of field values) through a compiled pipeline",
                    "p4sub simulate out --packets examples/itch-packets.jsonl")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--packets", required=True, help="JSON lines: one object of field values per line ('-' for stdin)")
    p.set_defaults(func=run)


def read_packets(path: str, pipeline: ir.Pipeline) -> dict[str, list[int]]:
    """Columns of integer field values, one row per non-empty line, with file:line errors."""
    widths = {k.field: k.width for t in pipeline.tables for k in t.keys}
    fields = {f: (widths[f], pipeline.attributes.get(f, {}).get("scale", 0)) for f in _inputs(pipeline)}
    stream = sys.stdin if path == "-" else _open(path)
    cols: dict[str, list[int]] = {f: [] for f in fields}
    for row in jsonl_rows(stream, path, fields, "which the pipeline matches on"):
        for f, v in row.items():
            cols[f].append(v)
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
