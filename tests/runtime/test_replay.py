"""Trace replay: per-port counts against message-by-message sets, coarsened pipelines, Spark vs in-process,
partitioning, damage, and the command line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from apps.pcap import PcapReader, pcap_record_offsets
from compiler import ir
from compiler.compile import CompileOptions, compile_rules
from compiler.oracle import evaluate
from compiler.rules.parser import parse_rules
from runtime.model import Model
from runtime.replay import replay, replay_local
from runtime.replay_partition import PORT_METRICS
from runtime.spec_trace import read_trace
from tests.runtime.conftest import ITCH_RULES

# ------------------------------------------------------------------------------------------------
# An independent count: Python sets per message from Model.port_sets() and compiler.oracle
# ------------------------------------------------------------------------------------------------


def expected_counts(pipeline: ir.Pipeline, typed, columns: dict[str, np.ndarray], msg_bytes: str | None) -> dict[str, Counter]:
    delivered = Model(pipeline).run(columns).port_sets()
    fields = list(typed.fields)
    wanted = [evaluate(typed, {f: int(columns[f][i]) for f in fields}).ports for i in range(len(delivered))]
    out: dict[str, Counter] = {m: Counter() for m in PORT_METRICS}
    size = columns[msg_bytes].tolist() if msg_bytes else [0] * len(delivered)
    for d, w, s in zip(delivered, wanted, size):
        for p in d:
            out["delivered"][p] += 1
        for p in w:
            out["wanted"][p] += 1
        for p in d - w:
            out["false_positives"][p] += 1
            out["fp_bytes"][p] += s
        for p in w - d:
            out["false_negatives"][p] += 1
            out["fn_bytes"][p] += s
    packets: dict[int, tuple[set, set, int]] = {}
    for i, pkt in enumerate(columns["packet_index"].tolist()):
        entry = packets.setdefault(pkt, (set(), set(), int(columns["packet_len"][i])))
        entry[0].update(delivered[i])
        entry[1].update(wanted[i])
    for d, w, length in packets.values():
        for p in d:
            out["delivered_packets"][p] += 1
            out["delivered_packet_bytes"][p] += length
        for p in w:
            out["wanted_packets"][p] += 1
        for p in d - w:
            out["fp_packets"][p] += 1
            out["fp_packet_bytes"][p] += length
        for p in w - d:
            out["fn_packets"][p] += 1
    return out


def as_counters(result) -> dict[str, Counter]:
    return {m: Counter({p: int(v) for p, v in zip(result.space.ports, result.total.ports[m]) if v}) for m in PORT_METRICS}


ITCH_FIELDS = ["add_order.stock", "add_order.price", "add_order.shares", "add_order.buy_sell_indicator"]
INT_FIELDS = ["int_hop.switch_id", "int_hop.hop_latency", "int_hop.queue_occupancy"]


def itch_columns(path: Path) -> dict[str, np.ndarray]:
    """The feed's rows as the spec's parser reads them (the replay's own reading)."""
    from compiler.spec.reader import read_spec

    return read_trace(path, read_spec(Path(__file__).resolve().parents[2] / "apps/itch/itch.p4"), ITCH_FIELDS)


def totals(result) -> dict:
    return {"ports": {m: result.total.ports[m].tolist() for m in PORT_METRICS},
            "scalars": {k: result.total.scalars[k] for k in ("packets", "messages", "rows", "rows_with_delivery")},
            "damage": dict(result.total.damage), "skipped": dict(result.total.skipped),
            "statuses": dict(result.total.statuses)}


# ------------------------------------------------------------------------------------------------
# In process (no Spark)
# ------------------------------------------------------------------------------------------------


def test_itch_counts_equal_message_by_message_sets(itch_compiled, itch_feed) -> None:
    result = replay_local(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], partitions=3, batch_packets=500)
    cols = itch_columns(itch_feed)
    assert as_counters(result) == expected_counts(itch_compiled.pipeline, itch_compiled.typed, cols, "message_bytes")
    assert result.app == "itch" and result.exact
    assert result.total.scalars["rows"] == len(cols["packet_index"])
    assert result.total.scalars["messages"] == 20_000  # every MoldUDP64 block, Add Order or not
    assert sum(result.total.ports["wanted"]) > 1000 and len(result.partitions) == 3


