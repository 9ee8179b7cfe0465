"""Outputs that appear whole or not at all: write to a temporary name beside the target, then rename.

An interrupted or failing ``gen`` must not leave a truncated trace that replays as if complete, nor
destroy a good file already at that path: every file output is written under a temporary name in the
same directory (so the rename stays on one file system, hence atomic) and renamed into place only when
complete; on any failure, SIGINT included, the temporary file is removed and the target is untouched.

Output directories (``compile``, ``route``) go the same way as a whole (:func:`staged_dir`): written
into a staging directory beside the target, given a manifest (:mod:`compiler.base.manifest`), and swapped
with the old directory in one rename, so that a re-run cannot leave the files of the previous one
(a stale ``program.p4`` beside a ``--target none`` pipeline, the switches of another topology).

Report directories (``--report`` of replay, netsim, eval) are added to rather than replaced, since
users keep reports of several runs side by side (:func:`staged_report`): the files are written into a
staging directory and each renamed over its namesake only when the whole report is done.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from compiler.base.atomic import blocking_file, is_special, output_mode, staged
from compiler.base.errors import P4subError
from compiler.base.manifest import MANIFEST, read_manifest, unlisted, write_manifest


def write_files(files: dict[str, str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write rendered files ``{name: text}`` into ``out_dir`` (created if missing); their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written


def output_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as an output directory a command may replace as a whole, or P4subError saying why not.

    Absent, empty, or written by p4sub (a manifest that lists every file in it): replaced. A file,
    a non-empty directory without a manifest (an older p4sub's output, or the user's own files), or
    one holding files its manifest does not list (put there since): refused, since replacing it would
    destroy what p4sub did not write. Called before the work too, so that a long compile is not
    thrown away at the end. Symbolic links are followed: the directory they name is replaced.
    """
    if os.fspath(path) in ("", "-"):
        raise P4subError(f"{os.fspath(path)!r}: not a directory name; give the output directory to write "
                         "(a command that writes a directory has no standard-output form)")
    target = Path(os.path.abspath(path))
    if target.is_symlink():
        target = target.resolve()
    if target.parent == target:
        raise P4subError(f"{path}: cannot replace the root directory; give an output directory")
    if target.exists() and not target.is_dir():
        kind = "a device, FIFO or socket" if is_special(target) else "a file"
        raise P4subError(f"{path}: is {kind}, not an output directory; give a new or empty directory")
    if not target.exists() and blocking_file(target) is not None:
        raise P4subError(f"{path}: {blocking_file(target)} is a file, so no output directory can be made under it")
    if not target.is_dir() or not any(target.iterdir()):
        return target
    doc = read_manifest(target)
    if doc is None:
        raise P4subError(f"{path}: not empty and has no {MANIFEST}, so p4sub did not write it (or an older p4sub "
                         "did); its files would be replaced: remove it or give a new or empty directory")
    extra = unlisted(target, doc)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise P4subError(f"{path}: holds {shown}, which no p4sub command wrote (not in its {MANIFEST}); the "
                         "directory is replaced as a whole: move them out, or give another directory")
    return target


