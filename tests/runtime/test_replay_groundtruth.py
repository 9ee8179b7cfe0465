"""The vectorised ground truth against the per-message oracle (compiler.oracle), which shares no code with it."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import rules as ast
from compiler.base.errors import P4subError
from compiler.oracle import evaluate
from compiler.rules.typecheck import check_rules
from compiler.rules.values import encode_string
from runtime import groundtruth
from runtime.groundtruth import GroundTruth, rule_ports
from runtime.replay_ports import PortSpace, or_segments
from tests.compiler.specs import make_spec

SPEC = make_spec({
    "msg.stock": (64, {"is_string": True}),
    "msg.side": (8, {"match_kind": "exact", "is_string": True}),
    "msg.price": (32, {"match_kind": "range", "scale": 4}),
    "msg.shares": (32, {"match_kind": "range"}),
    "ipv4.dst_addr": (32, {"match_kind": "lpm"}),
    "ipv6.dst_addr": (128, {}),
    "eth.dst": (48, {}),
}, counters={"rate": 1000})

SYMBOLS = ["AAPL", "GOOGL", "MSFT", "GO", "A", "ZVZZT"]


@st.composite
def comparison(draw) -> ast.Comparison:
    field = draw(st.sampled_from(["msg.stock", "msg.side", "msg.price", "msg.shares", "ipv4.dst_addr", "ipv6.dst_addr", "eth.dst"]))
    if field == "msg.stock":
        op = draw(st.sampled_from(["==", "==", "!=", "prefix"]))
        return ast.Comparison(ast.Field(field), op, ast.String(draw(st.sampled_from(SYMBOLS + [""]))))
    if field == "msg.side":
        return ast.Comparison(ast.Field(field), draw(st.sampled_from(["==", "!="])), ast.String(draw(st.sampled_from("BS"))))
    if field in ("msg.price", "msg.shares"):
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", ">", "<"]))
        if field == "msg.price" and draw(st.booleans()):
            value = ast.Number(Decimal(draw(st.integers(0, 2000))) / 4)
        else:
            value = ast.Number(draw(st.integers(0, 400)))
        return ast.Comparison(ast.Field(field), op, value)
    if field == "ipv4.dst_addr":
        plen = draw(st.sampled_from([0, 8, 16, 24, 31, 32]))
        base = draw(st.sampled_from([0x0A000000, 0x0A010200, 0xC0A80101]))
        value = base >> (32 - plen) << (32 - plen) if plen else 0
        op = draw(st.sampled_from(["==", "!="] if plen < 32 else ["==", "!=", "<", ">="]))
        return ast.Comparison(ast.Field(field), op, ast.IPAddress(4, value, plen))
    if field == "ipv6.dst_addr":
        plen = draw(st.sampled_from([0, 16, 64, 128]))
        base = 0x20010DB8 << 96 | draw(st.integers(0, 3))
        value = base >> (128 - plen) << (128 - plen) if plen else 0
        op = draw(st.sampled_from(["==", "!="] if plen < 128 else ["==", "!=", "<", ">"]))
        return ast.Comparison(ast.Field(field), op, ast.IPAddress(6, value, plen))
    return ast.Comparison(ast.Field(field), draw(st.sampled_from(["==", "!=", ">"])), ast.MACAddress(draw(st.sampled_from([1, 2, 0xFFFF]))))


RANDOM_FILTER = st.recursive(
    st.one_of(comparison(), comparison(), comparison(), st.booleans().map(ast.Const)),
    lambda ch: st.one_of(
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: ast.And(tuple(xs))),
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: ast.Or(tuple(xs))),
        ch.map(ast.Not),
    ), max_leaves=6)


@st.composite
def camus_filter(draw) -> ast.Filter:
    """The shape subscription workloads use most: symbol equality and a price threshold (or two)."""
    items = [ast.Comparison(ast.Field("msg.stock"), "==", ast.String(draw(st.sampled_from(SYMBOLS[:3]))))]
    for _ in range(draw(st.integers(0, 2))):
        items.append(ast.Comparison(ast.Field(draw(st.sampled_from(["msg.price", "msg.shares"]))),
                                    draw(st.sampled_from(["<", "<=", ">", ">="])), ast.Number(draw(st.integers(0, 400)))))
    if draw(st.booleans()):
        items.append(ast.Comparison(ast.Field("msg.side"), "==", ast.String(draw(st.sampled_from("BS")))))
    return ast.And(tuple(items)) if len(items) > 1 else items[0]


FILTER = st.one_of(camus_filter(), RANDOM_FILTER)
PORTS = st.lists(st.integers(0, 70), max_size=3, unique=True)


@st.composite
def rule_set(draw) -> ast.RuleSet:
    rules = []
    for _ in range(draw(st.integers(1, 16))):
        f = draw(FILTER)
        ports = draw(PORTS)
        actions = (ast.Forward(tuple(sorted(ports))),) if ports else (ast.Drop(),)
        rules.append(ast.Rule(f, actions))
    return ast.RuleSet(tuple(rules))


def _field_value(rng: random.Random, field: str) -> int:
    if field == "msg.stock":
        return encode_string(rng.choice(SYMBOLS + ["GOOD", "AAPLX"]), 64)
    if field == "msg.side":
        return ord(rng.choice("BSX"))
    if field == "msg.price":
        return rng.choice([rng.randint(0, 4_000_000), rng.choice([0, 500_000, 1_000_000, 2_500_000, 4_000_001])])
    if field == "msg.shares":
        return rng.choice([rng.randint(0, 500), rng.choice([0, 100, 399, 400, 2**32 - 1])])
    if field == "ipv4.dst_addr":
        return rng.choice([rng.choice([0x0A000000, 0x0A010200, 0x0A010201, 0xC0A80101, 0xC0A80100]), rng.getrandbits(32)])
    if field == "ipv6.dst_addr":
        return rng.choice([rng.choice([0x20010DB8 << 96, 0x20010DB8 << 96 | 1, 0x20010DB8 << 96 | 3, 1 << 100]),
                           rng.getrandbits(128)])
    return rng.choice([0, 1, 2, 3, 0xFFFF, 2**48 - 1])


def _near_constants(typed) -> dict[str, list[int]]:
    """Per field, the values rules compare with and their neighbours: where off-by-one bugs show."""
    out: dict[str, list[int]] = {}
    for rule in typed.rules:
        for cmp in ast.comparisons(rule.filter):
            info = typed.fields[cmp.attribute.name]
            v = cmp.value
            if isinstance(v, ast.String):
                c = encode_string(v.value, info.width) if len(v.value) * 8 <= info.width else 0
            elif isinstance(v, ast.Number):
                c = int(Decimal(v.value) * 10 ** info.scale)
            else:
                c = v.value
            top = (1 << info.width) - 1
            out.setdefault(info.name, []).extend(x for x in (c - 1, c, c + 1) if 0 <= x <= top)
    return out


def messages(seed: int, fields: list[str], near: dict[str, list[int]]) -> list[dict[str, int]]:
    """Messages drawn from a seeded generator (hypothesis draws the seed): values are either near
    a rule's constants or from each field's own pool."""
    rng = random.Random(seed)

    def value(f: str) -> int:
        return rng.choice(near[f]) if near.get(f) and rng.random() < 0.5 else _field_value(rng, f)

    return [{f: value(f) for f in fields} for _ in range(rng.randint(1, 40))]


FIELDS = ["msg.stock", "msg.side", "msg.price", "msg.shares", "ipv4.dst_addr", "ipv6.dst_addr", "eth.dst"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_vectorised_ground_truth_equals_per_message_oracle(data) -> None:
    rules = data.draw(rule_set())
    typed = check_rules(rules, SPEC)
    msgs = messages(data.draw(st.integers(0, 2**32)), FIELDS, _near_constants(typed))
    space = PortSpace.of(rule_ports(typed) | {1})
    columns = {f: np.array([m[f] for m in msgs], dtype=object if f == "ipv6.dst_addr" else np.uint64) for f in FIELDS}
    want = [evaluate(typed, m).ports for m in msgs]
    # Threshold families tabulate where each (key group, threshold rank) lands, or search for it
    # when the table would be large: both ways against the oracle.
    for dense in (groundtruth.DENSE_PAIRS, 0):
        saved, groundtruth.DENSE_PAIRS = groundtruth.DENSE_PAIRS, dense
        try:
            truth = GroundTruth.build(typed, space)
        finally:
            groundtruth.DENSE_PAIRS = saved
        assert space.sets(truth.wanted(columns)) == want, dense


def test_family_methods_cover_lookup_threshold_and_residual() -> None:
    """The three evaluation methods all occur for the rule shapes they are meant for."""
    text = ['msg.stock == "AAPL" : fwd(1);', 'msg.stock == "GOOGL" and msg.price > 10 : fwd(2);',
            'msg.stock == "MSFT" and msg.price > 10 and msg.shares < 5 : fwd(3);', 'msg.shares != 7 : fwd(4);']
    from compiler.rules.parser import parse_rules

    truth = GroundTruth.build(check_rules(parse_rules("\n".join(text)), SPEC), PortSpace.of([1, 2, 3, 4]))
    methods = sorted(f["method"] for f in truth.describe())
    assert methods == ["lookup", "residual", "residual", "threshold"]


def test_aggregates_no_counter_keeps_are_refused_with_the_rule_location() -> None:
    """State variables have values now (runtime.groundtruth_state keeps the spec's counters); an
    aggregate that no counter adds up still has none."""
    from compiler.rules.parser import parse_rules

    typed = check_rules(parse_rules('msg.stock == "A" : fwd(1);\navg(msg.price) > 5 : fwd(2);', "r.sub"), SPEC)
    with pytest.raises(P4subError) as err:
        GroundTruth.build(typed, PortSpace.of([1, 2]))
    assert "r.sub:2" in str(err.value) and "avg(msg.price)" in str(err.value)


def test_state_variables_are_kept_over_the_rows() -> None:
    from compiler.rules.parser import parse_rules

    typed = check_rules(parse_rules('rate > 2 : fwd(2);', "r.sub"), SPEC)
    truth = GroundTruth.build(typed, PortSpace.of([2]))
    assert truth.fields == {}  # an unkeyed counter reads no packet field, only time
    stamps = np.array([0, 1, 2, 3, 999, 1000, 1001], dtype=np.int64) * 1000  # µs, windows of 1000 µs
    wanted = truth.wanted({"timestamp_ns": stamps}, len(stamps))
    assert wanted.any(axis=1).tolist() == [False, False, True, True, True, False, False]


def test_missing_trace_column_is_a_user_error() -> None:
    from compiler.rules.parser import parse_rules

    truth = GroundTruth.build(check_rules(parse_rules("msg.shares > 1 : fwd(1);"), SPEC), PortSpace.of([1]))
    with pytest.raises(P4subError, match="msg.shares"):
        truth.wanted({"msg.price": np.zeros(3, dtype=np.uint64)})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 130), max_size=5), min_size=1, max_size=40), st.data())
def test_port_counts_equal_counting_sets_directly(sets, data) -> None:
    ports = sorted({p for s in sets for p in s} | {0})
    space = PortSpace.of(ports)
    masks = np.array([space.mask(s) for s in sets])
    weights = np.array(data.draw(st.lists(st.integers(0, 1500), min_size=len(sets), max_size=len(sets))))
    assert space.sets(masks) == [frozenset(s) for s in sets]
    assert np.array_equal(space.masks(sets), masks)  # all sets at once, as one set at a time
    assert space.counts(masks).tolist() == [sum(p in s for s in sets) for p in ports]
    assert space.counts(masks, weights).tolist() == [sum(w for s, w in zip(sets, weights) if p in s) for p in ports]
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(sets) - 1), max_size=5)) if len(sets) > 1 else []))
    starts = np.array([0] + cuts)
    bounds = [0] + cuts + [len(sets)]
    expect = [frozenset().union(*[frozenset(s) for s in sets[a:b]]) for a, b in zip(bounds, bounds[1:])]
    assert space.sets(or_segments(masks, starts)) == expect


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.frozensets(st.integers(0, 70), max_size=5), st.frozensets(st.integers(0, 70), max_size=5),
                          st.integers(0, 1500)), min_size=1, max_size=40))
def test_replay_counts_equal_counting_delivered_and_wanted_sets_directly(rows) -> None:
    """Replay unpacks only the delivered sets and derives wanted = delivered - fp + fn per port."""
    from runtime.replay_partition import _count

    space = PortSpace.of({p for d, w, _ in rows for p in d | w} | {0})
    delivered = np.array([space.mask(d) for d, _, _ in rows])
    wanted = np.array([space.mask(w) for _, w, _ in rows])
    size = np.array([s for _, _, s in rows], dtype=np.int64)
    which = {"d": lambda d, w: d, "w": lambda d, w: w, "fp": lambda d, w: d - w, "fn": lambda d, w: w - d}
    counts = {f"n_{k}": k for k in which}
    weights = {f"b_{k}": k for k in which}
    got = {name: np.zeros(len(space.ports), dtype=np.int64) for name in [*counts, *weights]}
    _count(space, delivered, wanted, size, counts, weights, got)
    for k, sets_of in which.items():
        assert got[f"n_{k}"].tolist() == [sum(p in sets_of(d, w) for d, w, _ in rows) for p in space.ports]
        assert got[f"b_{k}"].tolist() == [sum(s for d, w, s in rows if p in sets_of(d, w)) for p in space.ports]


def test_ground_truth_imports_nothing_of_the_model_it_judges() -> None:
    """The oracle shares no code with the model: neither module imports runtime.model or its state engine."""
    import ast as pyast
    from pathlib import Path

    judged = {"runtime.model", "runtime.state"}
    for name in ("groundtruth.py", "groundtruth_state.py"):
        tree = pyast.parse((Path(__file__).resolve().parents[2] / "runtime" / name).read_text())
        imported = {n.module for n in pyast.walk(tree) if isinstance(n, pyast.ImportFrom)}
        imported |= {a.name for n in pyast.walk(tree) if isinstance(n, pyast.Import) for a in n.names}
        assert not imported & judged, (name, imported & judged)
