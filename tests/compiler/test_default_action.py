"""``@query_default_action(NAME)``: the user action a packet gets when the tables evaluate it and no
rule gives it anything (Camus: the query table's default action instead of a drop)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.base.errors import CompileError
from compiler.compile import CompileOptions, compile_rules
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec
from compiler.verify import verify
from runtime.model import Model

ROOT = Path(__file__).resolve().parents[2]
SPEC_TEXT = """
@pragma query_field_exact(dns_query.label, 32)
@pragma query_field(dns_query.qtype, 16)
@pragma query_default_action(notfound)
@pragma query_action(answer, 32)
"""
RULES = """
dns_query.label = "no97" : answer(10.0.0.97);
dns_query.label == 5 and dns_query.qtype < 3 : fwd(3);
dns_query.qtype == 9 : drop;
"""
NO97 = int.from_bytes(b"no97", "big")


def compiled():
    return compile_rules(parse_spec(SPEC_TEXT, "dns.p4"), parse_rules(RULES))


def test_packets_no_rule_matches_get_the_default_action_and_verify_proves_it():
    c = compiled()
    assert c.stats["delivery"] == "groups"
    res = Model(c.pipeline).run({"dns_query.label": [NO97, 5, 5, 6, 6], "dns_query.qtype": [1, 1, 7, 1, 9]})
    calls = {name: sorted(int(r) for rows, _ in batches for r in rows) for name, batches in res.calls.items()}
    assert res.port_sets() == [set(), {3}, set(), set(), set()]
    # a rule whose only action is drop gives nothing either: the default action runs (as in Camus)
    assert calls == {"answer": [0], "notfound": [2, 3, 4]}
    assert verify(c.pipeline, c.typed).equivalent


def test_verify_catches_a_pipeline_that_drops_instead():
    c = compiled()
    broken = dataclasses.replace(c.pipeline, entries=tuple(e for e in c.pipeline.entries if e.table != "call_notfound"))
    verdict = verify(broken, c.typed)
    assert [d.output for d in verdict.differences] == [("call", "notfound", ())]
    assert verdict.differences[0].missing is not None


def test_bitmap_delivery_is_refused_with_the_reason():
    with pytest.raises(CompileError, match="needs --delivery groups"):
        compile_rules(parse_spec(SPEC_TEXT, "dns.p4"), parse_rules(RULES), CompileOptions(delivery="bitmap"))


def test_simulate_prints_the_user_actions_a_packet_triggers(tmp_path):
    (tmp_path / "dns.p4").write_text(SPEC_TEXT)
    (tmp_path / "r.sub").write_text(RULES)
    (tmp_path / "p.jsonl").write_text('{"dns_query.label": "no97", "dns_query.qtype": 1}\n'
                                      '{"dns_query.label": 6, "dns_query.qtype": 1}\n')
    cli = [sys.executable, "-m", "p4sub"]
    subprocess.run([*cli, "compile", str(tmp_path / "dns.p4"), str(tmp_path / "r.sub"), "-o", str(tmp_path / "out")],
                   check=True, capture_output=True, cwd=ROOT)
    done = subprocess.run([*cli, "simulate", str(tmp_path / "out"), "--packets", str(tmp_path / "p.jsonl")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert lines == [{"ports": [], "calls": [{"action": "answer", "args": [0x0A000061]}]},
                     {"ports": [], "calls": [{"action": "notfound", "args": []}]}]


def test_a_pragma_only_spec_takes_undeclared_actions_with_widths_from_the_calls():
    """Camus's coexistence DNS rules call answerDNS(10.0.0.97), an action only the user's program
    defines: p4sub reads its argument widths from the calls and says so."""
    from compiler.base.errors import TypeCheckError
    from compiler.rules.typecheck import check_rules

    spec = parse_spec("@pragma query_field_exact(dns_query.label, 32)\n", "dns.p4")
    typed = check_rules(parse_rules('dns_query.label = "a" : reply(10.0.0.97, 7);\n'
                                    'dns_query.label = "b" : reply(1, 5000000000);'), spec)
    assert typed.spec.actions["reply"].arg_widths == (32, 64)
    assert any("reply is not declared" in n for n in typed.spec.notes)
    c = compile_rules(spec, parse_rules('dns_query.label = "a" : reply(10.0.0.97);'))
    assert verify(c.pipeline, c.typed).equivalent
    with pytest.raises(TypeCheckError, match="called with 1 and 2 arguments"):
        check_rules(parse_rules('dns_query.label = "a" : reply(1);\ndns_query.label = "b" : reply(1, 2);'), spec)
    declared = parse_spec("header h_t { bit<32> label; }\nstruct headers { h_t h; }\n@query_field(h.label)\n", "d.p4")
    with pytest.raises(TypeCheckError, match="unknown action 'reply'"):
        check_rules(parse_rules("h.label == 1 : reply(1);"), declared)
