"""Workload generators: the text parses with the subscription grammar, and each workload has the
shape, ranges and determinism it promises."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from apps.itch.symbols import symbol_names
from apps.workloads import (
    SienaConfig,
    hicn_rules,
    int_rules,
    itch_rules,
    latency_thresholds,
    siena_rules,
    workload_text,
)
from compiler.base.errors import P4subError

GRAMMAR = Path(__file__).resolve().parents[2] / "grammar" / "subscription.lark"


@pytest.fixture(scope="module")
def parser():  # type: ignore[no-untyped-def]
    lark = pytest.importorskip("lark")
    if not GRAMMAR.exists():
        pytest.skip("grammar/subscription.lark not present")
    return lark.Lark(GRAMMAR.read_text(), parser="lalr")


def rules_of(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("#")]


@pytest.mark.parametrize(
    "lines",
    [
        lambda: itch_rules(200, constraints=5, seed=1),
        lambda: itch_rules(200, constraints=1, integer_prices=True),
        lambda: int_rules(200),
        lambda: hicn_rules(200, id_bits=64),
        lambda: siena_rules(300, SienaConfig(attribute_distribution="zipf", value_distribution="zipf")),
    ],
    ids=["itch5", "itch1", "int", "hicn", "siena"],
)
def test_every_workload_parses_with_the_subscription_grammar(parser, lines) -> None:  # type: ignore[no-untyped-def]
    text = workload_text(lines())
    tree = parser.parse(text)
    assert len(tree.children) == len(rules_of(text.splitlines()))


ITCH_RULE = re.compile(
    r'^add_order\.stock == "(?P<s>[A-Z0-9]+)" and add_order\.price > (?P<p>\d+(\.\d{1,4})?)'
    r"(?: and add_order\.shares > (?P<sh>\d+))?"
    r'(?: and add_order\.buy_sell_indicator == "(?P<b>[BS])")?'
    r"(?: and add_order\.price < (?P<u>\d+(\.\d{1,4})?))?: fwd\((?P<h>\d+)\);$"
)


@pytest.mark.parametrize("constraints", [2, 3, 5])
def test_itch_rules_shape_and_ranges(constraints: int) -> None:
    lines = rules_of(list(itch_rules(3000, symbols=50, hosts=200, constraints=constraints, seed=4)))
    assert len(lines) == 3000
    names = set(symbol_names(50))
    hosts, symbols = Counter(), Counter()
    for line in lines:
        m = ITCH_RULE.match(line)
        assert m, line
        assert m["s"] in names
        price = Decimal(m["p"])
        assert 0 < price < 1000
        assert (m["sh"] is not None) == (constraints >= 3)
        assert (m["b"] is not None) == (constraints >= 4)
        assert (m["u"] is not None) == (constraints >= 5)
        if m["u"]:
            assert price < Decimal(m["u"]) < 1000
        hosts[int(m["h"])] += 1
        symbols[m["s"]] += 1
    assert set(hosts) <= set(range(1, 201)) and len(hosts) > 150
    assert len(symbols) == 50


def test_itch_integer_prices_and_decimals() -> None:
    whole = rules_of(list(itch_rules(500, integer_prices=True)))
    assert all(re.search(r"price > \d+:", r) for r in whole)
    decimal = rules_of(list(itch_rules(500)))
    assert sum("." in r.split("price > ")[1] for r in decimal) > 400


def test_int_rules_use_the_thresholds_and_switches() -> None:
    levels = latency_thresholds(1000)
    assert len(levels) == 1000 == len(set(levels)) and levels[0] == 1000 and max(levels) >= 10_000_000
    seen_sw, seen_lat = set(), set()
    for line in rules_of(list(int_rules(20_000, switches=100, seed=3))):
        m = re.match(r"^int_hop\.switch_id == (\d+) and int_hop\.hop_latency > (\d+): fwd\((\d+)\);$", line)
        assert m, line
        seen_sw.add(int(m[1]))
        seen_lat.add(int(m[2]))
    assert seen_sw == set(range(1, 101))
    assert seen_lat <= set(levels) and len(seen_lat) > 990


INT_RULE = re.compile(
    r"^int_hop\.switch_id == (?P<sw>\d+)(?: and int_hop\.hop_latency > (?P<lat>\d+))?"
    r"(?: and int_hop\.queue_occupancy > (?P<q>\d+))?(?: and int_hop\.hop_latency < (?P<up>\d+))?: fwd\((\d+)\);$"
)


@pytest.mark.parametrize("constraints", [1, 2, 3, 4])
def test_int_rules_take_one_to_four_constraints(constraints: int) -> None:
    levels = set(latency_thresholds(1000))
    lines = rules_of(list(int_rules(5000, constraints=constraints, seed=5)))
    for line in lines:
        m = INT_RULE.match(line)
        assert m, line
        assert [m[g] is not None for g in ("lat", "q", "up")] == [constraints >= 2, constraints >= 3, constraints >= 4]
        if m["lat"]:
            assert int(m["lat"]) in levels
        if m["q"]:
            assert 1 <= int(m["q"]) <= 20_000
        if m["up"]:
            assert int(m["up"]) > int(m["lat"])
    if constraints == 2:  # Camus's two constraints: the rules drawn before there was a choice
        assert lines == rules_of(list(int_rules(5000, seed=5)))
    assert all(a.split(" and ")[:constraints - 1] == b.split(" and ")[:constraints - 1]
               for a, b in zip(lines, rules_of(list(int_rules(5000, constraints=4, seed=5)))))


def test_hicn_ids_are_distinct_and_fit_their_width() -> None:
    lines = rules_of(list(hicn_rules(50_000, field="name.id", id_bits=20, seed=2)))
    ids = [int(re.match(r"^name\.id == (\d+): fwd\(\d+\);$", line)[1]) for line in lines]  # type: ignore[index]
    assert len(ids) == len(set(ids)) == 50_000 and max(ids) < 1 << 20
    with pytest.raises(P4subError):
        list(hicn_rules(10, id_bits=3))


def test_siena_constraints_operators_and_types() -> None:
    cfg = SienaConfig(attributes=8, constraints=(2, 3), operators=("=", "<", "prefix"), int_fraction=0.5, values=50)
    lines = rules_of(list(siena_rules(2000, cfg, seed=6)))
    per_filter = Counter()
    for line in lines:
        filt = line.split(": fwd(")[0]
        parts = filt.split(" and ")
        per_filter[len(parts)] += 1
        attrs = [p.split()[0] for p in parts]
        assert len(set(attrs)) == len(attrs) and attrs == sorted(attrs, key=lambda a: int(a[len("siena.") + 1 :]))
        for p in parts:
            attr, op, value = p.split(" ", 2)
            if attr.startswith("siena.i"):
                assert op in ("==", "<") and 1 <= int(value) <= 50
            else:
                assert op in ("==", "prefix") and re.fullmatch(r'"[a-z]{1,8}"', value)
    assert set(per_filter) == {2, 3}


def test_siena_zipf_skews_attribute_popularity() -> None:
    def first_attr_share(dist: str) -> float:
        cfg = SienaConfig(attributes=20, constraints=(1, 1), attribute_distribution=dist, zipf=1.2)
        attrs = Counter(line.split()[0] for line in rules_of(list(siena_rules(4000, cfg, seed=1))))
        return attrs["siena.i0"] / 4000

    assert first_attr_share("zipf") > 0.2
    assert first_attr_share("uniform") < 0.1


def test_same_seed_same_text_other_seed_other_text() -> None:
    for make in (lambda s: itch_rules(100, seed=s), lambda s: int_rules(100, seed=s), lambda s: hicn_rules(100, seed=s),
                 lambda s: siena_rules(100, seed=s)):
        assert list(make(1)) == list(make(1)) != list(make(2))


@pytest.mark.parametrize(
    "make",
    [
        lambda: itch_rules(10, constraints=6),
        lambda: itch_rules(10, symbols=0),
        lambda: siena_rules(10, SienaConfig(constraints=(3, 2))),
        lambda: siena_rules(10, SienaConfig(operators=("~",))),
        lambda: siena_rules(10, SienaConfig(attributes=2, constraints=(1, 3))),
        lambda: hicn_rules(10, field="noheader"),
        lambda: int_rules(10, constraints=5),
    ],
)
def test_bad_options_are_user_errors(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(P4subError):
        list(make())
