"""The one way p4sub opens a file it reads: rules, specs, packets, traces, topologies, pipeline.json.

Why one opener: a path is not always a file. A FIFO with no writer blocks ``open()`` forever,
``/dev/zero`` never ends, a directory fails with a message that names no input, and a 50 GB file
handed over by mistake is read whole before anything is said. Here every input is opened without
blocking (``O_NONBLOCK``), must be a regular file, and - unless it is a trace that is streamed
(pcap, JSON lines read batch by batch) - must be at most :data:`DEFAULT_MAX_BYTES` bytes
(``P4SUB_MAX_INPUT_BYTES`` overrides it). ``ENOENT``, ``EACCES``, ``EISDIR``, ... become one-line
messages naming the file and what it was for.

Text inputs are UTF-8; a byte-order mark at the start is skipped (editors on Windows write one),
and a byte that is not UTF-8 is reported at its line and column, not at a byte offset.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

from compiler.base.errors import P4subError, ParseError, SourceLocation

#: Inputs read whole (rules, specs, packets JSON, topologies, pipeline.json) are refused past this
#: size: 256 MiB is ten times the largest compiled pipeline.json and rule files we have seen.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: Environment variable that overrides :data:`DEFAULT_MAX_BYTES` (a number of bytes).
MAX_BYTES_ENV = "P4SUB_MAX_INPUT_BYTES"
BOM = b"\xef\xbb\xbf"

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


class InputError(P4subError):
    """An input file that cannot be read: ``reason`` is the short why ("no such file", "is a directory")."""

    def __init__(self, message: str, path: str, reason: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


def max_input_bytes() -> int:
    """The size limit for inputs read whole: ``$P4SUB_MAX_INPUT_BYTES`` or :data:`DEFAULT_MAX_BYTES`."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    if not text.isdigit() or int(text) < 1:
        raise P4subError(f"{MAX_BYTES_ENV}={text!r}: expected a positive number of bytes")
    return int(text)


def _fail(path: str, what: str, reason: str) -> InputError:
    if reason == "no such file":
        return InputError(f"{path}: no such {what}", path, reason)
    if reason.startswith(("is ", "has ")):
        return InputError(f"{path}: {what} {reason}", path, reason)
    return InputError(f"{path}: cannot read {what}: {reason}", path, reason)


def _os_reason(exc: OSError) -> str:
    return {
        errno.ENOENT: "no such file",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "a part of the path is not a directory",
        errno.ELOOP: "too many symbolic links",
        errno.ENAMETOOLONG: "the path is too long",
    }.get(exc.errno or 0, (exc.strerror or str(exc)).lower())


def open_input(path: str | os.PathLike[str], what: str, *, limit: int | None | bool = True) -> BinaryIO:
    """Open ``path`` for reading (binary) after checking that it is a regular file of at most
    ``limit`` bytes (True: :func:`max_input_bytes`; None or False: no limit, for streamed traces).

    ``what`` names the input in messages ("rule file", "trace"). Never blocks: the file is opened
    with ``O_NONBLOCK``, so a FIFO is refused instead of waiting for a writer.
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _fail(name, what, _os_reason(exc)) from None
    try:
        info = os.fstat(fd)
        for test, reason in _KINDS:
            if test(info.st_mode):
                raise _fail(name, what, reason)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(name, what, "is not a regular file")
        cap = max_input_bytes() if limit is True else (limit or None)
        if cap is not None and info.st_size > cap:
            raise _too_large(name, what, info.st_size, cap)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _too_large(path: str, what: str, size: int, cap: int) -> InputError:
    return InputError(f"{path}: {what} has {size:,} bytes or more; p4sub reads inputs of up to {cap:,} bytes "
                      f"(set {MAX_BYTES_ENV} to raise the limit)", path, "is too large")


def read_bytes(path: str | os.PathLike[str], what: str) -> bytes:
    """The whole of a regular file of at most :func:`max_input_bytes` bytes."""
    cap = max_input_bytes()
    with open_input(path, what, limit=cap) as f:
        try:
            data = f.read(cap + 1)
        except OSError as exc:
            raise _fail(os.fspath(path), what, _os_reason(exc)) from None
    if len(data) > cap:  # it grew after the check
        raise _too_large(os.fspath(path), what, len(data), cap)
    return data


def read_text(path: str | os.PathLike[str], what: str, error: type[P4subError] = ParseError) -> str:
    """A UTF-8 text input (BOM skipped); bytes that are not UTF-8 are an ``error`` at their line:col."""
    return decode_text(read_bytes(path, what), os.fspath(path), what, error)


def decode_text(data: bytes, path: str, what: str = "file", error: type[P4subError] = ParseError) -> str:
    """``data`` as UTF-8 text without a leading byte-order mark; a bad byte is reported at line:column."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = len(data[line_start:exc.start].decode("utf-8", errors="replace")) + 1
        bad = data[exc.start:exc.end]
        raise error(f"{what} is not UTF-8 text: byte {' '.join(f'0x{b:02x}' for b in bad[:4])} ({exc.reason})"
                    + binary_hint(data), SourceLocation(path, line, column)) from None