def test_bitmap_lanes_replay_counts_equal_message_by_message_sets(itch_spec, itch_feed) -> None:
    """The same feed through ITCH rules compiled as port bitmaps in two lanes (a layout the model runs
    for any spec): the replay reads the surviving copies of each bitmap and counts them exactly."""
    compiled = compile_rules(itch_spec, parse_rules(ITCH_RULES, "itch.sub"), CompileOptions(delivery="bitmap", lanes=2))
    assert compiled.pipeline.delivery.is_bitmap and compiled.pipeline.lanes == 2
    result = replay_local(compiled.pipeline, compiled.typed, [itch_feed], partitions=2, batch_packets=700)
    cols = itch_columns(itch_feed)
    assert as_counters(result) == expected_counts(compiled.pipeline, compiled.typed, cols, "message_bytes")
    assert result.exact and sum(result.total.ports["false_positives"]) == 0


def test_int_counts_equal_message_by_message_sets(int_compiled, int_spec, int_feed) -> None:
    result = replay_local(int_compiled.pipeline, int_compiled.typed, [int_feed], partitions=2)
    cols = read_trace(int_feed, int_spec, INT_FIELDS)
    assert as_counters(result) == expected_counts(int_compiled.pipeline, int_compiled.typed, cols, "message_bytes")
    assert result.app == "int" and result.exact
    assert all(result.total.ports["wanted"][result.space.bit(p)] > 0 for p in (3, 4, 5, 6))


def _price_band(path: Path) -> tuple[int, int]:
    """Two prices in cents between which a fair share of AAPL's Add Orders lie."""
    cols = itch_columns(path)
    aapl = cols["add_order.price"][cols["add_order.stock"] == int.from_bytes(b"AAPL    ", "big")]
    lo, hi = np.percentile(aapl, [30, 70]) // 100
    return int(lo), int(hi)


def _compile_with_rule_one(spec, cents: int):
    text = ITCH_RULES.replace("add_order.price > 50 : fwd(1)", f"add_order.price > {cents // 100}.{cents % 100:02d} : fwd(1)")
    assert text != ITCH_RULES
    return compile_rules(spec, parse_rules(text))


def coarsened_case(itch_spec, itch_feed):
    """Subscriptions with AAPL above hi cents on port 1, a pipeline compiled with that rule widened to lo:
    exactly the AAPL Add Orders priced in (lo, hi] are extra on port 1 (no other rule sends AAPL there)."""
    lo, hi = _price_band(itch_feed)
    truth, widened = _compile_with_rule_one(itch_spec, hi), _compile_with_rule_one(itch_spec, lo)
    cols = itch_columns(itch_feed)
    aapl = cols["add_order.stock"] == int.from_bytes(b"AAPL    ", "big")
    price = cols["add_order.price"].astype(np.int64)
    band = aapl & (price > lo * 100) & (price <= hi * 100)
    return truth, widened, int(band.sum()), int(cols["message_bytes"][band].astype(np.int64).sum())


def test_widened_rule_shows_exactly_the_expected_false_positives(itch_spec, itch_feed) -> None:
    truth, widened, extra, extra_bytes = coarsened_case(itch_spec, itch_feed)
    assert extra > 20
    result = replay_local(widened.pipeline, truth.typed, [itch_feed], partitions=2)
    fp = as_counters(result)["false_positives"]
    assert fp == Counter({1: extra})
    assert as_counters(result)["fp_bytes"] == Counter({1: extra_bytes})
    assert result.exact  # widening loses nothing
    narrowed = replay_local(truth.pipeline, widened.typed, [itch_feed], partitions=2)
    assert as_counters(narrowed)["false_negatives"] == Counter({1: extra})
    assert not narrowed.exact and not narrowed.total.ports["false_positives"].any()


