"""``p4sub simulate OUT --packets FILE.jsonl``: run packets through the reference switch model."""

from __future__ import annotations

import argparse
import json

import numpy as np

from compiler import ir, packet_json
from compiler.base import read_stdin, read_text
from compiler.packet_json import PacketField, fields_of_pipeline
from compiler.rules import validity
from p4sub import add_command
from runtime.model import Model
from runtime.state import TIME_COLUMN


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "simulate", "run packets (JSON lines of field values) through a compiled pipeline",
                    "p4sub simulate out --packets examples/itch-packets.jsonl")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--packets", required=True,
                   help="JSON lines: one object of field values per line ('-' for stdin); docs/packets.md")
    p.set_defaults(func=run)


def pipeline_fields(pipeline: ir.Pipeline, model: Model | None = None) -> tuple[dict[str, PacketField], list[str]]:
    """The packet fields a pipeline reads (with how each is given in JSON) and the headers whose
    validity it tests (a packet carries a header when it gives any of its fields)."""
    model = model or Model(pipeline)
    fields = fields_of_pipeline(pipeline, model.inputs, model.widths)
    return fields, [validity.header_of_validity(f) for f in model.validity]


def read_packets(path: str, pipeline: ir.Pipeline) -> tuple[dict[str, list[int]], int]:
    """Columns of integer field values and header validity, and the number of packets (non-blank
    lines), read by :mod:`compiler.packet_json` with file:line errors; ``-`` is stdin."""
    fields, headers = pipeline_fields(pipeline)
    text = read_stdin("packets input") if path == "-" else read_text(path, "packets file")
    cols: dict[str, list[int]] = {f: [] for f in fields} | {validity.field_name(h): [] for h in headers}
    clock = PacketField(TIME_COLUMN, 64) if pipeline.updates else None  # counters: each packet's time, in ns
    if clock:
        cols[TIME_COLUMN] = []
    n = 0
    for _, obj, row in packet_json.read_lines(text.splitlines(), path, fields, headers=headers,
                                               why="which the pipeline matches on"):
        n += 1
        if clock:  # 0 when left out
            row[TIME_COLUMN] = clock.value(obj[TIME_COLUMN]) if TIME_COLUMN in obj else 0
        for f, v in row.items():
            cols[f].append(v)
    return cols, n


def run(args: argparse.Namespace) -> int:
    pipeline = ir.load(args.out)
    cols, n = read_packets(args.packets, pipeline)
    model = Model(pipeline)
    arrays = {f: np.array(v, dtype=np.uint64 if model.widths.get(f, 64) <= 64 else object) for f, v in cols.items()}
    result = model.run(arrays) if arrays else model.run({}, rows=n)
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
