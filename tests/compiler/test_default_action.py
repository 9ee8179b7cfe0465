"""``@query_default_action(NAME)``: the user action a packet gets when the tables evaluate it and no
rule gives it anything (Camus: the query table's default action instead of a drop)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.compile import CompileOptions, compile_rules
from compiler.errors import CompileError
from compiler.lang import parse_rules
from compiler.spec_reader import parse_spec
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
    cli = [sys.executable, "-m", "compiler"]
    subprocess.run([*cli, "compile", str(tmp_path / "dns.p4"), str(tmp_path / "r.sub"), "-o", str(tmp_path / "out")],
                   check=True, capture_output=True, cwd=ROOT)
    done = subprocess.run([*cli, "simulate", str(tmp_path / "out"), "--packets", str(tmp_path / "p.jsonl")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert lines == [{"ports": [], "calls": [{"action": "answer", "args": [0x0A000061]}]},
                     {"ports": [], "calls": [{"action": "notfound", "args": []}]}]