def test_report_summary_table_and_plots(itch_spec, itch_feed, tmp_path) -> None:
    from runtime.replay_report import text_table, write_report

    truth, widened, extra, _ = coarsened_case(itch_spec, itch_feed)
    result = replay_local(widened.pipeline, truth.typed, [itch_feed], partitions=2)
    data = write_report(result, tmp_path / "report")
    saved = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert saved == json.loads(json.dumps(data))
    port1 = next(p for p in saved["ports"] if p["port"] == 1)
    assert port1["false_positives"] == extra and port1["fp_rate"] == pytest.approx(extra / port1["delivered"])
    assert saved["totals"]["false_negatives"] == 0 and saved["exact"] is True
    assert saved["messages"] == 20_000 and saved["partitions"] == 2 and len(saved["partition_detail"]) == 2
    for name in ("deliveries_per_port.png", "false_positive_rate.png", "throughput_per_partition.png"):
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = text_table(data)
    assert "no false negatives" in table and f"{extra:,}" in table


# ------------------------------------------------------------------------------------------------
# Spark
# ------------------------------------------------------------------------------------------------


def damaged_copy(src: Path, dst: Path) -> int:
    """A copy of an ITCH feed with damage: bad UDP checksums, garbage between records, a cut tail.
    Returns how many packets were corrupted in place."""
    data = bytearray(src.read_bytes())
    offsets = pcap_record_offsets(src)
    corrupted = offsets[5::97]
    for rec in corrupted:
        data[int(rec["data_offset"]) + 60] ^= 0xFF  # inside the MoldUDP64 payload: the UDP checksum fails
    out = bytearray()
    prev = 0
    for k, rec in enumerate(offsets[300::700]):
        at = int(rec["offset"])
        out += data[prev:at] + bytes([0xAB, 0x01, 0x02]) * (k + 1)
        prev = at
    out += data[prev:-10]
    dst.write_bytes(bytes(out))
    return len(corrupted)


@pytest.mark.spark
def test_spark_exact_itch_has_no_false_positives_or_negatives(spark, itch_compiled, itch_feed) -> None:
    result = replay(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], spark=spark, partitions=4)
    assert result.exact and not result.total.ports["false_positives"].any()
    assert totals(result) == totals(replay_local(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], partitions=1))
    assert result.total.scalars["rows"] > 9000 and result.cores == 2


@pytest.mark.spark
def test_spark_exact_int_has_no_false_positives_or_negatives(spark, int_compiled, int_feed) -> None:
    result = replay(int_compiled.pipeline, int_compiled.typed, [int_feed, int_feed], spark=spark)
    assert result.exact and not result.total.ports["false_positives"].any()
    single = replay_local(int_compiled.pipeline, int_compiled.typed, [int_feed], partitions=1)
    assert result.total.scalars["rows"] == 2 * single.total.scalars["rows"] > 10_000
    assert (result.total.ports["wanted"] == 2 * single.total.ports["wanted"]).all()


@pytest.mark.spark
def test_spark_widened_rule_shows_exactly_the_expected_false_positives(spark, itch_spec, itch_feed) -> None:
    truth, widened, extra, extra_bytes = coarsened_case(itch_spec, itch_feed)
    result = replay(widened.pipeline, truth.typed, [itch_feed], spark=spark, partitions=3)
    assert as_counters(result)["false_positives"] == Counter({1: extra})
    assert as_counters(result)["fp_bytes"] == Counter({1: extra_bytes})
    assert result.exact


@pytest.mark.spark
def test_spark_many_partitions_give_the_same_totals_as_one(spark, itch_compiled, itch_feed) -> None:
    one = replay(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], spark=spark, partitions=1)
    many = replay(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], spark=spark, partitions=13, batch_packets=64)
    assert len(one.partitions) == 1 and len(many.partitions) == 13
    assert totals(many) == totals(one)
    assert [r.first_index for r in many.ranges] == sorted(r.first_index for r in many.ranges)


@pytest.mark.spark
def test_spark_damaged_packets_are_read_as_the_switch_parser_reads_them(spark, itch_spec, itch_compiled, itch_feed,
                                                                        tmp_path) -> None:
    """Damage inside packets is not filtered out (a switch checks no UDP checksum): the corrupted
    message counts (XOR 0xFF on their high byte) send the parser past the last block, a status the
    replay counts per packet exactly as the reference parser gives it; damage between records is
    the pcap layer's, counted and resynchronised."""
    from runtime.parse_graph import ParseGraph

    bad = tmp_path / "damaged.pcap"
    corrupted = damaged_copy(itch_feed, bad)
    result = replay(itch_compiled.pipeline, itch_compiled.typed, [bad], spark=spark, partitions=6)
    graph = ParseGraph(itch_spec)
    parsed = [graph.parse(rec.data) for rec in PcapReader(bad)]
    assert result.total.statuses == dict(Counter(p.status for p in parsed))
    assert corrupted // 2 < result.total.statuses["packet_too_short"] <= corrupted
    assert result.total.scalars["rows"] == sum(len(p.stacks.get("add_order", ())) for p in parsed)
    assert result.total.damage.get("bad_record_header", 0) >= 1
    assert totals(result) == totals(replay_local(itch_compiled.pipeline, itch_compiled.typed, [bad], partitions=1))
    assert result.exact and not result.total.ports["false_positives"].any()


