"""Streaming pcap and pcapng I/O that survives damaged captures.

Traces for replay are large (tens of millions of packets) and sometimes damaged (a capture cut
short, a record with a garbage length). So the reader walks the file in fixed-size chunks (memory
does not grow with the file), never raises for damaged data, counts every damaged spot in
:class:`DamageCounter` and resynchronises on the next plausible record. Only a file that cannot be
opened or is not a capture at all is an error (:class:`TraceError`, naming the path).

Both classic pcap (either byte order, microsecond and nanosecond magic) and pcapng (SHB, IDB, EPB,
SPB and the obsolete PB, either byte order, ``if_tsresol``/``if_tsoffset``) are read. Only classic
pcap is written: every tool reads it and the nanosecond variant keeps ITCH timestamps exact.

For parallel replay a file can be cut at record boundaries into byte ranges
(:func:`split_pcap`); each :class:`PcapRange` carries the format state needed to read it alone.
"""

from __future__ import annotations

import io
import os
import struct
from collections import Counter
from dataclasses import dataclass
from typing import BinaryIO, Iterator, NamedTuple

import numpy as np

from apps import storage
from compiler.base import InputError, P4subError, open_input

LINKTYPE_ETHERNET = 1

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_IDB = 0x00000001
PCAPNG_PB = 0x00000002
PCAPNG_SPB = 0x00000003
PCAPNG_EPB = 0x00000006
# Block types a resynchronising reader accepts as a plausible restart point.
PCAPNG_KNOWN_BLOCKS = frozenset({PCAPNG_SHB, PCAPNG_IDB, PCAPNG_PB, PCAPNG_SPB, 4, 5, PCAPNG_EPB, 9, 10, 0xBAD, 0x40000BAD})

# No sane capture has a record this large; larger lengths are damage, not data.
MAX_RECORD = 1 << 18
MAX_BLOCK = 1 << 24
DEFAULT_CHUNK_BYTES = 1 << 23


#: Timestamps are int64 nanoseconds (year 2262); a pcapng block's 64-bit ticks at a damaged
#: resolution can exceed that, and is clamped (counted as damage) rather than overflow.
MAX_TIMESTAMP_NS = (1 << 63) - 1


class TraceError(P4subError):
    """A trace file cannot be opened, or is not a capture file at all."""


class PcapRecord(NamedTuple):
    """One captured packet. A NamedTuple rather than a dataclass: millions are made per trace."""

    timestamp_ns: int
    data: bytes
    orig_len: int
    linktype: int


class DamageCounter:
    """Counts damaged spots in a trace by reason; ``total`` is what callers usually report."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, reason: str, n: int = 1) -> None:
        if n:
            self.counts[reason] += n

    def update(self, other: "DamageCounter") -> None:
        self.counts.update(other.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __int__(self) -> int:
        return self.total

    def __repr__(self) -> str:
        return f"DamageCounter({dict(self.counts)})"


@dataclass(frozen=True)
class Interface:
    """A pcapng interface (IDB): link type, snap length and timestamp resolution."""

    linktype: int
    snaplen: int = 0
    tsresol: int = 6
    tsoffset_s: int = 0

    def to_ns(self, ticks: int) -> int:
        """Ticks in this interface's resolution (10^-k or 2^-k seconds) to nanoseconds."""
        if self.tsresol & 0x80:
            ns = (ticks * 1_000_000_000) >> (self.tsresol & 0x7F)
        elif self.tsresol <= 9:
            ns = ticks * 10 ** (9 - self.tsresol)
        else:
            ns = ticks // 10 ** (self.tsresol - 9)
        return ns + self.tsoffset_s * 1_000_000_000


@dataclass(frozen=True)
class Section:
    """The format state needed to read records from some point of a file on.

    Classic pcap: byte order, ``nanosecond`` and one interface. pcapng: byte order of the current
    section and its interfaces so far.
    """

    kind: str
    byte_order: str
    interfaces: tuple[Interface, ...]
    nanosecond: bool = False


@dataclass(frozen=True)
class PcapRange:
    """Records whose header starts in ``[start, end)``; ``first_index`` numbers the first of them."""

    path: str
    start: int
    end: int
    first_index: int
    section: Section


