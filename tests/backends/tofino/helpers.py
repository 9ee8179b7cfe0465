"""Pipelines for the Tofino backend tests, and a reader of the generated program that shares no code
with the renderer (regular expressions over the P4 text)."""

from __future__ import annotations

import re
from pathlib import Path

from compiler import ir
from compiler.compile import CompileOptions, compile_rules
from compiler.rules.parser import parse_rules
from compiler.spec.model import (
    Extract,
    FieldDef,
    HeaderInstance,
    HeaderType,
    ParserState,
    QueryField,
    SelectCase,
    Spec,
)
from compiler.spec.reader import read_spec
from compiler.tables import TableOptions

ROOT = Path(__file__).resolve().parents[3]
ITCH_SPEC = ROOT / "apps/itch/itch.p4"
INT_SPEC = ROOT / "apps/int/int.p4"

ITCH_RULES = """
add_order.stock == "GOOGL" and add_order.price > 50.25 : fwd(1);
add_order.stock == "AAPL" : fwd(2);
add_order.shares > 1000 and add_order.buy_sell_indicator == "B" : fwd(3);
add_order.stock == "MSFT" : fwd(1, 2);
"""

INT_RULES = """
int_hop.switch_id == 5 : fwd(1);
int_hop.hop_latency > 1000 : fwd(2);
int_hop.switch_id == 7 and int_hop.queue_occupancy >= 64 : fwd(2, 3);
"""

SCALAR_RULES = """
order.stock == "GOOG" and order.price > 10 : fwd(1);
order.stock == "AAPL" and order.price < 20 : fwd(2);
order.price > 5 and order.qty <= 300 : fwd(3);
order.qty == 7 : fwd(4, 5);
"""


def scalar_spec() -> Spec:
    """One Camus-style message per packet: a scalar ``order`` header (64-bit stock, 32-bit price, 16-bit qty)."""
    order = HeaderType("order_t", (FieldDef("stock", 64), FieldDef("price", 32), FieldDef("qty", 16)))
    return Spec(
        path="scalar.p4", header_types={"order_t": order}, headers=(HeaderInstance("order", "order_t"),),
        parser_states={"start": ParserState("start", (Extract("order"),), (), (SelectCase((), "accept", True),))},
        query_fields={
            "order.stock": QueryField("order.stock", 64, "exact", is_string=True),
            "order.price": QueryField("order.price", 32, "range", scale=4),
            "order.qty": QueryField("order.qty", 16, "range"),
        })


def compile_text(spec: Spec, rules: str, encoding: str = "range", per_field: dict | None = None,
                 delivery: str = "auto", lanes: int | None = None) -> ir.Pipeline:
    options = CompileOptions(tables=TableOptions(range_encoding=encoding, per_field_encoding=per_field or {}),
                             delivery=delivery, lanes=lanes)
    return compile_rules(spec, parse_rules(rules), options).pipeline


def itch_pipeline(**kw) -> ir.Pipeline:
    return compile_text(read_spec(ITCH_SPEC), ITCH_RULES, **kw)


def int_pipeline(**kw) -> ir.Pipeline:
    return compile_text(read_spec(INT_SPEC), INT_RULES, **kw)


# -- reading the generated P4 ---------------------------------------------------------------------

_TABLE = re.compile(r"@name\(\"([^\"]+)\"\) table (\w+) \{(.*?)\n    \}\n", re.S)
_KEY = re.compile(r"^\s*(\S+) : (\w+) @name\(\"([^\"]+)\"\);", re.M)
_ACTIONS = re.compile(r"actions = \{(.*?)\}", re.S)
_SIZE = re.compile(r"size = (\d+);")
_ACTION = re.compile(r"@name\(\"([^\"]+)\"\) action (\w+)\(([^)]*)\)")


def control_body(text: str, control: str) -> str:
    start = text.index(f"control {control}(")
    end = text.index("\ncontrol ", start + 1) if "\ncontrol " in text[start + 1:] else len(text)
    return text[start:end]


def tables_in(text: str) -> dict[str, dict]:
    """Every table declared in ``text``: its keys (expression, match kind, @name), actions and size."""
    out = {}
    for m in _TABLE.finditer(text):
        body = m.group(3)
        actions = [a.strip().rstrip(";") for a in _ACTIONS.search(body).group(1).split("\n") if a.strip()]
        out[m.group(1)] = {"keys": _KEY.findall(body), "actions": actions, "size": int(_SIZE.search(body).group(1))}
    return out


def actions_in(text: str) -> dict[str, list[tuple[str, str]]]:
    """Every action declared in ``text``: (type, name) of its parameters."""
    out = {}
    for m in _ACTION.finditer(text):
        params = [tuple(p.strip().rsplit(" ", 1)) for p in m.group(3).split(",") if p.strip()]
        out[m.group(1)] = params
    return out
