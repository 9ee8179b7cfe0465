"""Fuzz the pcap/pcapng reader (apps/pcap.py) and netsim's trace reading (issue 19): damaged
captures and random bytes give records, counted damage or a TraceError - never another exception,
never a hang - and netsim exits 0 or 2 with a message."""

from __future__ import annotations

import struct
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.pcap import PcapReader, read_section, write_pcap
from p4sub import main
from tests.fuzz.helpers import SETTINGS, only_p4sub_errors, run_cli
from tests.fuzz.mutations import mutated_bytes

REPO = Path(__file__).resolve().parents[2]


def _classic(tmp: Path) -> bytes:
    path = tmp / "c.pcap"
    write_pcap(path, [(10**9 + i * 1000, bytes(range(i, i + 60))) for i in range(4)])
    return path.read_bytes()


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _pcapng() -> bytes:
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _block(1, struct.pack("<HHI", 1, 0, 0))
    epbs = b"".join(_block(6, struct.pack("<IIIII", 0, 0, i, 60, 60) + bytes(60)) for i in range(3))
    return shb + idb + epbs


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("fuzz_pcap")
    return {"dir": tmp, "classic": _classic(tmp), "pcapng": _pcapng()}


def _read_all(path: Path) -> None:
    read_section(path)
    with PcapReader(path) as reader:
        for n, _ in enumerate(reader):
            assert n < 10_000  # the inputs are small: more records than bytes would be a loop
    with PcapReader(path, chunk_bytes=64) as reader:
        for _chunk in reader.chunks():
            pass


@SETTINGS
@given(data=st.data())
def test_the_pcap_reader_on_damaged_captures(bases, data):
    base = bases[data.draw(st.sampled_from(["classic", "pcapng"]))]
    blob = data.draw(st.one_of(mutated_bytes(base), st.binary(max_size=300)))
    path = bases["dir"] / "t.pcap"
    path.write_bytes(blob)
    only_p4sub_errors(lambda: _read_all(path))


@pytest.fixture(scope="module")
def network(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzz_netsim") / "net"
    assert main(["route", str(REPO / "examples/fat-tree-4.topo"), str(REPO / "examples/fat-tree-4.rules"),
                 "--spec", str(REPO / "apps/itch/itch.p4"), "--jobs", "1", "-o", str(out)]) == 0
    return out


# Each example reads fat-tree-4's 20 compiled switches afresh (about 5 s on the 2-core machine, 7 s
# under load): the hang bound is 30 s here, not the suite's 5.
@settings(SETTINGS, deadline=timedelta(seconds=30))
@given(blob=st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda b: b"\x0a\x0d\x0d\x0a" + b),
                      st.binary(max_size=300).map(lambda b: b"\xd4\xc3\xb2\xa1" + b)))
def test_netsim_on_random_bytes(network, blob):
    path = network.parent / "trace.bin"
    path.write_bytes(blob)
    run_cli("netsim", str(network), "--trace", str(path), "--publisher", "h1")
