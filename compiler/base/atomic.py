"""One file written whole or not at all: to a temporary name beside it, then renamed over it.

The bottom of every output p4sub writes: :mod:`compiler.base.outputs` builds whole files and
directories on it, and :mod:`compiler.base.manifest` rewrites a manifest with it.

Only regular files are replaced so. A device, FIFO or socket named as an output (``-o /dev/null``,
a named pipe a reader waits on) is written in place, as a shell's ``>`` would: renaming a file over
it would destroy the device node and leave the reader waiting. A symbolic link is followed: the
file it names is replaced beside itself (in its own directory, so the rename stays atomic) and the
link stays, as ``output_dir`` does for directories and ``>`` does for files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from compiler.base.errors import P4subError


def is_special(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (its symbolic links followed) is a device, FIFO or socket: written in place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def blocking_file(path: str | os.PathLike[str]) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory (``/etc/passwd`` for
    ``/etc/passwd/x``): what stops anything being made there, for a message that names it."""
    ancestor = Path(os.path.abspath(path)).parent
    while not ancestor.exists() and ancestor.parent != ancestor:
        ancestor = ancestor.parent
    return None if ancestor.is_dir() else ancestor


@contextlib.contextmanager
def staged(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path to write ``path``'s content to; renamed to ``path`` when the block succeeds.

    For a device, FIFO or socket the path itself (written in place). An OSError of the writing
    (``No space left on device``) becomes a P4subError naming ``path``, so the command exits 2.
    """
    if os.fspath(path) in ("", "-"):
        raise P4subError(f"{os.fspath(path)!r}: not a file name; give the file to write"
                         + (" (/dev/stdout to write to the standard output)" if os.fspath(path) == "-" else ""))
    target = Path(path)
    if target.is_dir():
        raise P4subError(f"{target}: is a directory, not a file to write")
    if is_special(target):
        held = _fifo_with_reader(target)
        try:
            with _write_errors(os.fspath(path), os.fspath(path)):
                yield os.fspath(path)
        finally:
            if held is not None:
                os.close(held)
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))  # replace the file the link names, keep the link
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=parent)
    except OSError as exc:
        blocker = blocking_file(target)
        if blocker is not None:
            raise P4subError(f"{path}: {blocker} is a file, so nothing can be written under it") from None
        raise P4subError(f"{path}: cannot write: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        with _write_errors(os.fspath(path), tmp):
            yield tmp
            os.chmod(tmp, output_mode(target, 0o666))  # mkstemp's 0600 is a temporary name's, not the output's
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fifo_with_reader(target: Path) -> int | None:
    """For a FIFO, a write end opened without waiting (None for other targets). A FIFO nobody reads
    would block the command in open() for ever: refused at once. The end is held open while the
    output is written, since closing it would give the reader its end of file before the data."""
    try:
        if not stat.S_ISFIFO(os.stat(target).st_mode):
            return None
        return os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise P4subError(f"{target}: a FIFO with no reader; start the reader first (e.g. cat {target} &)") from None
        return None


def output_mode(target: Path, default: int) -> int:
    """The permissions an output gets: those of the file it replaces, else ``default`` less the umask
    (as a shell's ``>`` or ``mkdir`` gives them)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return default & ~mask


@contextlib.contextmanager
def _write_errors(target: str, written: str) -> Iterator[None]:
    """Turn an OSError from writing ``written`` (for ``target``) into a P4subError naming ``target``.

    Only errors of that file: those naming it, and those naming no file (a ``write`` or ``close``
    that failed); an OSError naming another file is not this output's and passes unchanged.
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is not None and os.fspath(exc.filename) not in (written, target):
            raise
        raise P4subError(f"{target}: cannot write: {exc.strerror or exc}") from None