@dataclass
class RecordChunk:
    """Consecutive records sharing one buffer: ``buffer[data_offsets[i]:][:caplens[i]]`` is record i.

    ``base`` is the file offset of ``buffer[0]``; ``record_offsets`` are file offsets of the record
    headers (pcap) or blocks (pcapng). All per-record fields are int64 numpy arrays.
    """

    buffer: bytes
    base: int
    first_index: int
    record_offsets: np.ndarray
    data_offsets: np.ndarray
    caplens: np.ndarray
    orig_lens: np.ndarray
    timestamps_ns: np.ndarray
    linktypes: np.ndarray

    def __len__(self) -> int:
        return len(self.data_offsets)

    def records(self) -> Iterator[PcapRecord]:
        buf = self.buffer
        for off, cap, orig, ts, lt in zip(
            self.data_offsets.tolist(), self.caplens.tolist(), self.orig_lens.tolist(),
            self.timestamps_ns.tolist(), self.linktypes.tolist(),
        ):
            yield PcapRecord(ts, buf[off : off + cap], orig, lt)


def _chunk_from_lists(buf: bytes, base: int, first_index: int, columns: list[list[int]]) -> RecordChunk:
    arrays = [np.asarray(c, dtype=np.int64) for c in columns]
    return RecordChunk(buf, base, first_index, *arrays)


def _open(path: str | os.PathLike[str]) -> BinaryIO:
    """A capture file: a URL through :mod:`apps.storage` (hdfs://, s3a://, file://: readable from any
    cluster machine), else opened through :func:`compiler.base.inputs.open_input`: a regular file (a FIFO or
    a device is refused, never waited on), with no size limit (traces are streamed and may be huge)."""
    if storage.is_url(path):
        return storage.open_url(os.fspath(path))
    try:
        return open_input(path, "trace", limit=False)
    except InputError as exc:
        raise TraceError(exc.message) from None


def _read_section(path: str, f: BinaryIO) -> tuple[Section, int]:
    """Read the file header; return the initial section and where records start."""
    head = f.read(24)
    if len(head) < 4:
        raise TraceError(f"{path}: not a pcap or pcapng file ({'empty' if not head else 'too short'})")
    for order in ("<", ">"):
        (magic,) = struct.unpack_from(order + "I", head)
        if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            if len(head) < 24:
                return Section("pcap", order, (Interface(LINKTYPE_ETHERNET),), magic == PCAP_MAGIC_NS), -1
            major, minor = struct.unpack_from(order + "HH", head, 4)
            if major != 2:  # not read as "no packets": the records would not be where 2.x puts them
                raise TraceError(f"{path}: pcap version {major}.{minor}; p4sub reads version 2 (2.4)")
            snaplen, network = struct.unpack_from(order + "II", head, 16)
            ns = magic == PCAP_MAGIC_NS
            # FCS bits live in the top of the link-type word (LINKTYPE_ values fit in 16 bits).
            iface = Interface(network & 0xFFFF, snaplen, 9 if ns else 6)
            return Section("pcap", order, (iface,), ns), 24
    (magic,) = struct.unpack_from("<I", head)
    if magic == PCAPNG_SHB:
        if len(head) < 12:
            return Section("pcapng", "<", ()), -1
        for order in ("<", ">"):
            if struct.unpack_from(order + "I", head, 8)[0] == PCAPNG_BYTE_ORDER_MAGIC:
                major, minor = struct.unpack_from(order + "HH", head, 12) if len(head) >= 16 else (1, 0)
                if major != 1:
                    raise TraceError(f"{path}: pcapng version {major}.{minor}; p4sub reads version 1")
                return Section("pcapng", order, ()), 0
        raise TraceError(f"{path}: pcapng section header with a bad byte-order magic")
    raise TraceError(f"{path}: not a pcap or pcapng file (magic 0x{magic:08x})")


def read_section(path: str | os.PathLike[str]) -> Section:
    """The format of a capture file as its header declares it (pcapng: before any IDB)."""
    with _open(path) as f:
        return _read_section(os.fspath(path), f)[0]


