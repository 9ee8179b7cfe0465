"""``p4sub eval vt``: a small sweep end to end (CLI, JSON, Markdown, plots) and its bookkeeping."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.base.errors import P4subError
from compiler.network.topology import facebook_fabric
from runtime.delivery_eval.vt.evaluation import VtEvalConfig, evaluate

ROOT = Path(__file__).resolve().parents[3]


def test_small_sweep_is_exact_and_hops_do_not_depend_on_the_budget():
    config = VtEvalConfig(densities=(0.3,), rules=(0, 10, 20), strategies=("hops", "topo", "threshold:30"),
                          runs=1, messages=3)
    report = evaluate(facebook_fabric(), config)
    rows = report["results"]
    assert len(rows) == 9
    assert all(r["exact"] == r["notifications"] == 3 for r in rows)
    hops = [r["mean"]["header_bytes"] for r in rows if r["strategy"] == "hops"]
    assert len(set(hops)) == 1
    zero = {r["strategy"]: r["mean"]["header_bytes"] for r in rows if r["rules"] == 0}
    assert len(set(zero.values())) == 1, "without rules every strategy is source routing"
    for r in rows:
        m = r["mean"]
        assert m["header_bytes"] == pytest.approx(4 + 2 * m["labels"])
        assert m["labels"] == pytest.approx(m["trees"] + m["hops"] + m["stops"])
        assert r["install"]["max_entries"] <= r["rules"]
    assert report["checks"], "the dissertation comparison is part of the report"


def test_eval_vt_cli_writes_json_markdown_and_plots(tmp_path):
    out = tmp_path / "vt"
    r = subprocess.run([sys.executable, "-m", "p4sub", "eval", "vt", "--density", "70", "--rules", "0,10",
                        "--strategies", "hops,tree,threshold:30:hops", "--runs", "1", "--messages", "2",
                        "--quiet", "--report", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "| 70% | tree | 10 |" in r.stdout
    data = json.loads((out / "vt.json").read_text())
    assert {row["strategy"] for row in data["results"]} == {"hops", "tree", "threshold:30:hops"}
    for name in ("vt.md", "vt_header_bytes.png", "vt_network_load.png", "vt_labels.png"):
        assert (out / name).stat().st_size > 0


def test_bad_arguments_are_errors_not_tracebacks():
    with pytest.raises(P4subError):
        VtEvalConfig(strategies=("nope",))
    with pytest.raises(P4subError):
        VtEvalConfig(rules=(-1,))
    r = subprocess.run([sys.executable, "-m", "p4sub", "eval", "vt", "--rules", "a,b"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr
