"""bf-p4c on the routed delivery programs of fat-tree-4 (issue 28): the edge, aggregation and core
switches of header-stack delivery and of virtual trees fit Tofino 1's 12 stages.

Marked ``tofino``; skipped when bf-p4c is not on PATH, as the other bf-p4c tests are. The aggregation
and core programs of a delivery are the same text but for their header comment (the switch id is a
control-plane default entry), so each distinct program is compiled once.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from backends.tofino import bf_p4c
from p4sub import main

ROOT = Path(__file__).resolve().parents[3]
ROUTE = ["route", str(ROOT / "examples/fat-tree-4.topo"), str(ROOT / "examples/fat-tree-4.rules"),
         "--spec", str(ROOT / "apps/itch/itch.p4"), "--target", "tofino", "--quiet"]
SWITCHES = ("e1_1", "a1_1", "c1")  # edge, aggregation, core

pytestmark = [
    pytest.mark.tofino,
    pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON)"),
]


def distinct_programs(out: Path) -> dict[str, str]:
    """{first switch with this program: its text}, programs compared without their leading comment."""
    seen: dict[str, str] = {}
    texts: dict[str, str] = {}
    for switch in SWITCHES:
        text = (out / switch / "program.p4").read_text()
        body = re.sub(r"\A/\*.*?\*/", "", text, count=1, flags=re.S)
        if body not in seen:
            seen[body] = switch
            texts[switch] = text
    return texts


@pytest.mark.parametrize("delivery", ["header-stack", "vt"])
def test_bf_p4c_places_every_switch_role_within_12_stages(tmp_path, delivery):
    out = tmp_path / "net"
    assert main([*ROUTE, "--delivery", delivery, "-o", str(out)]) == 0
    programs = distinct_programs(out)
    assert "e1_1" in programs and len(programs) >= 2  # the edge and a transit program
    for switch, text in programs.items():
        measured = bf_p4c.judge(text)  # raises when bf-p4c refuses
        assert measured.stages <= 12, (switch, measured.stages)
