"""Telemetry Report v2.0 (P4.org, 2020-10-08): what an INT collector receives over UDP.

UDP payload (destination port chosen by the deployment; p4sub defaults to 32766)::

    group header (8):  Ver=2(4) hw_id(6) SequenceNumber(22) | NodeID(32)
    then one or more individual reports:
      RepType(4) InType(4) ReportLength(8) MDLength(8) D Q F I Rsvd(4)
      RepType 1 (INT) main contents: RepMdBits(16) DomainSpecificID(16) DSMdBits(16) DSMdStatus(16)
                                     metadata selected by RepMdBits, then DS metadata (MDLength words)
      inner contents: a truncated packet (InType 3 Ethernet, 4 IPv4, 5 IPv6), TLVs (1) or DS data (2)

``ReportLength`` counts 4-byte words after the first word of the individual report; 0xFF means
"to the end of the UDP payload" (and that no report follows). Inner contents are zero-padded
to whole words when encoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from apps.int.metadata import REPORT_LAYOUT, HopMetadata, decode_metadata, encode_metadata, metadata_length
from apps.pcap import DamageCounter

DEFAULT_REPORT_PORT = 32766
REP_TYPE_INNER_ONLY, REP_TYPE_INT, REP_TYPE_IOAM = 0, 1, 2
IN_TYPE_NONE, IN_TYPE_TLV, IN_TYPE_DS, IN_TYPE_ETHERNET, IN_TYPE_IPV4, IN_TYPE_IPV6 = 0, 1, 2, 3, 4, 5
REPORT_LENGTH_TO_END = 0xFF
GROUP_HEADER_SIZE = 8

_GROUP = struct.Struct("!II")
_MAIN = struct.Struct("!HHHH")


@dataclass(frozen=True)
class ReportGroupHeader:
    node_id: int
    sequence: int
    hw_id: int = 0
    version: int = 2


@dataclass(frozen=True)
class IndividualReport:
    """One report. For RepType 1 (INT), ``metadata`` holds what ``rep_md_bits`` selects."""

    inner: bytes
    rep_type: int = REP_TYPE_INT
    in_type: int = IN_TYPE_ETHERNET
    dropped: bool = False
    congested_queue: bool = False
    tracked_flow: bool = False
    intermediate: bool = False
    rep_md_bits: int = 0
    domain_specific_id: int = 0
    ds_md_bits: int = 0
    ds_md_status: int = 0
    metadata: HopMetadata = field(default_factory=HopMetadata)
    report_length_to_end: bool = False


@dataclass(frozen=True)
class TelemetryReport:
    group: ReportGroupHeader
    reports: tuple[IndividualReport, ...]


def encode_report(report: TelemetryReport) -> bytes:
    g = report.group
    out = [_GROUP.pack((g.version & 0xF) << 28 | (g.hw_id & 0x3F) << 22 | (g.sequence & 0x3FFFFF), g.node_id)]
    for i, r in enumerate(report.reports):
        main = b""
        md_words = 0
        if r.rep_type == REP_TYPE_INT:
            md = encode_metadata(r.metadata, r.rep_md_bits, REPORT_LAYOUT)
            if len(md) % 4:
                raise ValueError("report metadata must be whole 4-byte words")
            md_words = len(md) // 4
            main = _MAIN.pack(r.rep_md_bits, r.domain_specific_id, r.ds_md_bits, r.ds_md_status) + md
        inner = r.inner + b"\x00" * (-len(r.inner) % 4)
        words = (len(main) + len(inner)) // 4
        if r.report_length_to_end or words >= REPORT_LENGTH_TO_END:
            if i != len(report.reports) - 1:
                raise ValueError("only the last report may extend to the end of the payload")
            words = REPORT_LENGTH_TO_END
        flags = int(r.dropped) << 3 | int(r.congested_queue) << 2 | int(r.tracked_flow) << 1 | int(r.intermediate)
        out.append(bytes(((r.rep_type & 0xF) << 4 | (r.in_type & 0xF), words, md_words, flags << 4)))
        out.append(main)
        out.append(inner)
    return b"".join(out)


def walk_reports(data: bytes | memoryview, damage: DamageCounter) -> tuple[int, int, list[tuple[int, int, int, int, int]]] | None:
    """Check a report payload's framing and find its individual reports without decoding them.

    Returns ``(group word 0, node id, [(position, rep_type, in_type, inner offset, end), ...])``;
    the damage rules of :func:`decode_report` live here, once.
    """
    n = len(data)
    if n < GROUP_HEADER_SIZE:
        damage.add("report_short")
        return None
    w0, node = _GROUP.unpack_from(data, 0)
    if w0 >> 28 != 2:
        damage.add("report_version")
        return None
    found: list[tuple[int, int, int, int, int]] = []
    pos = GROUP_HEADER_SIZE
    while pos < n:
        if pos + 4 > n:
            damage.add("report_truncated")
            break
        b0, words, md_words = data[pos], data[pos + 1], data[pos + 2]
        rep_type, in_type = b0 >> 4, b0 & 0xF
        end = n if words == REPORT_LENGTH_TO_END else pos + 4 + 4 * words
        if end > n:
            damage.add("report_truncated")
            break
        inner_at = pos + 4
        if rep_type == REP_TYPE_INT:
            inner_at = pos + 12 + 4 * md_words
            if inner_at > end or metadata_length(int.from_bytes(data[pos + 4 : pos + 6], "big"), REPORT_LAYOUT) > 4 * md_words:
                damage.add("report_md_length")
                pos = end
                continue
        found.append((pos, rep_type, in_type, inner_at, end))
        pos = end
    return w0, node, found


def decode_report(data: bytes | memoryview, damage: DamageCounter) -> tuple[TelemetryReport, list[tuple[int, int]]] | None:
    """Decode a report payload. Also returns ``(offset, length)`` of each report's inner contents
    in ``data``, so that readers can parse the embedded packet in place."""
    walked = walk_reports(data, damage)
    if walked is None:
        return None
    w0, node, found = walked
    group = ReportGroupHeader(node, w0 & 0x3FFFFF, (w0 >> 22) & 0x3F, w0 >> 28)
    reports: list[IndividualReport] = []
    inners: list[tuple[int, int]] = []
    for pos, rep_type, in_type, inner_at, end in found:
        words, md_words, flags = data[pos + 1], data[pos + 2], data[pos + 3] >> 4
        main_fields = (0, 0, 0, 0)
        meta = HopMetadata()
        if rep_type == REP_TYPE_INT:
            main_fields = _MAIN.unpack_from(data, pos + 4)
            meta = decode_metadata(data, pos + 12, main_fields[0], 4 * md_words, REPORT_LAYOUT)
        reports.append(IndividualReport(
            bytes(data[inner_at:end]), rep_type, in_type, bool(flags & 8), bool(flags & 4), bool(flags & 2),
            bool(flags & 1), main_fields[0], main_fields[1], main_fields[2], main_fields[3], meta,
            words == REPORT_LENGTH_TO_END,
        ))
        inners.append((inner_at, end - inner_at))
    return TelemetryReport(group, tuple(reports)), inners
