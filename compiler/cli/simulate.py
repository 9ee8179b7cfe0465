"""``p4sub simulate OUT --packets FILE.jsonl``: run packets through the reference switch model."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from compiler import ir, validity
from compiler.cli import add_command
from compiler.errors import P4subError
from runtime.model import Model
from runtime.state import TIME_COLUMN
from runtime.sample import jsonl_rows


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "simulate", "run packets (JSON lines of field values) through a compiled pipeline",
                    "p4sub simulate out --packets examples/itch-packets.jsonl")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--packets", required=True, help="JSON lines: one object of field values per line ('-' for stdin)")
    p.set_defaults(func=run)


def read_packets(path: str, pipeline: ir.Pipeline) -> dict[str, list[int]]:
    """Columns of integer field values and header validity, one row per non-empty line, with
    file:line errors (a packet carries the headers it gives fields of: :func:`runtime.sample.jsonl_rows`)."""
    model = Model(pipeline)
    fields = {f: (model.widths[f], pipeline.attributes.get(f, {}).get("scale", 0)) for f in model.inputs}
    if pipeline.updates:  # counters: each packet's time, in ns (0 when left out)
        fields[TIME_COLUMN] = (64, 0)
    headers = [validity.header_of_validity(f) for f in model.validity]
    stream = sys.stdin if path == "-" else _open(path)
    cols: dict[str, list[int]] = {f: [] for f in fields} | {f: [] for f in model.validity}
    for row in jsonl_rows(stream, path, fields, "which the pipeline matches on", headers):
        for f, v in row.items():
            cols[f].append(v)
    return cols


def _open(path: str):
    try:
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise P4subError(f"{path}: cannot read packets: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    pipeline = ir.load(args.out)
    cols = read_packets(args.packets, pipeline)
    model = Model(pipeline)
    arrays = {f: np.array(v, dtype=np.uint64 if model.widths.get(f, 64) <= 64 else object) for f, v in cols.items()}
    if not arrays:
        n = sum(1 for line in _open(args.packets) if line.strip()) if args.packets != "-" else 0
        result = model.run({}, rows=n)
    else:
        result = model.run(arrays)
    calls = result_calls(result, len(result.port))
    for ports, row_calls in zip(result.port_sets(), calls):
        line = {"ports": sorted(ports)}
        if row_calls:
            line["calls"] = row_calls
        print(json.dumps(line))
    return 0


def result_calls(result, n: int) -> list[list[dict]]:
    """Per row, the user actions the packet triggers: ``[{"action": name, "args": [...]}, ...]``."""
    out: list[list[dict]] = [[] for _ in range(n)]
    for name, batches in sorted(result.calls.items()):
        for rows, args in batches:
            for r, a in zip(rows.tolist(), np.asarray(args).tolist()):
                out[r].append({"action": name, "args": [int(x) for x in a]})
    return out
