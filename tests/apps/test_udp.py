"""Ethernet/IPv4/UDP framing: our frames against scapy's dissection and checksums, and the
vectorised frame checks against the per-frame ones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.pcap import DamageCounter, PcapReader, write_pcap
from apps.udp import UdpEndpoints, UdpFrame, build_udp_frame, ones_complement_sum, parse_udp_frame
from apps.udp_batch import decode_udp_frames

scapy = pytest.importorskip("scapy.all", reason="scapy is a test dependency")

ips = st.tuples(*[st.integers(0, 255)] * 4).map(bytes)
ports = st.integers(0, 0xFFFF)
endpoints = st.builds(UdpEndpoints, src_ip=ips, dst_ip=ips, src_port=ports, dst_port=ports, ttl=st.integers(1, 255))


def naive_sum(data: bytes) -> int:
    """Textbook RFC 1071: add 16-bit words, fold carries."""
    if len(data) % 2:
        data += b"\x00"
    s = 0
    for (w,) in struct.iter_unpack("!H", data):
        s += w
        s = (s & 0xFFFF) + (s >> 16)
    return s


@given(st.binary(max_size=200))
def test_ones_complement_sum_equals_textbook_algorithm(data: bytes) -> None:
    assert ones_complement_sum(data) == naive_sum(data)


@given(ep=endpoints, payload=st.binary(max_size=300), ident=st.integers(0, 0xFFFF))
@settings(max_examples=100)
def test_built_frame_dissects_in_scapy_with_checksums_scapy_agrees_with(ep: UdpEndpoints, payload: bytes, ident: int) -> None:
    frame = build_udp_frame(payload, ep, ident)
    pkt = scapy.Ether(frame)
    ip, udp = pkt[scapy.IP], pkt[scapy.UDP]
    assert (ip.src, ip.dst, ip.len, ip.id, ip.ttl, ip.proto) == (
        ".".join(map(str, ep.src_ip)), ".".join(map(str, ep.dst_ip)), 28 + len(payload), ident, ep.ttl, 17,
    )
    assert (udp.sport, udp.dport, udp.len, bytes(udp.payload)) == (ep.src_port, ep.dst_port, 8 + len(payload), payload)
    rebuilt = pkt.copy()
    del rebuilt[scapy.IP].chksum
    del rebuilt[scapy.UDP].chksum
    assert bytes(rebuilt) == frame  # scapy computes the same IPv4 and UDP checksums
    parsed = parse_udp_frame(frame)
    assert isinstance(parsed, UdpFrame)
    assert frame[parsed.payload_offset : parsed.payload_offset + parsed.payload_len] == payload


def _scapy_frames() -> dict[str, bytes]:
    S = scapy
    udp = S.UDP(sport=1, dport=1234) / b"hello world"
    return {
        "plain": bytes(S.Ether() / S.IP(dst="1.2.3.4") / udp),
        "vlan": bytes(S.Ether() / S.Dot1Q(vlan=7) / S.IP() / udp),
        "options": bytes(S.Ether() / S.IP(options=[S.IPOption_RR()]) / udp),
        "padded": bytes(S.Ether() / S.IP() / S.UDP(dport=5) / b"x") + b"\x00" * 10,
        "zero_udp_checksum": bytes(S.Ether() / S.IP() / S.UDP(dport=5, chksum=0) / b"abc"),
        "fragment": bytes(S.Ether() / S.IP(flags="MF") / udp),
        "tcp": bytes(S.Ether() / S.IP() / S.TCP()),
        "arp": bytes(S.Ether() / S.ARP()),
        "ipv6": bytes(S.Ether() / S.IPv6() / udp),
    }


def test_frame_kinds_are_classified_like_scapy_dissects_them() -> None:
    f = _scapy_frames()
    for name in ("plain", "vlan", "options", "padded", "zero_udp_checksum"):
        parsed = parse_udp_frame(f[name])
        assert isinstance(parsed, UdpFrame), name
        udp = scapy.Ether(f[name])[scapy.UDP]
        assert parsed.dst_port == udp.dport
        assert f[name][parsed.payload_offset : parsed.payload_offset + parsed.payload_len] == bytes(udp.payload)[: udp.len - 8]
    assert parse_udp_frame(f["fragment"]) == "fragment"
    assert parse_udp_frame(f["tcp"]) == "not_udp"
    assert parse_udp_frame(f["arp"]) == "not_ipv4"
    assert parse_udp_frame(f["ipv6"]) == "not_ipv4"


def test_damaged_frames_are_named() -> None:
    good = _scapy_frames()["plain"]
    assert parse_udp_frame(good[:10]) == "damaged:short_frame"
    assert parse_udp_frame(good[:30]) == "damaged:short_frame"
    bad = bytearray(good)
    bad[14 + 8] ^= 1  # TTL: header checksum no longer holds
    assert parse_udp_frame(bytes(bad)) == "damaged:ipv4_checksum"
    bad = bytearray(good)
    bad[-1] ^= 0x40  # payload: UDP checksum no longer holds
    assert parse_udp_frame(bytes(bad)) == "damaged:udp_checksum"
    assert isinstance(parse_udp_frame(bytes(bad), verify_udp=False), UdpFrame)
    assert parse_udp_frame(good[:-3]) == "damaged:ipv4_length"
    cut = parse_udp_frame(good[:-3], truncated=True)  # a report's truncated inner packet
    assert isinstance(cut, UdpFrame) and cut.payload_len == len(b"hello world") - 3


# --- vectorised checks agree with per-frame ones -----------------------------------------------
def mutate(frame: bytes, how: int, where: int, bit: int) -> bytes:
    if how == 0:
        return frame
    if how == 1:
        return frame[: where % (len(frame) + 1)]
    b = bytearray(frame)
    b[where % len(b)] ^= 1 << bit
    return bytes(b)


frame_lists = st.lists(
    st.tuples(
        st.sampled_from(sorted(_scapy_frames())) | st.binary(min_size=0, max_size=120).map(lambda p: "payload:" + p.hex()),
        st.sampled_from([0, 0, 1, 2]),
        st.integers(0, 400),
        st.integers(0, 7),
    ),
    min_size=1,
    max_size=30,
)


@given(specs=frame_lists, verify=st.booleans(), truncated=st.booleans())
@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_vectorised_frame_checks_match_per_frame_checks(tmp_path: Path, specs: list, verify: bool, truncated: bool) -> None:
    kinds = _scapy_frames()
    frames = []
    for kind, how, where, bit in specs:
        base = kinds[kind] if not kind.startswith("payload:") else build_udp_frame(bytes.fromhex(kind[8:]), UdpEndpoints())
        frames.append(mutate(base, how, where, bit))
    path = tmp_path / "v.pcap"
    write_pcap(path, [(i, f) for i, f in enumerate(frames)])
    expected_damage, expected = DamageCounter(), []
    for i, f in enumerate(frames):
        v = parse_udp_frame(f, verify_udp=verify, truncated=truncated)
        if isinstance(v, UdpFrame):
            expected.append((i, v.payload_offset, v.payload_len, v.dst_port, v.dst_ip))
        elif v.startswith("damaged:"):
            expected_damage.add(v[8:])
    damage = DamageCounter()
    with PcapReader(path) as reader:
        (chunk,) = list(reader.chunks())
    out = decode_udp_frames(chunk, damage, verify_udp=verify, truncated=truncated)
    got = [
        (int(r), int(p - chunk.data_offsets[r]), int(n), int(port), int(ip))
        for r, p, n, port, ip in zip(out["record"], out["payload"], out["payload_len"], out["dst_port"], out["dst_addr"])
    ]
    assert got == expected
    assert damage.counts == expected_damage.counts
