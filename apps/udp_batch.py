"""Vectorised Ethernet/IPv4/UDP parsing of pcap record chunks, shared by the columnar readers.

The rules are those of :func:`apps.udp.parse_udp_frame` (which checks one frame in plain
Python); here each check is one numpy operation over every frame of a chunk. The tests hold the
two to the same verdicts.
"""

from __future__ import annotations

import numpy as np

from apps.pcap import LINKTYPE_ETHERNET, DamageCounter, RecordChunk
from apps.udp import ETHERTYPE_IPV4, ETHERTYPE_VLAN, IPPROTO_UDP


def u16(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Big-endian 16-bit values at ``pos``; positions past the buffer read garbage, never raise
    (callers mask those rows out)."""
    pos = np.minimum(pos, len(arr) - 2)
    return (arr[pos].astype(np.int64) << 8) | arr[pos + 1]


def be_uint(arr: np.ndarray, pos: np.ndarray, width: int, dtype: type) -> np.ndarray:
    """Big-endian unsigned integers of ``width`` bytes at each position (width 1, 2, 4 or 8)."""
    if len(pos) == 0:
        return np.empty(0, dtype=dtype)
    if width == 1:
        return arr[pos].astype(dtype)
    idx = pos[:, None] + np.arange(width, dtype=np.int64)
    raw = np.ascontiguousarray(arr[idx])
    if width == 6:
        padded = np.zeros((len(pos), 8), dtype=np.uint8)
        padded[:, 2:] = raw
        raw = padded
        width = 8
    return raw.view(np.dtype(f">u{width}")).ravel().astype(dtype)


def gather_rows(arr: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each position as an (N, width) array: one copy per row through a
    sliding-window view, about twice as fast as fancy indexing with an (N, width) index."""
    if len(pos) == 0:
        return np.empty((0, width), dtype=np.uint8)
    return np.lib.stride_tricks.sliding_window_view(arr, width)[pos]


def row_uint(rows: np.ndarray, first: int, width: int, dtype: type) -> np.ndarray:
    """Big-endian unsigned integers in columns ``first:first+width`` of gathered rows."""
    if width == 1:
        return rows[:, first].astype(dtype)
    if width in (3, 6):
        pad = 4 if width == 3 else 8
        out = np.zeros((len(rows), pad), dtype=np.uint8)
        out[:, pad - width :] = rows[:, first : first + width]
        return out.view(np.dtype(f">u{pad}")).ravel().astype(dtype)
    return np.ascontiguousarray(rows[:, first : first + width]).view(np.dtype(f">u{width}")).ravel().astype(dtype)


class VecDamage:
    """Vectorised counting into a :class:`DamageCounter`."""

    def __init__(self, counter: DamageCounter) -> None:
        self.counter = counter

    def add(self, reason: str, mask: np.ndarray) -> None:
        self.counter.add(reason, int(np.count_nonzero(mask)))


def _ones_complement_ok(words_sum: np.ndarray) -> np.ndarray:
    s = words_sum
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def decode_udp_frames(
    chunk: RecordChunk,
    damage: DamageCounter,
    skipped: DamageCounter | None = None,
    ports: frozenset[int] | None = None,
    verify_udp: bool = True,
    truncated: bool = False,
) -> dict[str, np.ndarray]:
    """Vectorised Ethernet/IPv4/UDP parse of a chunk (the rules of :mod:`apps.udp`, including
    ``truncated`` for frames cut short of their IPv4 total length).

    Returns per good packet: ``record`` (index in chunk), ``payload`` and ``payload_len``
    (buffer offsets of the UDP payload), ``dst_addr``, ``dst_port``.
    """
    arr = np.frombuffer(chunk.buffer, dtype=np.uint8)
    off = np.asarray(chunk.data_offsets, dtype=np.int64)
    cap = np.asarray(chunk.caplens, dtype=np.int64)
    lt = np.asarray(chunk.linktypes, dtype=np.int64)
    dmg = VecDamage(damage)
    skip = VecDamage(skipped if skipped is not None else DamageCounter())
    rec = np.arange(len(off), dtype=np.int64)

    def keep(mask: np.ndarray) -> None:
        nonlocal rec, off, cap
        rec, off, cap = rec[mask], off[mask], cap[mask]

    is_eth = lt == LINKTYPE_ETHERNET
    skip.add("linktype", ~is_eth)
    keep(is_eth)
    short = cap < 14
    dmg.add("short_frame", short)
    keep(~short)
    ethertype = u16(arr, off + 12)
    vlan = ethertype == ETHERTYPE_VLAN
    short = vlan & (cap < 18)
    dmg.add("short_frame", short)
    keep(~short)
    ethertype, vlan = ethertype[~short], vlan[~short]
    ip_rel = np.where(vlan, 18, 14)
    ethertype = np.where(vlan, u16(arr, off + np.where(vlan, 16, 12)), ethertype)
    not_ip = ethertype != ETHERTYPE_IPV4
    skip.add("not_ipv4", not_ip)
    keep(~not_ip)
    ip_rel = ip_rel[~not_ip]
    short = cap < ip_rel + 20
    dmg.add("short_frame", short)
    keep(~short)
    ip_rel = ip_rel[~short]
    ip = off + ip_rel
    vihl = arr[ip].astype(np.int64)
    ihl = (vihl & 0x0F) * 4
    bad = ((vihl >> 4) != 4) | (ihl < 20)
    dmg.add("ipv4_header", bad)
    keep(~bad)
    ip, ip_rel, ihl = ip[~bad], ip_rel[~bad], ihl[~bad]
    short = cap < ip_rel + ihl
    dmg.add("short_frame", short)
    keep(~short)
    ip, ip_rel, ihl = ip[~short], ip_rel[~short], ihl[~short]
    total_sum = np.zeros(len(ip), dtype=np.int64)
    for w in range(0, 60, 2):
        inside = w < ihl
        if not inside.any():
            break
        total_sum += np.where(inside, u16(arr, np.where(inside, ip + w, ip)), 0)
    bad = ~_ones_complement_ok(total_sum)
    dmg.add("ipv4_checksum", bad)
    keep(~bad)
    ip, ip_rel, ihl = ip[~bad], ip_rel[~bad], ihl[~bad]
    total = u16(arr, ip + 2)
    avail = cap - ip_rel  # captured bytes from the IPv4 header on
    cut = total > avail
    bad = (total < ihl) | (cut & (not truncated))
    dmg.add("ipv4_length", bad)
    keep(~bad)
    ip, ihl, total, avail, cut = ip[~bad], ihl[~bad], total[~bad], avail[~bad], cut[~bad]
    frag = (u16(arr, ip + 6) & 0x3FFF) != 0
    skip.add("fragment", frag)
    keep(~frag)
    ip, ihl, total, avail, cut = ip[~frag], ihl[~frag], total[~frag], avail[~frag], cut[~frag]
    not_udp = arr[ip + 9] != IPPROTO_UDP
    skip.add("not_udp", not_udp)
    keep(~not_udp)
    ip, ihl, total, avail, cut = ip[~not_udp], ihl[~not_udp], total[~not_udp], avail[~not_udp], cut[~not_udp]
    udp = ip + ihl
    short = total - ihl < 8
    dmg.add("udp_length", short)
    keep(~short)
    ip, ihl, total, avail, cut, udp = ip[~short], ihl[~short], total[~short], avail[~short], cut[~short], udp[~short]
    short = avail < ihl + 8
    dmg.add("short_frame", short)
    keep(~short)
    ip, ihl, total, avail, cut, udp = ip[~short], ihl[~short], total[~short], avail[~short], cut[~short], udp[~short]
    ulen = u16(arr, udp + 4)
    bad = (ulen < 8) | (ulen > total - ihl)
    dmg.add("udp_length", bad)
    keep(~bad)
    ip, udp, ulen, avail, ihl, cut = ip[~bad], udp[~bad], ulen[~bad], avail[~bad], ihl[~bad], cut[~bad]
    if verify_udp and len(udp):
        check = (u16(arr, udp + 6) != 0) & ~cut
        if check.any():
            bad = np.zeros(len(udp), dtype=bool)
            bad[check] = ~_udp_checksum_ok(arr, ip[check], udp[check], ulen[check])
            dmg.add("udp_checksum", bad)
            keep(~bad)
            ip, udp, ulen, avail, ihl = ip[~bad], udp[~bad], ulen[~bad], avail[~bad], ihl[~bad]
    ulen = np.minimum(ulen, avail - ihl)
    dport = u16(arr, udp + 2)
    if ports is not None:
        wanted = np.isin(dport, np.fromiter(ports, dtype=np.int64))
        skip.add("other_port", ~wanted)
        keep(wanted)
        ip, udp, ulen, dport = ip[wanted], udp[wanted], ulen[wanted], dport[wanted]
    return {
        "record": rec,
        "payload": udp + 8,
        "payload_len": ulen - 8,
        "dst_addr": be_uint(arr, ip + 16, 4, np.uint32),
        "dst_port": dport.astype(np.uint16),
    }


def _udp_checksum_ok(arr: np.ndarray, ip: np.ndarray, udp: np.ndarray, ulen: np.ndarray) -> np.ndarray:
    """Whether each UDP segment's checksum verifies, with one pass over the buffer.

    Modulo 0xFFFF (the one's complement sum is a sum mod 0xFFFF), 256**2 == 1, so a byte at
    position j weighs 256**(j mod 2) in the little-endian 32-bit words of the buffer, and the
    big-endian 16-bit sum of a segment starting at s is its little-endian byte-weighted sum times
    256 if s is even (times 1 if odd). The 4-aligned middle of every segment is summed with one
    ``reduceat`` over the buffer's 32-bit words; the at most 3 + 3 bytes at the ends are added
    one by one (vectorised).
    """
    s, e = udp, udp + ulen
    words = arr[: len(arr) // 4 * 4].view("<u4")
    a = (s + 3) // 4
    b = e // 4  # every segment has >= 8 bytes, so a < b
    bounds = np.empty(2 * len(a), dtype=np.int64)
    bounds[0::2], bounds[1::2] = a, b
    tail_at_end = b[-1] >= len(words)
    if tail_at_end:
        bounds = bounds[:-1]
    sums = np.add.reduceat(words, bounds, dtype=np.uint64)[0::2].astype(np.int64) % 0xFFFF
    for k in range(3):
        head = s + k
        inside = head < 4 * a
        sums += np.where(inside, arr[np.where(inside, head, 0)].astype(np.int64) << (8 * (head & 1)), 0)
        tail = 4 * b + k
        inside = tail < e
        sums += np.where(inside, arr[np.where(inside, tail, 0)].astype(np.int64) << (8 * (tail & 1)), 0)
    sums = (sums % 0xFFFF) * np.where(s & 1, 1, 256)
    sums += u16(arr, ip + 12) + u16(arr, ip + 14) + u16(arr, ip + 16) + u16(arr, ip + 18) + IPPROTO_UDP + ulen
    return sums % 0xFFFF == 0
