"""MoldUDP64: the digest's test vector, unsigned counts, and damage in the block walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.itch.moldudp import END_OF_SESSION, decode_mold, encode_mold, end_of_session, heartbeat
from apps.pcap import DamageCounter

ADD_ORDER = bytes.fromhex("41000700001f1aced9f07b00000000deadbeef4200000064474f4f474c2020200012d644")
# Full UDP payload from the ecosystem digest §1.4 (session 0000000001, seq 42, count 1).
VECTOR = bytes.fromhex("30303030303030303031" "000000000000002a" "0001" "0024") + ADD_ORDER


def test_digest_vector_encodes_and_decodes() -> None:
    assert encode_mold("0000000001", 42, [ADD_ORDER]) == VECTOR
    pkt = decode_mold(VECTOR)
    assert pkt is not None
    assert (pkt.session, pkt.sequence, pkt.count, pkt.blocks) == ("0000000001", 42, 1, (ADD_ORDER,))


def test_end_of_session_count_is_unsigned() -> None:
    # The moldudp PyPI package unpacks the count as signed (-1) and misses the end of session.
    raw = end_of_session("SESSION001", 7)
    assert raw[18:20] == b"\xff\xff"
    pkt = decode_mold(raw)
    assert pkt is not None and pkt.count == 65535 == END_OF_SESSION and pkt.is_end_of_session
    assert pkt.blocks == ()
    hb = decode_mold(heartbeat("SESSION001", 7))
    assert hb is not None and hb.is_heartbeat and not hb.is_end_of_session


@given(
    session=st.text(alphabet="ABCDEFGHIJ0123456789", min_size=10, max_size=10),
    seq=st.integers(0, (1 << 64) - 1),
    blocks=st.lists(st.binary(max_size=60), max_size=20),
)
@settings(max_examples=100)
def test_decode_of_encode_is_identity(session: str, seq: int, blocks: list[bytes]) -> None:
    damage = DamageCounter()
    pkt = decode_mold(encode_mold(session, seq, blocks), damage)
    assert pkt is not None and damage.total == 0
    assert (pkt.session, pkt.sequence, pkt.count, list(pkt.blocks)) == (session, seq, len(blocks), blocks)


def test_wrong_counts_and_lengths_are_counted_and_keep_good_blocks() -> None:
    blocks = [b"A" * 36, b"D" * 19, b"X" * 23]
    too_many = encode_mold("S", 1, blocks, count=5)
    d = DamageCounter()
    pkt = decode_mold(too_many, d)
    assert pkt is not None and pkt.blocks == tuple(blocks) and d.counts == {"mold_truncated": 1}
    too_few = encode_mold("S", 1, blocks, count=2)
    d = DamageCounter()
    pkt = decode_mold(too_few, d)
    assert pkt is not None and pkt.blocks == tuple(blocks[:2]) and d.counts == {"mold_trailing": 1}
    cut = encode_mold("S", 1, blocks)[:-5]
    d = DamageCounter()
    pkt = decode_mold(cut, d)
    assert pkt is not None and pkt.blocks == tuple(blocks[:2]) and d.counts == {"mold_truncated": 1}
    d = DamageCounter()
    assert decode_mold(VECTOR[:19], d) is None and d.counts == {"mold_short": 1}
    d = DamageCounter()
    pkt = decode_mold(heartbeat("S", 1) + b"junk", d)
    assert pkt is not None and pkt.is_heartbeat and d.counts == {"mold_trailing": 1}


@given(st.binary(max_size=200))
@settings(max_examples=200)
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    decode_mold(data, DamageCounter())
