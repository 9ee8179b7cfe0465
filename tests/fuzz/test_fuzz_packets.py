"""Fuzz the packet JSON reader through ``p4sub simulate`` and ``p4sub explain`` (issue 19): damaged
lines of the shipped example and arbitrary JSON values for every field give exit 0 or 2 with a
message, never a traceback, within the deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4sub import main
from tests.fuzz.helpers import SETTINGS, run_cli
from tests.fuzz.mutations import JSON_VALUES, mutated_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples/itch-packets.jsonl").read_text()
FIELDS = ["add_order.stock", "add_order.price", "add_order.shares", "add_order.buy_sell_indicator", "ipv4.dst_addr"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzz_packets")
    assert main(["compile", str(REPO / "apps/itch/itch.p4"), str(REPO / "apps/itch/rules.sub"), "-o", str(d / "out")]) == 0
    return d


@st.composite
def packets(draw) -> str:
    base = json.loads(EXAMPLE.splitlines()[0])
    for f in draw(st.lists(st.sampled_from(FIELDS + ["x.y", "add_order.$valid"]), max_size=3)):
        if draw(st.booleans()):
            base[f] = draw(JSON_VALUES)
        else:
            base.pop(f, None)
    return json.dumps(base)


@SETTINGS
@given(text=st.one_of(mutated_text(EXAMPLE), packets().map(lambda p: p + "\n"),
                      st.lists(packets(), max_size=4).map("\n".join)))
def test_simulate_on_damaged_packets(compiled, text):
    path = compiled / "p.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    run_cli("simulate", str(compiled / "out"), "--packets", str(path))


@SETTINGS
@given(text=st.one_of(packets(), mutated_text(EXAMPLE.splitlines()[1]), JSON_VALUES.map(json.dumps)))
def test_explain_on_damaged_packets(compiled, text):
    run_cli("explain", str(compiled / "out"), f"--packet={text}")  # '=': a packet may start with '-'
    run_cli("explain", str(compiled / "out"), "--packet", text)  # argparse may take it for an option: exit 2
