"""Fuzz the network rule reader (compiler/network/host_rules.py): host subscriptions damaged a little
give rules or a P4subError, within the deadline, and type-check or fail cleanly (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compiler.network.compile import HOST_ID_BITS
from compiler.network.host_rules import read_network_rules
from compiler.network.topology_file import read_topology
from compiler.rules.typecheck import check_rules
from compiler.spec.reader import read_spec
from tests.fuzz.helpers import SETTINGS, only_p4sub_errors
from tests.fuzz.mutations import mutated_text

REPO = Path(__file__).resolve().parents[2]
RULES = (REPO / "examples/fat-tree-4.rules").read_text()
HOSTS = st.lists(st.sampled_from(["h1", "h16", "h17", "e1_1", "c1", "1", "0x1", "h", "", " ", "h1)", "h١"]),
                 max_size=4).map(lambda hs: "add_order.shares > 1 : fwd(" + ", ".join(hs) + ");\n")


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return (tmp_path_factory.mktemp("fuzz_netrules"), read_topology(REPO / "examples/fat-tree-4.topo"),
            read_spec(REPO / "apps/itch/itch.p4"))


@SETTINGS
@given(text=st.one_of(mutated_text(RULES), HOSTS))
def test_network_rules_on_damaged_files(context, text):
    workdir, topology, spec = context
    path = workdir / "n.rules"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    rules = only_p4sub_errors(lambda: read_network_rules(path, topology))
    if rules is not None:
        only_p4sub_errors(lambda: check_rules(rules, spec, port_bits=HOST_ID_BITS))
