"""Fuzz the rule reader through ``p4sub check`` and ``p4sub compile`` (issue 19): exit 0 or 2 with a
message, within the deadline, and a failed compile leaves the output directory as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.helpers import SETTINGS, output_dir, run_cli, snapshot
from tests.fuzz.mutations import HOSTILE_TOKENS, mutated_text

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
BASE = (REPO / "apps/itch/rules.sub").read_text()
SMALL = """add_order.stock == "GOOGL" and add_order.price > 50.25 : fwd(3);
not (add_order.shares < 100 or add_order.buy_sell_indicator == "S") : fwd(1, 2);
ipv4.dst_addr == 10.0.0.0/8 and add_order.stock prefix "AA" : drop;
"""
TOKENS = st.lists(st.sampled_from(HOSTILE_TOKENS + ["add_order.shares", "ipv4.dst_addr", " ", " == ", " : ", "fwd(1)",
                                                     "(", ")", "1", "50.25", '"X"', "10.0.0.1"]),
                  min_size=1, max_size=30).map("".join)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_rules")


@SETTINGS
@given(text=st.one_of(mutated_text(SMALL), mutated_text(BASE), TOKENS))
def test_check_and_compile_on_damaged_rules(workdir, text):
    rules = workdir / "r.sub"
    rules.write_text(text, encoding="utf-8", errors="surrogatepass")
    run_cli("check", ITCH, str(rules))
    out = output_dir(workdir)
    before = snapshot(out)
    code, _ = run_cli("compile", ITCH, str(rules), "-o", str(out))
    if code != 0:
        assert snapshot(out) == before


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), mutated_text(SMALL).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_check_on_rule_bytes(workdir, data):
    rules = workdir / "b.sub"
    rules.write_bytes(data)
    run_cli("check", ITCH, str(rules))
