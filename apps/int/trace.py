"""INT traces as pcap files: INT-MD packets over UDP, and Telemetry Report v2.0 packets.

A trace may hold both kinds: frames to the INT port carry INT-MD directly (as a switch pipeline
sees them); frames to the report port are telemetry reports (as a collector receives them),
whose truncated inner packets are parsed for their INT-MD stacks. Each INT-MD instance found is
one :class:`IntRecord`; damage is counted as for ITCH and never raised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator

from apps.int.headers import DEFAULT_INT_PORT, IntMd, decode_int_md, encode_int_md
from apps.int.report import (
    DEFAULT_REPORT_PORT,
    IN_TYPE_ETHERNET,
    IndividualReport,
    ReportGroupHeader,
    TelemetryReport,
    decode_report,
    encode_report,
)
from apps.pcap import LINKTYPE_ETHERNET, DamageCounter, PcapRange, PcapReader, PcapWriter
from apps.udp import UdpEndpoints, UdpFrame, build_udp_frame, parse_udp_frame


@dataclass(frozen=True)
class IntRecord:
    """One INT-MD stack found in a trace.

    ``report_index`` is the position of the individual report in its telemetry report packet
    (0 for a direct INT packet); ``group``/``report`` are set for reports. Addresses and ports
    are those of the packet that carries the INT header (the inner packet of a report).
    ``packet_len`` is the captured frame's length on the wire.
    """

    packet_index: int
    report_index: int
    timestamp_ns: int
    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int
    md: IntMd
    payload: bytes
    packet_len: int
    group: ReportGroupHeader | None = None
    report: IndividualReport | None = None


def build_int_frame(md: IntMd, payload: bytes, endpoints: UdpEndpoints, ident: int = 0, udp_checksum: bool = True) -> bytes:
    """An Ethernet/IPv4/UDP frame to the INT port carrying shim + MD + stack + original payload.

    With NPT=1 the shim keeps the original UDP destination port (``md.shim_value``).
    """
    return build_udp_frame(encode_int_md(md) + payload, endpoints, ident, udp_checksum)


def build_report_frame(report: TelemetryReport, endpoints: UdpEndpoints, ident: int = 0, udp_checksum: bool = True) -> bytes:
    return build_udp_frame(encode_report(report), endpoints, ident, udp_checksum)


def decode_int_payload(
    payload: memoryview | bytes, damage: DamageCounter, skipped: DamageCounter | None = None
) -> tuple[IntMd, bytes] | None:
    out = decode_int_md(payload, 0, len(payload), damage, skipped)
    if out is None:
        return None
    md, end = out
    return md, bytes(payload[end:])


class IntTraceReader:
    """Iterate :class:`IntRecord` of a pcap/pcapng trace; ``damage`` and ``skipped`` as for ITCH."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        int_ports: Iterable[int] = (DEFAULT_INT_PORT,),
        report_ports: Iterable[int] = (DEFAULT_REPORT_PORT,),
        verify_udp: bool = True,
        byte_range: PcapRange | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.int_ports = frozenset(int_ports)
        self.report_ports = frozenset(report_ports)
        self.verify_udp = verify_udp
        self.byte_range = byte_range
        self.damage = DamageCounter()
        self.skipped = DamageCounter()

    def _frame(self, frame: bytes, truncated: bool) -> UdpFrame | None:
        parsed = parse_udp_frame(frame, verify_udp=self.verify_udp, truncated=truncated)
        if isinstance(parsed, str):
            if parsed.startswith("damaged:"):
                self.damage.add(parsed[8:])
            else:
                self.skipped.add(parsed)
            return None
        return parsed

    def __iter__(self) -> Iterator[IntRecord]:
        with PcapReader(self.path, byte_range=self.byte_range, damage=self.damage) as reader:
            index = self.byte_range.first_index if self.byte_range else 0
            for rec in reader:
                i = index
                index += 1
                if rec.linktype != LINKTYPE_ETHERNET:
                    self.skipped.add("linktype")
                    continue
                udp = self._frame(rec.data, truncated=False)
                if udp is None:
                    continue
                payload = memoryview(rec.data)[udp.payload_offset : udp.payload_offset + udp.payload_len]
                if udp.dst_port in self.int_ports:
                    out = decode_int_payload(payload, self.damage, self.skipped)
                    if out is not None:
                        yield IntRecord(i, 0, rec.timestamp_ns, udp.src_ip, udp.dst_ip, udp.src_port, udp.dst_port,
                                        out[0], out[1], rec.orig_len)
                elif udp.dst_port in self.report_ports:
                    yield from self._reports(payload, i, rec.timestamp_ns, rec.orig_len)
                else:
                    self.skipped.add("other_port")

    def _reports(self, payload: memoryview, index: int, ts: int, packet_len: int) -> Iterator[IntRecord]:
        decoded = decode_report(payload, self.damage)
        if decoded is None:
            return
        report, inners = decoded
        for k, (r, (at, length)) in enumerate(zip(report.reports, inners)):
            if r.in_type != IN_TYPE_ETHERNET:
                self.skipped.add("report_inner_type")
                continue
            inner = bytes(payload[at : at + length])
            udp = self._frame(inner, truncated=True)
            if udp is None:
                continue
            if udp.dst_port not in self.int_ports:
                self.skipped.add("report_without_int")
                continue
            out = decode_int_payload(memoryview(inner)[udp.payload_offset : udp.payload_offset + udp.payload_len], self.damage, self.skipped)
            if out is not None:
                yield IntRecord(index, k, ts, udp.src_ip, udp.dst_ip, udp.src_port, udp.dst_port,
                                out[0], out[1], packet_len, report.group, r)


def read_int_records(path: str | os.PathLike[str], **options: object) -> tuple[list[IntRecord], DamageCounter]:
    reader = IntTraceReader(path, **options)  # type: ignore[arg-type]
    return list(reader), reader.damage


class IntTraceWriter:
    """Write INT-MD packets and telemetry reports into one pcap (IPv4 ids increase per frame)."""

    def __init__(self, path: str | os.PathLike[str], udp_checksum: bool = True) -> None:
        self._pcap = PcapWriter(path)
        self._ident = 0
        self.udp_checksum = udp_checksum

    @property
    def packets_written(self) -> int:
        return self._pcap.records_written

    def write_frame(self, frame: bytes, timestamp_ns: int) -> None:
        self._pcap.write(frame, timestamp_ns)

    def write_int(self, md: IntMd, payload: bytes, endpoints: UdpEndpoints, timestamp_ns: int) -> bytes:
        frame = build_int_frame(md, payload, endpoints, self._ident, self.udp_checksum)
        self._ident = (self._ident + 1) & 0xFFFF
        self._pcap.write(frame, timestamp_ns)
        return frame

    def write_report(self, report: TelemetryReport, endpoints: UdpEndpoints, timestamp_ns: int) -> bytes:
        frame = build_report_frame(report, endpoints, self._ident, self.udp_checksum)
        self._ident = (self._ident + 1) & 0xFFFF
        self._pcap.write(frame, timestamp_ns)
        return frame

    def close(self) -> None:
        self._pcap.close()

    def __enter__(self) -> "IntTraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
