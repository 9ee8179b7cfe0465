"""INT per-hop metadata (P4.org INT v2.1 §"What to monitor") selected by an instruction bitmap.

Bit 0 is the most significant bit of the 16-bit bitmap. Each set bit adds 4 bytes of metadata to
a hop's record, except bits 4-6 which add 8, in bit order (the checksum complement, bit 15, is
always last). The Telemetry Report v2.0 ``RepMdBits`` reuse bits 1-8 with the same layout, but bit
0 is reserved (the node id is in the report group header) and bit 15 means queue id (8) + drop
reason (8) + padding (16). The two tables below say so as data; one codec serves both.

A value a node cannot provide is sent as all ones; a field the bitmap does not select decodes
to ``None``. Reserved bits (9-14) carry 4 bytes each that are skipped on decode and written as
all ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

# (bit, bytes, ((field, bits), ...)); fields fill the item from its most significant bit.
Layout = tuple[tuple[int, int, tuple[tuple[str, int], ...]], ...]

_COMMON: Layout = (
    (1, 4, (("ingress_port_id", 16), ("egress_port_id", 16))),
    (2, 4, (("hop_latency", 32),)),
    (3, 4, (("queue_id", 8), ("queue_occupancy", 24))),
    (4, 8, (("ingress_timestamp", 64),)),
    (5, 8, (("egress_timestamp", 64),)),
    (6, 8, (("l2_ingress_port_id", 32), ("l2_egress_port_id", 32))),
    (7, 4, (("egress_tx_util", 32),)),
    (8, 4, (("buffer_id", 8), ("buffer_occupancy", 24))),
) + tuple((b, 4, ()) for b in range(9, 15))

INT_MD_LAYOUT: Layout = ((0, 4, (("switch_id", 32),)),) + _COMMON + ((15, 4, (("checksum_complement", 32),)),)
REPORT_LAYOUT: Layout = ((0, 4, ()),) + _COMMON + ((15, 4, (("drop_queue_id", 8), ("drop_reason", 8), ("drop_padding", 16))),)

# The instruction set of p4sub's INT spec (apps/int/int.p4): node id, L1 port ids, hop latency,
# queue id + occupancy, i.e. bits 0-3.
BIT_NODE_ID, BIT_L1_PORTS, BIT_HOP_LATENCY, BIT_QUEUE = 0x8000, 0x4000, 0x2000, 0x1000
P4SUB_INSTRUCTIONS = BIT_NODE_ID | BIT_L1_PORTS | BIT_HOP_LATENCY | BIT_QUEUE


@dataclass(frozen=True, slots=True)
class HopMetadata:
    """One hop's metadata (or a report's own metadata); ``None`` where the bitmap selects nothing."""

    switch_id: int | None = None
    ingress_port_id: int | None = None
    egress_port_id: int | None = None
    hop_latency: int | None = None
    queue_id: int | None = None
    queue_occupancy: int | None = None
    ingress_timestamp: int | None = None
    egress_timestamp: int | None = None
    l2_ingress_port_id: int | None = None
    l2_egress_port_id: int | None = None
    egress_tx_util: int | None = None
    buffer_id: int | None = None
    buffer_occupancy: int | None = None
    checksum_complement: int | None = None
    drop_queue_id: int | None = None
    drop_reason: int | None = None
    drop_padding: int | None = None
    domain_specific: bytes = b""


FIELD_NAMES = tuple(f.name for f in fields(HopMetadata) if f.name != "domain_specific")


def bit_mask(bit: int) -> int:
    return 0x8000 >> bit


@lru_cache(maxsize=1024)
def _plan(bitmap: int, layout: Layout) -> tuple[tuple[int, tuple[tuple[str, int], ...]], ...]:
    """The (size, fields) items a bitmap selects, in wire order (cached: bitmaps repeat)."""
    return tuple((size, items) for bit, size, items in layout if bitmap & bit_mask(bit))


def metadata_length(bitmap: int, layout: Layout = INT_MD_LAYOUT) -> int:
    """Bytes of metadata a bitmap selects (without domain-specific metadata)."""
    return sum(size for size, _ in _plan(bitmap, layout))


def selected_fields(bitmap: int, layout: Layout = INT_MD_LAYOUT) -> tuple[str, ...]:
    return tuple(name for _, items in _plan(bitmap, layout) for name, _ in items)


def encode_metadata(meta: HopMetadata, bitmap: int, layout: Layout = INT_MD_LAYOUT) -> bytes:
    """The bytes of one record: the selected items in bit order, then ``domain_specific``."""
    out: list[bytes] = []
    for size, items in _plan(bitmap, layout):
        value = 0
        for name, width in items:
            v = getattr(meta, name)
            if v is None:
                v = (1 << width) - 1
            elif not 0 <= v < (1 << width):
                raise ValueError(f"{name}={v} does not fit {width} bits")
            value = (value << width) | v
        out.append(value.to_bytes(size, "big") if items else b"\xff" * size)
    out.append(meta.domain_specific)
    return b"".join(out)


def decode_metadata(data: bytes | memoryview, offset: int, bitmap: int, record_len: int, layout: Layout = INT_MD_LAYOUT) -> HopMetadata:
    """Decode one record of ``record_len`` bytes (the caller checked it fits in ``data``)."""
    values: dict[str, int] = {}
    pos = offset
    for size, items in _plan(bitmap, layout):
        value = int.from_bytes(data[pos : pos + size], "big")
        shift = size * 8
        for name, width in items:
            shift -= width
            values[name] = (value >> shift) & ((1 << width) - 1)
        pos += size
    ds = bytes(data[pos : offset + record_len])
    return HopMetadata(**values, domain_specific=ds)

