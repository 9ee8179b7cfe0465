"""Fixtures for the replay tests: one small local Spark session, small generated traces and specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.compile import compile_rules
from compiler.rules.parser import parse_rules

REPO = Path(__file__).resolve().parents[2]

ITCH_RULES = """
add_order.stock == "AAPL" and add_order.price > 50 : fwd(1);
add_order.stock == "MSFT" : fwd(2);
add_order.stock == "AMZN" or add_order.stock == "NVDA" : fwd(3, 4);
add_order.shares < 100 and add_order.buy_sell_indicator == "B" : fwd(5);
add_order.price >= 300 : fwd(6);
add_order.stock == "GOOGL" and add_order.price > 10 and add_order.price <= 30 : fwd(7);
add_order.stock != "AAPL" and add_order.shares >= 500 and add_order.price < 20 : fwd(1);
"""

INT_RULES = """
int_hop.hop_latency > 100000 : fwd(3);
int_hop.switch_id == 5 and int_hop.queue_occupancy > 10 : fwd(4);
int_hop.switch_id == 7 : fwd(5);
int_hop.queue_occupancy >= 2000 or int_hop.switch_id == 11 : fwd(6, 7);
"""


@pytest.fixture(scope="session", autouse=True)
def replay_cache_dir(tmp_path_factory):
    """``p4sub replay`` keeps contexts under P4SUB_CACHE_DIR (runtime.replay_cache): a temporary one
    for the tests and the p4sub processes they start, not the user's ~/.cache."""
    import os

    path = tmp_path_factory.mktemp("p4sub-cache")
    saved = os.environ.get("P4SUB_CACHE_DIR")
    os.environ["P4SUB_CACHE_DIR"] = str(path)
    yield path
    if saved is None:
        os.environ.pop("P4SUB_CACHE_DIR", None)
    else:
        os.environ["P4SUB_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def spark():
    """A local[2] session shared by every Spark test (starting one costs tens of seconds)."""
    from runtime.replay import java_available, spark_session

    if not java_available():
        pytest.skip("Spark needs Java 17: no java on PATH and no JAVA_HOME")
    pytest.importorskip("pyspark", reason="PySpark is not installed")
    session = spark_session("local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                         "spark.driver.memory": "1g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def itch_spec():
    from compiler.spec.reader import read_spec

    return read_spec(REPO / "apps" / "itch" / "itch.p4")


@pytest.fixture(scope="session")
def int_spec():
    from compiler.spec.reader import read_spec

    return read_spec(REPO / "apps" / "int" / "int.p4")


@pytest.fixture(scope="session")
def itch_feed(tmp_path_factory) -> Path:
    from apps.itch.feed import FeedConfig, write_itch_feed

    path = tmp_path_factory.mktemp("replay") / "feed.pcap"
    write_itch_feed(path, FeedConfig(messages=20_000, symbols=40, seed=3))
    return path


@pytest.fixture(scope="session")
def int_feed(tmp_path_factory) -> Path:
    from apps.int.generator import IntTraceConfig, write_int_trace

    path = tmp_path_factory.mktemp("replay") / "int.pcap"
    write_int_trace(path, IntTraceConfig(packets=2000, switches=20, anomalies=0.05, seed=1))
    return path


@pytest.fixture(scope="session")
def itch_compiled(itch_spec):
    return compile_rules(itch_spec, parse_rules(ITCH_RULES, "itch.sub"))


@pytest.fixture(scope="session")
def int_compiled(int_spec):
    return compile_rules(int_spec, parse_rules(INT_RULES, "int.sub"))