class PcapReader:
    """Iterate the records of a pcap or pcapng file (or of one :class:`PcapRange` of it).

    ``for rec in PcapReader(path)`` yields :class:`PcapRecord`; :meth:`chunks` yields the same
    records in batches sharing a buffer, for vectorised decoding. ``damage`` counts what was
    skipped (pass a counter to share it with a decoder); ``records_read`` how many records
    were yielded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        byte_range: PcapRange | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        damage: DamageCounter | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.damage = damage if damage is not None else DamageCounter()
        self.records_read = 0
        self.chunk_bytes = max(1 << 12, chunk_bytes)
        self.section_changes: list[tuple[int, Section]] = []
        self._file = _open(self.path)
        try:
            section, start = _read_section(self.path, self._file)
        except BaseException:
            self._file.close()
            raise
        self._end: int | None = None
        self._index = 0
        self._resyncing = False  # inside a damaged stretch: count it once, not per byte tried
        self._last_sec = -1
        if byte_range is not None:
            section, start = byte_range.section, byte_range.start
            self._end = byte_range.end
            self._index = byte_range.first_index
        self.section = section
        self._start = start
        self.section_changes.append((max(start, 0), section))

    # -- context management -------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "PcapReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[PcapRecord]:
        for chunk in self.chunks():
            yield from chunk.records()

    # -- the walk -------------------------------------------------------------------------------
    def chunks(self, max_records: int = 65536) -> Iterator[RecordChunk]:
        """Yield records in chunks of at most ``max_records``, reading ``chunk_bytes`` at a time."""
        if self._start < 0:
            self.damage.add("truncated_file_header")
            return
        f = self._file
        f.seek(self._start)
        base = self._start  # file offset of buf[0]
        buf = f.read(self.chunk_bytes)
        pos = 0
        eof = len(buf) < self.chunk_bytes
        walk = self._walk_pcap if self.section.kind == "pcap" else self._walk_pcapng
        while True:
            pos, status, chunk = walk(buf, pos, base, eof, max_records)
            if len(chunk):
                self._index += len(chunk)
                self.records_read += len(chunk)
                yield chunk
            if status == "done":
                return
            if status == "more":
                if eof:
                    if pos < len(buf):
                        self.damage.add("truncated_record")
                    return
                keep = buf[pos:]
                base += pos
                new = f.read(self.chunk_bytes)
                eof = len(new) < self.chunk_bytes
                buf = keep + new
                pos = 0
            # status "full": the chunk reached max_records; continue in the same buffer.

    def _past_end(self, absolute: int) -> bool:
        return self._end is not None and absolute >= self._end

    def _walk_pcap(self, buf: bytes, pos: int, base: int, eof: bool, max_records: int) -> tuple[int, str, RecordChunk]:
        """Collect records from ``pos`` until the buffer, the range or ``max_records`` ends.

        The inner loop only follows the length field (the one thing needed to step on); the
        other header checks run vectorised afterwards and, on a failure, the walk is cut back to
        the bad record and resynchronised from there.
        """
        sec = self.section
        order = sec.byte_order
        n = len(buf)
        iface = sec.interfaces[0]
        max_cap = min(max(iface.snaplen, 65535), MAX_RECORD) if iface.snaplen else MAX_RECORD
        frac_limit = 1_000_000_000 if sec.nanosecond else 1_000_000
        cap_at = struct.Struct(order + "I").unpack_from
        # Records whose header starts at or after range_stop belong to the next byte range.
        range_stop = (1 << 62) if self._end is None else self._end - base
        positions: list[int] = []
        heads: list[np.ndarray] = []
        append = positions.append
        while True:
            first_new = len(positions)
            room = max_records - first_new
            bad = False
            limit = min(range_stop - 1, n - 16)  # a header at pos <= limit is in range and in buf
            while room and pos <= limit:
                caplen = cap_at(buf, pos + 8)[0]
                end = pos + 16 + caplen
                if caplen > max_cap or end > n:
                    break
                append(pos)
                pos = end
                room -= 1
            if not room:
                status = "full"
            elif pos >= range_stop:
                status = "done"
            elif pos + 16 > n:
                status = "more"
            elif cap_at(buf, pos + 8)[0] > max_cap:
                bad = True
            else:
                status = "more"
            if len(positions) > first_new:
                head = _gather_words(buf, positions[first_new:], order, 4)
                ok = (head[:, 3] >= head[:, 2]) & (head[:, 1] < frac_limit)
                if not ok.all():
                    i = int(np.argmin(ok))
                    pos = positions[first_new + i]
                    del positions[first_new + i :]
                    head = head[:i]
                    bad = True
                if len(head):
                    heads.append(head)
                    self._resyncing = False
                    self._last_sec = int(head[-1, 0])
            if not bad:
                break
            if not self._resyncing:
                self.damage.add("bad_record_header")
                self._resyncing = True
            new_pos = self._resync_pcap(buf, pos + 1, order, max_cap, frac_limit, self._last_sec, eof)
            if new_pos is None:
                # Keep the last 15 bytes: a record header may straddle the chunk boundary.
                pos = max(pos + 1, n - 15) if not eof else n
                status = "more"
                break
            pos = new_pos
        return pos, status, self._pcap_chunk(buf, base, positions, heads)

    def _pcap_chunk(self, buf: bytes, base: int, positions: list[int], heads: list[np.ndarray]) -> RecordChunk:
        sec = self.section
        pos = np.asarray(positions, dtype=np.int64)
        head = np.concatenate(heads).astype(np.int64) if heads else np.empty((0, 4), dtype=np.int64)
        scale = 1 if sec.nanosecond else 1000
        return RecordChunk(
            buf, base, self._index, pos + base, pos + 16, head[:, 2], head[:, 3],
            head[:, 0] * 1_000_000_000 + head[:, 1] * scale,
            np.full(len(pos), sec.interfaces[0].linktype, dtype=np.int64),
        )

    def _resync_pcap(self, buf: bytes, start: int, order: str, max_cap: int, frac_limit: int, last_sec: int, eof: bool) -> int | None:
        """First position >= start where a plausible header is followed by another (or by EOF)."""
        n = len(buf)
        if n - start < 16:
            return None
        arr = np.frombuffer(buf, dtype=np.uint8)
        best: int | None = None
        dtype = np.dtype(order + "u4")
        for k in range(4):
            first = start + ((k - start) % 4)
            count = (n - first) // 4
            if count < 4:
                continue
            words = arr[first : first + count * 4].view(dtype)
            sec_w, frac_w, cap_w, orig_w = words[:-3], words[1:-2], words[2:-1], words[3:]
            ok = (cap_w <= max_cap) & (orig_w >= cap_w) & (frac_w < frac_limit)
            if last_sec >= 0:
                ok &= np.abs(sec_w.astype(np.int64) - last_sec) <= 86400
            for i in np.flatnonzero(ok):
                p = first + 4 * int(i)
                if best is not None and p >= best:
                    break
                nxt = p + 16 + int(cap_w[i])
                if nxt == n and eof or nxt + 16 > n and not eof:
                    best = p  # ends the file, or the check must wait for more data: accept
                    break
                if nxt + 16 <= n:
                    _, f2, c2, o2 = struct.unpack_from(order + "IIII", buf, nxt)
                    if c2 <= max_cap and o2 >= c2 and f2 < frac_limit:
                        best = p
                        break
        return best

    def _walk_pcapng(self, buf: bytes, pos: int, base: int, eof: bool, max_records: int) -> tuple[int, str, RecordChunk]:
        columns: list[list[int]] = [[], [], [], [], [], []]
        pos, status = self._walk_pcapng_blocks(buf, pos, base, eof, max_records, columns)
        return pos, status, _chunk_from_lists(buf, base, self._index, columns)

    def _walk_pcapng_blocks(self, buf: bytes, pos: int, base: int, eof: bool, max_records: int, columns: list[list[int]]) -> tuple[int, str]:
        n = len(buf)
        count = 0
        offsets, dofs, caps, origs, stamps, lts = columns
        while True:
            if count >= max_records:
                return pos, "full"
            if self._end is not None and base + pos >= self._end:
                return pos, "done"
            if pos + 12 > n:
                return pos, "more"
            order = self.section.byte_order
            btype = struct.unpack_from(order + "I", buf, pos)[0]
            if btype == PCAPNG_SHB:
                new_order = None
                for o in ("<", ">"):
                    if struct.unpack_from(o + "I", buf, pos + 8)[0] == PCAPNG_BYTE_ORDER_MAGIC:
                        new_order = o
                if new_order is None:
                    self._bad_block()
                    r = self._resync_pcapng(buf, pos + 1, eof)
                    if r is None:
                        return (max(pos + 1, n - 11) if not eof else n), "more"
                    pos = r
                    continue
                order = new_order
            blen = struct.unpack_from(order + "I", buf, pos + 4)[0]
            if blen < 12 or blen % 4 or blen > MAX_BLOCK:
                self._bad_block()
                r = self._resync_pcapng(buf, pos + 1, eof)
                if r is None:
                    return (max(pos + 1, n - 11) if not eof else n), "more"
                pos = r
                continue
            if pos + blen > n:
                return pos, "more"
            if struct.unpack_from(order + "I", buf, pos + blen - 4)[0] != blen:
                self._bad_block()
                r = self._resync_pcapng(buf, pos + 1, eof)
                if r is None:
                    return (max(pos + 1, n - 11) if not eof else n), "more"
                pos = r
                continue
            self._resyncing = False
            body = pos + 8
            body_end = pos + blen - 4
            if btype == PCAPNG_SHB:
                self._set_section(base + pos, Section("pcapng", order, ()))
            elif btype == PCAPNG_IDB:
                if body_end - body < 8:
                    self.damage.add("bad_block")
                else:
                    self._set_section(base + pos, Section("pcapng", order, self.section.interfaces + (_parse_idb(buf, body, body_end, order),)))
            elif btype in (PCAPNG_EPB, PCAPNG_PB, PCAPNG_SPB):
                rec = self._packet_block(buf, btype, body, body_end, order)
                if rec is not None:
                    data_off, caplen, orig, ts, lt = rec
                    offsets.append(base + pos)
                    dofs.append(data_off)
                    caps.append(caplen)
                    origs.append(orig)
                    stamps.append(ts)
                    lts.append(lt)
                    count += 1
            pos += blen

    def _bad_block(self) -> None:
        if not self._resyncing:
            self.damage.add("bad_block")
            self._resyncing = True

    def _set_section(self, at: int, section: Section) -> None:
        self.section = section
        self.section_changes.append((at, section))

    def _packet_block(self, buf: bytes, btype: int, body: int, body_end: int, order: str) -> tuple[int, int, int, int, int] | None:
        ifaces = self.section.interfaces
        if btype == PCAPNG_SPB:
            if body_end - body < 4 or not ifaces:
                self.damage.add("bad_packet_block")
                return None
            (orig,) = struct.unpack_from(order + "I", buf, body)
            snap = ifaces[0].snaplen or orig
            caplen = min(orig, snap, body_end - body - 4)
            return body + 4, caplen, orig, 0, ifaces[0].linktype
        if btype == PCAPNG_EPB:
            if body_end - body < 20:
                self.damage.add("bad_packet_block")
                return None
            iface_id, ts_hi, ts_lo, caplen, orig = struct.unpack_from(order + "IIIII", buf, body)
            data = body + 20
        else:
            if body_end - body < 20:
                self.damage.add("bad_packet_block")
                return None
            iface_id, _drops, ts_hi, ts_lo, caplen, orig = struct.unpack_from(order + "HHIIII", buf, body)
            data = body + 20
        if iface_id >= len(ifaces) or data + caplen > body_end:
            self.damage.add("bad_packet_block")
            return None
        iface = ifaces[iface_id]
        ns = iface.to_ns((ts_hi << 32) | ts_lo)
        if not 0 <= ns <= MAX_TIMESTAMP_NS:  # a damaged resolution or offset: kept, counted, clamped
            self.damage.add("bad_timestamp")
            ns = min(max(ns, 0), MAX_TIMESTAMP_NS)
        return data, caplen, orig, ns, iface.linktype

    def _resync_pcapng(self, buf: bytes, start: int, eof: bool) -> int | None:
        """First position >= start holding a block of a known type whose two lengths agree.

        A candidate whose end lies beyond the buffer (before EOF) is accepted on its type and
        length alone; the walk re-checks it once more data is in.
        """
        n = len(buf)
        if n - start < 12:
            return None
        arr = np.frombuffer(buf, dtype=np.uint8)
        known = np.array(sorted(PCAPNG_KNOWN_BLOCKS), dtype=np.uint32)
        best: int | None = None
        for order in ("<", ">"):
            dtype = np.dtype(order + "u4")
            for k in range(4):
                first = start + ((k - start) % 4)
                count = (n - first) // 4
                if count < 3:
                    continue
                words = arr[first : first + count * 4].view(dtype)
                types, lens = words[:-2], words[1:-1]
                ok = np.isin(types, known) & (lens >= 12) & (lens % 4 == 0) & (lens <= MAX_BLOCK)
                for i in np.flatnonzero(ok):
                    p = first + 4 * int(i)
                    if best is not None and p >= best:
                        break
                    btype, blen = int(types[i]), int(lens[i])
                    if btype != PCAPNG_SHB and order != self.section.byte_order:
                        continue
                    if p + blen > n:
                        if not eof:
                            best = p
                            break
                        continue
                    if struct.unpack_from(order + "I", buf, p + blen - 4)[0] == blen:
                        best = p
                        break
        return best


def _gather_words(buf: bytes, positions: list[int], order: str, count: int) -> np.ndarray:
    """``count`` 32-bit words at each (unaligned) position of ``buf``, as an (N, count) array."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    idx = np.asarray(positions, dtype=np.int64)[:, None] + np.arange(4 * count, dtype=np.int64)
    return np.ascontiguousarray(arr[idx]).view(np.dtype(order + "u4")).reshape(len(positions), count)


