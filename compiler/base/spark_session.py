"""Spark sessions whose executors can run p4sub, shared by ``route --master`` and ``replay --master``.

A Python task on Spark runs in a worker process that the executor starts with PySpark's
``PYSPARK_PYTHON`` (``python3`` from ``PATH`` when unset) and that imports the task's code by
module name. Neither is p4sub by default: ``python3`` need not have p4sub's dependencies (hence
``No module named 'lark'``), and p4sub itself is importable only where it happens to be on the
path (hence ``No module named 'compiler'`` outside a checkout). So every session made here:

* runs the workers on the interpreter running p4sub (:func:`worker_python`), which has the
  dependencies; ``PYSPARK_PYTHON`` or ``--conf spark.pyspark.python=PATH`` name another one,
  e.g. where a cluster's machines keep their Python;
* ships the p4sub packages this process imported, data files included (grammars, templates,
  specs), as one zip added with ``SparkContext.addPyFile`` (:func:`ship_code`): executors put it
  first on ``sys.path``, so they run exactly the driver's code, on this machine or any other,
  whatever else is installed there.

Errors from Spark (no Java, a master that cannot be reached, a task that failed) become
:class:`~compiler.base.errors.P4subError` naming the Python error of the task (:func:`spark_errors`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from compiler.base.errors import P4subError

# What executors import: every top-level package of the p4sub distribution.
PACKAGES = ("compiler", "runtime", "backends", "apps", "grammar")
_SHIPPED = "_p4sub_code_zip"  # attribute set on a SparkContext once the code is on its executors


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and os.path.exists(os.path.join(home, "bin", "java"))))


def worker_python(conf: Mapping[str, str] | None = None) -> str:
    """The executors' Python: ``spark.pyspark.python`` if set, else ``PYSPARK_PYTHON``, else this one."""
    return (conf or {}).get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable


def package_dirs() -> dict[str, Path]:
    """Where this process imports each p4sub package from (a checkout, site-packages, an editable install)."""
    dirs = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise P4subError(f"cannot find the p4sub package {name!r} to send to Spark executors")
        dirs[name] = Path(next(iter(spec.submodule_search_locations)))
    return dirs


