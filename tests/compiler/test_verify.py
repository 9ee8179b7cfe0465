"""The BDD equivalence check: compiled pipelines are proved equal to their rules, and every
difference it reports on a broken pipeline is a real one (the reference model and the oracle
disagree on its counterexample packet, in the direction it says)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import ir, oracle
from compiler import rules as ast
from compiler.compile import compile_rules
from compiler.verify import verify
from runtime.model import Model
from tests.compiler.test_compile_property import SPEC, layout_options, layouts, packet, rule

ROOT = Path(__file__).resolve().parents[2]


def model_ports(pipeline: ir.Pipeline, pkt: dict[str, int]) -> frozenset[int]:
    """The model on one packet; a counterexample's header validity (``h.$valid``) goes in too."""
    model = Model(pipeline)
    if not model.inputs:
        return model.run_one({k: v for k, v in pkt.items() if k.endswith("$valid")})[0]
    return model.run({f: np.array([pkt[f]], dtype=np.uint64) for f in model.inputs + model.validity
                      if f in pkt}).ports_of(0)


def oracle_ports(typed, pkt: dict[str, int]) -> frozenset[int]:
    """The oracle on one packet: it carries every header but those a counterexample marks invalid."""
    invalid = {k[: -len(".$valid")] for k, v in pkt.items() if k.endswith(".$valid") and not v}
    carried = {h.name for h in SPEC.headers} - invalid
    return oracle.evaluate(typed, pkt, carried).ports


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, max_size=8), st.sampled_from(["range", "ternary", "compress"]), layouts)
def test_every_compiled_pipeline_is_proved_equivalent_to_its_rules(rules, encoding, layout) -> None:
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), layout_options(layout, range_encoding=encoding))
    verdict = verify(compiled.pipeline, compiled.typed)
    assert verdict.equivalent, verdict.differences


def _mutate(pipeline: ir.Pipeline, data: st.DataObject) -> ir.Pipeline:
    """One entry removed, or its action arguments changed (another state, port or group)."""
    entries = list(pipeline.entries)
    i = data.draw(st.integers(0, len(entries) - 1))
    if data.draw(st.booleans()):
        del entries[i]
    else:
        e = entries[i]
        if not e.args:
            del entries[i]
        else:
            args = tuple(data.draw(st.integers(0, 7)) for _ in e.args)
            entries[i] = dataclasses.replace(e, args=args)
    groups = {g.id for g in pipeline.multicast_groups}
    extra = tuple(ir.MulticastGroup(g, (g,)) for g in range(1, 8) if g not in groups)
    return dataclasses.replace(pipeline, entries=tuple(entries), multicast_groups=pipeline.multicast_groups + extra)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rule, min_size=1, max_size=6), st.lists(packet, min_size=1, max_size=20), st.data(), layouts)
def test_differences_found_on_broken_pipelines_are_real(rules, packets, data, layout) -> None:
    compiled = compile_rules(SPEC, ast.RuleSet(tuple(rules)), layout_options(layout))
    if not compiled.pipeline.entries:
        return
    broken = _mutate(compiled.pipeline, data)
    verdict = verify(broken, compiled.typed)
    for d in verdict.differences:
        _, port = d.output
        if d.missing is not None:
            assert port in oracle_ports(compiled.typed, d.missing)
            assert port not in model_ports(broken, d.missing)
        if d.extra is not None:
            assert port not in oracle_ports(compiled.typed, d.extra)
            assert port in model_ports(broken, d.extra)
    if verdict.equivalent:  # then no packet may tell them apart
        for pkt in packets:
            assert model_ports(broken, pkt) == oracle.evaluate(compiled.typed, pkt).ports


def test_a_widened_range_is_reported_with_a_packet_that_shows_it(tmp_path) -> None:
    rules = tmp_path / "r.sub"
    rules.write_text('add_order.stock == "GOOGL" and add_order.price > 50 : fwd(3);\n'
                     'add_order.stock == "GOOGL" and add_order.price <= 50 : fwd(4);\n')
    out = tmp_path / "out"
    cli = [sys.executable, "-m", "p4sub"]
    subprocess.run([*cli, "compile", str(ROOT / "apps/itch/itch.p4"), str(rules), "-o", str(out)], check=True,
                   capture_output=True, cwd=ROOT)
    ok = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout.startswith("equivalent"), ok.stdout + ok.stderr

    pipeline = ir.load(out)
    price = next(e for e in pipeline.entries if e.table.endswith("price") and isinstance(e.matches[-1], ir.Range)
                 and e.matches[-1].lo == 500001)
    widened = dataclasses.replace(price, matches=(*price.matches[:-1], ir.Range(500000, price.matches[-1].hi)))
    ir.save(dataclasses.replace(pipeline, entries=tuple(widened if e == price else e for e in pipeline.entries)),
            out / "pipeline.json")
    bad = subprocess.run([*cli, "verify", str(out), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1, bad.stderr
    verdict = json.loads(bad.stdout)
    assert not verdict["equivalent"] and not verdict["sound"]
    by_output = {d["output"]: d for d in verdict["differences"]}
    # 50.0000 exactly (raw 500000), printed as explain reads it: a scaled field's value in whole units
    assert by_output["port 3"]["extra"] == {"add_order.stock": "GOOGL", "add_order.price": "50"}
    assert by_output["port 4"]["missing"] == {"add_order.stock": "GOOGL", "add_order.price": "50"}


def test_superset_accepts_extra_deliveries_only(tmp_path) -> None:
    rules = tmp_path / "r.sub"
    rules.write_text('add_order.price > 50 : fwd(3);\n')
    out = tmp_path / "out"
    cli = [sys.executable, "-m", "p4sub"]
    subprocess.run([*cli, "compile", str(ROOT / "apps/itch/itch.p4"), str(rules), "-o", str(out)], check=True,
                   capture_output=True, cwd=ROOT)
    pipeline = ir.load(out)
    e = next(e for e in pipeline.entries if isinstance(e.matches[-1], ir.Range))
    wider = dataclasses.replace(e, matches=(*e.matches[:-1], ir.Range(e.matches[-1].lo - 10, e.matches[-1].hi)))
    ir.save(dataclasses.replace(pipeline, entries=tuple(wider if x == e else x for x in pipeline.entries)),
            out / "pipeline.json")
    strict = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, cwd=ROOT)
    loose = subprocess.run([*cli, "verify", str(out), "--superset"], capture_output=True, text=True, cwd=ROOT)
    assert strict.returncode == 1 and "extra for" in strict.stdout and "missing" not in strict.stdout
    assert loose.returncode == 0 and loose.stdout.startswith("superset")


def test_verify_without_rules_exits_2_naming_what_is_missing(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "p4sub", "verify", str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 2 and "pipeline.json" in done.stderr and "Traceback" not in done.stderr
