"""Nasdaq BinaryFILE: the framing of the historical ``MMDDYYYY.NASDAQ_ITCH50(.gz)`` files.

Each message is preceded by its 2-byte big-endian length, nothing else. Files are large (≈250 M
messages a day), so they are read in chunks; ``.gz`` files are recognised by their magic bytes,
not their name. A message whose length is wrong for its type is counted and skipped (the
framing itself stays in step); a file that ends inside a message is counted as truncated.
"""

from __future__ import annotations

import gzip
import os
from typing import BinaryIO, Iterable, Iterator

from apps.itch.messages import Message, decode_message, encode_message
from apps.pcap import DamageCounter, TraceError
from compiler.base import InputError, open_input

CHUNK = 1 << 22


def _open_maybe_gzip(path: str) -> BinaryIO:
    try:
        raw = open_input(path, "ITCH file", limit=False)  # streamed: no size limit, but a regular file
    except InputError as exc:
        raise TraceError(exc.message) from None
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


class BinaryFileReader:
    """Iterate the messages of a BinaryFILE; ``damage`` counts bad lengths and truncation.

    ``types``: only decode messages whose type byte is in this set (others are skipped cheaply,
    which is most of the work saved on a full-day file).
    """

    def __init__(self, path: str | os.PathLike[str], types: Iterable[str] | None = None) -> None:
        self.path = os.fspath(path)
        self.types = frozenset(t.encode("latin-1")[0] for t in types) if types is not None else None
        self.damage = DamageCounter()
        self.messages_read = 0

    def __iter__(self) -> Iterator[Message]:
        wanted = self.types
        f = _open_maybe_gzip(self.path)
        try:
            buf = b""
            pos = 0
            while True:
                try:
                    new = f.read(CHUNK)
                except (OSError, EOFError, gzip.BadGzipFile):
                    self.damage.add("bad_gzip")
                    new = b""
                buf = buf[pos:] + new
                pos = 0
                n = len(buf)
                while pos + 2 <= n:
                    length = (buf[pos] << 8) | buf[pos + 1]
                    end = pos + 2 + length
                    if end > n:
                        break
                    if length == 0:
                        self.damage.add("msg_length")
                    elif wanted is None or buf[pos + 2] in wanted:
                        msg = decode_message(buf, pos + 2, length)
                        if msg is None:
                            self.damage.add("msg_length")
                        else:
                            self.messages_read += 1
                            yield msg
                    pos = end
                if not new:
                    if pos < n:
                        self.damage.add("truncated_message")
                    return
        finally:
            f.close()


def read_binary_file(path: str | os.PathLike[str], types: Iterable[str] | None = None) -> tuple[list[Message], DamageCounter]:
    """All messages of a (small) BinaryFILE and its damage count."""
    reader = BinaryFileReader(path, types)
    return list(reader), reader.damage


def write_binary_file(path: str | os.PathLike[str], messages: Iterable[Message], compress: bool = False) -> int:
    """Write messages in BinaryFILE framing (gzip-compressed if asked); return the count."""
    count = 0
    try:
        f: BinaryIO = gzip.open(path, "wb") if compress else open(path, "wb", buffering=1 << 20)  # type: ignore[assignment]
    except OSError as exc:
        raise TraceError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None
    with f:
        for m in messages:
            b = encode_message(m)
            f.write(len(b).to_bytes(2, "big") + b)
            count += 1
    return count
