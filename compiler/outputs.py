"""Outputs that appear whole or not at all: write to a temporary name beside the target, then rename.

An interrupted or failing ``gen`` must not leave a truncated trace that replays as if complete, nor
destroy a good file already at that path: every file output is written under a temporary name in the
same directory (so the rename stays on one file system, hence atomic) and renamed into place only when
complete; on any failure, SIGINT included, the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from compiler.errors import P4subError


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


def write_files(files: dict[str, str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write rendered files ``{name: text}`` into ``out_dir`` (created if missing); their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written
