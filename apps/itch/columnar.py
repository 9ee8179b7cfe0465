"""Columnar, vectorised decoding of ITCH traces for replay: Add Orders as numpy arrays.

Replay runs the reference switch over tens of millions of messages, so decoding must not touch
each message from Python. The pcap layer hands over chunks of records sharing one buffer; here
every header check and field extraction is a numpy operation over all packets (or all messages)
of the chunk at once. Only the walk over MoldUDP64 blocks loops, once per block *position*
(at most the largest message count of a packet), not once per message.

The checks and damage reasons are the same as :mod:`apps.itch.trace` (per packet, in plain
Python); the tests hold the two to the same output. Frame checks: :mod:`apps.udp_batch`.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

import numpy as np

from apps.itch.messages import MESSAGE_SIZES
from apps.itch.moldudp import END_OF_SESSION, HEADER_SIZE, HEARTBEAT
from apps.pcap import DamageCounter, PcapRange, PcapReader, RecordChunk
from apps.udp_batch import VecDamage, decode_udp_frames, gather_rows, row_uint, u16

ADD_ORDER_COLUMNS = {
    "add_order.stock": np.uint64,
    "add_order.price": np.uint32,
    "add_order.shares": np.uint32,
    "add_order.buy_sell_indicator": np.uint8,
    "add_order.order_ref_number": np.uint64,
    "add_order.stock_locate": np.uint16,
    "add_order.timestamp": np.uint64,
    "msg_type": np.uint8,
    "ipv4.dst_addr": np.uint32,
    "udp.dst_port": np.uint16,
    "packet_index": np.int64,
    "msg_index": np.int32,
    "msg_len": np.uint16,
    "packet_len": np.uint32,
    "timestamp_ns": np.int64,
}

_EXPECTED_SIZE = np.zeros(256, dtype=np.int64)
for _t, _size in MESSAGE_SIZES.items():
    _EXPECTED_SIZE[_t[0]] = _size
_TYPE_A, _TYPE_F = ord("A"), ord("F")


def walk_mold(
    arr: np.ndarray, payload: np.ndarray, payload_len: np.ndarray, damage: DamageCounter
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised MoldUDP64 block walk over packets (the rules of :mod:`apps.itch.moldudp`).

    Returns per message, in buffer order: packet (index into the given arrays), position in its
    packet, buffer offset of the message and its length.
    """
    dmg = VecDamage(damage)
    short = payload_len < HEADER_SIZE
    dmg.add("mold_short", short)
    count = np.where(short, 0, u16(arr, np.where(short, payload, payload + 18)))
    end = payload + payload_len
    no_blocks = ~short & ((count == HEARTBEAT) | (count == END_OF_SESSION))
    dmg.add("mold_trailing", no_blocks & (payload_len > HEADER_SIZE))
    active = np.flatnonzero(~short & ~no_blocks)
    cursor = payload[active] + HEADER_SIZE
    cnt = count[active]
    pkt_parts, pos_parts, start_parts, len_parts = [], [], [], []
    k = 0
    while len(active):
        fits_len = cursor + 2 <= end[active]
        length = np.where(fits_len, u16(arr, np.where(fits_len, cursor, payload[active])), 0)
        fits = fits_len & (cursor + 2 + length <= end[active])
        dmg.add("mold_truncated", ~fits)
        active, cursor, cnt, length = active[fits], cursor[fits], cnt[fits], length[fits]
        pkt_parts.append(active)
        pos_parts.append(np.full(len(active), k, dtype=np.int32))
        start_parts.append(cursor + 2)
        len_parts.append(length)
        cursor = cursor + 2 + length
        k += 1
        done = cnt == k
        dmg.add("mold_trailing", done & (cursor != end[active]))
        more = ~done
        active, cursor, cnt = active[more], cursor[more], cnt[more]
    if not pkt_parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, np.empty(0, dtype=np.int32), empty, empty
    # Blocks were collected position by position; put them back in file order.
    start = np.concatenate(start_parts)
    order = np.argsort(start, kind="stable")
    return (
        np.concatenate(pkt_parts)[order],
        np.concatenate(pos_parts)[order],
        start[order],
        np.concatenate(len_parts)[order],
    )


