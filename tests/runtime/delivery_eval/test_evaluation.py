"""The evaluation runner, its report files and the ``p4sub eval delivery`` command."""

from __future__ import annotations

import json

import pytest

from compiler.base.errors import P4subError
from compiler.network.topology import fat_tree, jellyfish
from p4sub import main
from p4sub.eval import parse_fractions
from runtime.delivery_eval.evaluation import EvalConfig, evaluate, workload


def test_workload_is_seeded_and_sized_like_the_dissertation():
    t = jellyfish(255, 4, seed=1)
    pub, receivers = workload(t, 0.8, 3, seed=1)
    assert len(receivers) == 204 and pub not in receivers
    assert workload(t, 0.8, 3, seed=1) == (pub, receivers)
    assert workload(t, 0.8, 4, seed=1) != (pub, receivers)


def test_evaluation_averages_every_scheme_and_skips_what_does_not_apply():
    t = jellyfish(16, 4, seed=2)
    report = evaluate(t, EvalConfig(fractions=(0.25, 0.75), runs=3))
    assert "elmo" in report["skipped"]
    names = {r["scheme"] for r in report["results"]}
    assert {"port", "bitmask", "unicast", "lipsin", "bier"} <= names
    for r in report["results"]:
        assert r["runs"] == 3
        if report["schemes"][r["scheme"]]["exact"]:
            assert r["exact_runs"] == 3 and r["mean"]["missing"] == 0
    json.dumps(report)


def test_evaluation_checks_compare_with_the_dissertation():
    report = evaluate(fat_tree(4), EvalConfig(fractions=(0.2, 0.6), runs=2, schemes=("port", "bitmask", "mcgroup", "openflow", "unicast", "broadcast")))
    claims = {c["claim"] for c in report["checks"]}
    assert any("lookups" in c for c in claims) and any("initial header" in c for c in claims)
    lookups = next(c for c in report["checks"] if "lookups" in c["claim"])
    assert lookups["agrees"] is True


@pytest.mark.parametrize("text, expected", [("10-90", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)),
                                            ("10-50:20", (0.1, 0.3, 0.5)), ("5,95", (0.05, 0.95))])
def test_parse_fractions(text, expected):
    assert parse_fractions(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["10-", "0-50", "90-10", "a,b", "101"])
def test_parse_fractions_rejects_bad_input(text):
    with pytest.raises(P4subError):
        parse_fractions(text)


def test_cli_writes_json_table_and_plots(tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["eval", "delivery", "--topology", "fat-tree:4", "--subscribers", "20,60", "--runs", "2",
                 "--schemes", "port,mcgroup,elmo,openflow", "--report", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert "| 60% (10) | elmo |" in captured.out
    assert "[100%]" in captured.err or "100%" in captured.err
    data = json.loads((out / "delivery.json").read_text())
    assert {r["scheme"] for r in data["results"]} == {"port", "mcgroup", "elmo", "openflow"}
    assert (out / "header_bytes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "delivery.md").read_text().startswith("Topology fat-tree-4")


def test_cli_reports_bad_input_as_an_error(capsys):
    assert main(["eval", "delivery", "--topology", "torus:3", "--runs", "1", "--quiet"]) == 2
    assert "unknown topology" in capsys.readouterr().err
    assert main(["eval", "delivery", "--topology", "fat-tree:4", "--schemes", "port,carrier-pigeon", "--quiet"]) == 2
