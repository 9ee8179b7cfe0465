"""Cutting traces at packet boundaries: the ranges together read every record exactly once."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.pcap import PcapReader, PcapWriter, pcap_record_offsets
from runtime.replay import plan_partitions
from runtime.replay_split import split_trace


def _write(path: Path, sizes: list[int], garbage_after: dict[int, bytes], cut_tail: int) -> None:
    """A pcap with records of ``sizes`` bytes (each filled with its index), garbage bytes inserted
    after some records, and the last ``cut_tail`` bytes cut off."""
    with PcapWriter(path) as w:
        for i, size in enumerate(sizes):
            w.write(bytes([i % 256]) * size, 1_548_806_400_000_000_000 + i * 1000)
            if i in garbage_after:
                w._file.write(garbage_after[i])  # noqa: SLF001 - damage on purpose
    if cut_tail:
        data = path.read_bytes()
        path.write_bytes(data[: max(24, len(data) - cut_tail)])


def _read(path: Path, rng=None) -> tuple[list[tuple[int, bytes]], int]:
    with PcapReader(path, byte_range=rng) as reader:
        out = [(int(off), bytes(c.buffer[d : d + n]))
               for c in reader.chunks(max_records=7)
               for off, d, n in zip(c.record_offsets.tolist(), c.data_offsets.tolist(), c.caplens.tolist())]
        return out, reader.damage.total


GARBAGE = st.binary(min_size=1, max_size=40).filter(lambda b: len(b) % 4 != 0 or b[:4] != b"\0\0\0\0")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 300), min_size=0, max_size=60), parts=st.integers(1, 12),
       garbage=st.dictionaries(st.integers(0, 59), GARBAGE, max_size=3), cut_tail=st.sampled_from([0, 0, 5, 17]))
def test_ranges_read_every_record_exactly_once(tmp_path_factory, sizes, parts, garbage, cut_tail) -> None:
    path = tmp_path_factory.mktemp("split") / "t.pcap"
    _write(path, sizes, {k: v for k, v in garbage.items() if k < len(sizes)}, cut_tail)
    whole, whole_damage = _read(path)
    split = split_trace(path, parts)
    assert len(split.ranges) <= parts
    pieces, damage = [], 0
    for k, rng in enumerate(split.ranges):
        got, dmg = _read(path, rng)
        assert rng.first_index == len(pieces)
        if k:
            assert got and got[0][0] == rng.start  # every range but the first starts on a record
        pieces += got
        damage += dmg
    assert pieces == whole
    assert damage == whole_damage


def test_cuts_follow_the_apps_record_offsets(tmp_path) -> None:
    path = tmp_path / "t.pcap"
    rng = random.Random(1)
    _write(path, [rng.randint(40, 1500) for _ in range(2000)], {}, 0)
    offsets = pcap_record_offsets(path)["offset"].tolist()
    split = split_trace(path, 8)
    assert len(split.ranges) == 8
    assert [r.start for r in split.ranges[1:]] == [offsets[r.first_index] for r in split.ranges[1:]]
    sizes = [r.end - r.start for r in split.ranges]
    assert max(sizes) - min(sizes) < 2 * 1516  # about equal: a cut moves by at most one record


def test_a_cut_short_file_header_is_counted_not_fatal(tmp_path) -> None:
    path = tmp_path / "t.pcap"
    path.write_bytes(struct.pack("<IHH", 0xA1B2C3D4, 2, 4))
    split = split_trace(path, 4)
    assert split.ranges == () and dict(split.file_damage) == {"truncated_file_header": 1}


@pytest.mark.parametrize("sizes,cores,requested,expected", [
    ([100], 2, None, [4]),
    ([100], 2, 7, [7]),
    ([300 << 20, 100 << 20], 2, None, [6, 2]),
    ([10, 10, 10], 1, 1, [1, 1, 1]),
])
def test_partition_plan(sizes, cores, requested, expected) -> None:
    assert plan_partitions(sizes, cores, requested) == expected
