"""A sample of traffic as field columns, for the compiler's choice of what to widen (``compile --trace``).

A pcap is read through the spec's own parse graph (:mod:`runtime.parse_graph`): one row per message,
every element of a queried header stack in order, so the sample holds what the switch will match.
A JSON-lines file gives field values directly (docs/packets.md, as ``p4sub simulate --packets``). Without a
trace, :func:`uniform` draws values uniformly over each field's domain.
"""

from __future__ import annotations

import itertools

import numpy as np

from compiler import packet_json
from compiler.base import P4subError, check_regular, text_lines
from compiler.packet_json import fields_from_query
from compiler.spec import QueryField, Spec

MAX_ROWS = 20_000


def read_sample(path: str, spec: Spec, fields: dict[str, QueryField], rows: int = MAX_ROWS) -> dict[str, np.ndarray]:
    """Columns of the queried ``fields`` from a pcap (``.pcap``/``.pcapng``) or a JSON-lines file."""
    p = check_regular(path, "trace")  # a FIFO or a directory is refused here, not waited on
    if p.suffix in (".pcap", ".pcapng", ".cap"):
        return _from_pcap(path, spec, fields, rows)
    return _from_jsonl(path, spec, fields, rows)


def _columns(rows: list[dict[str, int]], fields: dict[str, QueryField]) -> dict[str, np.ndarray]:
    return {f: np.array([r[f] for r in rows], dtype=np.uint64 if info.width <= 64 else object)
            for f, info in fields.items()}


def _from_pcap(path: str, spec: Spec, fields: dict[str, QueryField], limit: int) -> dict[str, np.ndarray]:
    from apps.pcap import LINKTYPE_ETHERNET, PcapReader, require_packets
    from runtime.parse_graph import parse_packet

    require_packets(path)  # a capture of no Ethernet packet (tcpdump -i any) is refused, as replay refuses it
    out: list[dict[str, int]] = []
    with PcapReader(path) as reader:
        for record in reader:
            if record.linktype != LINKTYPE_ETHERNET:
                continue
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


def _from_jsonl(path: str, spec: Spec, fields: dict[str, QueryField], limit: int) -> dict[str, np.ndarray]:
    lines = text_lines(path, "trace")  # streamed: only the first `limit` packets are read
    out = list(itertools.islice(packet_json.rows(lines, path, fields_from_query(fields)), limit))
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
