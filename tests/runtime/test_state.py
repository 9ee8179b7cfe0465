"""runtime.state and the model's stateful pipelines, against a plain per-message loop.

The oracle below is the semantics of docs/compiler.md ("Stateful subscriptions") written as the
obvious loop over messages with a dict of cells; it shares no code with runtime/state.py (nor with
the compiler: rules are judged by compiler.oracle on the values the loop computes). Hypothesis
draws windows, widths (small ones, so that counts and sums wrap), slot counts (so that keys
collide), timestamps that sometimes go back, headers that are sometimes missing, and the cuts of a
trace into batches.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.base.errors import P4subError
from compiler.compile import compile_rules
from compiler.oracle import evaluate
from compiler.rules.parser import parse_rules
from compiler.spec.reader import parse_spec
from runtime.model import Model
from runtime.state import StateEngine

ROOT = Path(__file__).resolve().parents[2]

SPEC = """
#include <core.p4>
header h_t { bit<16> stock; bit<8> qty; bit<8> kind; }
header g_t { bit<8> x; }
@query_field_exact(h.stock)
@query_counter(c1, WINDOW1, SLOTS, key=h.stock, field=h.qty, width=WIDTH)
@query_counter(c2, WINDOW2, 8)
struct headers { h_t h; g_t g; }
parser P(packet_in p, out headers hdr) {
    state start { p.extract(hdr.h); transition select(hdr.h.kind) { 1: with_g; default: accept; } }
    state with_g { p.extract(hdr.g); transition accept; }
}
"""

RULES = """
h.stock == {s} and c1 > {k1}: fwd(1);
avg(h.qty) >= {k2}: fwd(2);
not (sum(c1) < {k3}): fwd(3);
c2 <= {k4} or g.x == 1: fwd(4);
count(c1) == {k5}: fwd(5);
"""


def oracle(rows: list[dict], counters: list[dict]) -> list[dict[str, int]]:
    """What each message reads, by the semantics' loop: time is the running maximum of the rows'
    microseconds; a cell opens a window when the time reaches its end; count and sum wrap."""
    clock = 0
    cells: dict[tuple[str, int], tuple[int, int, int]] = {}
    out = []
    for row in rows:
        clock = max(clock, row["timestamp_ns"] // 1000)
        read = {}
        for c in counters:
            if not all(row["valid"][h] for h in c["headers"]):
                read.update({(c["name"], f): 0 for f in ("count", "sum", "avg")})
                continue
            cell = 0
            if c["key"]:
                value = row[c["key"]]
                cell = zlib.crc32(value.to_bytes((c["key_width"] + 7) // 8, "big")) % c["slots"]
            end, count, total = cells.get((c["name"], cell), (0, 0, 0))
            if clock >= end:
                end, count, total = clock + c["window"], 0, 0
            count = (count + 1) % (1 << c["width"])
            total = (total + (row[c["field"]] if c["field"] else 0)) % (1 << c["width"])
            cells[(c["name"], cell)] = (end, count, total)
            read[(c["name"], "count")] = count
            read[(c["name"], "sum")] = total
            read[(c["name"], "avg")] = total // count if count else 0
        out.append(read)
    return out


@st.composite
def traces(draw):
    n = draw(st.integers(1, 60))
    stocks = draw(st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=5, unique=True))
    t, rows = 0, []
    for _ in range(n):
        step = draw(st.sampled_from([0, 0, 1, 7, 50, 300, 1000, 5000, -40]))  # µs; sometimes back in time
        t = max(0, t + step * 1000 + draw(st.integers(0, 999)))
        has_h = draw(st.booleans()) or draw(st.booleans())
        kind = draw(st.integers(0, 2))
        rows.append({"timestamp_ns": t, "h.stock": draw(st.sampled_from(stocks)), "h.qty": draw(st.integers(0, 255)),
                     "h.kind": kind, "g.x": draw(st.integers(0, 2)),
                     "valid": {"h": has_h, "g": has_h and kind == 1}})
    window1 = draw(st.sampled_from([1, 40, 1000, 3000, 20000]))
    window2 = draw(st.sampled_from([1, 500, 7000]))
    slots = draw(st.sampled_from([1, 2, 3, 64]))
    width = draw(st.sampled_from([3, 8, 32]))
    consts = {k: min(draw(st.integers(0, 12)), (1 << width) - 1) for k in ("k1", "k2", "k3", "k5")}
    consts["k4"] = draw(st.integers(0, 12))
    consts["s"] = draw(st.sampled_from(stocks))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    return rows, window1, window2, slots, width, consts, cuts


def columns_of(rows: list[dict]) -> dict[str, np.ndarray]:
    cols = {f: np.array([r[f] for r in rows], dtype=np.uint64) for f in ("h.stock", "h.qty", "h.kind", "g.x")}
    cols["timestamp_ns"] = np.array([r["timestamp_ns"] for r in rows], dtype=np.int64)
    cols["h.$valid"] = np.array([r["valid"]["h"] for r in rows], dtype=np.uint64)
    cols["g.$valid"] = np.array([r["valid"]["g"] for r in rows], dtype=np.uint64)
    return cols


def batches(rows: list[dict], cuts: list[int]):
    bounds = [0, *cuts, len(rows)]
    for a, b in zip(bounds, bounds[1:]):
        yield rows[a:b]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_model_equals_the_per_message_loop(trace) -> None:
    rows, window1, window2, slots, width, consts, cuts = trace
    text = SPEC.replace("WINDOW1", str(window1)).replace("WINDOW2", str(window2)).replace("SLOTS", str(slots))
    spec = parse_spec(text.replace("WIDTH", str(width)), "stateful.p4")
    compiled = compile_rules(spec, parse_rules(RULES.format(**consts)))
    counters = [
        {"name": "c1", "window": window1, "slots": slots, "key": "h.stock", "key_width": 16, "field": "h.qty",
         "width": width, "headers": ["h"]},
        {"name": "c2", "window": window2, "slots": 8, "key": None, "field": None, "width": 32, "headers": []},
    ]
    expected_reads = oracle(rows, counters)
    model = Model(compiled.pipeline)
    engine = StateEngine(compiled.pipeline)
    got_ports, got_reads = [], []
    for batch in batches(rows, cuts):
        cols = columns_of(batch)
        got_ports += model.run(cols, len(batch)).port_sets() if batch else []
        if batch:
            read = engine.run(cols, len(batch))
            got_reads += [{a: int(col[i]) for a, col in read.items()} for i in range(len(batch))]
    attribute = {"c1": ("c1", "count"), "count(c1)": ("c1", "count"), "avg(h.qty)": ("c1", "avg"),
                 "sum(c1)": ("c1", "sum"), "c2": ("c2", "count")}
    for i, (row, reads) in enumerate(zip(rows, expected_reads)):
        values = {"h.stock": row["h.stock"], "g.x": row["g.x"]}
        values.update({a: reads[attribute[a]] for a in attribute})
        carried = {h for h, v in row["valid"].items() if v}
        wanted = evaluate(compiled.typed, values, carried).ports
        assert got_ports[i] == wanted, (i, row, reads)
    for i, reads in enumerate(expected_reads):
        assert got_reads[i] == {a: reads[attribute[a]] for a in got_reads[i]}, (i, rows[i])
        assert set(got_reads[i]) == set(attribute)


def test_the_example_trace_across_window_boundaries() -> None:
    """GOOGL's fourth order in a 100 ms window goes to port 2 too; the window boundary resets it."""
    from compiler.compile import compile_files
    from compiler.rules.values import encode_string

    compiled = compile_files(ROOT / "examples/stateful/itch-rate.p4", ROOT / "examples/stateful/itch-rate.rules")
    model = Model(compiled.pipeline)
    google = encode_string("GOOGL", 64)
    ms = [0, 10, 20, 30, 40, 100, 150, 250, 260, 270, 280]
    cols = {"add_order.stock": np.full(len(ms), google, dtype=np.uint64),
            "add_order.shares": np.full(len(ms), 100, dtype=np.uint64),
            "timestamp_ns": np.array(ms, dtype=np.int64) * 1_000_000}
    result = model.run(cols)
    assert [sorted(p) for p in result.port_sets()] == [[1], [1], [1], [1, 2], [1, 2], [1], [1], [1], [1], [1], [1, 2]]
    assert result.metadata["meta.p4sub_st_rate_count"].tolist() == [1, 2, 3, 4, 5, 1, 2, 1, 2, 3, 4]
    model.reset_state()
    assert model.run({k: v[-1:] for k, v in cols.items()}).metadata["meta.p4sub_st_rate_count"].tolist() == [1]


def test_a_stateful_pipeline_needs_time() -> None:
    spec = parse_spec(SPEC.replace("WINDOW1", "10").replace("WINDOW2", "10").replace("SLOTS", "4")
                      .replace("WIDTH", "8"), "s.p4")
    model = Model(compile_rules(spec, parse_rules("c2 > 1: fwd(1);")).pipeline)
    with pytest.raises(P4subError, match="timestamp_ns"):
        model.run({"h.stock": [1]}, 1)
