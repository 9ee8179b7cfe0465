"""The driver's :class:`~runtime.replay_partition.ReplayContext`, kept between runs of ``p4sub replay``.

Building the context reads ``pipeline.json``, parses and checks the rules and indexes them for the
ground truth: seconds for 100k rules (about 5 CPU seconds on this project's benchmark), the same
seconds every time the same compiled pipeline is replayed on another trace. So the context is
pickled once, under the user's cache directory, and loaded (about half a second) when everything
it is made from is unchanged. The key is a SHA-256 of all of that:

* the bytes of ``pipeline.json`` (which holds the pipeline's own spec) and of the rule file;
* the trace spec when it is not the pipeline's (the bytes of ``--spec``'s file, or the ``--app``
  name and its shipped spec's bytes);
* ``--batch-packets``;
* p4sub's own code: every ``.py`` file of its packages, so a changed p4sub never loads a context an
  older one built;
* the Python and numpy versions (pickles of numpy arrays are read by the numpy that wrote them).

An entry that cannot be read is rebuilt; a cache directory that cannot be written only costs the
build next time. Entries are written whole (a temporary file renamed into place) and the newest
:data:`KEEP` are kept. The directory: ``$P4SUB_CACHE_DIR``, else ``$XDG_CACHE_HOME/p4sub``, else
``~/.cache/p4sub``, with ``replay/`` below it; ``p4sub replay --no-cache`` neither reads nor writes it.
Like any pickle, an entry is code: the directory must be writable by its user only (it is made so).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np

from runtime.replay_partition import ReplayContext

KEEP = 4
FORMAT = 1  # bump when ReplayContext's pickled form changes in a way the code hash would not show
PACKAGES = ("compiler", "runtime", "apps")


def cache_dir() -> Path:
    """Where entries live (see the module docstring)."""
    root = os.environ.get("P4SUB_CACHE_DIR")
    if root:
        return Path(root) / "replay"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "p4sub" / "replay"


def _code_digest() -> bytes:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent.parent
    for package in PACKAGES:
        for f in sorted((here / package).rglob("*.py")):
            h.update(f.relative_to(here).as_posix().encode())
            h.update(f.read_bytes())
    return h.digest()


def key(pipeline_json: str | os.PathLike[str], rules: str | os.PathLike[str], spec_files: Iterable[str | os.PathLike[str]],
        spec_label: str, batch_packets: int) -> str:
    """The entry name for a context built from these inputs (hex SHA-256).

    ``spec_files``: the trace spec's file when it is not the pipeline's own (else none);
    ``spec_label``: how it was named (``--spec PATH``, ``--app NAME`` or empty)."""
    h = hashlib.sha256()
    h.update(f"p4sub replay context {FORMAT} {sys.version} numpy {np.__version__} batch {batch_packets} "
             f"spec {spec_label}\0".encode())
    h.update(_code_digest())
    for path in (pipeline_json, rules, *spec_files):
        data = Path(path).read_bytes()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def has(name: str) -> bool:
    """Whether an entry is stored under ``name`` (it may still turn out unreadable: :func:`load`)."""
    return (cache_dir() / f"{name}.pickle").is_file()


def load(name: str) -> ReplayContext | None:
    """The context stored under ``name``, or None when there is none or it cannot be read."""
    path = cache_dir() / f"{name}.pickle"
    try:
        with open(path, "rb") as f:
            ctx = pickle.load(f)
    except Exception:  # missing, truncated, written by another version: built again
        return None
    if not isinstance(ctx, ReplayContext):
        return None
    try:
        os.utime(path)  # most recently used: kept longest
    except OSError:
        pass
    return ctx


def store(name: str, ctx: ReplayContext) -> None:
    """Keep ``ctx`` under ``name`` (best effort: a cache that cannot be written is skipped)."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(ctx, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, directory / f"{name}.pickle")
        except BaseException:
            os.unlink(tmp)
            raise
        entries = sorted(directory.glob("*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
