"""Header validity is part of the match: a rule applies exactly when the headers it reads are valid.

Rules over protocols that never share a packet (ITCH, DNS, plain IPv4 on one switch) must each
forward their own packets. The defect this guards against: the program required *every* queried
header, so it forwarded nothing, while the model, ``verify`` and the oracle (which all ignored
validity) reported success. Here the oracle judges validity on its own (compiler.oracle), the model
runs the program's guard and validity keys, and ``verify`` proves the two equal over every
combination of valid headers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import oracle
from compiler import rules as ast
from compiler.compile import CompileOptions, compile_rules
from compiler.default_path import parse_default
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from compiler.verify import verify
from runtime.model import Model
from tests.compiler.specs import make_spec

SPEC = make_spec({
    "ipv4.dst": (32, {"match_kind": "lpm"}),
    "udp.dport": (16, {}),
    "dns.label": (32, {"match_kind": "exact"}),
    "order.shares": (16, {"match_kind": "range"}),
    "order.side": (8, {}),
})
HEADERS = ("ipv4", "udp", "dns", "order")
VALUES = {"ipv4.dst": [0x0A000001, 0x0A000002, 0xC0A80001], "udp.dport": [53, 1234, 9],
          "dns.label": [1, 7, 97], "order.shares": [0, 10, 300, 65535], "order.side": [66, 83]}

COEXIST = """
ipv4.dst == 10.0.0.2 : fwd(1);
dns.label == 97 : fwd(2);
order.shares > 100 and order.side == 66 : fwd(3);
udp.dport == 53 and ipv4.dst == 10.0.0.1/32 : fwd(4);
"""


def columns(packets: list[dict], headers: list[set]) -> dict[str, np.ndarray]:
    """Model columns: each field (0 where its header is absent) and each header's validity."""
    out = {f: np.array([p.get(f, 0) for p in packets], dtype=np.uint64) for f in VALUES}
    out |= {f"{h}.$valid": np.array([int(h in hs) for hs in headers], dtype=np.uint64) for h in HEADERS}
    return out


def test_rules_over_disjoint_protocols_each_forward_their_own_packets():
    rules = parse_rules(COEXIST)
    for delivery in ("groups", "bitmap"):
        compiled = compile_rules(SPEC, rules, CompileOptions(delivery=delivery))
        assert compiled.pipeline.guard == (), "no header is read by every rule"
        model = Model(compiled.pipeline)
        packets = [{"ipv4.dst": 0x0A000002}, {"dns.label": 97}, {"order.shares": 500, "order.side": 66},
                   {"ipv4.dst": 0x0A000001, "udp.dport": 53}, {"udp.dport": 53}, {}]
        carried = [{"ipv4"}, {"dns"}, {"order"}, {"ipv4", "udp"}, {"udp"}, set()]
        got = model.run(columns(packets, carried)).port_sets()
        assert got == [{1}, {2}, {3}, {4}, set(), set()], delivery
        assert verify(compiled.pipeline, compiled.typed).equivalent


def test_a_header_every_rule_reads_is_the_guard_and_costs_no_table():
    compiled = compile_rules(SPEC, parse_rules("order.shares > 5 : fwd(1);\norder.side == 83 : fwd(2);\n"))
    assert compiled.pipeline.guard == ("order",)
    assert not any(k.field.endswith("$valid") for t in compiled.pipeline.tables for k in t.keys)
    model = Model(compiled.pipeline)
    res = model.run({"order.shares": [9, 9], "order.side": [83, 83], "order.$valid": [1, 0]})
    assert res.port_sets() == [{1, 2}, set()]


def test_verify_refuses_a_program_that_requires_every_queried_header():
    """The shipped defect, rebuilt: the same tables behind a guard over all queried headers."""
    compiled = compile_rules(SPEC, parse_rules(COEXIST))
    old = dataclasses.replace(compiled.pipeline, guard=None)  # format-2 meaning: all queried headers
    assert set(old.guard_headers()) == {"ipv4", "udp", "dns", "order"}
    verdict = verify(old, compiled.typed)
    assert not verdict.equivalent and not verdict.sound
    missing = [d.missing for d in verdict.differences if d.missing]
    assert missing and all(any(v == 0 for k, v in m.items() if k.endswith("$valid")) for m in missing)


fields = st.sampled_from(sorted(VALUES))


@st.composite
def comparisons(draw) -> ast.Comparison:
    name = draw(fields)
    op = draw(st.sampled_from(["==", "!="] if name in ("ipv4.dst", "dns.label") else ["==", "!=", "<", ">="]))
    value = draw(st.sampled_from(VALUES[name]))
    const = ast.IPAddress(4, value, 32) if name == "ipv4.dst" else ast.Number(value)
    return ast.Comparison(ast.Field(name), op, const)


