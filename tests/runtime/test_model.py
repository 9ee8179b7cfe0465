"""The vectorised tables agree with the literal P4Runtime semantics on random tables with overlaps.

Each table is checked on every code path of :func:`runtime.model._lookup_batch`: the dense arrays
(small keys), the perfect hash (wide exact keys with few values) and binary search (everything
else, forced by setting the limits of the other two to zero).
"""

from __future__ import annotations

from contextlib import nullcontext
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import ir
from runtime import model
from runtime.model import _compile_table, _lookup_batch, lookup

PATHS = {"dense": {}, "search": {"DENSE_LIMIT": 0, "HASH_LIMIT": 0}, "hash": {"DENSE_LIMIT": 0}}


@st.composite
def tables(draw, width: int):
    """A table keyed on (state, field) and the field values worth querying."""
    top = (1 << width) - 1
    if width <= 8:
        pool = list(range(top + 1))
    else:
        pool = sorted(draw(st.sets(st.integers(0, top), min_size=1, max_size=6)))
    kind = draw(st.sampled_from(["exact", "range", "ternary", "lpm"]))
    keys = (ir.Key("meta.s", 3, "exact"), ir.Key("h.f", width, kind))
    table = ir.Table("t", keys, ("a",), "NoAction")
    entries = []
    used_prios = set()
    for i in range(draw(st.integers(0, 12))):
        s = draw(st.integers(0, 3))
        if kind == "exact":
            m = ir.Exact(draw(st.sampled_from(pool)))
        elif kind == "range":
            lo = draw(st.sampled_from(pool))
            m = ir.Range(lo, draw(st.sampled_from([v for v in pool if v >= lo])))
        else:
            plen = draw(st.integers(0, width))
            value = draw(st.sampled_from(pool)) >> (width - plen) << (width - plen) if plen else 0
            m = ir.Lpm(value, plen) if kind == "lpm" else ir.Ternary(value, (top << (width - plen)) & top)
        prio = 0
        if kind in ("range", "ternary"):
            prio = draw(st.integers(1, 1000).filter(lambda p: p not in used_prios))
            used_prios.add(prio)
        entry = ir.Entry("t", (ir.Exact(s), m), "a", (i,), prio)
        if kind in ("exact", "lpm") and any(e.matches == entry.matches for e in entries):
            continue  # duplicate keys are refused by P4Runtime targets
        entries.append(entry)
    near = {min(max(v + d, 0), top) for v in pool for d in (-1, 0, 1)} | {0, top, top >> 1}
    return table, entries, sorted(near)


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("width", [8, 64])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_vectorised_lookup_equals_literal_p4runtime_lookup(width, path, data) -> None:
    table, entries, values = data.draw(tables(width))
    with mock.patch.multiple(model, **PATHS[path]) if PATHS[path] else nullcontext():
        ct = _compile_table(table, entries)
        states, queries = np.meshgrid(np.arange(5, dtype=np.uint64), np.array(values, dtype=np.uint64))
        states, queries = states.ravel(), queries.ravel()
        got = _lookup_batch(ct, [states, queries])
    for s, v, idx in zip(states, queries, got):
        want = lookup(table, entries, [int(s), int(v)])
        assert (entries[idx] if idx >= 0 else None) == want


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([8, 16, 32, 64]), st.data())
def test_bucketed_count_of_known_values_equals_binary_search(width, data) -> None:
    top = (1 << width) - 1
    centre = data.draw(st.integers(0, top))
    spread = data.draw(st.integers(1, top))
    near = st.integers(max(0, centre - spread), min(top, centre + spread))
    known = data.draw(st.lists(st.one_of(near, st.sampled_from([0, top])), min_size=8, max_size=300))
    edges = sorted({min(top, max(0, v + d)) for v in known for d in (-1, 0, 1)} | {0, top})
    queries = data.draw(st.lists(st.one_of(near, st.sampled_from(edges)), min_size=1, max_size=60))
    ranker = model._Ranker(known, width)
    values = np.array(queries, dtype=np.uint64)
    assert ranker.buckets is not None or len(set(known)) < 8
    assert ranker.count_le(values).tolist() == np.searchsorted(np.array(sorted(set(known)), dtype=np.uint64), values,
                                                               side="right").tolist()
