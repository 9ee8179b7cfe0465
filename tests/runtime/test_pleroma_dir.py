"""``p4sub netsim DIR`` on a PLEROMA network directory (:mod:`runtime.pleroma_dir`): the rendered
entries read back and run give the figures netsim gives on the flows they were rendered from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.network import fat_tree
from compiler.pleroma import Samples, build, enforce, flow_count
from p4sub import main
from runtime import pleroma_dir
from runtime.netsim import Batch, simulate
from runtime.netsim_pleroma import pleroma_network
from runtime.pleroma_eval.workloads import make

TOPO = fat_tree(4)
HOSTS = TOPO.hosts()
PUBS = [HOSTS[0], HOSTS[5]]


@pytest.fixture(scope="module")
def network():
    wl = make("balogh", TOPO, 40, 300, 3)
    net = build(TOPO, wl.typed, PUBS, 20, "rank", "publisher", max_dz=16)
    return wl, net


def _trace(path, wl) -> None:
    n = len(next(iter(wl.columns.values())))
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({k: int(v[i]) for k, v in wl.columns.items()}) + "\n")


@pytest.mark.parametrize("merged", [False, True])
def test_netsim_runs_the_directory_as_it_runs_the_flows(tmp_path, capsys, network, merged):
    wl, net = network
    tables = net.tables
    if merged:
        dz = net.space.event_dz(wl.columns, net.resolution)
        tables, stats = enforce(TOPO, tables, max(flow_count(tables).values()) // 2, "ms", net.trees,
                                net.resolution, Samples(dz[:50], np.zeros(50, dtype=np.int64), PUBS[:1]))
        assert stats.merges
    out = tmp_path / "net"
    pleroma_dir.write(out, TOPO, wl.rules_text, wl.spec_text, net, tables, {"method": "ms"} if merged else None)
    _trace(tmp_path / "events.jsonl", wl)
    assert main(["netsim", str(out), "--trace", str(tmp_path / "events.jsonl"), "--publisher", PUBS[1],
                 "--report", str(tmp_path / "rep")]) == 0
    assert "pleroma network" in capsys.readouterr().out
    got = json.loads((tmp_path / "rep" / "netsim.json").read_text())
    n = len(next(iter(wl.columns.values())))
    batch = Batch(dict(wl.columns), np.arange(n, dtype=np.int64), np.full(n, 64, dtype=np.int64),
                  np.zeros(n, dtype=np.int64))
    ref = simulate(pleroma_network(TOPO, wl.typed, wl.spec, net.space, net.resolution, tables, net.trees, net.tree),
                   [batch], PUBS[1], "prune").report()
    assert got["kind"] == "pleroma" and got["host_totals"] == ref["host_totals"] and got["tiers"] == ref["tiers"]
    assert got["host_totals"]["delivered"] > 0
    others = {h: s for h, s in got["hosts"].items() if h != PUBS[1]}
    assert sum(s["false_negatives"] for s in others.values()) == 0


def test_bad_directories_are_refused_with_a_located_message(tmp_path, capsys, network):
    wl, net = network
    out = tmp_path / "net"
    pleroma_dir.write(out, TOPO, wl.rules_text, wl.spec_text, net, net.tables)
    _trace(tmp_path / "events.jsonl", wl)
    args = ["netsim", str(out), "--trace", str(tmp_path / "events.jsonl"), "--publisher"]
    assert main(args + [HOSTS[9]]) == 2  # per-publisher trees: h9 publishes nothing here
    assert "not one of this PLEROMA network's publishers" in capsys.readouterr().err
    good = (out / "network.json").read_text()
    manifest = json.loads(good)
    (out / "network.json").write_text(json.dumps({**manifest, "kind": "other"}))
    assert main(args + [PUBS[0]]) == 2
    assert "unknown network kind 'other'" in capsys.readouterr().err
    del manifest["space"]
    (out / "network.json").write_text(json.dumps(manifest))
    assert main(args + [PUBS[0]]) == 2
    err = capsys.readouterr().err
    assert "network.json: not a PLEROMA network manifest" in err and "Traceback" not in err
    first = TOPO.switches()[0]
    (out / "network.json").write_text(good)
    (out / first / "entries.p4rt.json").write_text("[]")
    assert main(args + [PUBS[0]]) == 2
    err = capsys.readouterr().err
    assert f"{first}/entries.p4rt.json: unreadable entries" in err and "Traceback" not in err