@pytest.mark.spark
def test_cli_replay_writes_the_report(spark, itch_feed, tmp_path, capsys, replay_cache_dir) -> None:
    from p4sub import main

    rules = tmp_path / "itch.sub"
    rules.write_text(ITCH_RULES)
    out = tmp_path / "out"
    assert main(["compile", str(Path(__file__).resolve().parents[2] / "apps/itch/itch.p4"), str(rules), "-o", str(out)]) == 0
    capsys.readouterr()
    status = main(["replay", str(out), "--trace", str(itch_feed), "--rules", str(rules), "--partitions", "3",
                   "--report", str(tmp_path / "report"), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0
    assert "no false negatives" in printed and "20,000 messages" in printed
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["partitions"] == 3 and summary["totals"]["false_positives"] == 0
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session was reused, not stopped
    stages = summary["command"]["stages_s"]
    assert set(stages) == {"start", "rules", "index", "session", "split", "job", "driver", "report", "stop"}
    assert summary["command"]["seconds"] == pytest.approx(sum(stages.values()), abs=0.01)
    assert printed.splitlines()[1].startswith("end to end ") and "the whole command" in printed.splitlines()[1]

    # Again: the context comes from the cache (runtime.replay_cache), and counts the same.
    entries = list((replay_cache_dir / "replay").glob("*.pickle"))
    assert len(entries) == 1
    assert main(["replay", str(out), "--trace", str(itch_feed), "--rules", str(rules), "--partitions", "3",
                 "--report", str(tmp_path / "again"), "--quiet"]) == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert list((replay_cache_dir / "replay").glob("*.pickle")) == entries
    assert {k: again[k] for k in ("totals", "ports", "messages", "rules", "app")} == \
        {k: summary[k] for k in ("totals", "ports", "messages", "rules", "app")}


def test_cli_replay_without_rules_is_a_user_error(itch_compiled, itch_feed, tmp_path, capsys) -> None:
    from p4sub import main

    ir.save(itch_compiled.pipeline, tmp_path / "pipeline.json")
    assert main(["replay", str(tmp_path), "--trace", str(itch_feed)]) == 2
    assert "--rules" in capsys.readouterr().err


def test_cli_replay_finds_rules_in_sources_json(itch_compiled, tmp_path) -> None:
    from p4sub.replay import sources

    (tmp_path / "sources.json").write_text(json.dumps({"rules": "r.sub", "spec": "/abs/spec.p4"}))
    assert sources(tmp_path) == {"rules": str(tmp_path / "r.sub"), "spec": "/abs/spec.p4"}


def test_cli_replay_refuses_both_spec_and_app(itch_compiled, itch_feed, tmp_path, capsys) -> None:
    from p4sub import main

    ir.save(itch_compiled.pipeline, tmp_path / "pipeline.json")
    rules = tmp_path / "r.sub"
    rules.write_text(ITCH_RULES)
    spec = str(Path(__file__).resolve().parents[2] / "apps/itch/itch.p4")
    assert main(["replay", str(tmp_path), "--trace", str(itch_feed), "--rules", str(rules), "--spec", spec,
                 "--app", "itch"]) == 2
    assert "--spec and --app" in capsys.readouterr().err


def test_replay_with_a_spec_that_lacks_the_pipelines_fields_is_a_user_error(itch_compiled, int_spec, itch_feed) -> None:
    from compiler.base.errors import P4subError

    with pytest.raises(P4subError, match="not a field of the spec's headers"):
        replay_local(itch_compiled.pipeline, itch_compiled.typed, [itch_feed], spec=int_spec)


def test_cli_replay_refuses_an_empty_trace_before_spark_starts(itch_compiled, tmp_path, capsys, monkeypatch) -> None:
    """As netsim does (tests/runtime/test_netsim.py): "0 messages replayed, exact" would be a lie."""
    import struct

    from compiler.base import spark_session
    from p4sub import main

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for an empty trace")

    monkeypatch.setattr(spark_session, "SessionStart", no_spark)

    ir.save(itch_compiled.pipeline, tmp_path / "pipeline.json")
    rules = tmp_path / "r.sub"
    rules.write_text(ITCH_RULES)
    trace = tmp_path / "empty.pcap"
    trace.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    assert main(["replay", str(tmp_path), "--trace", str(trace), "--rules", str(rules), "--master", "local[1]"]) == 2
    assert f"{trace}: holds no packets" in capsys.readouterr().err


def test_cached_context_counts_what_a_built_one_counts(itch_compiled, itch_spec, itch_feed, tmp_path, monkeypatch) -> None:
    from runtime import replay_cache
    from runtime.replay import split_traces
    from runtime.replay_partition import ReplayContext, replay_range

    monkeypatch.setenv("P4SUB_CACHE_DIR", str(tmp_path))
    built = ReplayContext.build(itch_compiled.pipeline, itch_compiled.typed, itch_spec)
    replay_cache.store("k", built)
    loaded = replay_cache.load("k")
    assert loaded is not None and (loaded.app, loaded.rules, loaded.ordered) == ("itch", len(itch_compiled.typed.rules), False)
    rng = split_traces([itch_feed], 1)[0].ranges[0]
    a, b = replay_range(built, rng, 0), replay_range(loaded, rng, 0)
    assert all(np.array_equal(a.ports[m], b.ports[m]) for m in PORT_METRICS) and a.ports["delivered"].any()
    (tmp_path / "replay" / "k.pickle").write_bytes(b"not a pickle")
    assert replay_cache.load("k") is None  # a damaged entry is built again, not an error
    assert replay_cache.load("absent") is None


def test_context_cache_key_changes_with_every_input(tmp_path) -> None:
    from runtime.replay_cache import key

    pipeline, rules, spec = tmp_path / "pipeline.json", tmp_path / "r.sub", tmp_path / "s.p4"
    pipeline.write_text("{}")
    rules.write_text("a.b == 1 : fwd(1);")
    spec.write_text("header")
    base = key(pipeline, rules, [], "", 64)
    assert key(pipeline, rules, [], "", 64) == base
    assert key(pipeline, rules, [], "", 65) != base
    assert key(pipeline, rules, [spec], "--spec s.p4", 64) != base
    rules.write_text("a.b == 2 : fwd(1);")
    assert key(pipeline, rules, [], "", 64) != base
    rules.write_text("a.b == 1 : fwd(1);")
    pipeline.write_text("{ }")
    assert key(pipeline, rules, [], "", 64) != base


def test_model_for_batches_runs_as_the_model_without_its_ir(itch_compiled, itch_spec, itch_feed) -> None:
    """What replay ships and caches: the same verdicts, a smaller pickle, and no run_one."""
    import pickle

    from compiler.base.errors import P4subError

    full = Model(itch_compiled.pipeline)
    slim = full.for_batches()
    columns = read_trace(itch_feed, itch_spec, full.inputs)
    a, b = full.run(columns), slim.run(columns)
    assert np.array_equal(a.port, b.port) and np.array_equal(a.group, b.group) and np.array_equal(a.dropped, b.dropped)
    assert a.port_sets() == b.port_sets() and any(a.port_sets())
    assert len(pickle.dumps(slim)) < len(pickle.dumps(full))
    assert full.pipeline.entries and not slim.pipeline.entries  # the original is left whole
    with pytest.raises(P4subError, match="for_batches"):
        slim.run_one({})
