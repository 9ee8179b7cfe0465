"""Siena spec, traces and ``p4sub gen siena``: the spec reads, rules type-check against it, and
the pcap parses back (through the spec's own parser) to exactly the generated columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apps.pcap import read_pcap
from apps.siena.spec import DEFAULT_SPEC_PATH, SIENA_PORT, siena_attributes, siena_spec_text
from apps.siena.trace import siena_packets, write_siena_pcap
from apps.udp import ones_complement_sum
from apps.workloads import SienaConfig, siena_rules, siena_words, workload_text
from compiler import rules as ast
from compiler.base.errors import P4subError
from compiler.oracle import evaluate
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from compiler.rules.values import decode_string, encode_string
from compiler.spec.reader import parse_spec, read_spec
from p4sub import main
from runtime.parse_graph import parse_packet

SMALL = SienaConfig(attributes=5, constraints=(1, 3), int_fraction=0.4, values=30, header="msg")


def _comparisons(f: ast.Filter) -> list[ast.Comparison]:
    if isinstance(f, ast.Comparison):
        return [f]
    items = getattr(f, "items", None) or ([f.item] if isinstance(f, ast.Not) else [])
    return [c for i in items for c in _comparisons(i)]


def test_checked_in_spec_is_the_generated_default() -> None:
    assert DEFAULT_SPEC_PATH.read_text(encoding="utf-8") == siena_spec_text(SienaConfig())


@pytest.mark.parametrize("config", [SienaConfig(), SMALL, SienaConfig(int_fraction=0.0, values=5), SienaConfig(attributes=3, constraints=(1, 3), int_fraction=1.0)])
def test_spec_reads_and_rules_type_check(config: SienaConfig) -> None:
    spec = parse_spec(siena_spec_text(config), "siena.p4")
    attrs = siena_attributes(config)
    assert list(spec.query_fields) == [a.name for a in attrs]
    for a in attrs:
        info = spec.query_fields[a.name]
        assert (info.width, info.is_string) == (a.bits, a.is_string)
    typed = check_rules(parse_rules(workload_text(siena_rules(200, config, seed=4))), spec)
    assert len(typed.rules.rules) == 200


def test_default_spec_file_reads() -> None:
    spec = read_spec(DEFAULT_SPEC_PATH)
    assert "siena.i6" in spec.query_fields and spec.query_fields["siena.s7"].is_string


@pytest.mark.parametrize("header", ["udp", "ipv4", "state", "header"])
def test_header_names_the_spec_cannot_hold_are_refused(header: str) -> None:
    with pytest.raises(P4subError, match="--header"):
        siena_spec_text(SienaConfig(header=header))


def test_columns_are_drawn_like_the_rule_constants() -> None:
    cols = siena_packets(2000, SMALL, seed=3)
    assert list(cols) == ["msg.i0", "msg.i1", "msg.s2", "msg.s3", "msg.s4"]
    assert all(v.dtype == np.uint64 and len(v) == 2000 for v in cols.values())
    assert cols["msg.i0"].min() >= 1 and cols["msg.i0"].max() <= SMALL.values
    words = {encode_string(w, 64) for w in siena_words(SMALL.values, 3)}
    assert set(cols["msg.s2"].tolist()) <= words
    assert all(np.array_equal(a, b) for a, b in zip(cols.values(), siena_packets(2000, SMALL, seed=3).values()))
    zipf = siena_packets(2000, SienaConfig(values=100, value_distribution="zipf", zipf=1.5), seed=3)["siena.i0"]
    assert np.bincount(zipf.astype(np.int64)).argmax() == 1  # rank 1 is the most frequent, as in the rules


def test_pcap_parses_back_to_the_columns(tmp_path: Path) -> None:
    spec = parse_spec(siena_spec_text(SMALL))
    cols = siena_packets(50, SMALL, seed=1)
    path = tmp_path / "siena.pcap"
    assert write_siena_pcap(path, cols) == 50
    records, damage = read_pcap(path)
    assert damage.total == 0 and len(records) == 50
    stamps = [r.timestamp_ns for r in records]
    assert all(a < b for a, b in zip(stamps, stamps[1:]))
    for i, rec in enumerate(records):
        parsed = parse_packet(spec, rec.data)
        assert parsed.ok and parsed.states[-1] == "parse_msg"
        assert parsed.value("udp.dst_port") == SIENA_PORT
        assert ones_complement_sum(rec.data[14:34]) == 0xFFFF  # IPv4 header checksum
        assert {name: parsed.value(name) for name in cols} == {name: int(v[i]) for name, v in cols.items()}
    assert decode_string(int(cols["msg.s2"][0]), 64) in siena_words(SMALL.values, 1)


def test_bad_columns_are_refused(tmp_path: Path) -> None:
    cols = siena_packets(3, SMALL)
    with pytest.raises(P4subError, match="integer attributes come before"):
        write_siena_pcap(tmp_path / "x.pcap", {"msg.s0": cols["msg.s2"], "msg.i1": cols["msg.i0"]})
    with pytest.raises(P4subError, match="attribute 0"):
        write_siena_pcap(tmp_path / "x.pcap", {"msg.i1": cols["msg.i0"]})


def test_rules_and_packets_with_one_seed_share_strings_and_match() -> None:
    seed = 7
    spec = parse_spec(siena_spec_text(SMALL))
    typed = check_rules(parse_rules(workload_text(siena_rules(100, SMALL, seed=seed))), spec)
    cols = siena_packets(50, SMALL, seed=seed)
    constants = {encode_string(c.value.value, 64) for r in typed.rules for c in _comparisons(r.filter)
                 if isinstance(c.value, ast.String) and c.op == "=="}
    packet_strings = {int(v) for name, col in cols.items() if ".s" in name for v in col}
    assert constants & packet_strings
    matched = sum(bool(evaluate(typed, {n: int(v[i]) for n, v in cols.items()}).ports) for i in range(50))
    assert matched > 0


def test_gen_siena_cli_writes_the_library_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "siena.pcap"
    assert main(["gen", "siena", "--packets", "40", "--attributes", "5", "--int-fraction", "0.4", "--values", "30",
                 "--header", "msg", "--seed", "2", "--progress", "-o", str(out)]) == 0
    write_siena_pcap(tmp_path / "lib.pcap", siena_packets(40, SMALL, seed=2))
    assert out.read_bytes() == (tmp_path / "lib.pcap").read_bytes()
    err = capsys.readouterr().err
    assert "gen siena: 40/40 (100%" in err and "40 Siena messages" in err


def test_gen_rules_spec_out(tmp_path: Path) -> None:
    rules, spec = tmp_path / "r.sub", tmp_path / "s.p4"
    assert main(["gen", "rules", "--workload", "siena", "--filters", "30", "--attributes", "5", "--constraints", "1-3",
                 "--int-fraction", "0.4", "--values", "30", "--header", "msg", "-q", "--spec-out", str(spec), "-o", str(rules)]) == 0
    assert spec.read_text() == siena_spec_text(SMALL)
    check_rules(parse_rules(rules.read_text()), read_spec(spec))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gen", "siena", "--packets", "-1", "-o", "x.pcap"], "--packets"),
        (["gen", "siena", "--values", "1", "-o", "x.pcap"], "--values"),
        (["gen", "siena", "--int-fraction", "2", "-o", "x.pcap"], "--int-fraction"),
        (["gen", "siena", "--header", "udp", "-o", "x.pcap"], "--header"),
        (["gen", "siena", "--seed", "-3", "-o", "x.pcap"], "--seed"),
        (["gen", "rules", "--workload", "itch", "--filters", "5", "--spec-out", "x.pcap"], "--spec-out"),
        (["gen", "rules", "--workload", "siena", "--filters", "5", "--header", "ipv4", "--spec-out", "x.pcap"], "--header"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.pcap").exists()


def test_gen_siena_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gen", "siena", "--help"])
    assert exc.value.code == 0 and "example:\n  p4sub gen siena" in capsys.readouterr().out