def _parse_idb(buf: bytes, body: int, body_end: int, order: str) -> Interface:
    linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", buf, body)
    tsresol, tsoffset = 6, 0
    p = body + 8
    while p + 4 <= body_end:
        code, length = struct.unpack_from(order + "HH", buf, p)
        if code == 0:
            break
        value = p + 4
        if value + length > body_end:
            break
        if code == 9 and length >= 1:
            tsresol = buf[value]
        elif code == 14 and length >= 8:
            (tsoffset,) = struct.unpack_from(order + "q", buf, value)
        p = value + ((length + 3) & ~3)
    return Interface(linktype, snaplen, tsresol, tsoffset)


def read_pcap(path: str | os.PathLike[str]) -> tuple[list[PcapRecord], DamageCounter]:
    """All records of a (small) capture and its damage count; use :class:`PcapReader` for big ones."""
    with PcapReader(path) as reader:
        records = list(reader)
        return records, reader.damage


#: Link types met in captures that are not Ethernet, named in the refusal.
LINKTYPE_NAMES = {0: "BSD loopback", 101: "raw IP", 105: "IEEE 802.11", 113: "Linux cooked capture (SLL)",
                  127: "IEEE 802.11 radiotap", 228: "raw IPv4", 229: "raw IPv6", 276: "Linux cooked capture v2 (SLL2)"}


