"""Declarative scapy layers for INT v2.1 and Telemetry Report v2.0, written from the spec text.

They are the tests' oracle: bit fields declared as scapy fields share no code with the shift
arithmetic in :mod:`apps.int`.
"""

from __future__ import annotations

import pytest

scapy = pytest.importorskip("scapy.all", reason="scapy is a test dependency")
from scapy.fields import BitField, ByteField, IntField, LongField, ShortField, X3BytesField  # noqa: E402
from scapy.packet import Packet  # noqa: E402


class IntShimUdp(Packet):
    name = "INT shim (TCP/UDP)"
    fields_desc = [BitField("type", 1, 4), BitField("npt", 1, 2), BitField("reserved", 0, 2), ByteField("length", 0), ShortField("value", 0)]


class IntMdHeader(Packet):
    name = "INT-MD metadata header"
    fields_desc = [
        BitField("version", 2, 4), BitField("d", 0, 1), BitField("e", 0, 1), BitField("m", 0, 1),
        BitField("reserved", 0, 12), BitField("hop_ml", 0, 5), ByteField("remaining_hop_count", 0),
        ShortField("instruction_bitmap", 0), ShortField("domain_specific_id", 0),
        ShortField("ds_instruction", 0), ShortField("ds_flags", 0),
    ]


class P4subHop(Packet):
    """One hop of the p4sub instruction set (bits 0-3): 16 bytes."""

    name = "INT hop (node id, L1 ports, hop latency, queue)"
    fields_desc = [
        IntField("switch_id", 0), ShortField("ingress_port_id", 0), ShortField("egress_port_id", 0),
        IntField("hop_latency", 0), ByteField("queue_id", 0), X3BytesField("queue_occupancy", 0),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class TimestampsHop(Packet):
    """Bits 0, 4, 5: node id, ingress and egress timestamps (20 bytes)."""

    fields_desc = [IntField("switch_id", 0), LongField("ingress_timestamp", 0), LongField("egress_timestamp", 0)]


class ReportGroup(Packet):
    name = "Telemetry Report Group Header v2.0"
    fields_desc = [BitField("version", 2, 4), BitField("hw_id", 0, 6), BitField("sequence", 0, 22), IntField("node_id", 0)]


class IndividualReportHeader(Packet):
    name = "Individual Report Header v2.0"
    fields_desc = [
        BitField("rep_type", 1, 4), BitField("in_type", 3, 4), ByteField("report_length", 0), ByteField("md_length", 0),
        BitField("d", 0, 1), BitField("q", 0, 1), BitField("f", 0, 1), BitField("i", 0, 1), BitField("reserved", 0, 4),
        ShortField("rep_md_bits", 0), ShortField("domain_specific_id", 0), ShortField("ds_md_bits", 0), ShortField("ds_md_status", 0),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s
