"""Ethernet / IPv4 / UDP framing shared by the ITCH and INT trace codecs.

Both applications carry their payload in UDP over IPv4 over Ethernet, and both readers must
tell a good frame from a damaged one the same way, so the rules live here once:

* Ethernet II, optionally one 802.1Q tag; EtherType 0x0800.
* IPv4 version 4, IHL >= 5, a correct header checksum, total length that fits the capture
  (Ethernet padding after it is ignored), not a fragment.
* UDP length between 8 and what the IPv4 payload holds. The UDP checksum is checked when it is
  not 0 (0 means "not computed" in IPv4) and ``verify_udp`` is set.

Writers compute both the IPv4 header checksum and the UDP checksum (never 0; a computed 0 is
sent as 0xFFFF, RFC 768).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_VLAN = 0x8100
IPPROTO_UDP = 17
ETH_HEADER = 14
IPV4_HEADER = 20
UDP_HEADER = 8

_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def ones_complement_sum(data: bytes) -> int:
    """16-bit one's complement sum of ``data`` (odd length padded with a zero byte).

    Uses the identity sum ≡ value mod 0xFFFF for the big-endian integer of the bytes, which is
    far faster in CPython than summing words; 0xFFFF (negative zero) is returned for a nonzero
    multiple of 0xFFFF.
    """
    if len(data) % 2:
        data += b"\x00"
    value = int.from_bytes(data, "big")
    if value == 0:
        return 0
    s = value % 0xFFFF
    return s if s else 0xFFFF


def ipv4_checksum(header: bytes) -> int:
    """The checksum to put in an IPv4 header whose checksum field is zero."""
    return ~ones_complement_sum(header) & 0xFFFF


def udp_checksum(src: bytes, dst: bytes, udp_segment: bytes) -> int:
    """UDP checksum over the IPv4 pseudo-header and the segment (checksum field zero)."""
    pseudo = src + dst + struct.pack("!BBH", 0, IPPROTO_UDP, len(udp_segment))
    c = ~ones_complement_sum(pseudo + udp_segment) & 0xFFFF
    return c or 0xFFFF


def mac_bytes(mac: str | bytes) -> bytes:
    if isinstance(mac, bytes):
        return mac
    return bytes(int(x, 16) for x in mac.replace("-", ":").split(":"))


def ipv4_bytes(addr: str | int | bytes) -> bytes:
    if isinstance(addr, bytes):
        return addr
    return ipaddress.IPv4Address(addr).packed


def multicast_mac(ip: bytes) -> bytes:
    """The Ethernet address of an IPv4 multicast group (01:00:5e + low 23 bits)."""
    return bytes((0x01, 0x00, 0x5E, ip[1] & 0x7F, ip[2], ip[3]))


@dataclass(frozen=True)
class UdpEndpoints:
    """Addresses and ports of a UDP flow; a multicast destination gets its group MAC by default."""

    src_mac: bytes = bytes.fromhex("020000000001")
    dst_mac: bytes | None = None
    src_ip: bytes = bytes((10, 0, 0, 1))
    dst_ip: bytes = bytes((10, 0, 0, 2))
    src_port: int = 50000
    dst_port: int = 1234
    ttl: int = 64

    @property
    def resolved_dst_mac(self) -> bytes:
        if self.dst_mac is not None:
            return self.dst_mac
        if 224 <= self.dst_ip[0] <= 239:
            return multicast_mac(self.dst_ip)
        return bytes.fromhex("020000000002")


def build_udp_frame(payload: bytes, ep: UdpEndpoints, ident: int = 0, udp_checksum_on: bool = True) -> bytes:
    """An Ethernet II / IPv4 / UDP frame around ``payload`` with correct lengths and checksums."""
    udp_len = UDP_HEADER + len(payload)
    total = IPV4_HEADER + udp_len
    ip = bytearray(_IPV4.pack(0x45, 0, total, ident & 0xFFFF, 0x4000, ep.ttl, IPPROTO_UDP, 0, ep.src_ip, ep.dst_ip))
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    udp = _UDP.pack(ep.src_port, ep.dst_port, udp_len, 0) + payload
    if udp_checksum_on:
        csum = udp_checksum(ep.src_ip, ep.dst_ip, udp)
        udp = udp[:6] + csum.to_bytes(2, "big") + udp[8:]
    return _ETH.pack(ep.resolved_dst_mac, ep.src_mac, ETHERTYPE_IPV4) + bytes(ip) + udp


@dataclass(frozen=True)
class UdpFrame:
    """A parsed frame: where the UDP payload is and the header fields replay needs."""

    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int
    payload_offset: int
    payload_len: int
    ip_offset: int


def parse_udp_frame(frame: bytes, verify_udp: bool = True, truncated: bool = False) -> UdpFrame | str:
    """Parse an Ethernet/IPv4/UDP frame; return a :class:`UdpFrame` or the reason it is not one.

    Reasons starting with ``"damaged:"`` mean a broken frame; the others (``"not_ipv4"``,
    ``"not_udp"``, ``"fragment"``) mean a frame of another kind, which readers skip silently.
    ``truncated`` accepts a frame cut short of its IPv4 total length (the truncated packets
    inside telemetry reports); its UDP checksum cannot be checked and its payload is what is left.
    """
    n = len(frame)
    if n < ETH_HEADER:
        return "damaged:short_frame"
    ethertype = int.from_bytes(frame[12:14], "big")
    ip = ETH_HEADER
    if ethertype == ETHERTYPE_VLAN:
        if n < ETH_HEADER + 4:
            return "damaged:short_frame"
        ethertype = int.from_bytes(frame[16:18], "big")
        ip += 4
    if ethertype != ETHERTYPE_IPV4:
        return "not_ipv4"
    if n < ip + IPV4_HEADER:
        return "damaged:short_frame"
    vihl = frame[ip]
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or ihl < IPV4_HEADER:
        return "damaged:ipv4_header"
    if n < ip + ihl:
        return "damaged:short_frame"
    if ones_complement_sum(frame[ip : ip + ihl]) != 0xFFFF:
        return "damaged:ipv4_checksum"
    total = int.from_bytes(frame[ip + 2 : ip + 4], "big")
    cut = ip + total > n
    if total < ihl or (cut and not truncated):
        return "damaged:ipv4_length"
    if int.from_bytes(frame[ip + 6 : ip + 8], "big") & 0x3FFF:
        return "fragment"
    if frame[ip + 9] != IPPROTO_UDP:
        return "not_udp"
    udp = ip + ihl
    if total - ihl < UDP_HEADER:
        return "damaged:udp_length"
    if n < udp + UDP_HEADER:
        return "damaged:short_frame"
    sport, dport, ulen, csum = _UDP.unpack_from(frame, udp)
    if ulen < UDP_HEADER or ulen > total - ihl:
        return "damaged:udp_length"
    if verify_udp and csum and not cut:
        src, dst = frame[ip + 12 : ip + 16], frame[ip + 16 : ip + 20]
        pseudo = src + dst + struct.pack("!BBH", 0, IPPROTO_UDP, ulen)
        if ones_complement_sum(pseudo + frame[udp : udp + ulen]) != 0xFFFF:
            return "damaged:udp_checksum"
    return UdpFrame(
        int.from_bytes(frame[ip + 12 : ip + 16], "big"),
        int.from_bytes(frame[ip + 16 : ip + 20], "big"),
        sport,
        dport,
        udp + UDP_HEADER,
        min(ulen, n - udp) - UDP_HEADER,
        ip,
    )
