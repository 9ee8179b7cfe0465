"""`p4sub build OUT` on a Tofino output: bf-p4c judges the program, its placement replaces the estimate.

Without bf-p4c: the errors a user meets (exit 2, how to get it), and a failing compiler leaves the
output as it was. With bf-p4c on PATH (marked ``tofino``): the real compile, its resources in
``resources.json`` beside the estimate, ``entries.bfrt.json`` checked against its ``bf-rt.json``.
"""

from __future__ import annotations

import json
import shutil

import pytest

from compiler.base.manifest import find_listed
from p4sub import main

ITCH = "apps/itch/itch.p4"
RULES = "apps/itch/rules.sub"


@pytest.fixture(scope="module")
def tofino_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("tofino") / "out"
    # --batch first: the program bf-p4c accepts (the union of 12 message slots needs more than 12
    # stages under bf-p4c; docs/tofino.md, "Judged by bf-p4c")
    assert main(["compile", ITCH, RULES, "--target", "tofino", "--batch", "first", "-o", str(out)]) == 0
    return out


@pytest.fixture()
def out(tofino_out, tmp_path):
    d = tmp_path / "out"
    shutil.copytree(tofino_out, d)
    return d


def test_the_estimate_says_it_is_one(out):
    assert json.loads((out / "resources.json").read_text())["source"] == "estimate"


def test_build_of_a_tofino_output_without_bf_p4c_says_how_to_get_it(out, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["build", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bf-p4c is not on PATH" in err and "ENABLE_TOFINO" in err


def test_bf_p4c_path_that_is_a_directory_is_named(out, tmp_path, capsys):
    assert main(["build", str(out), "--bf-p4c", str(tmp_path)]) == 2
    assert "--bf-p4c" in capsys.readouterr().err


def test_a_failing_bf_p4c_leaves_the_output_as_it_was(out, tmp_path, capsys):
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    fake = tmp_path / "bf-p4c"
    fake.write_text("#!/bin/sh\necho 'program.p4(12): error: PHV allocation was not successful' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert main(["build", str(out), "--bf-p4c", str(fake)]) == 2
    assert "PHV allocation was not successful" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not (out / "program.tofino").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".build.")]


@pytest.mark.tofino
def test_bf_p4c_builds_it_and_its_figures_replace_the_estimate(out, capsys):
    if shutil.which("bf-p4c") is None:
        pytest.skip("bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON, or the Tofino SDE)")
    estimate = json.loads((out / "resources.json").read_text())
    assert main(["build", str(out)]) == 0, capsys.readouterr().err
    res = json.loads((out / "resources.json").read_text())
    assert res["source"] == "bf-p4c" and res["estimate"] == estimate
    assert 0 < res["stages"] <= 12 and res["sram_blocks"] > 0
    assert res["bf_p4c"]["tables"], "bf-p4c's log attributes memory to tables"
    totals = res["comparison"]["totals"]
    assert totals["tcam_blocks"]["estimate"] == estimate["tcam_blocks"]
    assert totals["tcam_blocks"]["bf_p4c"] == res["tcam_blocks"]
    assert (out / "program.tofino" / "bf-rt.json").is_file()
    manifest = find_listed(out)
    manifest.check(["resources.json", "program.tofino/bf-rt.json"])
    # Built again: the estimate stays the compile's, not the first build's figures.
    assert main(["build", str(out)]) == 0
    assert json.loads((out / "resources.json").read_text())["estimate"] == estimate


def test_a_broken_resources_json_is_named_with_line_and_column(out, tmp_path, capsys):
    (out / "manifest.json").unlink()  # without a manifest nothing else catches the edit
    (out / "resources.json").write_text('{"target": "tofino",\n "stages": }\n')
    fake = tmp_path / "bf-p4c"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert main(["build", str(out), "--bf-p4c", str(fake)]) == 2
    assert "resources.json:2:" in capsys.readouterr().err
