"""Capture files read through a spec's parse graph: batches of message rows for replay and netsim.

This is the one way replay and netsim read packets (:mod:`runtime.columnar` runs the spec's parser
over each chunk of records), so their ground truth and the model's inputs are what the switch's
parser extracts, for any protocol a spec describes. The pcap layer (:mod:`apps.pcap`) walks the
file and counts damaged records; nothing here checks what the parser does not (IPv4 or UDP
checksums, lengths): a switch forwards such packets all the same. Records of a link type other
than Ethernet are skipped and counted (every parse graph p4sub reads starts at the frame).

A batch is a dict of numpy columns: the requested fields, ``h.$valid`` of every scalar header, and
per row ``packet_index`` (the record's index in the file), ``element`` (its position in the row
stack), ``packet_len`` (the record's original length), ``message_bytes`` (one message's size on
the wire, :attr:`runtime.columnar.SpecReader.message_bytes`, or the packet's length when a packet
is one message) and ``timestamp_ns``. Rows of a packet are consecutive, packets in file order.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Iterator

import numpy as np

from apps.pcap import LINKTYPE_ETHERNET, DamageCounter, PcapRange, PcapReader
from compiler.spec import Spec
from runtime.columnar import SpecReader

#: Columns every batch has besides the fields (names without a dot, so never a header field).
BOOKKEEPING = ("packet_index", "element", "packet_len", "message_bytes", "timestamp_ns")


class SpecTraceReader:
    """Iterate the row batches of a capture (or a byte range of one) as the spec's parser reads it.

    After iteration: ``packets_read`` (records), ``messages_read`` (messages in them: elements of
    the row stack's group, or one per packet), ``statuses`` (packets per parse status),
    ``damage`` (records the pcap layer could not read) and ``skipped`` (records left out, by reason).
    """

    def __init__(self, path: str | os.PathLike[str], spec: Spec | SpecReader, fields: Iterable[str] = (),
                 batch_packets: int = 1 << 15, byte_range: PcapRange | None = None) -> None:
        self.path = os.fspath(path)
        self.reader = spec if isinstance(spec, SpecReader) else SpecReader(spec, fields)
        self.batch_packets = batch_packets
        self.byte_range = byte_range
        self.damage = DamageCounter()
        self.skipped = DamageCounter()
        self.statuses: Counter[str] = Counter()
        self.packets_read = 0
        self.messages_read = 0

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        with PcapReader(self.path, byte_range=self.byte_range, damage=self.damage) as pcap:
            for chunk in pcap.chunks(self.batch_packets):
                self.packets_read += len(chunk)
                ethernet = np.flatnonzero(np.asarray(chunk.linktypes) == LINKTYPE_ETHERNET)
                self.skipped.add("linktype", len(chunk) - len(ethernet))
                parsed = self.reader.parse_buffer(chunk.buffer, chunk.data_offsets[ethernet], chunk.caplens[ethernet])
                self.statuses.update(parsed.statuses)
                self.messages_read += int(parsed.messages.sum())
                if not len(parsed):
                    continue
                record = ethernet[parsed.packet]
                batch = dict(parsed.columns)
                batch["packet_index"] = record.astype(np.int64) + chunk.first_index
                batch["element"] = parsed.element
                batch["packet_len"] = np.asarray(chunk.orig_lens, dtype=np.int64)[record]
                if self.reader.row_stack is None:
                    batch["message_bytes"] = batch["packet_len"].copy()
                else:
                    batch["message_bytes"] = np.full(len(record), self.reader.message_bytes, dtype=np.int64)
                batch["timestamp_ns"] = np.asarray(chunk.timestamps_ns, dtype=np.int64)[record]
                yield batch


def read_trace(path: str | os.PathLike[str], spec: Spec, fields: Iterable[str],
               batch_packets: int = 1 << 15) -> dict[str, np.ndarray]:
    """A whole (small) trace as one batch: tests and tools. Every column, empty when no row."""
    source = SpecTraceReader(path, spec, fields, batch_packets)
    batches = list(source)
    if not batches:
        names = list(source.reader.fields) + list(source.reader.validity) + list(BOOKKEEPING)
        return {k: np.zeros(0, dtype=np.int64 if "." not in k else np.uint64) for k in names}
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