def require_packets(path: str | os.PathLike[str]) -> None:
    """Refuse a capture with no readable record, or with no Ethernet record: replayed or simulated, it
    would say "0 messages" and succeed, as if the trace had been read and nothing in it had mattered
    (issue 19; issue 27 for a capture of another link type, such as ``tcpdump -i any``'s). Reading
    stops at the first Ethernet record, so a good trace costs one chunk."""
    other: set[int] = set()
    with PcapReader(path, chunk_bytes=1 << 16) as reader:
        for chunk in reader.chunks(max_records=4096):  # a chunk may hold no record: only damaged bytes
            kinds = set(np.unique(np.asarray(chunk.linktypes)).tolist())
            if LINKTYPE_ETHERNET in kinds:
                return
            other |= kinds
        if not other:
            damage = ", ".join(f"{n} {reason}" for reason, n in sorted(reader.damage.counts.items()))
            raise TraceError(f"{os.fspath(path)}: holds no packets" + (f" ({damage})" if damage else "")
                             + "; an empty capture is not a trace")
    named = ", ".join(f"{t} ({LINKTYPE_NAMES[t]})" if t in LINKTYPE_NAMES else str(t) for t in sorted(other))
    raise TraceError(f"{os.fspath(path)}: no Ethernet packet (link type {LINKTYPE_ETHERNET}): its link type is "
                     f"{named}, and p4sub's parsers start at an Ethernet header; capture on an Ethernet interface "
                     "(not tcpdump -i any)")