filters = st.recursive(comparisons(), lambda ch: st.one_of(
    st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.And(tuple(x))),
    st.lists(ch, min_size=2, max_size=3).map(lambda x: ast.Or(tuple(x))),
    ch.map(ast.Not)), max_leaves=4)
rules = st.builds(lambda f, p: ast.Rule(f, (ast.Forward((p,)),)), filters, st.integers(1, 4))


@st.composite
def packets(draw) -> tuple[dict, set]:
    carried = draw(st.sets(st.sampled_from(HEADERS)))
    values = {f: draw(st.sampled_from(VALUES[f])) for f in VALUES if f.split(".")[0] in carried}
    return values, carried


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rules, min_size=1, max_size=6), st.lists(packets(), min_size=1, max_size=20),
       st.sampled_from(["groups", "bitmap"]))
def test_model_judges_validity_as_the_rules_say(rule_list, pkts, delivery):
    ruleset = ast.RuleSet(tuple(rule_list))
    compiled = compile_rules(SPEC, ruleset, CompileOptions(delivery=delivery))
    typed = check_rules(ruleset, SPEC)
    got = Model(compiled.pipeline).run(columns([p for p, _ in pkts], [c for _, c in pkts])).port_sets()
    for (values, carried), ports in zip(pkts, got):
        full = {f: values.get(f, 0) for f in VALUES}
        assert ports == oracle.evaluate(typed, full, carried).ports, (values, carried)
    assert verify(compiled.pipeline, compiled.typed).equivalent


# -- the default path: packets that carry no header a rule reads (compile --default) ------------


def test_default_fwd_sends_packets_no_rule_looks_at_to_its_port_and_verify_proves_it():
    rules = parse_rules(COEXIST)
    for delivery in ("groups", "bitmap"):
        compiled = compile_rules(SPEC, rules, CompileOptions(delivery=delivery, default=parse_default("fwd(7)")))
        assert compiled.pipeline.queried == ("ipv4", "udp", "dns", "order")
        packets = [{}, {"ipv4.dst": 0x0A000002}, {"ipv4.dst": 0x0A000009}, {"dns.label": 1}]
        carried = [set(), {"ipv4"}, {"ipv4"}, {"dns"}]
        got = Model(compiled.pipeline).run(columns(packets, carried)).port_sets()
        # Looked at but matched by no rule: dropped (nobody subscribed), not sent to the default port.
        assert got == [{7}, {1}, set(), set()], delivery
        assert verify(compiled.pipeline, compiled.typed).equivalent


def test_verify_refuses_a_default_path_taken_by_packets_a_rule_reads():
    compiled = compile_rules(SPEC, parse_rules(COEXIST), CompileOptions(default=parse_default("fwd(7)")))
    wrong = dataclasses.replace(compiled.pipeline, queried=("ipv4", "udp", "order"))  # forgets dns
    verdict = verify(wrong, compiled.typed)
    assert not verdict.equivalent
    assert any(d.output == ("port", 7) and d.extra and d.extra["dns.$valid"] == 1 for d in verdict.differences)


def test_default_table_is_an_l2_l3_hook_the_user_fills():
    spec = make_spec({"ethernet.dst_addr": (48, None), "ipv4.dst_addr": (32, {"match_kind": "lpm"}),
                      "order.shares": (16, {"match_kind": "range"})})
    compiled = compile_rules(spec, parse_rules("order.shares > 5 : fwd(1);"),
                             CompileOptions(default=parse_default("table")))
    p = compiled.pipeline
    tables = {t.name: t for t in p.tables}
    assert p.default_control == ("p4sub_default_l2", "p4sub_default_l3")
    assert [k.field for k in tables["p4sub_default_l3"].keys] == ["ipv4.$valid", "ipv4.dst_addr"]
    assert verify(p, compiled.typed).equivalent  # no entries yet: everything not looked at is dropped
    from compiler import ir

    filled = dataclasses.replace(p, entries=p.entries + (
        ir.Entry("p4sub_default_l2", (ir.Exact(0x0000000000AA),), "forward", (4,)),
        ir.Entry("p4sub_default_l3", (ir.Exact(1), ir.Lpm(0x0A000000, 8)), "forward", (5,))))
    model = Model(filled)
    rows = {"ethernet.dst_addr": [0xAA, 0xAA, 0xBB, 0xAA], "ipv4.dst_addr": [0, 0x0A010101, 0x0A010101, 0x0B000000],
            "ipv4.$valid": [0, 1, 1, 1], "order.$valid": [0, 0, 0, 0]}
    assert model.run(rows).port_sets() == [{4}, {5}, {5}, {4}]


