"""MoldUDP64 downstream packets: the UDP payload that carries ITCH messages.

Layout (all big-endian): ``session(10) sequence(8) count(2)`` then ``count`` message blocks of
``length(2) message(length)``. ``sequence`` numbers the first message of the packet; the next
packet's is ``sequence + count``. The count is *unsigned*: 0 is a heartbeat and 0xFFFF the end
of the session, and neither carries blocks. (The ``moldudp`` PyPI package reads the count as
signed and so never sees an end of session; a regression test holds us to the unsigned reading.)

Decoding never raises for damaged input: a block that runs past the payload stops the walk
(``mold_truncated``), bytes left after ``count`` blocks are ``mold_trailing``, a payload shorter
than the header is ``mold_short``. Blocks read before the damage are kept.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from apps.pcap import DamageCounter

HEADER_SIZE = 20
HEARTBEAT = 0
END_OF_SESSION = 0xFFFF
MAX_BLOCKS = 0xFFFE

_HEADER = struct.Struct("!10sQH")


@dataclass(frozen=True)
class MoldPacket:
    """A decoded MoldUDP64 packet; ``blocks`` are the raw messages (without length prefixes).

    ``session`` is all 10 characters as sent (a shorter session is space-padded when encoded).
    """

    session: str
    sequence: int
    count: int
    blocks: tuple[bytes, ...]

    @property
    def is_heartbeat(self) -> bool:
        return self.count == HEARTBEAT

    @property
    def is_end_of_session(self) -> bool:
        return self.count == END_OF_SESSION


def session_bytes(session: str) -> bytes:
    b = session.encode("ascii")
    if len(b) > 10:
        raise ValueError(f"MoldUDP64 session longer than 10 characters: {session!r}")
    return b.ljust(10, b" ")


def encode_mold(session: str, sequence: int, blocks: list[bytes] | tuple[bytes, ...], count: int | None = None) -> bytes:
    """A MoldUDP64 payload. ``count`` defaults to ``len(blocks)``; pass 0 or 0xFFFF (no blocks)
    for a heartbeat or end of session, or a wrong count on purpose to build damaged test data."""
    if count is None:
        if len(blocks) > MAX_BLOCKS:
            raise ValueError(f"too many blocks for one MoldUDP64 packet: {len(blocks)}")
        count = len(blocks)
    parts = [_HEADER.pack(session_bytes(session), sequence, count)]
    for b in blocks:
        if len(b) > 0xFFFF:
            raise ValueError("MoldUDP64 message longer than 65535 bytes")
        parts.append(len(b).to_bytes(2, "big"))
        parts.append(b)
    return b"".join(parts)


def heartbeat(session: str, next_sequence: int) -> bytes:
    return encode_mold(session, next_sequence, (), HEARTBEAT)


def end_of_session(session: str, next_sequence: int) -> bytes:
    return encode_mold(session, next_sequence, (), END_OF_SESSION)


def decode_mold(payload: bytes | memoryview, damage: DamageCounter | None = None) -> MoldPacket | None:
    """Decode a MoldUDP64 payload, counting damage; None only if the header itself is missing."""
    dmg = damage if damage is not None else DamageCounter()
    n = len(payload)
    if n < HEADER_SIZE:
        dmg.add("mold_short")
        return None
    session, sequence, count = _HEADER.unpack_from(payload, 0)
    pos = HEADER_SIZE
    blocks: list[bytes] = []
    if count not in (HEARTBEAT, END_OF_SESSION):
        for _ in range(count):
            if pos + 2 > n:
                dmg.add("mold_truncated")
                break
            length = int.from_bytes(payload[pos : pos + 2], "big")
            if pos + 2 + length > n:
                dmg.add("mold_truncated")
                pos = n
                break
            blocks.append(bytes(payload[pos + 2 : pos + 2 + length]))
            pos += 2 + length
        else:
            if pos != n:
                dmg.add("mold_trailing")
    elif n > HEADER_SIZE:
        dmg.add("mold_trailing")
    return MoldPacket(session.decode("latin-1"), sequence, count, tuple(blocks))
