"""Ground truth for stateful rules: counters kept by a plain loop over the messages.

Replay judges the model by comparing its deliveries with what the rules want; for rules that test
state variables and aggregates (``rate > 1000``, ``avg(add_order.price) > 50``) what they want
depends on every message before. This module computes those values one message at a time, the
obvious way, from the spec's counters and the semantics of docs/compiler.md ("Stateful
subscriptions"), sharing no code with the model's vectorised :mod:`runtime.state` (nor with
:mod:`compiler.stateful`): a mistake in either shows up as replay's false positives and negatives.
It costs a few microseconds per message and counter, which is fine for the traces replay is used
on to check a stateful rule set; the model does the same work about a hundred times faster.
"""

from __future__ import annotations

import zlib
from typing import Any, Mapping

import numpy as np

from compiler import rules as ast
from compiler.base import P4subError
from compiler.spec import Counter, Spec, intrinsic_width

TIME = "timestamp_ns"


def _binding(attr: ast.Attribute, spec: Spec) -> tuple[Counter, str]:
    """The counter and function (count, sum, avg) an attribute reads."""
    if isinstance(attr, ast.StateVar) and attr.name in spec.counters:
        return spec.counters[attr.name], "count"
    if isinstance(attr, ast.Aggregate):
        arg = attr.argument
        if isinstance(arg, ast.StateVar) and arg.name in spec.counters:
            counter = spec.counters[arg.name]
            if attr.function == "count" or counter.field:
                return counter, attr.function
        if isinstance(arg, ast.Field):
            found = [c for c in spec.counters.values() if c.field == arg.name]
            if len(found) == 1:
                return found[0], attr.function
    raise P4subError(f"{attr}: no counter keeps it (see docs/compiler.md, \"Stateful subscriptions\")",
                     getattr(attr, "location", None))


class StateLoop:
    """The values every stateful attribute of a rule set reads, message after message."""

    def __init__(self, rules: ast.RuleSet, spec: Spec) -> None:
        self.spec = spec
        self.attributes: dict[str, tuple[Counter, str]] = {}
        for rule in rules:
            for cmp in ast.comparisons(rule.filter):
                if isinstance(cmp.attribute, (ast.StateVar, ast.Aggregate)):
                    self.attributes[cmp.attribute.name] = _binding(cmp.attribute, spec)
        self.counters = {c.name: c for c, _ in self.attributes.values()}
        self.summed = {c.name for c, f in self.attributes.values() if f != "count"}
        #: The packet fields the loop reads: keys, and the summed fields.
        self.fields = {ref: self._width(ref) for c in self.counters.values()
                       for ref in (c.key, c.field if c.name in self.summed else None) if ref}
        self.reset()

    def _width(self, ref: str) -> int:
        width = self.spec.field_width(ref)
        return width if width is not None else intrinsic_width(*ref.split(".", 1))

    def _headers(self, c: Counter) -> list[str]:
        refs = [c.key, c.field]
        return [r.split(".", 1)[0] for r in refs if r and self.spec.header(r.split(".", 1)[0]) is not None]

    def reset(self) -> None:
        self.clock = 0
        self.cells: dict[tuple[str, int], list[int]] = {}

    def values(self, columns: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
        """Per attribute, what each of the ``n`` rows reads (the rows update the counters in order)."""
        if TIME not in columns:
            raise P4subError(f"stateful rules need each message's time: a {TIME} column")
        stamps = [int(x) for x in columns[TIME]]
        data = {ref: [int(x) for x in columns[ref]] for ref in self.fields}
        valid = {h: [bool(x) for x in columns[f"{h}.$valid"]] for c in self.counters.values()
                 for h in self._headers(c) if f"{h}.$valid" in columns}
        reads = {(name, f): [0] * n for name in self.counters for f in ("count", "sum", "avg")}
        for i in range(n):
            self.clock = max(self.clock, stamps[i] // 1000)
            for name, c in self.counters.items():
                if not all(valid[h][i] for h in self._headers(c) if h in valid):
                    continue
                cell = 0
                if c.key:
                    nbytes = (self.fields[c.key] + 7) // 8
                    cell = zlib.crc32(data[c.key][i].to_bytes(nbytes, "big")) % c.slots
                state = self.cells.setdefault((name, cell), [0, 0, 0])
                if self.clock >= state[0]:
                    state[:] = [self.clock + c.window_us, 0, 0]
                modulus = 1 << c.width
                state[1] = (state[1] + 1) % modulus
                if name in self.summed:
                    state[2] = (state[2] + data[c.field][i]) % modulus
                reads[(name, "count")][i] = state[1]
                reads[(name, "sum")][i] = state[2]
                reads[(name, "avg")][i] = state[2] // state[1] if state[1] else 0
        return {attr: np.array(reads[(c.name, f)], dtype=np.uint64) for attr, (c, f) in self.attributes.items()}
