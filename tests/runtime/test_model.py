"""The vectorised tables agree with the literal P4Runtime semantics on random tables with overlaps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import ir
from runtime.model import _compile_table, _lookup_batch, lookup

W = 8


@st.composite
def tables(draw):
    kind = draw(st.sampled_from(["exact", "range", "ternary", "lpm"]))
    keys = (ir.Key("meta.s", 3, "exact"), ir.Key("h.f", W, kind))
    table = ir.Table("t", keys, ("a",), "NoAction")
    entries = []
    used_prios = set()
    for i in range(draw(st.integers(0, 12))):
        s = draw(st.integers(0, 3))
        if kind == "exact":
            m = ir.Exact(draw(st.integers(0, 255)))
        elif kind == "range":
            lo = draw(st.integers(0, 255))
            m = ir.Range(lo, draw(st.integers(lo, 255)))
        else:
            plen = draw(st.integers(0, W))
            value = draw(st.integers(0, 255)) >> (W - plen) << (W - plen) if plen else 0
            m = ir.Lpm(value, plen) if kind == "lpm" else ir.Ternary(value, (0xFF << (W - plen)) & 0xFF)
        prio = 0
        if kind in ("range", "ternary"):
            prio = draw(st.integers(1, 1000).filter(lambda p: p not in used_prios))
            used_prios.add(prio)
        entry = ir.Entry("t", (ir.Exact(s), m), "a", (i,), prio)
        if kind in ("exact", "lpm") and any(e.matches == entry.matches for e in entries):
            continue  # duplicate keys are refused by P4Runtime targets
        entries.append(entry)
    return table, entries


@settings(max_examples=300, deadline=None)
@given(tables())
def test_vectorised_lookup_equals_literal_p4runtime_lookup(case) -> None:
    table, entries = case
    ct = _compile_table(table, entries)
    states, values = np.meshgrid(np.arange(5, dtype=np.uint64), np.arange(256, dtype=np.uint64))
    states, values = states.ravel(), values.ravel()
    got = _lookup_batch(ct, [states, values])
    for s, v, idx in zip(states, values, got):
        want = lookup(table, entries, [int(s), int(v)])
        assert (entries[idx] if idx >= 0 else None) == want
