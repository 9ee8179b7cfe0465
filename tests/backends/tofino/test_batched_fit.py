"""Batched ITCH on Tofino: the workload a user generates compiles to a program that fits.

Twelve messages per packet means twelve copies of the tables (``--batch union``). With a threshold per
filter the copies of the price code table need more TCAM than the chip has; the backend says so before
building them, with how many thresholds would fit, and the compile keeps that many (compiler/coarsen.py).
``--batch auto`` takes split mode instead (one copy of the tables, a recirculated copy per message).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.common.messages import message_layout
from backends.tofino import check_slots_fit, compile_options
from backends.tofino.layout import TofinoOptions
from compiler.base import ResourceError
from compiler.compile import CompileOptions, compile_rules
from compiler.rules import read_rules
from compiler.spec import read_spec
from p4sub import main

ROOT = Path(__file__).resolve().parents[3]
ITCH = ROOT / "apps/itch/itch.p4"


@pytest.fixture(scope="module")
def rules_2k(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fit") / "itch2k.sub"
    assert main(["gen", "rules", "--workload", "itch", "--filters", "2000", "-o", str(path)]) == 0
    return path


def test_too_many_copies_are_refused_before_they_are_built_with_the_thresholds_that_fit(rules_2k: Path) -> None:
    spec = read_spec(ITCH)
    options = CompileOptions(delivery="groups", tables=compile_options(spec))
    compiled = compile_rules(spec, read_rules(rules_2k), options)
    with pytest.raises(ResourceError) as caught:
        check_slots_fit(compiled.pipeline, message_layout(compiled.pipeline), TofinoOptions())
    assert "12 messages per packet need" in str(caught.value)
    (field, limit), = caught.value.codes.items()
    assert field == "add_order.price" and 1 <= limit < 2000


def test_the_compile_keeps_fewer_thresholds_and_fits(rules_2k: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["compile", str(ITCH), str(rules_2k), "--target", "tofino", "--batch", "union", "-o", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    res = json.loads((out / "resources.json").read_text())
    assert res["notes"]["messages_per_packet"] == 12 and res["notes"]["batch_mode"] == "union"
    assert res["tcam_blocks"] <= res["tcam_blocks_available"] and res["sram_blocks"] <= res["sram_blocks_available"]
    assert res["stages"] <= 12
    (cut,) = stats["coarsened"]
    assert cut["field"] == "add_order.price" and cut["thresholds_after"] < cut["thresholds_before"]
    assert stats["exact"] is False and stats["target_refusals"]
    entries = json.loads((out / "entries.bfrt.json").read_text())
    code = [e for e in entries["entries"] if e["table_name"].endswith("field_add_order_price_code_m0")]
    assert code


def test_exact_refuses_instead_of_coarsening(rules_2k: Path, tmp_path: Path, capsys) -> None:
    assert main(["compile", str(ITCH), str(rules_2k), "--target", "tofino", "--batch", "union", "--exact", "-o",
                 str(tmp_path / "o")]) == 2
    assert "12 messages per packet need" in capsys.readouterr().err


def test_auto_takes_split_mode_when_the_union_does_not_fit_and_stays_exact(rules_2k: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["compile", str(ITCH), str(rules_2k), "--target", "tofino", "-o", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    res = json.loads((out / "resources.json").read_text())
    assert res["notes"]["batch_mode"] == "split" and res["notes"]["union_refused"]
    assert stats["exact"] is True and "coarsened" not in stats
    assert stats["batch"]["passes_per_message"] == 2
    assert res["tcam_blocks"] <= res["tcam_blocks_available"] and res["stages"] <= 12
