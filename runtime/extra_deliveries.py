"""What an approximated pipeline costs on a trace: deliveries the rules want, and the extra ones it makes.

When the compiler widens rules to fit a budget (:mod:`compiler.budget`), every packet still reaches
everyone who subscribed to it, and some subscribers get packets they did not ask for. This module
counts both on a batch of messages given as field columns:

* the *wanted* port sets come from the rules themselves, evaluated column-wise here: each comparison
  becomes a boolean column from the operator and the constant (as :func:`compiler.intervals.comparison_intervals`
  reads them, which shares nothing with the compiler's normalisation), ``and``/``or``/``not`` are
  numpy logic; no diagram, no table;
* the *delivered* port sets come from the reference model running the pipeline.

A delivery the rules want and the pipeline does not make is a false negative: there must be none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from compiler import ir
from compiler import rules as ast
from compiler.dnf import rule_actions
from compiler.rules import TypedRules
from compiler.spec import QueryField
from compiler.intervals import comparison_intervals
from runtime.model import Model


@dataclass(frozen=True)
class ExtraDeliveries:
    messages: int
    wanted: int  # (message, port) pairs the rules ask for
    delivered: int  # pairs the pipeline delivers
    extra: int  # delivered and not wanted
    missed: int  # wanted and not delivered (must be 0)

    @property
    def extra_per_wanted(self) -> float:
        return self.extra / self.wanted if self.wanted else 0.0

    def to_json(self) -> dict:
        return {"messages": self.messages, "wanted": self.wanted, "delivered": self.delivered, "extra": self.extra,
                "missed": self.missed, "extra_per_wanted": round(self.extra_per_wanted, 6),
                "extra_per_message": round(self.extra / self.messages, 6) if self.messages else 0.0}


def wanted_ports(typed: TypedRules, columns: Mapping[str, np.ndarray], ports: list[int]) -> np.ndarray:
    """A (messages x ports) boolean matrix: which port each message's matching rules forward to."""
    n = len(next(iter(columns.values()))) if columns else 0
    index = {p: i for i, p in enumerate(ports)}
    out = np.zeros((n, len(ports)), dtype=bool)
    memo: dict = {}
    for rule in typed.rules:
        targets = [index[p] for p in rule_actions(rule).ports if p in index]
        if not targets:
            continue
        mask = _holds(rule.filter, typed.fields, columns, n, memo)
        for t in targets:
            out[:, t] |= mask
    return out


def _holds(f: ast.Filter, fields: Mapping[str, QueryField], columns: Mapping[str, np.ndarray], n: int,
           memo: dict) -> np.ndarray:
    if isinstance(f, ast.Comparison):
        key = (f.attribute.name, f.op, repr(f.value))
        found = memo.get(key)
        if found is None:
            values = columns[f.attribute.name]
            found = np.zeros(n, dtype=bool)
            for lo, hi in comparison_intervals(f, fields[f.attribute.name]):
                if values.dtype == object:
                    found |= np.array([lo <= int(v) <= hi for v in values], dtype=bool)
                else:
                    found |= (values >= np.uint64(lo)) & (values <= np.uint64(hi))
            memo[key] = found
        return found
    if isinstance(f, ast.Const):
        return np.full(n, f.value, dtype=bool)
    if isinstance(f, ast.Not):
        return ~_holds(f.item, fields, columns, n, memo)
    parts = [_holds(i, fields, columns, n, memo) for i in f.items]
    out = parts[0].copy()
    for p in parts[1:]:
        out = (out & p) if isinstance(f, ast.And) else (out | p)
    return out


def measure(pipeline: ir.Pipeline, typed: TypedRules, columns: Mapping[str, np.ndarray]) -> ExtraDeliveries:
    """Count wanted, delivered, extra and missed (message, port) deliveries on ``columns``."""
    model = Model(pipeline)
    result = model.run({f: columns[f] for f in model.inputs}, rows=len(next(iter(columns.values()))))
    delivered_sets = result.port_sets()
    ports = sorted({p for r in typed.rules for p in rule_actions(r).ports} | {p for s in delivered_sets for p in s})
    index = {p: i for i, p in enumerate(ports)}
    wanted = wanted_ports(typed, columns, ports)
    got = np.zeros_like(wanted)
    for row, s in enumerate(delivered_sets):
        for p in s:
            got[row, index[p]] = True
    return ExtraDeliveries(len(delivered_sets), int(wanted.sum()), int(got.sum()), int((got & ~wanted).sum()),
                           int((wanted & ~got).sum()))
