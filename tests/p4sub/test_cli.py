"""The command line end to end on a small spec: check, compile, simulate, explain; errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4sub import main

SPEC = """
#include <core.p4>
header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header msg_t { bit<64> stock; bit<32> price; bit<32> shares; }
struct headers { ethernet_t ethernet; msg_t msg; }
@query_field_exact(msg.stock, string)
@query_field_range(msg.price, scale=4)
@query_field(msg.shares)
parser P(packet_in packet, out headers hdr) {
    state start { packet.extract(hdr.ethernet); transition select(hdr.ethernet.ether_type) { 0x88b5: m; default: accept; } }
    state m { packet.extract(hdr.msg); transition accept; }
}
"""

RULES = """# two subscribers
msg.stock == "GOOGL" and msg.price > 50: fwd(1);
msg.stock == GOOGL and msg.price > 100 or msg.shares >= 1000: fwd(2);
"""


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "s.p4").write_text(SPEC)
    (tmp_path / "r.sub").write_text(RULES)
    return tmp_path


def test_check_prints_a_summary(files, capsys) -> None:
    assert main(["check", str(files / "s.p4"), str(files / "r.sub")]) == 0
    out = capsys.readouterr().out
    assert "2 rules" in out and "msg.price" in out


@pytest.mark.parametrize("delivery", ["groups", "bitmap"])
def test_compile_simulate_explain(files, capsys, delivery) -> None:
    out_dir = files / "out"
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(out_dir), "--dot", str(files / "g.dot"),
                 "--delivery", delivery]) == 0
    stats = json.loads((out_dir / "stats.json").read_text())
    assert stats["delivery"] == delivery
    assert {"tables", "total_entries", "table_bits", "multicast_groups", "states", "compile_seconds"} <= set(stats)
    assert (files / "g.dot").read_text().startswith("digraph")
    packets = [
        {"msg.stock": "GOOGL", "msg.price": "100.0001", "msg.shares": 1},   # > 100.0001: both
        {"msg.stock": "GOOGL", "msg.price": "50.0001", "msg.shares": 1},    # 50.0001: port 1
        {"msg.stock": "AAPL", "msg.price": "999.9999", "msg.shares": 5000},  # shares: port 2
        {"msg.stock": "AAPL", "msg.price": "999.9999", "msg.shares": 5},     # nobody
    ]
    (files / "p.jsonl").write_text("\n".join(json.dumps(p) for p in packets) + "\n")
    capsys.readouterr()
    assert main(["simulate", str(out_dir), "--packets", str(files / "p.jsonl")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [{"ports": [1, 2]}, {"ports": [1]}, {"ports": [2]}, {"ports": []}]
    assert main(["explain", str(out_dir), "--packet", json.dumps(packets[0])]) == 0
    out = capsys.readouterr().out
    if delivery == "groups":
        assert "leaf_actions" in out
    else:  # ports are ORed on the way (in one lane or several); the delivery step keeps their union
        lines = out.splitlines()
        assert any(" hit " in line and line.endswith("ports [1]") or line.endswith("ports [1, 2]") for line in lines)
        assert any(line.startswith("deliver") and line.endswith("keeps ports [1, 2]") for line in lines)
        assert out.strip().splitlines()[-2].startswith("deliver") and "keeps ports [1, 2]" in out
    assert out.strip().endswith('{"ports": [1, 2]}')


def test_a_typo_exits_2_with_location_and_suggestion(files, capsys) -> None:
    (files / "bad.sub").write_text('msg.stock == "GOOGL" and\n  msg.prise > 50: fwd(1);\n')
    assert main(["check", str(files / "s.p4"), str(files / "bad.sub")]) == 2
    err = capsys.readouterr().err
    assert f"{files / 'bad.sub'}:2:3: unknown field 'msg.prise'; did you mean 'msg.price'?" in err


def test_bad_packets_name_the_line(files, capsys) -> None:
    out_dir = files / "out"
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(out_dir)]) == 0
    (files / "p.jsonl").write_text('{"msg.stock": "A", "msg.price": 1, "msg.shares": 1}\n{"msg.stock": "A"}\n')
    assert main(["simulate", str(out_dir), "--packets", str(files / "p.jsonl")]) == 2
    assert "p.jsonl:2:1: packet lacks field 'msg.price'" in capsys.readouterr().err


def test_field_order_override_and_unknown_field(files, capsys) -> None:
    out_dir = files / "o2"
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(out_dir), "--field-order", "msg.shares,msg.price"]) == 0
    assert json.loads((out_dir / "stats.json").read_text())["field_order"][:2] == ["msg.shares", "msg.price"]
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(out_dir), "--field-order", "msg.nope"]) == 2
    assert "--field-order names msg.nope" in capsys.readouterr().err


def test_dnf_blow_up_is_an_error_naming_the_rule(files, capsys) -> None:
    big = " and ".join(f"(msg.shares > {i} or msg.price > {i})" for i in range(14))
    (files / "big.sub").write_text(f"\n{big}: fwd(1);\n")
    assert main(["compile", str(files / "s.p4"), str(files / "big.sub"), "-o", str(files / "o3")]) == 2
    assert "big.sub:2:1: this rule expands to more than 4096 conjunctions" in capsys.readouterr().err


def test_like_keeps_state_width_and_table_sizes_of_an_earlier_compile(files, capsys) -> None:
    from compiler import ir

    big = RULES + "".join(f"msg.stock == S{i} and msg.price > {i}: fwd({i % 5 + 1});\n" for i in range(40))
    (files / "big.sub").write_text(big)
    groups = ["--delivery", "groups"]
    assert main(["compile", str(files / "s.p4"), str(files / "big.sub"), "-o", str(files / "v1"), "--target", "bmv2",
                 *groups]) == 0
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(files / "v2"), "--target", "bmv2",
                 *groups]) == 0
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(files / "v3"), "--target", "bmv2",
                 "--like", str(files / "v1")]) == 0
    v1, v2, v3 = (ir.load(files / v / "pipeline.json") for v in ("v1", "v2", "v3"))

    def state_bits(p):
        return next(m.width for m in p.metadata if m.name == ir.STATE)

    assert state_bits(v2) < state_bits(v1) == state_bits(v3)
    assert {t.name: t.size for t in v3.tables} == {t.name: max(t.size, v1.table(t.name).size) for t in v2.tables}
    assert (files / "v3" / "program.p4").read_text() == (files / "v1" / "program.p4").read_text()
    capsys.readouterr()
    assert main(["compile", str(files / "s.p4"), str(files / "r.sub"), "-o", str(files / "v4"),
                 "--like", str(files / "nowhere")]) == 2
    assert "--like" in capsys.readouterr().err


def test_like_keeps_a_bitmap_layout_or_refuses_with_the_reason(files, capsys) -> None:
    from compiler import ir

    more = RULES + "".join(f"msg.stock == S{i} and msg.price > {i}: fwd({i % 3 + 1});\n" for i in range(20))
    (files / "more.sub").write_text(more)
    bitmap = ["--delivery", "bitmap", "--target", "bmv2"]
    assert main(["compile", str(files / "s.p4"), str(files / "more.sub"), "-o", str(files / "b1"), *bitmap]) == 0
    fewer = RULES + 'msg.stock == "S1" and msg.price > 7: fwd(3);\n'
    (files / "fewer.sub").write_text(fewer)
    assert main(["compile", str(files / "s.p4"), str(files / "fewer.sub"), "-o", str(files / "b2"), "--target", "bmv2",
                 "--like", str(files / "b1")]) == 0
    b1, b2 = ir.load(files / "b1"), ir.load(files / "b2")
    assert b2.delivery == b1.delivery and b2.lanes == b1.lanes
    assert (files / "b2" / "program.p4").read_text() == (files / "b1" / "program.p4").read_text()
    # a port the old bitmap lacks needs another program: refused, nothing written
    (files / "new_port.sub").write_text(RULES + "msg.shares > 5: fwd(9);\n")
    capsys.readouterr()
    assert main(["compile", str(files / "s.p4"), str(files / "new_port.sub"), "-o", str(files / "b3"),
                 "--target", "bmv2", "--like", str(files / "b1")]) == 2
    assert "another program" in capsys.readouterr().err and not (files / "b3").exists()


def test_a_widening_judged_on_uniform_traffic_that_wants_nothing_says_so(tmp_path, capsys):
    """INT thresholds (latencies, queue depths) are rarely met by uniform traffic over 32 bits: the
    compile must not present its 0 % under uniform traffic as the cost of the widening."""
    from apps.workloads import int_rules, workload_text

    rules = tmp_path / "int.sub"
    rules.write_text(workload_text(int_rules(1000, constraints=4, seed=2)))
    spec = str(Path(__file__).resolve().parents[2] / "apps/int/int.p4")
    assert main(["compile", spec, str(rules), "--target", "bmv2", "--budget", "entries=2000",
                 "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "rules widened" in err and "under uniform traffic the rules want" in err and "give --trace" in err
