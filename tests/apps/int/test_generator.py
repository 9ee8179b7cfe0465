"""The INT traffic generator: path and header invariants, latency distribution, anomaly share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apps.int.generator import IntTraceConfig, generate_int_packets, write_int_trace
from apps.int.metadata import P4SUB_INSTRUCTIONS
from compiler.base.errors import P4subError


def test_paths_and_headers_follow_the_spec() -> None:
    cfg = IntTraceConfig(packets=2000, switches=40, hops=(2, 6), seed=8)
    stamps = []
    for g in generate_int_packets(cfg):
        h = len(g.md.hops)
        assert 2 <= h <= 6 and len(set(g.path)) == h and all(1 <= s <= 40 for s in g.path)
        assert [hop.switch_id for hop in g.md.hops] == list(reversed(g.path))  # newest hop on top
        assert g.md.header.instruction_bitmap == P4SUB_INSTRUCTIONS and g.md.header.hop_ml == 4
        assert g.md.header.remaining_hop_count == 8 - h
        assert all(0 <= hop.queue_id < 8 and 1 <= hop.ingress_port_id <= 48 for hop in g.md.hops)
        stamps.append(g.timestamp_ns)
    assert all(a < b for a, b in zip(stamps, stamps[1:]))


def test_latencies_are_realistic_and_anomalies_have_the_asked_share() -> None:
    cfg = IntTraceConfig(packets=20_000, switches=100, anomalies=0.02, seed=2)
    lat, flag = [], []
    for g in generate_int_packets(cfg):
        lat += [h.hop_latency for h in g.md.hops]
        flag += list(g.anomalous)
    lat_a, flag_a = np.array(lat), np.array(flag)
    assert 0.015 < flag_a.mean() < 0.025
    normal, odd = lat_a[~flag_a], lat_a[flag_a]
    assert 250 <= np.median(normal) <= 5000  # a few hundred ns to a few us
    assert np.percentile(normal, 99.9) < 50_000
    assert odd.min() > 50_000  # every anomaly is far above normal traffic


def test_seed_fixes_the_bytes(tmp_path: Path) -> None:
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        write_int_trace(tmp_path / f"{name}.pcap", IntTraceConfig(packets=300, seed=seed))
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()
    assert (tmp_path / "a.pcap").read_bytes() != (tmp_path / "c.pcap").read_bytes()


@pytest.mark.parametrize(
    "kwargs",
    [{"hops": (0, 3)}, {"hops": (3, 9)}, {"hops": (4, 2)}, {"switches": 2, "hops": (1, 5)}, {"anomalies": 1.5}, {"switches": 0}],
)
def test_bad_configs_are_user_errors(kwargs: dict) -> None:
    with pytest.raises(P4subError):
        list(generate_int_packets(IntTraceConfig(**kwargs)))
