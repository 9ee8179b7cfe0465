"""Helpers for tests that run ``p4sub`` on Spark in a child process, from outside the checkout.

A child process, not ``main()`` in the test process: Spark allows one session per process (the
shared ``local[2]`` fixture may hold it), and the bug these tests guard against only shows in a
process whose workers cannot find p4sub on their own: the child gets no ``PYTHONPATH`` and no
``PYSPARK_PYTHON``, runs in a directory that is not the checkout, and imports this checkout
through ``sys.path`` in its own process only (so that it runs this tree's code even where the
venv's editable install points at another one); its Spark workers see none of that and must get
the interpreter and the code from :mod:`compiler.base.spark_session`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BOOT = f"import sys; sys.path.insert(0, {str(REPO)!r}); from p4sub import main; sys.exit(main(sys.argv[1:]))"


def java_runs() -> str | None:
    """None when ``java -version`` runs, else why not (the reason a Spark test skips with)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return "Spark needs Java 17: no java on PATH and no JAVA_HOME (Debian: apt-get install default-jre-headless)"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark needs Java 17: {java} -version failed ({exc})"
    return None if done.returncode == 0 else f"Spark needs Java 17: {java} -version exited {done.returncode}"


def skip_without_spark() -> None:
    """Skip when Java or PySpark is missing; fail instead where ``P4SUB_REQUIRE_SPARK`` is set
    (CI sets it, after making sure of Java in .ci/java.sh, so these tests cannot quietly not run)."""
    reason = java_runs()
    if reason is None:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            reason = "PySpark is not installed"
    if reason and os.environ.get("P4SUB_REQUIRE_SPARK"):
        pytest.fail(f"P4SUB_REQUIRE_SPARK is set but {reason}")
    if reason:
        pytest.skip(reason)


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONWARNINGS="ignore::FutureWarning", **extra)
    return env


def run_p4sub(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``p4sub ARGS`` in a child process started in ``cwd`` (see the module docstring)."""
    return subprocess.run([sys.executable, "-c", BOOT, *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=timeout)


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    """What to show when a child failed: its exit status and the end of its output."""
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if not k.endswith("seconds")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def assert_same_network(expected: Path, actual: Path) -> None:
    """The two ``p4sub route`` output directories hold the same files with the same bytes, except
    the compile times in ``stats.json`` files and the manifests, which name the command (its -o,
    its --master) and hash those stats: they list the same files with the same hashes otherwise."""
    files = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(actual) for p in actual.rglob("*") if p.is_file())
    assert any(f.name == "pipeline.json" and len(f.parts) == 2 for f in files)
    for f in files:
        a, b = expected / f, actual / f
        if f.name == "stats.json":
            assert _without_timings(json.loads(a.read_text())) == _without_timings(json.loads(b.read_text())), f
        elif f.name == "manifest.json":
            listed = [json.loads(m.read_text())["files"] for m in (a, b)]
            assert sorted(listed[0]) == sorted(listed[1]) == sorted(g.as_posix() for g in files if g != f)
            assert {k: v for k, v in listed[0].items() if not k.endswith("stats.json")} == \
                {k: v for k, v in listed[1].items() if not k.endswith("stats.json")}
        else:
            assert a.read_bytes() == b.read_bytes(), f
