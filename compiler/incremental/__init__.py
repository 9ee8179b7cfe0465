"""Incremental compile (issue 16 item 1): rules added and removed without rebuilding the rest.

:class:`Incremental` is the API; ``p4sub compile --update OLD_OUT`` is the command line; see
docs/compiler.md, "Incremental updates".
"""

from compiler.incremental import cache, delta, hitless
from compiler.incremental.delta import Delta, diff_pipelines, entry_key, same_program
from compiler.incremental.session import Incremental, Update

__all__ = [
    "Delta", "Incremental", "Update", "cache", "delta", "diff_pipelines", "entry_key", "hitless", "same_program",
]
