"""Fuzz the spec reader (P4_16 programs, P4_14 specs, pragma-only specs) through ``p4sub check``:
exit 0 or 2 with a message, within the deadline (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.helpers import SETTINGS, output_dir, run_cli, snapshot
from tests.fuzz.mutations import looping_parser, mutated_text

REPO = Path(__file__).resolve().parents[2]
ITCH = (REPO / "apps/itch/itch.p4").read_text()
INT = (REPO / "apps/int/int.p4").read_text()
P4_14 = """// -*- P4_14 -*-
header_type ethernet_t { fields { dstAddr : 48; srcAddr : 48; etherType : 16; } }
header_type msg_t { fields { stock : 64; price : 32; } }
header ethernet_t ethernet;
header msg_t msg;
parser start { extract(ethernet); return select(latest.etherType) { 0x88b5 : parse_msg; default : ingress; } }
parser parse_msg { extract(msg); return ingress; }
@pragma query_field_exact(msg.stock, 64)
@pragma query_field(msg.price, 32)
"""
PRAGMAS = """@pragma query_field_exact(dns_query.label, 32)
@pragma query_field(dns_query.qtype, 16)
@pragma query_action(answer, 32)
@pragma query_default_action(notfound)
"""
RULES = 'add_order.stock == "GOOGL" and add_order.price > 50 : fwd(1);\nmsg.price > 3 : fwd(2);\n'


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzz_spec")
    (d / "r.sub").write_text(RULES)
    return d


@SETTINGS
@given(text=st.one_of(mutated_text(ITCH, 3), mutated_text(INT, 3), mutated_text(P4_14), mutated_text(PRAGMAS)))
def test_check_on_damaged_specs(workdir, text):
    spec = workdir / "s.p4"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    run_cli("check", str(spec), str(workdir / "r.sub"))


@SETTINGS
@given(text=mutated_text(P4_14, 2))
def test_compile_on_damaged_p4_14_specs_changes_nothing_when_it_fails(workdir, text):
    spec = workdir / "s14.p4"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    rules = workdir / "m.sub"
    rules.write_text("msg.price > 3 : fwd(2);\n")
    out = output_dir(workdir)
    before = snapshot(out)
    code, _ = run_cli("compile", str(spec), str(rules), "-o", str(out))
    if code != 0:
        assert snapshot(out) == before


@st.composite
def _macro_spec(draw) -> str:
    """A P4_14 spec whose #defines refer to one another: chains, fans, cycles, self-references, used
    where a width, a select value or a declaration stands (issue 27: a doubling chain hung check)."""
    n = draw(st.integers(1, 45))
    lines = ["// -*- P4_14 -*-"]
    for i in range(n):
        body = draw(st.lists(st.one_of(st.sampled_from(["x", "8", "0x800", "(", ")", ";", "header"]),
                                       st.integers(0, n - 1).map(lambda j: f"M{j}")), max_size=4))
        lines.append(f"#define M{i} " + " ".join(body))
    use = f"M{draw(st.integers(0, n - 1))}"
    lines.append(draw(st.sampled_from([
        "header_type h_t { fields { a : USE; } }\nheader h_t h;\nparser start { extract(h); return ingress; }",
        "header_type h_t { fields { a : 16; } }\nheader h_t h;\n"
        "parser start { extract(h); return select(latest.a) { USE : ingress; default : ingress; } }",
        "USE",
    ])).replace("USE", use))
    lines.append("@pragma query_field(h.a, 16)")
    return "\n".join(lines) + "\n"


@SETTINGS
@given(text=_macro_spec())
def test_check_on_macro_expansion(workdir, text):
    spec = workdir / "macro.p4"
    spec.write_text(text)
    run_cli("check", str(spec), str(workdir / "r.sub"))


@SETTINGS
@given(text=looping_parser())
def test_gen_spec_on_looping_parse_graphs(workdir, text):
    spec = workdir / "loop.p4"
    spec.write_text(text)
    out = output_dir(workdir)
    before = snapshot(out)
    code, _ = run_cli("gen", "--spec", str(spec), "--packets", "2000", "-q", "-o", str(out / "keep.txt"))
    if code != 0:
        assert snapshot(out) == before
