"""apps/hicn: the hICN example (spec, rules, trace with hot and cold contents) compiles, replays
exactly (the model's counters against the ground truth's loop), sends hot contents to the cache and
cold ones (whose cell no hot content shares) to the origin, and both targets' programs pass p4c."""

from __future__ import annotations

import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from apps.hicn.trace import CATALOGUE, TraceConfig, content_name, interests, trace
from apps.pcap import write_pcap
from compiler.compile import compile_files
from runtime.model import Model
from runtime.replay import replay_local
from runtime.spec_trace import read_trace

ROOT = Path(__file__).resolve().parents[2]
SPEC, RULES = ROOT / "apps/hicn/hicn.p4", ROOT / "apps/hicn/rules.sub"
CONFIG = TraceConfig(seconds=3.0, rate=1500.0, hot=3, cold=500, seed=4)


@pytest.fixture(scope="module")
def compiled():
    return compile_files(SPEC, RULES)


@pytest.fixture(scope="module")
def pcap(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hicn") / "hicn.pcap"
    write_pcap(path, trace(CONFIG))
    return path


def test_trace_is_deterministic_and_names_contents() -> None:
    a, b = interests(CONFIG), interests(CONFIG)
    assert a == b and len(a) > 3000
    assert all(x[0] <= y[0] for x, y in zip(a, a[1:]))
    hot = {content_name(i) for i in range(CONFIG.hot)}
    share = sum(name in hot for _, name, _ in a) / len(a)
    assert 0.55 < share < 0.65
    assert content_name(0) >> 112 == CATALOGUE >> 112


def test_replay_is_exact_and_hot_contents_go_to_the_cache(compiled, pcap) -> None:
    result = replay_local(compiled.pipeline, compiled.typed, [pcap])
    assert result.exact and not result.total.ports["false_positives"].any()
    model = Model(compiled.pipeline)
    cols = read_trace(pcap, compiled.pipeline.spec, model.inputs + model.validity)
    ports = model.run(cols).port_sets()
    names = [int(n) for n in cols["ipv6.dst_addr"]]
    slots = compiled.pipeline.updates[0].size
    cell = {n: zlib.crc32(n.to_bytes(16, "big")) % slots for n in set(names)}
    hot = {content_name(i) for i in range(CONFIG.hot)}
    hot_cells = {cell[n] for n in hot}
    for n in hot:
        sent = [2 in p for name, p in zip(names, ports) if name == n]
        # 50 Interests per second go to the origin, the rest of each second to the cache.
        assert 0.6 < np.mean(sent) < 0.95
    cold = [2 in p for name, p in zip(names, ports) if name >> 112 == 0xB001 and name not in hot
            and cell[name] not in hot_cells]
    assert cold and not any(cold)
    assert all(p == frozenset({1}) for name, p in zip(names, ports) if name >> 112 == 0x9001)


@pytest.mark.p4c
def test_both_targets_programs_pass_p4c(compiled, tmp_path) -> None:
    import backends.bmv2 as bmv2
    import backends.tofino as tofino
    from tests.backends.tofino.test_program import _tna_include

    p4c = shutil.which("p4c-bm2-ss")
    include = _tna_include()
    if p4c is None or shutil.which("p4test") is None or include is None:
        pytest.skip("needs p4c-bm2-ss, p4test and tna.p4")
    (tmp_path / "bmv2.p4").write_text(bmv2.build_program(compiled.pipeline).text)
    done = subprocess.run([p4c, str(tmp_path / "bmv2.p4"), "-o", str(tmp_path / "bmv2.json")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (tmp_path / "tna.p4").write_text(tofino.build(compiled.pipeline).program.text)
    done = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", include, str(tmp_path / "tna.p4")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr
