"""Nasdaq BinaryFILE reading: round trips, gzip, damage, and the two oracles reading our files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apps.itch.binaryfile import BinaryFileReader, read_binary_file, write_binary_file
from apps.itch.feed import FeedConfig, generate_messages
from apps.itch.messages import AddOrder, AddOrderMPID, SystemEvent, encode_message
from apps.pcap import TraceError

CFG = FeedConfig(messages=800, symbols=8, seed=11)


@pytest.fixture(scope="module")
def messages() -> list:
    return list(generate_messages(CFG))


@pytest.mark.parametrize("compress", [False, True])
def test_read_of_write_is_identity(tmp_path: Path, messages: list, compress: bool) -> None:
    path = tmp_path / ("day.NASDAQ_ITCH50" + (".gz" if compress else ""))
    assert write_binary_file(path, messages, compress=compress) == len(messages)
    got, damage = read_binary_file(path)
    assert got == messages and damage.total == 0


def test_real_file_prefix_decodes(tmp_path: Path) -> None:
    # First 14 bytes of Nasdaq's 01302019.NASDAQ_ITCH50 (digest §1.4).
    path = tmp_path / "01302019.NASDAQ_ITCH50"
    path.write_bytes(bytes.fromhex("000c" "53" "0000" "0000" "0a0a60aadb93" "4f"))
    got, damage = read_binary_file(path)
    assert got == [SystemEvent(0, 0, 11_039_687_760_787, "O")] and damage.total == 0


def test_type_filter(tmp_path: Path, messages: list) -> None:
    path = tmp_path / "f.itch"
    write_binary_file(path, messages)
    got, _ = read_binary_file(path, types="AF")
    assert got == [m for m in messages if isinstance(m, (AddOrder, AddOrderMPID))]


def test_bad_lengths_and_truncation_are_counted(tmp_path: Path, messages: list) -> None:
    raws = [encode_message(m) for m in messages[:50]]
    framed = b""
    for i, r in enumerate(raws):
        if i == 10:
            r = r[:-1]  # one byte short of its type's size: framing stays in step
        framed += len(r).to_bytes(2, "big") + r
    framed += b"\x00\x00"  # an empty message
    path = tmp_path / "bad.itch"
    path.write_bytes(framed + len(raws[0]).to_bytes(2, "big") + raws[0][:5])
    got, damage = read_binary_file(path)
    assert got == messages[:10] + messages[11:50]
    assert damage.counts == {"msg_length": 2, "truncated_message": 1}


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="absent.itch"):
        list(BinaryFileReader(tmp_path / "absent.itch"))


def test_meatpy_and_itchfeed_read_our_files(tmp_path: Path, messages: list) -> None:
    os.environ["ITCH_NO_CPP"] = "1"
    parser = pytest.importorskip("itch.parser", reason="itchfeed is a test-only oracle")
    reader = pytest.importorskip("meatpy.itch50", reason="meatpy is a test-only oracle")
    path = tmp_path / "o.itch"
    write_binary_file(path, messages)
    meat = list(reader.ITCH50MessageReader().read_file(str(path)))
    assert [m.to_bytes() for m in meat] == [encode_message(m) for m in messages]
    with open(path, "rb") as f:
        feed = list(parser.MessageParser().parse_file(f))
    # itchfeed stops at the end-of-messages system event 'C', which is our last message
    assert [m.to_bytes() for m in feed] == [encode_message(m) for m in messages]