def decode_add_orders(
    chunk: RecordChunk,
    damage: DamageCounter,
    skipped: DamageCounter | None = None,
    ports: frozenset[int] | None = None,
    verify_udp: bool = True,
) -> tuple[dict[str, np.ndarray], int]:
    """The Add Order ('A' and 'F') columns of one record chunk (see :data:`ADD_ORDER_COLUMNS`),
    and how many MoldUDP64 blocks (messages of any type) the chunk held."""
    arr = np.frombuffer(chunk.buffer, dtype=np.uint8)
    frames = decode_udp_frames(chunk, damage, skipped, ports, verify_udp)
    pkt, pos, start, length = walk_mold(arr, frames["payload"], frames["payload_len"], damage)
    blocks = len(pkt)
    empty = length == 0
    mtype = arr[np.where(empty, 0, start)].astype(np.int64)
    expected = _EXPECTED_SIZE[mtype]
    bad = empty | ((expected != 0) & (length != expected))
    damage.add("msg_length", int(np.count_nonzero(bad)))
    sel = ~bad & ((mtype == _TYPE_A) | (mtype == _TYPE_F))
    pkt, pos, start, length, mtype = pkt[sel], pos[sel], start[sel], length[sel], mtype[sel]
    rec = frames["record"][pkt]
    orig = np.asarray(chunk.orig_lens, dtype=np.int64)
    rows = gather_rows(arr, start, 36)  # the 36 bytes of 'A'; 'F' adds its MPID after them
    return {
        "add_order.stock": row_uint(rows, 24, 8, np.uint64),
        "add_order.price": row_uint(rows, 32, 4, np.uint32),
        "add_order.shares": row_uint(rows, 20, 4, np.uint32),
        "add_order.buy_sell_indicator": rows[:, 19].copy(),
        "add_order.order_ref_number": row_uint(rows, 11, 8, np.uint64),
        "add_order.stock_locate": row_uint(rows, 1, 2, np.uint16),
        "add_order.timestamp": row_uint(rows, 5, 6, np.uint64),
        "msg_type": mtype.astype(np.uint8),
        "ipv4.dst_addr": frames["dst_addr"][pkt],
        "udp.dst_port": frames["dst_port"][pkt],
        "packet_index": rec + chunk.first_index,
        "msg_index": pos,
        "msg_len": length.astype(np.uint16),
        "packet_len": orig[rec].astype(np.uint32),
        "timestamp_ns": np.asarray(chunk.timestamps_ns, dtype=np.int64)[rec],
    }, blocks


class ItchBatchReader:
    """Iterate Add Order batches (dicts of numpy arrays) of a trace; ``damage`` counts what was skipped.

    Each batch comes from at most ``batch_packets`` packets. ``packets_read`` and
    ``messages_read`` (all MoldUDP64 blocks, not only Add Orders) are kept for throughput figures.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_packets: int = 65536,
        ports: Iterable[int] | None = None,
        verify_udp: bool = True,
        byte_range: PcapRange | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.batch_packets = batch_packets
        self.ports = frozenset(ports) if ports is not None else None
        self.verify_udp = verify_udp
        self.byte_range = byte_range
        self.damage = DamageCounter()
        self.skipped = DamageCounter()
        self.packets_read = 0
        self.messages_read = 0

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        with PcapReader(self.path, byte_range=self.byte_range, damage=self.damage) as reader:
            for chunk in reader.chunks(self.batch_packets):
                self.packets_read += len(chunk)
                batch, blocks = decode_add_orders(chunk, self.damage, self.skipped, self.ports, self.verify_udp)
                self.messages_read += blocks
                if len(batch["packet_index"]):
                    yield batch


def read_itch_batches(
    path: str | os.PathLike[str],
    batch_packets: int = 65536,
    ports: Iterable[int] | None = None,
    verify_udp: bool = True,
    byte_range: PcapRange | None = None,
) -> ItchBatchReader:
    """Add Order columns of an ITCH trace, batch by batch: ``for batch in read_itch_batches(p)``.

    The returned reader also holds ``damage`` (a :class:`~apps.pcap.DamageCounter`).
    """
    return ItchBatchReader(path, batch_packets, ports, verify_udp, byte_range)


def concat_batches(batches: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """All batches as one dict of arrays (empty arrays of the right types if there are none)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ADD_ORDER_COLUMNS}
    for b in batches:
        for k in ADD_ORDER_COLUMNS:
            parts[k].append(b[k])
    return {k: (np.concatenate(v).astype(ADD_ORDER_COLUMNS[k]) if v else np.empty(0, dtype=ADD_ORDER_COLUMNS[k])) for k, v in parts.items()}
