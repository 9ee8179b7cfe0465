"""compiler.base.spark_session: what Spark workers run (interpreter, shipped code) and how their failures
read; and ``p4sub route --master local[2]`` from outside the checkout against the process pool."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from compiler.base import spark_session
from compiler.base.errors import P4subError
from tests.spark_helpers import REPO, assert_same_network, child_env, failure, run_p4sub, skip_without_spark

TOPOLOGY = str(REPO / "examples" / "fat-tree-4.topo")
NETWORK_RULES = str(REPO / "examples" / "fat-tree-4.rules")
SPEC = str(REPO / "apps" / "itch" / "itch.p4")


def test_workers_run_this_interpreter_unless_told_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert spark_session.worker_python() == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py/bin/python3")
    assert spark_session.worker_python() == "/opt/py/bin/python3"
    assert spark_session.worker_python({"spark.pyspark.python": "/x/python"}) == "/x/python"


def test_the_code_zip_runs_p4sub_with_its_data_files_away_from_the_checkout(tmp_path) -> None:
    """What executors import: the zip alone (no checkout, no PYTHONPATH) parses rules with the lark
    grammar, reads a spec and renders a BMv2 program from the jinja2 templates inside it."""
    path = spark_session.build_code_zip(tmp_path / "code.zip")
    names = set(zipfile.ZipFile(path).namelist())
    assert {"grammar/subscription.lark", "grammar/p4spec.lark", "backends/bmv2/templates/program.p4.j2",
            "apps/itch/itch.p4", "runtime/replay_partition.py", "compiler/network/compile.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    script = f"""
import sys
sys.path.insert(0, {str(path)!r})
import compiler, backends.bmv2
assert compiler.__file__.startswith({str(path)!r}), compiler.__file__
from compiler.compile import compile_rules
from compiler.rules.parser import parse_rules
from compiler.spec.reader import read_spec
compiled = compile_rules(read_spec({SPEC!r}), parse_rules('add_order.stock == "AAPL" : fwd(1);', "r.sub"))
backends.bmv2.emit(compiled.pipeline, "out")
print(open("out/program.p4").read().count("table"))
"""
    other = tmp_path / "elsewhere"
    other.mkdir()
    done = subprocess.run([sys.executable, "-c", script], cwd=other, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 0


JOB_FAILURE = """An error occurred while calling o42.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/tmp/spark-1/userFiles-2/p4sub-code.zip/compiler/lang.py", line 16, in <module>
    from lark import Lark
{error}
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
"""


@pytest.mark.parametrize("error, expected", [
    ("ModuleNotFoundError: No module named 'lark'", "ModuleNotFoundError: No module named 'lark'"),
    ("apps.storage.StorageError: s3a://b/f.pcap: no such trace file", "s3a://b/f.pcap: no such trace file"),
])
def test_a_failed_task_is_summarised_by_its_python_error(error: str, expected: str) -> None:
    assert spark_session._summary(Exception(JOB_FAILURE.format(error=error))) == expected


def test_conf_arguments_are_key_value_pairs() -> None:
    assert spark_session.parse_conf(["spark.executor.memory=1g", "a=b=c"]) == {"spark.executor.memory": "1g", "a": "b=c"}
    with pytest.raises(P4subError, match="KEY=VALUE"):
        spark_session.parse_conf(["spark.executor.memory"])


@pytest.mark.spark
def test_route_on_local_spark_from_another_directory_writes_what_the_pool_writes(tmp_path) -> None:
    """Issue 15: ``route --master local[2]`` used to fail with ModuleNotFoundError ('lark', or
    'compiler' outside the checkout); now its per-switch output equals the process pool's."""
    from p4sub import main

    skip_without_spark()
    common = [TOPOLOGY, NETWORK_RULES, "--spec", SPEC, "--target", "bmv2", "--quiet"]
    assert main(["route", *common, "-o", str(tmp_path / "pool"), "--jobs", "2"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_p4sub(["route", *common, "-o", "net", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                      "--conf", "spark.driver.memory=512m"], cwd=elsewhere)
    assert proc.returncode == 0, failure(proc)
    assert "wrote net/network.json" in proc.stdout
    assert_same_network(tmp_path / "pool", elsewhere / "net")


def test_a_py4j_error_is_summarised_by_the_java_error_after_it() -> None:
    text = "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n: java.lang.IllegalStateException: boom\n\tat x"
    assert spark_session._summary(Exception(text)) == "java.lang.IllegalStateException: boom"


def test_a_spark_url_where_no_master_answers_is_a_user_error_at_once() -> None:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(P4subError, match=f"no Spark master answers at spark://127.0.0.1:{port}"):
        spark_session._check_master(f"spark://127.0.0.1:{port}")
    with pytest.raises(P4subError, match="expected spark://HOST:PORT"):
        spark_session._check_master("spark://nohost")
    spark_session._check_master("local[2]")  # nothing to check


def test_local_parallelism_is_known_before_spark_starts_for_local_masters_only() -> None:
    import os

    from compiler.base.spark_session import local_parallelism

    assert local_parallelism("local[2]") == 2 and local_parallelism("local") == 1 and local_parallelism("local[3,4]") == 3
    assert local_parallelism("local[*]") == (os.cpu_count() or 1)
    assert local_parallelism("local[2]", {"spark.default.parallelism": "6"}) == 6
    assert local_parallelism("spark://127.0.0.1:7077") is None and local_parallelism("yarn") is None