def build_code_zip(path: Path) -> Path:
    """Zip the p4sub packages (sources and data files, no bytecode) into ``path``."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, directory in package_dirs().items():
            for f in sorted(directory.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                    z.write(f, f"{name}/{f.relative_to(directory).as_posix()}")
    return path


def _context(spark: Any) -> Any:
    """The SparkContext of a session, or the context itself."""
    return getattr(spark, "sparkContext", spark)


def ship_code(session: Any) -> None:
    """Put p4sub's packages on every executor's ``sys.path`` (once per SparkContext); ``session``:
    a SparkSession or a SparkContext."""
    sc = _context(session)
    if getattr(sc, _SHIPPED, None):
        return
    directory = Path(tempfile.mkdtemp(prefix="p4sub-spark-"))
    atexit.register(shutil.rmtree, directory, True)  # the driver serves the file while the session lives
    path = build_code_zip(directory / "p4sub-code.zip")
    before = list(sys.path)
    sc.addPyFile(str(path))
    # addPyFile also puts the zip on the driver's path; the driver keeps importing from where it did.
    sys.path[:] = [p for p in sys.path if p in before]
    setattr(sc, _SHIPPED, str(path))


_LOCAL = re.compile(r"^local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")


def local_parallelism(master: str, conf: Mapping[str, str] | None = None) -> int | None:
    """The ``defaultParallelism`` a session at ``master`` will have, when that is known before it
    starts (local masters), else None. Lets a driver plan its tasks while Spark is still starting."""
    conf = conf or {}
    if "spark.default.parallelism" in conf:
        value = conf["spark.default.parallelism"]
        return int(value) if value.isdigit() and int(value) > 0 else None
    m = _LOCAL.match(master.strip())
    if not m:
        return None
    if m.group(1) in (None, ""):
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else max(1, int(m.group(1)))


def parse_conf(items: list[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` arguments as a dict of Spark settings."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise P4subError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
        conf[key] = value
    return conf


def _settings(conf: Mapping[str, str], app_name: str) -> dict[str, str]:
    settings = {
        "spark.app.name": app_name,
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
        # The driver's JVM only schedules tasks and moves a few bytes for p4sub (the work is in the
        # Python workers): the quick compiler alone and the serial collector start it in about half
        # the time on a busy 2-core machine (the optimising compiler's threads compete with the
        # driver's Python for the cores). --conf spark.driver.extraJavaOptions=... replaces this.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    settings.update(conf)
    return settings


def _start(master: str, conf: Mapping[str, str] | None, app_name: str, sql: bool) -> Any:
    if not java_available():
        raise P4subError("Spark needs Java 17: install a JDK (Debian: default-jre-headless) or set JAVA_HOME")
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise P4subError("Spark runs need PySpark: pip install pyspark") from None
    _check_master(master)
    conf = dict(conf or {})
    settings = _settings(conf, app_name)
    saved = os.environ.get("PYSPARK_PYTHON")
    # PySpark reads the workers' interpreter from the environment when the SparkContext starts.
    os.environ["PYSPARK_PYTHON"] = worker_python(conf)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if sql:
                builder = SparkSession.builder.master(master)
                for k, v in settings.items():
                    builder = builder.config(k, v)
                started = builder.getOrCreate()
            else:
                started = SparkContext.getOrCreate(SparkConf().setMaster(master).setAll(list(settings.items())))
    except Exception as exc:  # no usable Java, a bad master URL, a port in use: the user's environment
        raise P4subError(f"cannot start Spark at {master}: {_summary(exc)}") from None
    finally:
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved
    ship_code(started)
    return started


def spark_session(master: str = "local[*]", conf: Mapping[str, str] | None = None, app_name: str = "p4sub") -> Any:
    """A Spark session at ``master`` whose executors run this interpreter (see :func:`worker_python`)
    with p4sub's code shipped to them (:func:`ship_code`). ``conf`` entries override the defaults.

    A session already running in this process is returned as it is (Spark allows one per process),
    with the code shipped to it if it was not yet.
    """
    return _start(master, conf, app_name, sql=True)


def spark_context(master: str = "local[*]", conf: Mapping[str, str] | None = None, app_name: str = "p4sub") -> Any:
    """:func:`spark_session`'s SparkContext without the session: for jobs of plain RDDs (replay),
    whose start then skips Spark SQL's machinery (1.5-2 s of the JVM's start on this project's
    2-core machine). A context already running in this process (a session's) is returned as it is.
    """
    return _start(master, conf, app_name, sql=False)


def _check_master(master: str, timeout: float = 5.0) -> None:
    """Fail at once when no standalone master answers at a ``spark://`` URL (Spark itself retries
    for a minute and then reports a stopped context)."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master[len("spark://"):].split(","):  # several masters: high availability
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise P4subError(f"--master {master}: expected spark://HOST:PORT")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
            return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise P4subError(f"no Spark master answers at {master} ({'; '.join(errors)})")


