"""Cut capture files into byte ranges at packet boundaries, for replay's parallel tasks.

Each Spark task reads one :class:`~apps.pcap.PcapRange`: the records whose header starts inside
it. A range must start exactly on a record, or a packet would be lost or read twice. Resyncing
from an arbitrary byte offset cannot promise that (any 16 bytes may look like a record header),
so the driver walks the file once with the apps' reader and keeps, for each wanted cut, the first
record at or after it. The walk keeps only the cuts, not every record's offset: its memory does
not grow with the trace. Damaged stretches are skipped by that walk exactly as a task's reader
skips them, so the ranges meet at records both agree on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from apps import storage
from apps.pcap import PcapRange, PcapReader, Section

DEFAULT_RANGE_BYTES = 64 << 20


def _section_at(changes: list[tuple[int, Section]], offset: int) -> Section:
    return next(sec for at, sec in reversed(changes) if at <= offset)


@dataclass(frozen=True)
class TraceSplit:
    """A trace's ranges, and damage that belongs to no range (a file header cut short)."""

    path: str
    size: int
    ranges: tuple[PcapRange, ...]
    file_damage: tuple[tuple[str, int], ...] = ()


def split_trace(path: str | os.PathLike[str], parts: int, progress: Callable[[int, int], None] | None = None) -> TraceSplit:
    """At most ``parts`` ranges of about equal size covering every record of ``path``, in file order.

    The first range starts where records start (right after the file header), so damage before
    the first good record is still seen by its task; every other range starts on a record found
    by the walk. ``progress(bytes_done, bytes_total)`` is called as the walk advances.
    """
    path = os.fspath(path)
    size = storage.file_size(path)
    parts = max(1, parts)
    targets = [size * k // parts for k in range(1, parts)]
    cuts: list[tuple[int, int, Section]] = []  # (offset, first record index, section)
    with PcapReader(path) as reader:
        start = reader.section_changes[0][0]
        t = 0
        for chunk in reader.chunks(max_records=1 << 18):
            offsets = chunk.record_offsets
            if progress is not None and len(offsets):
                progress(int(offsets[-1]), size)
            while t < len(targets) and len(offsets) and targets[t] <= offsets[-1]:
                i = int(np.searchsorted(offsets, targets[t], side="left"))
                offset = int(offsets[i])
                if offset > (cuts[-1][0] if cuts else start):
                    cuts.append((offset, chunk.first_index + i, _section_at(reader.section_changes, offset)))
                t += 1
        changes = reader.section_changes
        header_damage = reader.damage.counts.get("truncated_file_header", 0)
    if header_damage:
        return TraceSplit(path, size, (), (("truncated_file_header", header_damage),))
    bounds = [(start, 0, _section_at(changes, start))] + cuts
    ranges = []
    for k, (offset, index, section) in enumerate(bounds):
        end = bounds[k + 1][0] if k + 1 < len(bounds) else size
        ranges.append(PcapRange(path, offset, end, index, section))
    return TraceSplit(path, size, tuple(ranges))
