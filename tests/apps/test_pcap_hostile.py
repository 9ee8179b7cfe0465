"""apps/pcap.py against hostile captures (issue 19): a version it does not read is an error, not
"0 packets"; a FIFO or a directory is refused at once; a timestamp past int64 is clamped and counted
as damage instead of overflowing."""

from __future__ import annotations

import os
import struct

import pytest

from apps.pcap import MAX_TIMESTAMP_NS, PcapReader, TraceError, read_pcap, write_pcap


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def test_a_pcap_of_another_version_is_an_error(tmp_path):
    path = tmp_path / "t.pcap"
    write_pcap(path, [(10**9, bytes(60))])
    data = bytearray(path.read_bytes())
    data[4:6] = struct.pack("<H", 3)
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"pcap version 3\.4; p4sub reads version 2"):
        read_pcap(path)
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 2, 0, -1))
    path.write_bytes(shb)
    with pytest.raises(TraceError, match=r"pcapng version 2\.0; p4sub reads version 1"):
        read_pcap(path)


def test_fifos_and_directories_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="FIFO"):
        PcapReader(fifo)
    with pytest.raises(TraceError, match="is a directory"):
        PcapReader(tmp_path)
    with pytest.raises(TraceError, match="no such trace"):
        PcapReader(tmp_path / "nope.pcap")


def test_a_timestamp_past_int64_is_clamped_and_counted(tmp_path):
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _block(1, struct.pack("<HHI", 1, 0, 0))  # microseconds: ticks * 1000 ns
    epb = _block(6, struct.pack("<IIIII", 0, 0xFFFFFFFF, 0xFFFFFFFF, 60, 60) + bytes(60))
    good = _block(6, struct.pack("<IIIII", 0, 0, 5, 60, 60) + bytes(60))
    path = tmp_path / "t.pcapng"
    path.write_bytes(shb + idb + epb + good)
    records, damage = read_pcap(path)
    assert [r.timestamp_ns for r in records] == [MAX_TIMESTAMP_NS, 5000]
    assert damage.counts["bad_timestamp"] == 1
