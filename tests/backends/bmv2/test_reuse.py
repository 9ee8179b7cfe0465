"""The pieces an update's fast write rests on: port bitmaps packed at once, and pipeline.json's entries
written without the generic walk, each held to a plain oracle of its own."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.bmv2.program import port_bitmaps
from compiler import ir
from compiler.ir import serial

groups = st.lists(st.builds(ir.MulticastGroup, st.integers(1, 1000),
                            st.lists(st.integers(0, 511), max_size=40).map(tuple)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(groups)
def test_port_bitmaps_set_bit_p_for_each_port_p(gs) -> None:
    expected = []
    for g in gs:
        bits = 0
        for p in g.ports:
            bits |= 1 << p
        expected.append(bits)
    assert port_bitmaps(gs) == expected


matches = st.one_of(st.builds(ir.Exact, st.integers(0, 2**64)), st.builds(ir.Range, st.integers(0, 9), st.integers(0, 9)),
                    st.builds(ir.Lpm, st.integers(0, 255), st.integers(0, 8)),
                    st.builds(ir.Ternary, st.integers(0, 255), st.integers(0, 255)))
entries = st.builds(ir.Entry, st.sampled_from(["t", "leaf_actions"]), st.lists(matches, max_size=3).map(tuple),
                    st.sampled_from(["a", "forward"]), st.lists(st.integers(0, 2**40), max_size=3).map(tuple),
                    st.integers(0, 100))


def plain(obj):
    """JSON of a dataclass tree as the format says: fields in order, ``kind`` first for a match."""
    if dataclasses.is_dataclass(obj):
        out = {"kind": type(obj).__name__} if isinstance(obj, (ir.Exact, ir.Range, ir.Lpm, ir.Ternary)) else {}
        out.update({f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
        return out
    if isinstance(obj, (list, tuple)):
        return [plain(x) for x in obj]
    return obj


@settings(max_examples=200, deadline=None)
@given(entries)
def test_an_entry_is_written_as_the_generic_walk_writes_it(e) -> None:
    assert json.dumps(serial.to_json(e), separators=(",", ":")) == json.dumps(plain(e), separators=(",", ":"))
    assert serial.from_json(ir.Entry, json.loads(json.dumps(serial.to_json(e)))) == e
