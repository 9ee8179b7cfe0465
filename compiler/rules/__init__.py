"""The subscription language: rules as text in, type-checked rules out.

* :mod:`.nodes` - the typed AST (plain slotted dataclasses) and its printer; outside this package
  it is read as ``from compiler import rules as ast`` and ``ast.Rule``, ``ast.comparisons(...)``;
* :mod:`.parser` - the front door (``parse_rules``, ``read_rules``): the hand-written reader of
  :mod:`.fastparse` (with per-shape builders from :mod:`.shapes`), the lark grammar as the
  reference and for what the fast reader declines; :mod:`.build` is what both mean by each piece;
* :mod:`.typecheck` - rules checked against a :class:`~compiler.spec.Spec`, and what each tested
  attribute is (width, match kind, scale);
* :mod:`.values` - how constants and packet values become the integers switches match on;
* :mod:`.validity` - which headers a rule set reads: the guard and the 1-bit validity fields
  (a public module);
* :mod:`.memo` - per-filter results shared by the compiles of a network (a public module);
* :mod:`.linediff` - two rule files diffed by lines, parsing only the changed ones (a public module).

Public face: the names below and the modules :mod:`.validity`, :mod:`.memo` and :mod:`.linediff`.
"""

from compiler.rules import linediff, memo, validity
from compiler.rules.nodes import (
    AGGREGATES,
    FLIPPED,
    NODES,
    OPERATORS,
    Action,
    Aggregate,
    And,
    Attribute,
    Call,
    Comparison,
    Const,
    Constant,
    Drop,
    Field,
    Filter,
    Forward,
    IPAddress,
    Loc,
    MACAddress,
    Not,
    Number,
    Or,
    Rule,
    RuleSet,
    StateVar,
    String,
    comparisons,
    guard_writes,
)
from compiler.rules.parser import parse_rules, read_rules
from compiler.rules.typecheck import TypedRules, check_rules, constant_value
from compiler.rules.validity import field_name, header_of_validity, is_validity
from compiler.rules.values import (
    MAX_NUMBER_DIGITS,
    BadNumber,
    decode_string,
    encode_string,
    field_kind,
    json_value,
    packet_value,
    scale_decimal,
    string_prefix_range,
)

__all__ = [
    "AGGREGATES", "FLIPPED", "MAX_NUMBER_DIGITS", "NODES", "OPERATORS", "Action", "Aggregate", "And", "Attribute",
    "BadNumber", "Call", "Comparison", "Const", "Constant", "Drop", "Field", "Filter", "Forward", "IPAddress", "Loc",
    "MACAddress", "Not", "Number", "Or", "Rule", "RuleSet", "StateVar", "String", "TypedRules", "check_rules",
    "comparisons", "constant_value", "decode_string", "encode_string", "field_kind", "field_name", "guard_writes",
    "header_of_validity", "is_validity", "json_value", "linediff", "memo", "packet_value", "parse_rules", "read_rules",
    "scale_decimal", "string_prefix_range", "validity",
]
