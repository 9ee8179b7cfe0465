"""Replay of stateful rules: ordered (one range per trace, state from the trace's start), ground truth
from a plain per-message loop (runtime.groundtruth_state), and a mismatch of windows caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apps.itch.orders import burst_trace
from apps.pcap import write_pcap
from compiler.compile import compile_files, compile_rules
from compiler.rules.parser import read_rules
from compiler.rules.typecheck import check_rules
from compiler.spec.reader import parse_spec
from runtime.groundtruth import GroundTruth
from runtime.model import Model
from runtime.replay import replay, replay_local
from runtime.replay_ports import PortSpace
from runtime.spec_trace import read_trace

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples/stateful/itch-rate.p4"
RULES = ROOT / "examples/stateful/itch-rate.rules"


@pytest.fixture(scope="module")
def compiled():
    return compile_files(SPEC, RULES)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[Path]:
    out = []
    for seed in (1, 2):
        path = tmp_path_factory.mktemp("stateful") / f"orders{seed}.pcap"
        write_pcap(path, burst_trace(seed, seconds=1.5))
        out.append(path)
    return out


def test_stateful_replay_is_exact_and_ordered(compiled, traces) -> None:
    result = replay_local(compiled.pipeline, compiled.typed, traces, partitions=7, batch_packets=64)
    assert len(result.ranges) == len(traces)  # one task per trace, whatever was asked
    assert result.exact and not result.total.ports["false_positives"].any()
    delivered = dict(zip(result.space.ports, result.total.ports["delivered"].tolist()))
    assert delivered[2] > 0 and delivered[1] > delivered[2]  # bursts of GOOGL, and quieter windows


def test_ground_truth_state_equals_the_model_on_a_trace(compiled, traces) -> None:
    model = Model(compiled.pipeline)
    truth = GroundTruth.build(compiled.typed, PortSpace.of({1, 2, 3, 4}))
    cols = read_trace(traces[0], compiled.pipeline.spec, list(model.inputs) + list(truth.fields))
    assert "rate" not in truth.fields and {"add_order.stock", "add_order.shares"} <= set(truth.fields)
    got = truth.state.values(cols, len(cols["timestamp_ns"]))
    result = model.run(cols)
    for update in compiled.pipeline.updates:
        for read in update.reads:
            assert result.metadata[read.field].tolist() == got[read.attribute].tolist(), read.attribute
    assert int(got["rate"].max()) >= 4


def test_a_pipeline_with_another_window_shows_false_deliveries(compiled, traces) -> None:
    """The ground truth does not take the pipeline's word for the windows: a pipeline compiled with
    1 ms windows, judged against the rules of 100 ms windows, misses bursts."""
    text = SPEC.read_text().replace("@query_counter(rate, 100000,", "@query_counter(rate, 1000,")
    short = compile_rules(parse_spec(text, str(SPEC)), read_rules(RULES)).pipeline
    result = replay_local(short, compiled.typed, traces[:1])
    negatives = dict(zip(result.space.ports, result.total.ports["false_negatives"].tolist()))
    assert negatives[2] > 0 and not result.exact


@pytest.mark.spark
def test_spark_stateful_replay_equals_in_process(spark, compiled, traces) -> None:
    local = replay_local(compiled.pipeline, compiled.typed, traces)
    distributed = replay(compiled.pipeline, compiled.typed, traces, spark=spark, partitions=6)
    assert len(distributed.ranges) == len(traces)
    for metric, values in local.total.ports.items():
        assert distributed.total.ports[metric].tolist() == values.tolist(), metric
