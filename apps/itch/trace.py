"""ITCH traces as pcap files: MoldUDP64 over UDP/IPv4/Ethernet, one packet at a time.

:class:`ItchTraceWriter` frames messages into MoldUDP64 packets (sequence numbers assigned for
you) inside correct Ethernet/IPv4/UDP frames (IPv4 header checksum and UDP checksum computed).
:class:`ItchTraceReader` gives back :class:`ItchPacket` objects; damaged frames, MoldUDP64
headers and messages are counted in ``damage`` and skipped, never raised. For replay speed use
:func:`apps.itch.columnar.read_itch_batches` instead; both read the same packets the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator

from apps.itch.messages import Message, decode_message, encode_message
from apps.itch.moldudp import END_OF_SESSION, HEARTBEAT, decode_mold, encode_mold
from apps.pcap import LINKTYPE_ETHERNET, DamageCounter, PcapRange, PcapReader, PcapWriter
from apps.udp import UdpEndpoints, UdpFrame, build_udp_frame, parse_udp_frame

DEFAULT_ITCH_PORT = 1234
DEFAULT_SESSION = "0000000001"
# Nasdaq TotalView-ITCH multicast groups live in 233.54.12.0/24; any group works for replay.
DEFAULT_ENDPOINTS = UdpEndpoints(
    src_ip=bytes((10, 0, 0, 1)), dst_ip=bytes((233, 54, 12, 111)), src_port=50000, dst_port=DEFAULT_ITCH_PORT
)


@dataclass(frozen=True)
class ItchPacket:
    """One MoldUDP64 packet read from a trace, with the header fields replay matches on.

    ``messages`` holds the messages that decoded; damaged ones are counted, not kept.
    ``packet_len`` is the frame length on the wire (the pcap original length).
    """

    packet_index: int
    timestamp_ns: int
    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int
    session: str
    sequence: int
    count: int
    messages: tuple[Message, ...]
    packet_len: int

    @property
    def is_heartbeat(self) -> bool:
        return self.count == HEARTBEAT

    @property
    def is_end_of_session(self) -> bool:
        return self.count == END_OF_SESSION


def decode_itch_frame(
    frame: bytes,
    damage: DamageCounter,
    skipped: DamageCounter | None = None,
    ports: frozenset[int] | None = None,
    verify_udp: bool = True,
) -> tuple[UdpFrame, str, int, int, list[Message]] | None:
    """Decode one Ethernet frame down to its ITCH messages; None if it carries no MoldUDP64.

    Returns ``(udp frame, session, sequence, count, messages)``.
    """
    parsed = parse_udp_frame(frame, verify_udp=verify_udp)
    if isinstance(parsed, str):
        if parsed.startswith("damaged:"):
            damage.add(parsed[8:])
        elif skipped is not None:
            skipped.add(parsed)
        return None
    if ports is not None and parsed.dst_port not in ports:
        if skipped is not None:
            skipped.add("other_port")
        return None
    payload = memoryview(frame)[parsed.payload_offset : parsed.payload_offset + parsed.payload_len]
    mold = decode_mold(payload, damage)
    if mold is None:
        return None
    messages: list[Message] = []
    for block in mold.blocks:
        msg = decode_message(block)
        if msg is None:
            damage.add("msg_length")
        else:
            messages.append(msg)
    return parsed, mold.session, mold.sequence, mold.count, messages


class ItchTraceReader:
    """Iterate the :class:`ItchPacket` of a pcap/pcapng trace; ``damage`` counts what was skipped.

    ``ports``: only UDP destination ports in this set are read as MoldUDP64 (default: all UDP).
    ``skipped`` counts frames of other kinds (not IPv4, not UDP, fragments, other link types).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        ports: Iterable[int] | None = None,
        verify_udp: bool = True,
        byte_range: PcapRange | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.ports = frozenset(ports) if ports is not None else None
        self.verify_udp = verify_udp
        self.byte_range = byte_range
        self.damage = DamageCounter()
        self.skipped = DamageCounter()

    def __iter__(self) -> Iterator[ItchPacket]:
        with PcapReader(self.path, byte_range=self.byte_range, damage=self.damage) as reader:
            index = self.byte_range.first_index if self.byte_range else 0
            for rec in reader:
                i = index
                index += 1
                if rec.linktype != LINKTYPE_ETHERNET:
                    self.skipped.add("linktype")
                    continue
                out = decode_itch_frame(rec.data, self.damage, self.skipped, self.ports, self.verify_udp)
                if out is None:
                    continue
                udp, session, seq, count, messages = out
                yield ItchPacket(
                    i, rec.timestamp_ns, udp.src_ip, udp.dst_ip, udp.src_port, udp.dst_port,
                    session, seq, count, tuple(messages), rec.orig_len,
                )


def read_itch_packets(path: str | os.PathLike[str], **options: object) -> tuple[list[ItchPacket], DamageCounter]:
    """All packets of a small trace and the damage count (see :class:`ItchTraceReader`)."""
    reader = ItchTraceReader(path, **options)  # type: ignore[arg-type]
    packets = list(reader)
    return packets, reader.damage


class ItchTraceWriter:
    """Write ITCH messages as MoldUDP64 packets into a pcap file.

    Sequence numbers start at ``first_sequence`` and advance by the number of messages per
    packet, as MoldUDP64 requires; heartbeats and the end of session carry the next sequence.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        endpoints: UdpEndpoints = DEFAULT_ENDPOINTS,
        session: str = DEFAULT_SESSION,
        first_sequence: int = 1,
        udp_checksum: bool = True,
    ) -> None:
        self.endpoints = endpoints
        self.session = session
        self.next_sequence = first_sequence
        self.udp_checksum = udp_checksum
        self.messages_written = 0
        self._ident = 0
        self._pcap = PcapWriter(path)

    @property
    def packets_written(self) -> int:
        return self._pcap.records_written

    def _emit(self, payload: bytes, timestamp_ns: int) -> None:
        frame = build_udp_frame(payload, self.endpoints, self._ident, self.udp_checksum)
        self._ident = (self._ident + 1) & 0xFFFF
        self._pcap.write(frame, timestamp_ns)

    def write_packet(self, messages: Iterable[Message], timestamp_ns: int) -> None:
        blocks = [encode_message(m) for m in messages]
        self.write_blocks(blocks, timestamp_ns)

    def write_blocks(self, blocks: list[bytes], timestamp_ns: int) -> None:
        """Write already-encoded messages as one packet (the generator's fast path)."""
        self._emit(encode_mold(self.session, self.next_sequence, blocks), timestamp_ns)
        self.next_sequence += len(blocks)
        self.messages_written += len(blocks)

    def write_heartbeat(self, timestamp_ns: int) -> None:
        self._emit(encode_mold(self.session, self.next_sequence, (), HEARTBEAT), timestamp_ns)

    def write_end_of_session(self, timestamp_ns: int) -> None:
        self._emit(encode_mold(self.session, self.next_sequence, (), END_OF_SESSION), timestamp_ns)

    def close(self) -> None:
        self._pcap.close()

    def __enter__(self) -> "ItchTraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
