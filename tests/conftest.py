"""Checks that hold for the whole suite."""

from compiler import rules
from compiler.errors import SourceLocation

# AST nodes and their locations are values, but not frozen dataclasses (their constructors would
# take 3.4 times as long: compiler/rules.py). Under the tests, any write to a built one fails.
rules.guard_writes(rules.NODES + (SourceLocation,))