def text_lines(path: str | os.PathLike[str], what: str, error: type[P4subError] = ParseError) -> Iterator[str]:
    """The lines of a streamed UTF-8 text input (JSON lines), decoded one by one: no size limit on
    the file, but a line longer than :func:`max_input_bytes` is refused (a file with no newline)."""
    name = os.fspath(path)
    cap = max_input_bytes()
    with open_input(path, what, limit=False) as f:
        lineno = 0
        while True:
            raw = f.readline(cap + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > cap:
                raise error(f"{what}: a line longer than {cap:,} bytes (set {MAX_BYTES_ENV} to raise the limit)",
                            SourceLocation(name, lineno, 1))
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                column = len(raw[:exc.start].decode("utf-8", errors="replace")) + 1
                bad = raw[exc.start:exc.end]
                raise error(f"{what} is not UTF-8 text: byte {' '.join(f'0x{b:02x}' for b in bad[:4])} "
                            f"({exc.reason})" + (binary_hint(raw) if lineno == 1 else ""),
                            SourceLocation(name, lineno, column)) from None


#: The first bytes of binary files people give where text is read, and what they are.
_MAGICS = {b"\xd4\xc3\xb2\xa1": "a pcap capture", b"\xa1\xb2\xc3\xd4": "a pcap capture",
           b"\x4d\x3c\xb2\xa1": "a pcap capture", b"\xa1\xb2\x3c\x4d": "a pcap capture",
           b"\x0a\x0d\x0d\x0a": "a pcapng capture", b"\x1f\x8b": "gzip-compressed"}


def binary_hint(head: bytes) -> str:
    """What a file that is not text seems to be, for the message (a pcap passed as --packets is
    not "text with a bad byte"): "" when nothing suggests a binary file."""
    for magic, kind in _MAGICS.items():
        if head.startswith(magic):
            return f"; it is {kind}, not text" + ("" if "gzip" in kind else " (replay and netsim read captures: --trace)")
    return "; it looks like a binary file (it holds NUL bytes), not text" if b"\0" in head[:4096] else ""


def read_stdin(what: str) -> str:
    """Standard input as UTF-8 text, at most :func:`max_input_bytes` bytes (``< /dev/zero`` ends)."""
    import sys

    cap = max_input_bytes()
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(cap + 1) if stream is not None else sys.stdin.read(cap + 1).encode("utf-8", "surrogateescape")
    if len(data) > cap:
        raise InputError(f"<stdin>: {what} has more than {cap:,} bytes (set {MAX_BYTES_ENV} to raise the limit)",
                         "<stdin>", "is too large")
    return decode_text(data, "<stdin>", what)


def strip_bom(text: str) -> str:
    """Text without a leading byte-order mark (for text that was decoded elsewhere)."""
    return text[1:] if text.startswith("\ufeff") else text


def check_regular(path: str | os.PathLike[str], what: str) -> Path:
    """Fail now, with the reason, unless ``path`` is a regular file p4sub can open (for inputs that a
    library opens itself, and for checking inputs before a long job starts)."""
    open_input(path, what, limit=False).close()
    return Path(path)
