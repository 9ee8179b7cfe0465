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
_field_name, _field_loc = setters(ast.Field, "name", "location")
_cmp_attribute, _cmp_op, _cmp_value, _cmp_loc = setters(ast.Comparison, "attribute", "op", "value", "location")


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


def _two_fields(cls: type, first: str):
    """The constructor of a node of one field and a location: ``make(value, where)``."""
    set_first, set_location = setters(cls, first, "location")

    def make(value, where: SourceLocation | None):
        made = _new(cls)
        set_first(made, value)
        set_location(made, where)
        return made

    make.__name__ = make.__qualname__ = cls.__name__.lower()
    return make


string = _two_fields(ast.String, "value")
negation = _two_fields(ast.Not, "item")
const = _two_fields(ast.Const, "value")
forward = _two_fields(ast.Forward, "ports")
_junctions = {ast.And: _two_fields(ast.And, "items"), ast.Or: _two_fields(ast.Or, "items")}


def junction(kind: type, items: tuple, where: SourceLocation | None) -> ast.And | ast.Or:
    """``kind(items, where)`` for kind And or Or."""
    return _junctions[kind](items, where)
