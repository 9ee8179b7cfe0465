"""``p4sub explain OUT --packet JSON``: the path of one packet through the tables."""

from __future__ import annotations

import argparse
import json

from compiler import ir
from compiler.packet_json import PacketField, read_packet
from compiler.rules import field_kind, validity
from p4sub import add_command
from p4sub.simulate import pipeline_fields
from runtime.model import Model


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "explain", "show the tables, states and entries one packet goes through",
                    "p4sub explain out --packet '{\"add_order.stock\": \"GOOGL\", \"add_order.price\": 123.45}'")
    p.add_argument("out", help="directory with pipeline.json")
    p.add_argument("--packet", required=True, help="a JSON object of field values (docs/packets.md)")
    p.set_defaults(func=run)


def _match_text(match: ir.Match) -> str:
    if isinstance(match, ir.Exact):
        return str(match.value)
    if isinstance(match, ir.Range):
        return f"{match.lo}..{match.hi}"
    if isinstance(match, ir.Lpm):
        return f"{match.value:#x}/{match.prefix_len}"
    return f"{match.value:#x}&&&{match.mask:#x}"


def _ored_ports(pipeline: ir.Pipeline, entry: ir.Entry) -> str:
    """`` ports [1, 3]`` when the entry's action ORs port bits into the bitmap."""
    action = pipeline.action(entry.action)
    bound = dict(zip((p.name for p in action.params), entry.args))
    ored = [bound[prim.args[1]] for prim in action.body if prim.op == "or_meta"]
    if not ored:
        return ""
    return f"  ports {sorted(pipeline.delivery.ports_of(ored[0]))}"


def run(args: argparse.Namespace) -> int:
    pipeline = ir.load(args.out)
    model = Model(pipeline)
    fields, headers = pipeline_fields(pipeline, model)
    # The packet is read as simulate reads a line: it carries the headers it gives fields of.
    values = read_packet(args.packet, fields, "--packet", headers=headers, why="which the pipeline matches on")
    # One packet has no history: the values its counters would read are given like fields (0 when
    # left out), e.g. {"rate": 7, "avg(add_order.shares)": 600}.
    raw = json.loads(args.packet)
    for attr, read in pipeline.state_reads().items():
        scale = pipeline.attributes.get(attr, {}).get("scale", 0) or 0
        field = PacketField(attr, read.width, field_kind(scale), scale)
        values[attr] = field.value(raw[attr]) if attr in raw else 0
    carried = [h for h in headers if values.get(validity.field_name(h))]
    if headers:
        print(f"{'headers':<36} carries {', '.join(carried) or 'none'} of {', '.join(headers)}")
    ports, trace = model.run_one(values)
    if not trace and pipeline.default_control == () and any(not values.get(g, 1) for g in model.guard):
        print(f"{'guard':<36} {', '.join(pipeline.guard_headers())} not all valid -> dropped")
    for table_name, entry in trace:
        table = pipeline.table(table_name)
        if entry is None:
            print(f"{table_name:<36} miss -> {table.default_action if not table.on_miss else 'apply ' + table.on_miss}")
        else:
            keys = ", ".join(f"{k.field}={_match_text(m)}" for k, m in zip(table.keys, entry.matches))
            print(f"{table_name:<36} hit [{keys}] -> {entry.action}({', '.join(map(str, entry.args))})"
                  + _ored_ports(pipeline, entry))
    if pipeline.delivery.is_bitmap:
        d = pipeline.delivery
        print(f"{'deliver':<36} bitmap of {len(d.ports)} ports -> " + (
            f"group {d.group}, the egress keeps ports {sorted(ports)}" if ports else "nothing set: dropped"))
    print(json.dumps({"ports": sorted(ports)}))
    return 0
