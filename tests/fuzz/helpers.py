"""What every fuzz test asserts about a reader given hostile input, in one place.

* The CLI (``p4sub.main``, in-process) exits 0 or 2 - 1 only where a command says so - and
  with 2 prints a message and no traceback; a reader function raises nothing but P4subError.
  Anything else escapes and fails the test with its traceback.
* Every example runs within the hypothesis ``deadline`` (:data:`SETTINGS`), so a hang or a
  blow-up fails instead of stalling CI.
* A command that fails changes no existing file: outputs go into a directory that already holds a
  file, and :func:`snapshot` compares the directory before and after.
"""

from __future__ import annotations

import contextlib
import io
import os
from datetime import timedelta
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, settings

from compiler.base.errors import P4subError
from p4sub import main

#: Modest and bounded: CI has 2 cores and 20 minutes for everything; this suite takes seconds per reader.
#: ``P4SUB_FUZZ_EXAMPLES=2000`` searches longer, with fresh random examples (derandomized otherwise,
#: so that CI sees the same examples every run).
EXAMPLES = int(os.environ.get("P4SUB_FUZZ_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=5),
                    derandomize="P4SUB_FUZZ_EXAMPLES" not in os.environ, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


def run_cli(*argv: str, ok: tuple[int, ...] = (0, 2)) -> tuple[int, str]:
    """``p4sub ARGV`` in this process: its exit code and stderr, after checking both are clean."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own usage errors: exit 2 with the usage and a message
            code = exc.code
    text = err.getvalue()
    assert code in ok, (argv, code, text)
    assert "Traceback" not in text, text
    if code == 2:
        assert text.strip(), f"{argv}: exit 2 without a message"
    return code, text


def only_p4sub_errors(read: Callable[[], object]) -> object | None:
    """Call a reader: its result, or None when it raised a P4subError with a message."""
    try:
        return read()
    except P4subError as exc:
        assert str(exc).strip()
        return None


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def output_dir(root: Path) -> Path:
    """A fresh output directory that already holds a file (which a failing command must leave alone)."""
    out = root / "out"
    if out.exists():
        for p in sorted(out.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        out.rmdir()
    out.mkdir()
    (out / "keep.txt").write_text("an existing file\n")
    return out