@contextlib.contextmanager
def spark(master: str = "local[*]", conf: Mapping[str, str] | None = None, app_name: str = "p4sub") -> Iterator[Any]:
    """A :func:`spark_session` for a ``with`` block, stopped afterwards only if this block started it
    (a session already running in the process is reused and left running)."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    session = spark_session(master, conf, app_name)
    try:
        yield session
    finally:
        if existing is None:
            session.stop()


def _import_modules(names: tuple[str, ...], _items: Iterable[Any]) -> Iterator[int]:
    import importlib as _importlib

    for name in names:
        _importlib.import_module(name)
    yield os.getpid()


def warm_workers(session: Any, modules: Iterable[str]) -> int:
    """Start the executors' Python workers and import ``modules`` in them, one task per core, so
    that the first real job finds them running (Spark reuses its Python workers,
    ``spark.python.worker.reuse``). Returns how many worker processes answered."""
    sc = _context(session)
    n = max(1, sc.defaultParallelism)
    with spark_errors("starting the Python workers", session):
        pids = sc.parallelize(range(n), n).mapPartitions(partial(_import_modules, tuple(modules))).collect()
    return len(set(pids))


class SessionStart:
    """A :func:`spark_session` (``sql=False``: a :func:`spark_context`) started on a thread, so that the seconds Spark takes to come up (the
    JVM, then the executors' Python workers when ``warm`` names modules for them) overlap the
    driver's own work (reading the rules, building what the job ships).

    :meth:`result` waits for the session and raises what starting it raised; :meth:`stop` waits
    for it and stops it unless it was already running when this object was made (as :func:`spark`).
    ``seconds``: how long the start took (None until it is over).
    """

    def __init__(self, master: str = "local[*]", conf: Mapping[str, str] | None = None, app_name: str = "p4sub",
                 warm: Iterable[str] = (), sql: bool = True) -> None:
        self.master, self.conf, self.app_name, self.warm, self.sql = master, dict(conf or {}), app_name, tuple(warm), sql
        # The JVM's active session is per thread: ask here, in the caller's thread.
        self.existing = _active_session() if sql else _active_context()
        self.session: Any = None
        self.error: BaseException | None = None
        self.seconds: float | None = None
        self._thread = threading.Thread(target=self._run, name="p4sub-spark-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            self.session = _start(self.master, self.conf, self.app_name, self.sql)
            if self.warm:
                warm_workers(self.session, self.warm)
        except BaseException as exc:  # handed to the caller's thread by result()
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - start

    def result(self) -> Any:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.session

    def stop(self) -> None:
        self._thread.join()
        if self.session is not None and self.existing is None:
            self.session.stop()


def _active_context() -> Any:
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    return SparkContext._active_spark_context


def _active_session() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None  # spark_session says so on the thread, and result() raises it
    return SparkSession.getActiveSession()


@contextlib.contextmanager
def spark_errors(what: str, session: Any = None) -> Iterator[None]:
    """Turn a failed Spark job into a :class:`P4subError` that names the task's own error
    (``session``: the job's, to name the executors' Python when they lack a module)."""
    try:
        yield
    except P4subError:
        raise
    except Exception as exc:
        if not type(exc).__module__.startswith(("py4j", "pyspark")):
            raise
        message = f"{what} failed on Spark: {_summary(exc)}"
        if "ModuleNotFoundError" in message or "ImportError" in message:
            python = getattr(_context(session), "pythonExec", None) or worker_python()
            message += (f" (the executors run {python}, which needs p4sub's dependencies: pip install p4sub"
                        " there, or name another Python with --conf spark.pyspark.python=PATH)")
        raise P4subError(message) from None


_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def _summary(exc: BaseException) -> str:
    """The Python error a task raised (the last line of its traceback), else the first line Spark gave."""
    text = str(exc)
    if "Traceback (most recent call last)" in text:
        tail = text.rsplit("Traceback (most recent call last)", 1)[1]
        found = [m for m in (_PY_ERROR.match(line.strip()) for line in tail.splitlines()) if m]
        if found:
            name, detail = found[0].groups()
            return detail if _is_user_error(name) else f"{name.rsplit('.', 1)[-1]}: {detail}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):  # Py4J: the Java error follows
        return lines[1].lstrip(": ")
    return lines[0] if lines else type(exc).__name__


def _is_user_error(qualified: str) -> bool:
    """True when a task's error class is a p4sub :class:`P4subError` (its message says it all)."""
    module, _, name = qualified.rpartition(".")
    if module.split(".")[0] not in PACKAGES:
        return False
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(cls, type) and issubclass(cls, P4subError)
