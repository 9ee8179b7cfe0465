"""Fuzz ``pipeline.json`` (compiler.ir.load and compiler/ir/check.py) through its readers: a node
of a good file replaced, deleted or duplicated gives exit 0 (the damage made another valid
pipeline), 1 (verify: the pipeline no longer equals its rules) or 2 with a message (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4sub import main
from tests.fuzz.helpers import SETTINGS, output_dir, run_cli, snapshot
from tests.fuzz.mutations import json_paths, mutated_json

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
RULES = """add_order.stock == "GOOGL" and add_order.price > 50.25 : fwd(3);
add_order.shares < 100 or add_order.buy_sell_indicator == "S" : fwd(1, 2);
ipv4.dst_addr == 10.0.0.0/8 : fwd(4);
"""
PACKET = json.dumps({"add_order.stock": "GOOGL", "add_order.price": 60, "add_order.shares": 5,
                     "add_order.buy_sell_indicator": "B", "ipv4.dst_addr": "10.0.0.1"})


def _good(root: Path, delivery: str) -> dict:
    (root / "r.sub").write_text(RULES)
    out = root / f"good_{delivery}"
    assert main(["compile", ITCH, str(root / "r.sub"), "-o", str(out), "--delivery", delivery]) == 0
    return json.loads((out / "pipeline.json").read_text())


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, dict, dict, list, list]:
    root = tmp_path_factory.mktemp("fuzz_pipeline")
    groups, bitmap = _good(root, "groups"), _good(root, "bitmap")
    (root / "p.jsonl").write_text(PACKET + "\n")
    return root, groups, bitmap, json_paths(groups), json_paths(bitmap)


def _run_readers(root: Path, damaged: object) -> None:
    out = root / "bad"
    out.mkdir(exist_ok=True)
    (out / "pipeline.json").write_text(json.dumps(damaged))
    run_cli("simulate", str(out), "--packets", str(root / "p.jsonl"))
    run_cli("explain", str(out), "--packet", PACKET)
    run_cli("verify", str(out), "--rules", str(root / "r.sub"), ok=(0, 1, 2))


@SETTINGS
@given(data=st.data())
def test_readers_on_a_damaged_groups_pipeline(good, data):
    root, groups, _, paths, _ = good
    _run_readers(root, data.draw(mutated_json(groups, paths)))


@SETTINGS
@given(data=st.data())
def test_readers_on_a_damaged_bitmap_pipeline(good, data):
    root, _, bitmap, _, paths = good
    _run_readers(root, data.draw(mutated_json(bitmap, paths)))


@SETTINGS
@given(data=st.data())
def test_compile_like_a_damaged_pipeline_changes_nothing_when_it_fails(good, data):
    root, groups, _, paths, _ = good
    bad = root / "like"
    bad.mkdir(exist_ok=True)
    (bad / "pipeline.json").write_text(json.dumps(data.draw(mutated_json(groups, paths))))
    out = output_dir(root)
    before = snapshot(out)
    code, _ = run_cli("compile", ITCH, str(root / "r.sub"), "-o", str(out), "--like", str(bad))
    if code != 0:
        assert snapshot(out) == before