RECORD_OFFSET_DTYPE = np.dtype([("offset", np.int64), ("data_offset", np.int64), ("caplen", np.uint32)])


def pcap_record_offsets(path: str | os.PathLike[str]) -> np.ndarray:
    """Where each record is: file offset of its header/block, of its data, and its captured length.

    One pass over the file; 20 bytes of memory per record. Damaged spots are skipped as by
    :class:`PcapReader`.
    """
    return _scan(path)[0]


def _scan(path: str | os.PathLike[str]) -> tuple[np.ndarray, list[tuple[int, Section]], int]:
    parts: list[np.ndarray] = []
    with PcapReader(path) as reader:
        for chunk in reader.chunks(max_records=1 << 18):
            arr = np.empty(len(chunk), dtype=RECORD_OFFSET_DTYPE)
            arr["offset"] = chunk.record_offsets
            arr["data_offset"] = np.asarray(chunk.data_offsets, dtype=np.int64) + chunk.base
            arr["caplen"] = chunk.caplens
            parts.append(arr)
        changes = reader.section_changes
    offsets = np.concatenate(parts) if parts else np.empty(0, dtype=RECORD_OFFSET_DTYPE)
    return offsets, changes, storage.file_size(path)


def split_pcap(path: str | os.PathLike[str], parts: int) -> list[PcapRange]:
    """Cut a capture into at most ``parts`` byte ranges of about equal record counts.

    Each range starts at a record boundary and carries the format state in force there, so
    ``PcapReader(path, byte_range=r)`` reads it without the rest of the file.
    """
    offsets, changes, size = _scan(path)
    n = len(offsets)
    if n == 0:
        return []
    cuts = sorted(set(int(c) for c in np.linspace(0, n, max(1, min(parts, n)) + 1)))
    ranges = []
    for a, b in zip(cuts, cuts[1:]):
        start = int(offsets["offset"][a])
        end = int(offsets["offset"][b]) if b < n else size
        section = next(sec for at, sec in reversed(changes) if at <= start)
        ranges.append(PcapRange(os.fspath(path), start, end, a, section))
    return ranges


class PcapWriter:
    """Write a classic pcap file (nanosecond magic by default; little-endian)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        linktype: int = LINKTYPE_ETHERNET,
        snaplen: int = 262144,
        nanosecond: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.nanosecond = nanosecond
        self.records_written = 0
        try:
            raw = open(self.path, "wb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot write: {exc.strerror or exc}") from None
        self._file = io.BufferedWriter(raw, buffer_size=1 << 20)
        magic = PCAP_MAGIC_NS if nanosecond else PCAP_MAGIC_US
        self._file.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        self._header = struct.Struct("<IIII")
        self._div = 1_000_000_000 if nanosecond else 1_000_000
        self._unit = 1 if nanosecond else 1000

    def write(self, data: bytes, timestamp_ns: int, orig_len: int | None = None) -> None:
        sec, frac = divmod(timestamp_ns // self._unit, self._div)
        self._file.write(self._header.pack(sec, frac, len(data), len(data) if orig_len is None else orig_len))
        self._file.write(data)
        self.records_written += 1

    def write_records(self, data: bytes | bytearray | memoryview, count: int) -> None:
        """Append ``count`` records already framed (16-byte record headers in this file's byte order
        and timestamp unit, then the frames): the bulk writers' path."""
        self._file.write(data)
        self.records_written += count

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "PcapWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_pcap(path: str | os.PathLike[str], frames: Iterator[tuple[int, bytes]] | list[tuple[int, bytes]], nanosecond: bool = True) -> int:
    """Write ``(timestamp_ns, frame)`` pairs as an Ethernet pcap; return how many were written."""
    with PcapWriter(path, nanosecond=nanosecond) as w:
        for ts, data in frames:
            w.write(data, ts)
        return w.records_written
