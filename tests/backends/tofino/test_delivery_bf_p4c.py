"""bf-p4c on the routed delivery programs of fat-tree-4 (issue 28): the edge, aggregation and core
switches of header-stack delivery and of virtual trees fit Tofino 1's 12 stages.

Each program is built as a user builds it, ``p4sub build OUT/<switch>``: bf-p4c compiles it and its
``bf-rt.json`` must name every table, key, action and data field of the switch's
``entries.bfrt.json``. Marked ``tofino``; skipped when bf-p4c is not on PATH, as the other bf-p4c tests
are. The aggregation and core programs of a delivery are the same text but for their header comment
(the switch id is a control-plane default entry), so each distinct program is built once.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from p4sub import main

ROOT = Path(__file__).resolve().parents[3]
ROUTE = ["route", str(ROOT / "examples/fat-tree-4.topo"), str(ROOT / "examples/fat-tree-4.rules"),
         "--spec", str(ROOT / "apps/itch/itch.p4"), "--target", "tofino", "--quiet"]
SWITCHES = ("e1_1", "a1_1", "c1")  # edge, aggregation, core

pytestmark = [
    pytest.mark.tofino,
    pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON)"),
]


def distinct_programs(out: Path) -> list[str]:
    """The first switch of each distinct program, programs compared without their leading comment."""
    seen: set[str] = set()
    first: list[str] = []
    for switch in SWITCHES:
        body = re.sub(r"\A/\*.*?\*/", "", (out / switch / "program.p4").read_text(), count=1, flags=re.S)
        if body not in seen:
            seen.add(body)
            first.append(switch)
    return first


@pytest.mark.parametrize("delivery", ["header-stack", "vt"])
def test_bf_p4c_places_every_switch_role_within_12_stages(tmp_path, delivery):
    out = tmp_path / "net"
    assert main([*ROUTE, "--delivery", delivery, "-o", str(out)]) == 0
    switches = distinct_programs(out)
    assert "e1_1" in switches and len(switches) >= 2  # the edge and a transit program
    for switch in switches:
        assert main(["build", str(out / switch)]) == 0, switch  # bf-p4c, then the BF Runtime names
        placed = json.loads((out / switch / "resources.json").read_text())["bf_p4c"]
        assert placed["stages"] <= 12, (switch, placed["stages"])
