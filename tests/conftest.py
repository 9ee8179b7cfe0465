"""Checks that hold for the whole suite."""

from compiler.base.errors import SourceLocation
from compiler.rules import nodes as rules

# AST nodes and their locations are values, but not frozen dataclasses (their constructors would
# take 3.4 times as long: compiler/rules/nodes.py). Under the tests, any write to a built one fails.
rules.guard_writes(rules.NODES + (SourceLocation,))
