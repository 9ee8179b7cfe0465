"""``compile --target tofino --fit-by bf-p4c``: bf-p4c judges every layout the estimate accepts.

Without bf-p4c the refusal loop is exercised with a stand-in on PATH that refuses the first program
("up to 12 stages, using 13", as bf-p4c refused Siena's lanes) and places the next one, writing a
resources.json of bf-p4c's schema; with the real bf-p4c (marked ``tofino``) the ITCH example.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys

import pytest

from p4sub import main

ITCH = "apps/itch/itch.p4"
RULES = "apps/itch/rules.sub"

STAND_IN = r'''#!PYTHON
"""A stand-in for bf-p4c: refuses while REFUSALS (a file's count) is positive, else "places" the program."""
import json, os, sys
from pathlib import Path
count_file = Path(os.environ["STAND_IN_COUNT"])
if sys.argv[1:2] == ["--version"]:
    print("bf-p4c stand-in 0.0"); sys.exit(0)
left = int(count_file.read_text())
if left > 0:
    count_file.write_text(str(left - 1))
    print("program.bfa:1: error: tofino supports up to 12 stages, using 13", file=sys.stderr)
    sys.exit(1)
out = Path(sys.argv[sys.argv.index("-o") + 1])
(out / "pipe" / "logs").mkdir(parents=True, exist_ok=True)
stage = {"stage_number": 0, "rams": {"nRows": 8, "nColumns": 10, "srams": [{"usages": [{"used_by": "SwitchIngress.x"}]}]},
         "tcams": {"nRows": 12, "nColumns": 2, "tcams": []}, "map_rams": {"maprams": []}}
(out / "pipe" / "logs" / "resources.json").write_text(json.dumps(
    {"compiler_version": "stand-in", "resources": {"mau": {"nStages": 12, "mau_stages": [stage]}}}))
'''


@pytest.fixture()
def stand_in(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "bf-p4c"
    script.write_text(STAND_IN.replace("PYTHON", sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    count = tmp_path / "count"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STAND_IN_COUNT", str(count))
    return count


def test_a_layout_bf_p4c_cannot_place_is_answered_with_one_the_estimate_holds_to_fewer_stages(stand_in, tmp_path,
                                                                                               capsys):
    # gen rules' ITCH workload at 1,000 filters: the estimate places it in all 12 stages (bf-p4c: 14)
    rules = tmp_path / "r.sub"
    assert main(["gen", "rules", "--workload", "itch", "--filters", "1000", "-q", "-o", str(rules)]) == 0
    stand_in.write_text("1")
    out = tmp_path / "out"
    assert main(["compile", ITCH, str(rules), "--target", "tofino", "--fit-by", "bf-p4c", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    judged = [line for line in err.splitlines() if "bf-p4c judging a layout" in line]
    assert len(judged) == 2 and "(the estimate held to 11 stages)" in judged[1], err
    assert "refused 1 larger layout" in err
    stats = json.loads((out / "stats.json").read_text())
    assert stats["target_refusals"] == ["tofino: bf-p4c: tofino supports up to 12 stages, using 13"]
    resources = json.loads((out / "resources.json").read_text())
    assert resources["source"] == "bf-p4c" and resources["compiler"] == "bf-p4c stand-in 0.0"
    assert resources["estimate"]["source"] == "estimate" and resources["estimate"]["stages"] <= 11
    assert resources["stages_available"] == 12
    assert json.loads((out / "sources.json").read_text())["options"]["fit_by"] == "bf-p4c"


def test_when_no_smaller_layout_exists_the_error_says_bf_p4c_refused(stand_in, tmp_path, capsys):
    # The ITCH example's 12-slot union needs 11 stages by its dependencies alone: held to 10, nothing fits
    # (with --batch auto the split program, 8 stages, would be the answer).
    stand_in.write_text("1")
    out = tmp_path / "out"
    assert main(["compile", ITCH, RULES, "--target", "tofino", "--batch", "union", "--fit-by", "bf-p4c",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "[held to 10 of 12 stages after bf-p4c refused a layout the estimate accepted: bf-p4c: tofino supports " \
           "up to 12 stages, using 13]" in err and "Traceback" not in err
    assert not out.exists()


def test_with_exact_a_refusal_is_the_answer(stand_in, tmp_path, capsys):
    stand_in.write_text("5")
    out = tmp_path / "out"
    assert main(["compile", ITCH, RULES, "--target", "tofino", "--fit-by", "bf-p4c", "--exact", "-o", str(out)]) == 2
    assert "bf-p4c: tofino supports up to 12 stages, using 13" in capsys.readouterr().err
    assert not out.exists()


def test_fit_by_bf_p4c_without_bf_p4c_or_for_bmv2_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["compile", ITCH, RULES, "--target", "tofino", "--fit-by", "bf-p4c", "-o", str(tmp_path / "o")]) == 2
    assert "--fit-by bf-p4c: bf-p4c is not on PATH" in capsys.readouterr().err
    assert main(["compile", ITCH, RULES, "--target", "bmv2", "--fit-by", "bf-p4c", "-o", str(tmp_path / "o")]) == 2
    assert "needs --target tofino" in capsys.readouterr().err


@pytest.mark.tofino
@pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON)")
def test_the_itch_example_fits_by_bf_p4c(tmp_path):
    out = tmp_path / "out"
    assert main(["compile", ITCH, RULES, "--target", "tofino", "--batch", "first", "--fit-by", "bf-p4c",
                 "-o", str(out)]) == 0
    resources = json.loads((out / "resources.json").read_text())
    assert resources["source"] == "bf-p4c" and resources["stages"] <= 12
