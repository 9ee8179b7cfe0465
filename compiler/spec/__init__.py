"""The protocol spec: what a P4 header file tells p4sub about packets and the fields rules may test.

* :mod:`.model` - :class:`Spec` and its parts (headers, parser states, query fields, counters);
* :mod:`.reader` - the front door: P4_16 text (or a whole program, :mod:`.skip` finding what a spec
  does not need) through :mod:`.syntax` (lark) into a checked :class:`Spec`; :mod:`.version` tells
  P4_14 from P4_16, and P4_14 goes through :mod:`.p4_14_lex` and :mod:`.p4_14`;
* :mod:`.annotations` - the ``@query_*`` annotations (and Camus's ``@pragma`` forms) of both readers;
* :mod:`.expr` - integer expressions of a parser, with P4_16 width semantics (a public module: the
  packet readers evaluate them);
* :mod:`.metadata` - intrinsic metadata a spec may name as a query field.

Public face: the names below and the module :mod:`.expr`.
"""

from compiler.spec import expr
from compiler.spec.metadata import INTRINSIC_METADATA, intrinsic_width
from compiler.spec.model import (
    Advance,
    Counter,
    Extract,
    HeaderInstance,
    HeaderType,
    ParserState,
    QueryField,
    SelectCase,
    Spec,
    UserAction,
)
from compiler.spec.reader import parse_expression, parse_spec, read_spec

__all__ = [
    "INTRINSIC_METADATA", "Advance", "Counter", "Extract", "HeaderInstance", "HeaderType", "ParserState",
    "QueryField", "SelectCase", "Spec", "UserAction", "expr", "intrinsic_width", "parse_expression", "parse_spec",
    "read_spec",
]
