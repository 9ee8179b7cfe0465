"""Siena message traces: attribute columns drawn like the rule constants, written as pcap.

Messages are drawn the way :func:`apps.workloads.siena_rules` draws its constants (integers in
1..values, strings among ``siena_words(values, seed)``, uniform or Zipf by rank), so that rules
and traffic made with the same config and seed meet: a packet's string is one of the words the
rules compare with, and integer thresholds fall inside the integers' range. Every message carries
every attribute (a Siena notification with all attributes set), so the attribute distribution
knob of the config only concerns rules.

Columns are numpy ``uint64`` arrays keyed by the rules' field names (``siena.i0``, ``siena.s7``),
holding what the switch reads: integers as they are, strings as :func:`compiler.rules.values.encode_string`
encodes them. They are the ground truth a replay or a parse of the pcap is checked against.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Mapping

import numpy as np

from apps.pcap import PcapWriter
from apps.siena.spec import INT_BITS, SIENA_PORT, STRING_BITS, siena_attributes
from apps.udp import UdpEndpoints, build_udp_frame
from apps.workloads import SienaConfig, _zipf_choice, siena_words
from compiler.base import P4subError
from compiler.rules import encode_string

#: 2019-01-30 00:00:00 UTC, the day the ITCH and INT generators use too.
DEFAULT_START_NS = 1_548_806_400 * 10**9
DEFAULT_GAP_NS = 1_000
#: Publisher 10.0.0.1 sends to the broker 10.0.0.2 (the switch under test sits in between).
DEFAULT_ENDPOINTS = UdpEndpoints(src_ip=bytes((10, 0, 0, 1)), dst_ip=bytes((10, 0, 0, 2)), src_port=50000, dst_port=SIENA_PORT)

# Mixed into the seed so that packets do not replay the rules' own random stream.
_TRACE_STREAM = 0x5E1A
_COLUMN = re.compile(r"(\w+)\.([is])(\d+)")


def siena_packets(n: int, config: SienaConfig = SienaConfig(), seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` messages as columns ``{field name: uint64 array}`` in header order.

    ``seed`` follows :func:`~apps.workloads.siena_rules`: the same seed picks the same word
    list, so ``siena_packets(n, cfg, s)`` hits the string constants of ``siena_rules(f, cfg, s)``.
    With ``value_distribution="zipf"`` rank 1 (integer 1, the first word) is the most frequent,
    as in the rules.
    """
    if n < 0:
        raise P4subError("--packets must be >= 0")
    if seed < 0:
        raise P4subError("--seed must be >= 0")
    attrs = siena_attributes(config)
    exponent = config.zipf if config.value_distribution == "zipf" else 0.0
    rng = np.random.default_rng([seed, _TRACE_STREAM])
    encoded: np.ndarray | None = None
    if any(a.is_string for a in attrs):
        encoded = np.array([encode_string(w, STRING_BITS) for w in siena_words(config.values, seed)], dtype=np.uint64)
    columns: dict[str, np.ndarray] = {}
    for a in attrs:
        rank = _zipf_choice(rng, config.values, exponent, n)
        columns[a.name] = encoded[rank] if a.is_string else (rank + 1).astype(np.uint64)  # type: ignore[index]
    return columns


def _layout(columns: Mapping[str, np.ndarray]) -> tuple[np.dtype, int]:
    """The big-endian record dtype of the header the columns fill, and the message count.

    The layout is read off the names (``i`` = 32 bits, ``s`` = 64) so that any columns
    :func:`siena_packets` returns can be written without repeating the config; names out of
    header order or of two headers are refused, since the spec would not read them back.
    """
    if not columns:
        raise P4subError("no Siena attribute columns to write")
    fields: list[tuple[str, str]] = []
    headers = set()
    counts = set()
    for position, (name, values) in enumerate(columns.items()):
        m = _COLUMN.fullmatch(name)
        if m is None or int(m.group(3)) != position:
            raise P4subError(f"column {name!r} is not attribute {position} of a Siena header (<header>.i{position} or .s{position})")
        if fields and fields[-1][1] == ">u8" and m.group(2) == "i":
            raise P4subError(f"column {name!r}: integer attributes come before string attributes")
        headers.add(m.group(1))
        counts.add(len(values))
        fields.append((f"{m.group(2)}{m.group(3)}", ">u4" if m.group(2) == "i" else ">u8"))
    if len(headers) != 1 or len(counts) != 1:
        raise P4subError("Siena columns must name one header and have equal lengths")
    return np.dtype(fields), counts.pop()


def siena_payloads(columns: Mapping[str, np.ndarray]) -> list[bytes]:
    """The Siena header bytes of each message (the UDP payload), packed in one numpy pass."""
    dtype, n = _layout(columns)
    records = np.empty(n, dtype=dtype)
    for name, values in columns.items():
        field = name.split(".", 1)[1]
        v = np.asarray(values, dtype=np.uint64)
        if field[0] == "i" and n and int(v.max()) >> INT_BITS:
            raise P4subError(f"column {name!r} holds values wider than {INT_BITS} bits")
        records[field] = v
    raw = records.tobytes()
    size = dtype.itemsize
    return [raw[i * size : (i + 1) * size] for i in range(n)]


def write_siena_pcap(
    path: str | os.PathLike[str],
    columns: Mapping[str, np.ndarray],
    endpoints: UdpEndpoints = DEFAULT_ENDPOINTS,
    start_ns: int = DEFAULT_START_NS,
    gap_ns: int = DEFAULT_GAP_NS,
    udp_checksum: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write one Ethernet/IPv4/UDP/Siena frame per message, ``gap_ns`` apart; return the count.

    IPv4 checksums are always right; the UDP checksum is computed unless ``udp_checksum`` is
    False (then 0, "not computed"). ``endpoints.dst_port`` must stay :data:`SIENA_PORT` for
    the spec's parser to reach the Siena header; another port makes plain UDP traffic.
    """
    if gap_ns < 1:
        raise P4subError("the gap between packets must be at least 1 ns (timestamps increase)")
    payloads = siena_payloads(columns)
    total = len(payloads)
    step = max(1, total // 100)
    with PcapWriter(path) as w:
        for i, payload in enumerate(payloads):
            w.write(build_udp_frame(payload, endpoints, i & 0xFFFF, udp_checksum), start_ns + i * gap_ns)
            if progress is not None and ((i + 1) % step == 0 or i + 1 == total):
                progress(i + 1, total)
        return w.records_written
