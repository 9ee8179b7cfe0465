"""Bounds before explosions, and `check` agreeing with `compile`: each case exits 2 at once with a
message, never a MemoryError, a RecursionError or a minutes-long run. Issue 19, "No bounds"."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compiler import compile as compile_module
from compiler.base.errors import CompileError, P4subError
from compiler.compile import Budget, CompileOptions, compile_rules
from compiler.network.topology_arg import parse_topology_arg
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec, read_spec
from compiler.tables import TableOptions
from p4sub import main

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")


def run(capsys, *argv: str, seconds: float = 30) -> tuple[int, str]:
    capsys.readouterr()
    started = time.monotonic()
    code = main(list(argv))
    assert time.monotonic() - started < seconds, f"{argv} took too long"
    return code, capsys.readouterr().err


def test_encode_exact_on_a_price_is_refused_at_once_saying_by_how_much(capsys, tmp_path):
    code, err = run(capsys, "compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "o"), "--encode", "add_order.price=exact",
                    seconds=20)
    assert code == 2
    assert "add_order.price: matching it exact (--encode asks for it) needs 107,500,020 entries" in err
    assert "108 times the limit of 1,000,000" in err and "--encode add_order.price=range" in err
    assert not (tmp_path / "o").exists()


def test_the_exact_expansion_limit_is_counted_before_expanding():
    spec = read_spec(ITCH)
    rules = parse_rules("add_order.shares > 100 and add_order.shares < 200 : fwd(1);", "r")
    small = CompileOptions(delivery="groups", tables=TableOptions(per_field_encoding={"add_order.shares": "exact"},
                                                                  max_exact_entries=50))
    with pytest.raises(CompileError, match="needs 99 entries"):
        compile_rules(spec, rules, small)
    ok = CompileOptions(delivery="groups", tables=TableOptions(per_field_encoding={"add_order.shares": "exact"}))
    assert compile_rules(spec, rules, ok).stats["total_entries"] >= 99


def test_encode_of_a_field_the_spec_lacks_is_refused(capsys, tmp_path):
    code, err = run(capsys, "compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "o"), "--encode", "add_order.prise=exact")
    assert code == 2 and "has no field 'add_order.prise'; did you mean 'add_order.price'?" in err
    code, err = run(capsys, "compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "o"), "--encode", "nosuch.f=exact")
    assert code == 2 and "--encode nosuch.f=exact" in err and "has no field 'nosuch.f'" in err


@pytest.mark.parametrize("argv, message", [
    (["check", ITCH, ITCH_RULES, "--port-bits", "-1"], "--port-bits -1: expected a width from 1 to 32 bits"),
    (["check", ITCH, ITCH_RULES, "--port-bits", "0"], "--port-bits 0: expected"),
    (["check", ITCH, ITCH_RULES, "--port-bits", "100000"], "--port-bits 100000: expected"),
    (["compile", ITCH, ITCH_RULES, "-o", "{tmp}/o", "--dnf-limit", "0"], "--dnf-limit 0: expected a positive number"),
    (["compile", ITCH, ITCH_RULES, "-o", "{tmp}/o", "--max-lanes", "100000"], "--max-lanes 100000: expected a number"),
    (["eval", "delivery", "--topology", "fat-tree:1000", "--runs", "1"], "'fat-tree:1000' has 251,250,000 nodes"),
    (["eval", "delivery", "--topology", "jellyfish:200000", "--runs", "1"], "has 400,000 nodes"),
])
def test_option_values_out_of_range_exit_2(capsys, tmp_path, argv, message):
    code, err = run(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert code == 2 and message in err and "Traceback" not in err


def test_generated_topologies_are_bounded_before_they_are_built():
    started = time.monotonic()
    for spec in ("fat-tree:1000", "jellyfish:10000000", "leaf-spine:1000,10,1000", "facebook:1000,1000,1000,4,4",
                 "jellyfish:" + "9" * 5000):
        with pytest.raises(P4subError):
            parse_topology_arg(spec)
    assert time.monotonic() - started < 5
    assert len(parse_topology_arg("fat-tree:4").switches()) == 20


@pytest.mark.parametrize("text, message", [
    ("add_order.shares == " + "1" * 1_000_000 + " : fwd(1);", "a number of 1,000,000 digits"),
    ("not " * 10_000 + "add_order.shares == 1 : fwd(1);", "nested more than 100 levels"),
])
def test_huge_and_deep_rules_exit_2_in_check_and_compile(capsys, tmp_path, text, message):
    rules = tmp_path / "r.sub"
    rules.write_text(text)
    for argv in (["check", ITCH, str(rules)], ["compile", ITCH, str(rules), "-o", str(tmp_path / "o")]):
        code, err = run(capsys, *argv)
        assert code == 2 and message in err and f"{rules}:1:" in err


def test_a_huge_advance_is_refused_by_check_as_compile_would(capsys, tmp_path):
    text = Path(ITCH).read_text()
    spec = tmp_path / "s.p4"
    spec.write_text(text.replace("packet.advance(((bit<32>)(hdr.mold_msg.last.msg_len - 1)) * 8);",
                                 "packet.advance(99999999999999999999999999);"))
    for argv in (["check", str(spec), ITCH_RULES], ["compile", str(spec), ITCH_RULES, "-o", str(tmp_path / "o"),
                                                    "--target", "bmv2"]):
        code, err = run(capsys, *argv)
        assert code == 2 and "packet.advance by 99999999999999999999999999 bits: it takes a bit<32>" in err
        assert f"{spec}:" in err
    with pytest.raises(P4subError, match="takes a bit<32>"):
        parse_spec(spec.read_text().replace("99999999999999999999999999", str(1 << 32)), "s.p4")
    parse_spec(spec.read_text().replace("99999999999999999999999999", str((1 << 32) - 8)), "s.p4")


def test_a_spec_literal_of_a_million_digits_is_a_located_error():
    text = Path(ITCH).read_text().replace("MAX_MSGS = 12", "MAX_MSGS = " + "1" * 1_000_000)
    with pytest.raises(P4subError, match="a literal of 1,000,000 digits") as info:
        parse_spec(text, "s.p4")
    assert info.value.location is not None


@pytest.mark.parametrize("target, refused", [("bmv2", True), ("tofino", False), ("none", False)])
def test_check_and_compile_agree_on_the_drop_port(capsys, tmp_path, target, refused):
    rules = tmp_path / "r.sub"
    rules.write_text("add_order.shares == 1 : fwd(3);\nadd_order.shares == 2 :\n   fwd(2, 511);\n")
    check, check_err = run(capsys, "check", ITCH, str(rules), "--target", target)
    comp, comp_err = run(capsys, "compile", ITCH, str(rules), "-o", str(tmp_path / "o"), "--target", target)
    assert check == comp == (2 if refused else 0), (check_err, comp_err)
    if refused:
        message = f"{rules}:3:4: port 511 is v1model's drop port, not an egress port (bmv2 ports are 0..510)"
        assert message in check_err and message in comp_err
    if target != "tofino":  # (--target tofino --default fwd(N) fails in the Tofino backend for any N)
        code, err = run(capsys, "compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "o2"), "--target", target,
                        "--default", "fwd(511)")
        assert code == (2 if refused else 0) and (not refused or "--default fwd(511): port 511 is v1model's drop" in err)


def test_port_512_is_out_of_range_everywhere(capsys, tmp_path):
    rules = tmp_path / "r.sub"
    rules.write_text("add_order.shares == 1 : fwd(512);\n")
    for argv in (["check", ITCH, str(rules)], ["compile", ITCH, str(rules), "-o", str(tmp_path / "o")]):
        code, err = run(capsys, *argv)
        assert code == 2 and "port 512 is out of range: ports are 9-bit (0..511)" in err


def test_an_explicit_groups_diagram_is_abandoned_past_its_bound(monkeypatch):
    monkeypatch.setattr(compile_module, "GROUPS_MIN_EDGES", 5)
    spec = read_spec(ITCH)
    rules = parse_rules("".join(f"add_order.shares > {i * 10} : fwd({i});\n" for i in range(20)), "r")
    with pytest.raises(CompileError, match="--delivery groups: the one decision diagram passed 10 edges"):
        compile_rules(spec, rules, CompileOptions(delivery="groups", budget=Budget(entries=1)))


def test_check_refuses_the_dnf_blow_up_compile_refuses(capsys, tmp_path):
    big = " and ".join(f"(add_order.shares > {i} or add_order.price > {i})" for i in range(14))
    rules = tmp_path / "r.sub"
    rules.write_text(f"add_order.shares == 1 : fwd(1);\n{big}: fwd(2);\n")
    check, check_err = run(capsys, "check", ITCH, str(rules))
    comp, comp_err = run(capsys, "compile", ITCH, str(rules), "-o", str(tmp_path / "o"))
    message = f"{rules}:2:1: this rule expands to more than 4096 conjunctions"
    assert check == comp == 2 and message in check_err and message in comp_err
    assert run(capsys, "check", ITCH, str(rules), "--dnf-limit", "20000")[0] == 0


@pytest.mark.parametrize("port, message", [
    (600, "switch e1_1 has port 600; --target bmv2 ports are 9-bit (0..511)"),
    (511, "switch e1_1 has port 511, which is v1model's drop port"),
])
def test_route_names_the_topology_of_a_port_the_target_cannot_use(capsys, tmp_path, port, message):
    topo = tmp_path / "t.topo"
    topo.write_text((REPO / "examples/fat-tree-4.topo").read_text().replace("link e1_1:1 ", f"link e1_1:{port} "))
    code, err = run(capsys, "route", str(topo), str(REPO / "examples/fat-tree-4.rules"), "--spec", ITCH,
                    "--target", "bmv2", "--jobs", "1", "--quiet", "-o", str(tmp_path / "net"))
    assert code == 2 and f"{topo}: {message}" in err and not (tmp_path / "net").exists()


@pytest.mark.parametrize("argv, message", [
    (("gen", "int", "--switches", str(2 ** 40), "--packets", "10"), "--switches 1,099,511,627,776: 1,099,511.6 times"),
    (("gen", "siena", "--values", str(2 ** 40), "--packets", "10"), "--values 1,099,511,627,776: "),
    (("gen", "siena", "--attributes", "100000"), "--attributes 100,000: 100.0 times the bound of 1,000"),
    (("gen", "itch", "--messages", str(10 ** 12)), "--messages 1,000,000,000,000: 1,000.0 times"),
    (("gen", "rules", "--workload", "itch", "--filters", "5", "--symbols", str(2 ** 40)), "--symbols"),
    (("gen", "rules", "--workload", "int", "--filters", "5", "--thresholds", str(2 ** 40)), "--thresholds"),
    (("gen", "rules", "--workload", "siena", "--filters", "5", "--attributes", str(2 ** 40)), "--attributes"),
    (("gen", "rules", "--workload", "siena", "--filters", "5", "--values", str(2 ** 40)), "--values"),
    (("gen", "--spec", ITCH, "--packets", str(10 ** 10)), "--packets 10,000,000,000: 10.0 times"),
])
def test_huge_gen_options_are_refused_at_once_saying_by_how_much(capsys, tmp_path, argv, message):
    out = tmp_path / "out"
    code, err = run(capsys, *argv, "-o", str(out), seconds=5)
    assert code == 2 and message in err and "times the bound of" in err, err
    assert not out.exists()


def test_gen_rules_refuses_hosts_compile_would_refuse_and_the_largest_it_allows_compiles(capsys, tmp_path):
    rules = tmp_path / "r.sub"
    code, err = run(capsys, "gen", "rules", "--workload", "itch", "--filters", "20", "--hosts", "1000",
                    "-o", str(rules))
    assert code == 2 and "--hosts 1,000" in err and "490 too many" in err and not rules.exists()
    assert run(capsys, "gen", "rules", "--workload", "itch", "--filters", "300", "--hosts", "510", "--seed", "3",
               "-o", str(rules), "--quiet")[0] == 0
    import re

    ports = [int(p) for group in re.findall(r"fwd\(([\d, ]+)\)", rules.read_text()) for p in group.split(",")]
    assert ports and max(ports) <= 510
    for target in ("none", "bmv2", "tofino"):
        code, err = run(capsys, "compile", ITCH, str(rules), "--target", target, "-o", str(tmp_path / target))
        assert code == 0, err
