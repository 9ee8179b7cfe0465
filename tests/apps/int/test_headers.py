"""INT v2.1 shim / INT-MD header / hop stack and Telemetry Report v2.0: round trips, a
declarative scapy oracle, and damage."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.int.headers import IntMd, IntMdHeader, decode_int_md, encode_int_md, new_header
from apps.int.metadata import (
    FIELD_NAMES,
    INT_MD_LAYOUT,
    P4SUB_INSTRUCTIONS,
    REPORT_LAYOUT,
    HopMetadata,
    bit_mask,
    metadata_length,
    selected_fields,
)
from apps.int.report import (
    IndividualReport,
    ReportGroupHeader,
    TelemetryReport,
    decode_report,
    encode_report,
)
from apps.pcap import DamageCounter
from tests.apps.int.scapy_layers import (
    IndividualReportHeader,
    IntMdHeader as ScapyMd,
    IntShimUdp,
    P4subHop,
    ReportGroup,
    TimestampsHop,
)

# Per-bit sizes as the INT v2.1 spec lists them (bit 0 = MSB), independent of the codec's table.
SPEC_ITEM_BYTES = {0: 4, 1: 4, 2: 4, 3: 4, 4: 8, 5: 8, 6: 8, 7: 4, 8: 4, 15: 4}
WIDTHS = {
    "switch_id": 32, "ingress_port_id": 16, "egress_port_id": 16, "hop_latency": 32, "queue_id": 8,
    "queue_occupancy": 24, "ingress_timestamp": 64, "egress_timestamp": 64, "l2_ingress_port_id": 32,
    "l2_egress_port_id": 32, "egress_tx_util": 32, "buffer_id": 8, "buffer_occupancy": 24,
    "checksum_complement": 32, "drop_queue_id": 8, "drop_reason": 8, "drop_padding": 16,
}

bitmaps = st.integers(0, 0xFFFF).map(lambda b: b & ~0x007E)  # reserved bits 9-14 carry no fields


def hop_for(bitmap: int, layout=INT_MD_LAYOUT) -> st.SearchStrategy[HopMetadata]:  # type: ignore[no-untyped-def]
    names = selected_fields(bitmap, layout)
    return st.builds(HopMetadata, **{n: st.integers(0, (1 << WIDTHS[n]) - 1) for n in names})


def test_metadata_sizes_follow_the_spec() -> None:
    for bit, size in SPEC_ITEM_BYTES.items():
        assert metadata_length(bit_mask(bit)) == size
    assert metadata_length(P4SUB_INSTRUCTIONS) == 16
    assert selected_fields(P4SUB_INSTRUCTIONS) == (
        "switch_id", "ingress_port_id", "egress_port_id", "hop_latency", "queue_id", "queue_occupancy",
    )
    assert set(FIELD_NAMES) == set(WIDTHS)


@st.composite
def int_mds(draw: st.DrawFn) -> IntMd:
    bitmap = draw(bitmaps)
    ds_words = draw(st.integers(0, 2))
    ml = metadata_length(bitmap) // 4 + ds_words
    hops = []
    if ml:
        for _ in range(draw(st.integers(0, 8))):
            hop = draw(hop_for(bitmap))
            ds = draw(st.binary(min_size=4 * ds_words, max_size=4 * ds_words))
            hops.append(dataclasses.replace(hop, domain_specific=ds))
    header = IntMdHeader(
        bitmap, ml, draw(st.integers(0, 255)), draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
        draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFFFF)),
    )
    source_words = draw(st.integers(0, ml - 1)) if ml else 0
    source_only = draw(st.binary(min_size=4 * source_words, max_size=4 * source_words))
    return IntMd(header, tuple(hops), draw(st.integers(0, 2)), draw(st.integers(0, 0xFFFF)), source_only)


@given(int_mds(), st.binary(max_size=20))
@settings(max_examples=200)
def test_decode_of_encode_is_identity(md: IntMd, payload: bytes) -> None:
    raw = encode_int_md(md) + payload
    damage = DamageCounter()
    out = decode_int_md(raw, 0, len(raw), damage)
    assert damage.total == 0 and out is not None
    assert out[0] == md and raw[out[1] :] == payload
    assert raw[1] * 4 == 12 + md.header.hop_ml * 4 * len(md.hops) + len(md.source_only)  # shim length excludes the shim


p4sub_hops = st.lists(hop_for(P4SUB_INSTRUCTIONS), min_size=0, max_size=8)


@given(p4sub_hops, st.integers(0, 0xFFFF))
@settings(max_examples=100)
def test_scapy_oracle_reads_our_p4sub_stack(hops: list[HopMetadata], port: int) -> None:
    md = IntMd(new_header(P4SUB_INSTRUCTIONS, len(hops)), tuple(hops), shim_value=port)
    raw = encode_int_md(md)
    shim = IntShimUdp(raw[:4])
    assert (shim.type, shim.npt, shim.length, shim.value) == (1, 1, 3 + 4 * len(hops), port)
    hdr = ScapyMd(raw[4:16])
    assert (hdr.version, hdr.hop_ml, hdr.remaining_hop_count, hdr.instruction_bitmap) == (2, 4, 8 - len(hops), 0xF000)
    for i, hop in enumerate(hops):
        s = P4subHop(raw[16 + 16 * i : 32 + 16 * i])
        assert (s.switch_id, s.ingress_port_id, s.egress_port_id, s.hop_latency, s.queue_id, s.queue_occupancy) == (
            hop.switch_id, hop.ingress_port_id, hop.egress_port_id, hop.hop_latency, hop.queue_id, hop.queue_occupancy,
        )


def test_we_read_a_stack_scapy_builds() -> None:
    raw = bytes(
        IntShimUdp(type=1, npt=1, length=3 + 2 * 5, value=443)
        / ScapyMd(version=2, d=1, hop_ml=5, remaining_hop_count=6, instruction_bitmap=0x8C00, domain_specific_id=7)
        / TimestampsHop(switch_id=9, ingress_timestamp=1 << 40, egress_timestamp=(1 << 40) + 900)
        / TimestampsHop(switch_id=3, ingress_timestamp=5, egress_timestamp=6)
    )
    damage = DamageCounter()
    out = decode_int_md(raw, 0, len(raw), damage)
    assert out is not None and damage.total == 0
    md = out[0]
    assert md.shim_value == 443 and md.header.discard and md.header.domain_specific_id == 7
    assert md.header.remaining_hop_count == 6
    assert [(h.switch_id, h.ingress_timestamp, h.egress_timestamp, h.hop_latency) for h in md.hops] == [
        (9, 1 << 40, (1 << 40) + 900, None), (3, 5, 6, None),
    ]


def test_reserved_bits_are_skipped_and_written_as_all_ones() -> None:
    bitmap = 0x8000 | bit_mask(10)  # node id + a reserved 4-byte item
    md = IntMd(IntMdHeader(bitmap, 2, 5), (HopMetadata(switch_id=4),))
    raw = encode_int_md(md)
    assert raw[-4:] == b"\xff" * 4
    out = decode_int_md(raw, 0, len(raw), DamageCounter())
    assert out is not None and out[0] == md


def test_damaged_stacks_are_counted_not_raised() -> None:
    hops = (HopMetadata(1, 2, 3, 4, 5, 6), HopMetadata(7, 8, 9, 10, 11, 12))
    good = encode_int_md(IntMd(new_header(P4SUB_INSTRUCTIONS, 2), hops))

    def reason(raw: bytes) -> dict:
        d = DamageCounter()
        assert decode_int_md(raw, 0, len(raw), d) is None
        return dict(d.counts)

    assert reason(good[:15]) == {"int_short": 1}
    assert reason(good[:-1]) == {"int_length": 1}  # stack runs past the packet
    assert reason(bytes([0x04]) + good[1:]) == {"int_type": 1}  # type 0 is not an INT type
    skipped = DamageCounter()
    mx = bytes([0x34]) + good[1:]  # INT-MX: well-formed, but no stack to read
    assert decode_int_md(mx, 0, len(mx), DamageCounter(), skipped) is None and skipped.counts == {"int_not_md": 1}
    assert reason(good[:1] + bytes([2]) + good[2:]) == {"int_length": 1}  # shorter than the MD header
    assert reason(good[:4] + bytes([0x10]) + good[5:]) == {"int_version": 1}
    small_ml = bytearray(good)
    small_ml[6] = (small_ml[6] & 0xE0) | 3  # Hop ML 3 words < the 4 the bitmap needs
    assert reason(bytes(small_ml)) == {"int_hop_ml": 1}


# --- Telemetry Report v2.0 ---------------------------------------------------------------------
@st.composite
def reports(draw: st.DrawFn) -> TelemetryReport:
    group = ReportGroupHeader(draw(st.integers(0, 0xFFFFFFFF)), draw(st.integers(0, 0x3FFFFF)), draw(st.integers(0, 63)))
    items = []
    n = draw(st.integers(1, 3))
    for i in range(n):
        bits = draw(st.integers(0, 0xFFFF)) & ~0x8000 & ~0x007E  # bit 0 and bits 9-14 are reserved
        meta = draw(hop_for(bits, REPORT_LAYOUT))
        inner_words = draw(st.integers(0, 8))
        items.append(IndividualReport(
            draw(st.binary(min_size=4 * inner_words, max_size=4 * inner_words)),
            rep_type=draw(st.sampled_from([0, 1])), in_type=draw(st.integers(0, 5)),
            dropped=draw(st.booleans()), congested_queue=draw(st.booleans()), tracked_flow=draw(st.booleans()),
            intermediate=draw(st.booleans()), rep_md_bits=bits, domain_specific_id=draw(st.integers(0, 0xFFFF)),
            ds_md_bits=0, ds_md_status=draw(st.integers(0, 0xFFFF)), metadata=meta,
            report_length_to_end=(i == n - 1) and draw(st.booleans()),
        ))
    fixed = []
    for r in items:
        if r.rep_type == 0:  # Inner Only: no main contents
            r = dataclasses.replace(r, rep_md_bits=0, domain_specific_id=0, ds_md_status=0, metadata=HopMetadata())
        fixed.append(r)
    return TelemetryReport(group, tuple(fixed))


@given(reports())
@settings(max_examples=150)
def test_report_decode_of_encode_is_identity(report: TelemetryReport) -> None:
    raw = encode_report(report)
    damage = DamageCounter()
    out = decode_report(raw, damage)
    assert out is not None and damage.total == 0
    assert out[0] == report
    assert [raw[a : a + n] for a, n in out[1]] == [r.inner for r in report.reports]


def test_scapy_oracle_reads_a_report() -> None:
    meta = HopMetadata(ingress_port_id=3, egress_port_id=4, hop_latency=777, queue_id=2, queue_occupancy=99)
    inner = bytes(range(20))
    report = TelemetryReport(
        ReportGroupHeader(node_id=42, sequence=0x2ABCDE, hw_id=5),
        (IndividualReport(inner, rep_md_bits=0x7000, metadata=meta, tracked_flow=True, congested_queue=True),),
    )
    raw = encode_report(report)
    g = ReportGroup(raw[:8])
    assert (g.version, g.hw_id, g.sequence, g.node_id) == (2, 5, 0x2ABCDE, 42)
    h = IndividualReportHeader(raw[8:20])
    assert (h.rep_type, h.in_type, h.md_length, h.d, h.q, h.f, h.i, h.rep_md_bits) == (1, 3, 3, 0, 1, 1, 0, 0x7000)
    assert h.report_length == (8 + 12 + 20) // 4
    assert raw[20:32] == (3 << 16 | 4).to_bytes(4, "big") + (777).to_bytes(4, "big") + bytes([2]) + (99).to_bytes(3, "big")
    assert raw[32:] == inner


def test_report_damage() -> None:
    report = TelemetryReport(ReportGroupHeader(1, 1), (IndividualReport(bytes(40)), IndividualReport(bytes(8))))
    raw = encode_report(report)

    def damage_of(data: bytes) -> dict:
        d = DamageCounter()
        decode_report(data, d)
        return dict(d.counts)

    assert damage_of(raw[:7]) == {"report_short": 1}
    assert damage_of(bytes([0x10]) + raw[1:]) == {"report_version": 1}
    assert damage_of(raw[:-3]) == {"report_truncated": 1}
    bad_md = bytearray(raw)
    bad_md[8 + 2] = 200  # MD length past the report
    assert damage_of(bytes(bad_md)) == {"report_md_length": 1}