def _stage_beside(target: Path, path: str | os.PathLike[str]) -> Path:
    """A fresh staging directory beside ``target`` (same parent: one file system, so renames are atomic)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".staging", dir=target.parent))
    except OSError as exc:
        raise P4subError(f"{path}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def staged_dir(path: str | os.PathLike[str], kind: str, argv: list[str] | None = None) -> Iterator[Path]:
    """A staging directory for everything ``path`` will hold; when the block succeeds, its manifest is
    written (command ``kind``, its arguments ``argv``, default this process's) and it replaces
    ``path`` whole. On any failure, SIGINT included, the staging directory is removed and ``path``
    is untouched."""
    target = output_dir(path)
    stage = _stage_beside(target, path)
    try:
        yield stage
        write_manifest(stage, kind, sys.argv[1:] if argv is None else argv)
        output_dir(path)  # again: the user may have put files there while the command ran
        _swap_into_place(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


@contextlib.contextmanager
def staged_outputs(out: str | os.PathLike[str], kind: str, file: str | os.PathLike[str] | None = None,
                   argv: list[str] | None = None) -> Iterator[tuple[Path, Path | None]]:
    """:func:`staged_dir` for ``out``, and where to write one more output ``file`` (``compile --dot``)
    so that it appears only if the directory does: inside the staging directory when ``file`` lies
    in ``out``, else under a temporary name beside it, renamed into place after the directory."""
    if file is None:
        with staged_dir(out, kind, argv) as stage:
            yield stage, None
        return
    target, path = output_dir(out), Path(os.path.abspath(file))
    if path.is_relative_to(target):
        with staged_dir(out, kind, argv) as stage:
            inside = stage / path.relative_to(target)
            if inside == stage or inside.name == MANIFEST:
                raise P4subError(f"{file}: is the output directory or its {MANIFEST}; give another file")
            inside.parent.mkdir(parents=True, exist_ok=True)
            yield stage, inside
        return
    with staged(file) as tmp, staged_dir(out, kind, argv) as stage:
        yield stage, Path(tmp)


def report_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a report directory (absent, or a directory), or P4subError: checked before the work
    too, so that a long replay is not thrown away because its report cannot be written."""
    target = Path(os.path.abspath(path))
    if target.exists() and not target.is_dir():
        kind = "a device, FIFO or socket" if is_special(target) else "a file"
        raise P4subError(f"{path}: is {kind}, not a report directory")
    ancestor = target
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise P4subError(f"{path}: {ancestor} is a file, so no report directory can be made under it")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise P4subError(f"{path}: cannot write under {ancestor}: permission denied")
    return target


@contextlib.contextmanager
def staged_report(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A staging directory for a report's files; when the block succeeds each is renamed into ``path``
    (made if missing) over the file of the same name, other files staying. On any failure, SIGINT
    included, the staging directory is removed and ``path`` is untouched."""
    target = report_dir(path)
    stage = _stage_beside(target, path)
    try:
        yield stage
        blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            for file in sorted(f for f in stage.rglob("*") if not f.is_dir()):
                dest = target / file.relative_to(stage)
                dest.parent.mkdir(parents=True, exist_ok=True)
                if is_special(dest):
                    _copy_into(file, dest)
                else:
                    os.replace(file, dest)
        except OSError as exc:
            where = exc.filename if exc.filename is not None else path
            raise P4subError(f"{where}: cannot put the report in place: {exc.strerror or exc}") from None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _copy_into(source: Path, dest: Path) -> None:
    """Write ``source``'s bytes into the device, FIFO or socket ``dest`` in place (compiler.base.atomic:
    a rename would replace the node)."""
    with open(source, "rb") as src, open(dest, "wb") as out:
        try:
            shutil.copyfileobj(src, out)
            out.flush()
        except OSError as exc:
            exc.filename = os.fspath(dest)
            raise


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap_into_place(stage: Path, target: Path) -> None:
    """Put ``stage`` at ``target``, removing what was there. Signals wait until it is done: both renames
    happen, or neither. With Linux's renameat2(RENAME_EXCHANGE) the swap is one atomic step even
    against a crash; elsewhere the old directory is first renamed aside (and put back if the second
    rename fails), so a crash between the two leaves it beside ``target``, not lost.

    A SIGINT, SIGTERM or SIGHUP that arrived while the swap was blocking it undoes the swap before it
    is delivered: the command is interrupted, and an interrupted command leaves ``target`` as it was
    (the new directory is back at ``stage``, which the caller removes)."""
    os.chmod(stage, output_mode(target, 0o777))  # mkdtemp's 0700 is a staging directory's, not the output's
    blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    aside: Path | None = None
    how = ""
    try:
        try:
            if not target.exists() or not any(target.iterdir()):
                was_empty_dir = target.exists()
                os.rename(stage, target)  # rename(2) replaces an empty directory
                how = "empty-dir" if was_empty_dir else "new"
            elif _exchange(stage, target):
                aside, how = stage, "exchanged"  # stage now holds the old directory
            else:
                aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
                os.rename(target, aside)  # replaces the empty directory just made
                try:
                    os.rename(stage, target)
                except OSError:
                    os.rename(aside, target)
                    aside = None
                    raise
                how = "aside"
            if signal.sigpending() & blocked:
                aside = _undo_swap(how, stage, target, aside)
        except OSError as exc:
            raise P4subError(f"{target}: cannot put the new output in place: {exc.strerror or exc}") from None
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _undo_swap(how: str, stage: Path, target: Path, aside: Path | None) -> Path | None:
    """Put the old ``target`` back and the new directory at ``stage``; what is left to remove (None)."""
    if how == "exchanged":
        _exchange(stage, target)
    elif how == "aside" and aside is not None:
        os.rename(target, stage)
        os.rename(aside, target)
    else:
        os.rename(target, stage)
        if how == "empty-dir":
            target.mkdir()
    return None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    return False  # EINVAL/ENOSYS on file systems without it: the two-rename fallback
