"""Camus's rule syntax end to end: strings on unmarked fields, address arguments of user actions,
'!' and prefixes with spaces, compiled and run through the reference model against the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import oracle
from compiler.compile import CompileOptions, compile_rules
from compiler.rules.parser import parse_rules
from compiler.rules.values import encode_string
from runtime.model import Model
from tests.compiler.specs import make_spec

FIELDS = {
    "dns_q.label": (32, {"match_kind": "exact"}),  # no `string` marker, as Camus's specs have none
    "order.symbol": (64, {"match_kind": None}),  # @query_field, the compiler picks the match
    "order.qty": (32, {"match_kind": "range"}),
    "ipv4.dstAddr": (32, {}),
    "ethernet.dstAddr": (48, {}),
}
SPEC = make_spec(FIELDS, actions={"answer": (32,), "rewrite_mac": (48,)})

RULES = """# written the way Camus's users write them
dns_q.label = "ab12" : answer(10.0.0.97);
dns_q.label = "x": answer(10.0.0.98), rewrite_mac(00:11:22:33:44:55);
order.symbol prefix "AC" and ! order.qty = 5: fwd(2);  # not 5 shares
ipv4.dstAddr = 10.0.0.0 / 8 : fwd(3);
ethernet.dstAddr = 00:00:5e:00:53:01:fwd(4);
"""

PACKETS = [
    # label, symbol, qty, dst IPv4, dst MAC
    (encode_string("ab12", 32), encode_string("ACME", 64), 5, 0x0A000001, 0x00005E005301),
    (encode_string("x", 32), encode_string("ACME", 64), 6, 0x0B000001, 0),
    (encode_string("ab1", 32), encode_string("BC", 64), 6, 0x0B000001, 0x00005E005302),
    (int.from_bytes(b"x\0\0\0", "big"), int.from_bytes(b"AC", "big"), 0, 0, 0),  # NUL-padded: not "x"
]
EXPECTED = [
    ({3, 4}, {("answer", (0x0A000061,))}),
    ({2}, {("answer", (0x0A000062,)), ("rewrite_mac", (0x001122334455,))}),
    (set(), set()),
    (set(), set()),
]


def packets() -> list[dict[str, int]]:
    return [dict(zip(FIELDS, p)) for p in PACKETS]


@pytest.mark.parametrize("delivery", ["groups", "bitmap", "auto"])
def test_camus_style_rules_compile_and_run_as_the_oracle_says(delivery: str) -> None:
    compiled = compile_rules(SPEC, parse_rules(RULES, "camus.sub"), CompileOptions(delivery=delivery))
    model = Model(compiled.pipeline)
    pkts = packets()
    result = model.run({f: np.array([p[f] for p in pkts], dtype=np.uint64) for f in model.inputs})
    calls: list[set] = [set() for _ in pkts]
    for name, batches in result.calls.items():
        for rows, args in batches:
            for row, a in zip(rows.tolist(), args.tolist()):
                calls[row].add((name, tuple(int(x) for x in a)))
    for i, (pkt, (ports, expected_calls)) in enumerate(zip(pkts, EXPECTED)):
        want = oracle.evaluate(compiled.typed, pkt)
        assert (set(want.ports), set(want.calls)) == (ports, expected_calls), i
        assert result.ports_of(i) == want.ports, i
        assert calls[i] == expected_calls, i
        assert model.run_one(pkt)[0] == want.ports, i


def test_the_string_marker_is_only_a_hint() -> None:
    marked = make_spec({**FIELDS, "dns_q.label": (32, {"match_kind": "exact", "is_string": True}),
                        "order.symbol": (64, {"match_kind": None, "is_string": True})},
                       actions={"answer": (32,), "rewrite_mac": (48,)})
    plain = compile_rules(SPEC, parse_rules(RULES), CompileOptions(delivery="groups"))
    hinted = compile_rules(marked, parse_rules(RULES), CompileOptions(delivery="groups"))
    assert plain.pipeline.entries == hinted.pipeline.entries


def test_strings_are_space_padded_on_the_right_as_camus_pads_them() -> None:
    # Camus: space_pad_str s (w/8), then the first character in the most significant byte.
    assert encode_string("no97", 32) == int.from_bytes(b"no97", "big")
    assert encode_string("ab", 32) == int.from_bytes(b"ab  ", "big")
    assert encode_string("", 16) == 0x2020
