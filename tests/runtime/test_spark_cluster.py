"""A real Spark standalone cluster on 127.0.0.1 (one master, one worker of 1 core and 1 GB, from the
scripts and jars pyspark ships): ``p4sub replay`` and ``p4sub route`` with ``--master spark://...``,
run in a child process from a directory that is not the checkout, give what the in-process runs give.

The executor is a separate JVM started by the worker in its own work directory, with its own
Python workers: it finds neither the driver's working directory nor its ``PYTHONPATH``, so these
tests see what a remote machine would lack (short of a second disk: the traces are read once by a
``file://`` URL, through pyarrow.fs like ``hdfs://``/``s3a://``, and once by a relative path).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.runtime.conftest import ITCH_RULES
from tests.spark_helpers import REPO, assert_same_network, child_env, failure, run_p4sub, skip_without_spark

pytestmark = [pytest.mark.spark, pytest.mark.spark_cluster]

START_TIMEOUT_S = 90
SMALL = ["--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m", "--conf", "spark.ui.enabled=false"]
COUNTS = ("partitions", "packets", "messages", "rows", "damaged", "damage", "skipped", "totals", "ports", "exact", "rules")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Stop a daemon and everything it started (its session: spark-class execs the JVM in it)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    except ProcessLookupError:
        pass


def _wait_for(log: Path, text: str, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"exited {dead[0].returncode}" if dead else f"not ready after {START_TIMEOUT_S} s"
            raise RuntimeError(f"Spark standalone {log.stem} {why}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def standalone(request, tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master and one worker, stopped after the module, even on failure."""
    skip_without_spark()
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.skip(f"this pyspark has no {spark_class} to start a standalone cluster with")
    work = tmp_path_factory.mktemp("standalone")
    env = child_env(SPARK_HOME=str(home), SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(work),
                    SPARK_WORKER_DIR=str(work / "worker"), SPARK_NO_DAEMONIZE="1")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = {
        "master": ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                   "--webui-port", str(_free_port())],
        "worker": ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                   "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(work / "worker")],
    }
    procs: list[subprocess.Popen] = []

    def teardown() -> None:
        for p in reversed(procs):
            _stop(p)

    request.addfinalizer(teardown)
    ready = {"master": "I have been elected leader", "worker": "Successfully registered with master"}
    for name, args in daemons.items():
        log = work / f"{name}.log"
        with open(log, "w") as out:
            procs.append(subprocess.Popen([str(spark_class), *args], cwd=work, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for(log, ready[name], procs)
    yield url


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> Path:
    """A working directory outside the checkout with a small ITCH feed, its rules and their compile."""
    from apps.itch.feed import FeedConfig, write_itch_feed
    from p4sub import main

    d = tmp_path_factory.mktemp("elsewhere")
    write_itch_feed(d / "feed.pcap", FeedConfig(messages=20_000, symbols=40, seed=3))
    (d / "itch.sub").write_text(ITCH_RULES)
    assert main(["compile", str(REPO / "apps/itch/itch.p4"), str(d / "itch.sub"), "-o", str(d / "out")]) == 0
    return d


def test_replay_on_a_standalone_cluster_counts_what_the_local_replay_counts(standalone, elsewhere) -> None:
    from compiler import ir
    from compiler.rules.parser import read_rules
    from compiler.rules.typecheck import check_rules
    from runtime.replay import replay_local
    from runtime.replay_report import summary

    feed = elsewhere / "feed.pcap"
    traces = [feed.as_uri(), "feed.pcap"]  # a URL read through pyarrow.fs, and a path relative to the cwd
    proc = run_p4sub(["replay", "out", "--rules", "itch.sub", "--trace", traces[0], "--trace", traces[1],
                      "--master", standalone, "--partitions", "3", "--report", "report", "--quiet", *SMALL],
                     cwd=elsewhere)
    assert proc.returncode == 0, failure(proc)
    cluster = json.loads((elsewhere / "report" / "summary.json").read_text())
    assert cluster["master"] == standalone
    assert cluster["traces"] == [feed.as_uri(), str(feed.resolve())]
    pipeline = ir.load(elsewhere / "out")
    local = summary(replay_local(pipeline, check_rules(read_rules(elsewhere / "itch.sub"), pipeline.spec),
                                 [feed, feed], partitions=3))
    assert {k: cluster[k] for k in COUNTS} == {k: local[k] for k in COUNTS}
    assert cluster["messages"] == 40_000 and cluster["exact"] and cluster["totals"]["delivered"] > 0


def test_route_on_a_standalone_cluster_writes_what_the_pool_writes(standalone, elsewhere) -> None:
    from p4sub import main

    common = [str(REPO / "examples/fat-tree-4.topo"), str(REPO / "examples/fat-tree-4.rules"),
              "--spec", str(REPO / "apps/itch/itch.p4"), "--target", "bmv2", "--quiet"]
    pool = elsewhere / "net-pool"
    assert main(["route", *common, "-o", str(pool), "--jobs", "2"]) == 0
    proc = run_p4sub(["route", *common, "-o", "net", "--master", standalone, *SMALL], cwd=elsewhere)
    assert proc.returncode == 0, failure(proc)
    assert_same_network(pool, elsewhere / "net")