def test_parse_default_names_what_it_accepts():
    import pytest

    from compiler.base.errors import P4subError

    assert str(parse_default(" fwd( 3 ) ")) == "fwd(3)"
    for bad in ("fwd(512)", "forward", "fwd(-1)"):
        with pytest.raises(P4subError, match="--default"):
            parse_default(bad)


# -- validity in the parse graph, and in one table ---------------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


def test_the_parser_decides_which_headers_imply_others():
    from compiler.spec.reader import read_spec

    spec = read_spec(ROOT / "examples/coexistence/coexistence.p4")
    implied = spec.implied_headers()
    assert implied["add_order"] >= {"ethernet", "ipv4", "udp", "mold_hdr"}
    assert implied["int_hop_latency"] >= {"int_switch_id", "udp"}
    assert "dns_query" not in implied["add_order"] and implied["ethernet"] == frozenset()


def test_shipped_itch_rules_keep_a_guard_and_no_validity_table():
    """ITCH rules read ipv4 or not, but an Add Order implies its IPv4 header: the guard holds both."""
    from compiler.spec.reader import read_spec

    spec = read_spec(ROOT / "apps/itch/itch.p4")
    compiled = compile_rules(spec, parse_rules((ROOT / "apps/itch/rules.sub").read_text()))
    assert compiled.pipeline.guard == ("ipv4", "add_order")
    assert not any(k.field.endswith("$valid") for t in compiled.pipeline.tables for k in t.keys)


def test_four_protocols_fold_their_validity_into_one_table_and_fit_exactly():
    from compiler.spec.reader import read_spec

    spec = read_spec(ROOT / "examples/coexistence/coexistence.p4")
    compiled = compile_rules(spec, parse_rules((ROOT / "examples/coexistence/rules.sub").read_text()))
    assert compiled.widening is None and not compiled.stats["budget_misses"]
    valid_tables = [t for t in compiled.pipeline.tables if any(k.field.endswith("$valid") for k in t.keys)]
    assert valid_tables
    assert len(valid_tables) == len({t.lane for t in valid_tables}), "one validity table per lane"
    # int_switch_id is implied by int_hop_latency (the parser extracts it first): no field of its own
    assert "int_switch_id.$valid" not in compiled.typed.validity
    assert verify(compiled.pipeline, compiled.typed).equivalent


def test_verify_catches_a_broken_validity_table_entry():
    from compiler import ir
    from compiler.spec.reader import read_spec

    spec = read_spec(ROOT / "examples/coexistence/coexistence.p4")
    compiled = compile_rules(spec, parse_rules((ROOT / "examples/coexistence/rules.sub").read_text()),
                             CompileOptions(delivery="groups"))
    p = compiled.pipeline
    table = next(t for t in p.tables if t.name.startswith("valid_"))
    victim = next(e for e in p.entries if e.table == table.name)
    flipped = dataclasses.replace(victim, matches=victim.matches[:1] + tuple(
        ir.Exact(1 - m.value) for m in victim.matches[1:]))
    broken = dataclasses.replace(p, entries=tuple(flipped if e == victim else e for e in p.entries
                                                  if e.matches != flipped.matches or e.table != table.name))
    assert not verify(broken, compiled.typed).equivalent


def test_explain_and_simulate_read_a_json_packet_as_carrying_the_headers_it_gives(tmp_path):
    import json
    import subprocess
    import sys

    cli = [sys.executable, "-m", "p4sub"]
    out = tmp_path / "out"
    subprocess.run([*cli, "compile", str(ROOT / "examples/coexistence/coexistence.p4"),
                    str(ROOT / "examples/coexistence/rules.sub"), "-o", str(out)], check=True, capture_output=True, cwd=ROOT)
    dns = '{"dns_query.label": "ab98", "ipv4.dstAddr": "10.0.0.4"}'
    done = subprocess.run([*cli, "explain", str(out), "--packet", dns], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "carries dns_query, ipv4 of" in done.stdout and done.stdout.strip().endswith('{"ports": [2]}')
    (tmp_path / "p.jsonl").write_text(dns + '\n{"ipv4.dstAddr": "10.0.0.2"}\n{"add_order.shares": 100}\n')
    done = subprocess.run([*cli, "simulate", str(out), "--packets", str(tmp_path / "p.jsonl")],
                          capture_output=True, text=True, cwd=ROOT)
    # the third packet gives part of add_order only: an error naming the field it lacks
    assert done.returncode == 2 and "add_order.price" in done.stderr
    (tmp_path / "p.jsonl").write_text(dns + '\n{"ipv4.dstAddr": "10.0.0.2"}\n{}\n')
    done = subprocess.run([*cli, "simulate", str(out), "--packets", str(tmp_path / "p.jsonl")],
                          capture_output=True, text=True, cwd=ROOT)
    assert [json.loads(x)["ports"] for x in done.stdout.splitlines()] == [[2], [1], []]
