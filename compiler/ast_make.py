"""Constructors of AST nodes for the hand-written rule parser's hot loops.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` looked up by name
at every call; building a 100,000-rule AST makes millions of nodes, and that was most of the time
for rules of many comparisons. The nodes have slots (compiler/rules.py), so each field can be set
through its slot's own setter: the same object (same type, fields, equality, hash, repr, pickle),
built in half the time. ``tests/compiler/test_fastparse.py`` compares what these build with what
the classes' own constructors build.
"""

from __future__ import annotations

from compiler import rules as ast
from compiler.errors import SourceLocation

_new = object.__new__


def setters(cls: type, *names: str) -> tuple:
    """The setters of the named slots of ``cls``, in that order."""
    return tuple(cls.__dict__[name].__set__ for name in names)


location_setters = setters(SourceLocation, "file", "line", "column")  # for loops that inline location()
_loc_file, _loc_line, _loc_column = location_setters
_num_value, _num_hex, _num_loc = setters(ast.Number, "value", "hex", "location")
_str_value, _str_loc = setters(ast.String, "value", "location")
_field_name, _field_loc = setters(ast.Field, "name", "location")
_cmp_attribute, _cmp_op, _cmp_value, _cmp_loc = setters(ast.Comparison, "attribute", "op", "value", "location")
_not_item, _not_loc = setters(ast.Not, "item", "location")
_const_value, _const_loc = setters(ast.Const, "value", "location")
_fwd_ports, _fwd_loc = setters(ast.Forward, "ports", "location")


def location(file: str, line: int, column: int) -> SourceLocation:
    made = _new(SourceLocation)
    _loc_file(made, file)
    _loc_line(made, line)
    _loc_column(made, column)
    return made


def number(value, hex: bool, where: SourceLocation | None) -> ast.Number:
    made = _new(ast.Number)
    _num_value(made, value)
    _num_hex(made, hex)
    _num_loc(made, where)
    return made


def string(value: str, where: SourceLocation | None) -> ast.String:
    made = _new(ast.String)
    _str_value(made, value)
    _str_loc(made, where)
    return made


def comparison(name: str, op: str, value, where: SourceLocation | None) -> ast.Comparison:
    """``Comparison(Field(name, where), op, value, where)``: a comparison is located at its field."""
    attribute = _new(ast.Field)
    _field_name(attribute, name)
    _field_loc(attribute, where)
    made = _new(ast.Comparison)
    _cmp_attribute(made, attribute)
    _cmp_op(made, op)
    _cmp_value(made, value)
    _cmp_loc(made, where)
    return made


def negation(item, where: SourceLocation | None) -> ast.Not:
    made = _new(ast.Not)
    _not_item(made, item)
    _not_loc(made, where)
    return made


def const(value: bool, where: SourceLocation | None) -> ast.Const:
    made = _new(ast.Const)
    _const_value(made, value)
    _const_loc(made, where)
    return made


def forward(ports: tuple, where: SourceLocation | None) -> ast.Forward:
    made = _new(ast.Forward)
    _fwd_ports(made, ports)
    _fwd_loc(made, where)
    return made


def junction(kind: type, items: tuple, where: SourceLocation | None) -> ast.And | ast.Or:
    """``kind(items, where)`` for kind And or Or."""
    made = _new(kind)
    _junction_items[kind](made, items)
    _junction_loc[kind](made, where)
    return made


_junction_items = {kind: kind.__dict__["items"].__set__ for kind in (ast.And, ast.Or)}
_junction_loc = {kind: kind.__dict__["location"].__set__ for kind in (ast.And, ast.Or)}
