"""One file written whole or not at all: to a temporary name beside it, then renamed over it.

The bottom of every output p4sub writes: :mod:`compiler.base.outputs` builds whole files and
directories on it, and :mod:`compiler.base.manifest` rewrites a manifest with it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from compiler.base.errors import P4subError


@contextlib.contextmanager
def staged(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path to write ``path``'s content to; renamed to ``path`` when the block succeeds."""
    target = Path(path)
    if target.is_dir():
        raise P4subError(f"{target}: is a directory, not a file to write")
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=parent)
    except OSError as exc:
        raise P4subError(f"{target}: cannot write: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
