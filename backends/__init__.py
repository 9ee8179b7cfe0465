"""Targets: the Pipeline IR rendered as a P4 program and its entries, for one architecture each.

* :mod:`.common` - the P4 text both targets share (headers, parser, names, include mode);
* :mod:`.bmv2` - v1model for BMv2: program, entries, P4Runtime and simple_switch_CLI install;
* :mod:`.tofino` - TNA for Tofino: layout, program, resources, BF Runtime install;
* :mod:`.stack_network` and :mod:`.vt_network` - the per-switch programs of a network whose
  delivery trees travel in a header stack (chapter 3) or as virtual trees (chapters 5 and 6),
  written for either target.

A backend imports the compiler and never the reverse: the compiler is handed what it needs of a
backend as a value (:func:`switch_emitter` for ``route``).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from compiler import ir
from compiler.base import P4subError
from compiler.compile import CompileOptions
from compiler.spec import Spec


def target_compile_options(target: str, spec: Spec, options: CompileOptions,
                           budget_given: Iterable[str] = (), routed: bool = False,
                           batch: str = "auto") -> CompileOptions:
    """``options`` as ``target`` wants them: its table encodings (``compile_options``) and its limits
    (``compile_budget``), except the budget items the user named in ``budget_given``. One place for
    ``p4sub compile --target`` and for every switch of ``p4sub route --target`` (``routed``: a
    routed switch keeps groups for a header stack, since its transforms rewrite leaf tables; ``batch``:
    the batch mode asked for, which must be one the backend renders bitmaps in, ``STACK_BITMAP_MODES``)."""
    backend = importlib.import_module(f"backends.{target}")
    if hasattr(backend, "compile_options"):
        options = replace(options, tables=backend.compile_options(spec, options.tables))
    if batch in getattr(backend, "STACK_BITMAP_MODES", ()) and not routed:
        options = replace(options, stack_bitmaps=True)
    if hasattr(backend, "compile_budget"):
        limits = backend.compile_budget(options.budget)
        kept = {k: getattr(limits, k) for k in ("entries", "groups", "stages") if k not in set(budget_given)}
        options = replace(options, budget=replace(options.budget, **kept))
    return options


def switch_emitter(target: str) -> Callable[[ir.Pipeline, Path, tuple[int, ...]], Any]:
    """What renders one routed switch for ``target`` (``compiler.network.compile_network``'s ``emit``);
    a P4subError when the backend cannot be loaded."""
    try:
        importlib.import_module(f"backends.{target}")
    except ImportError as exc:
        raise P4subError(f"--target {target}: the backend cannot be loaded ({exc})") from None
    return functools.partial(emit_switch, target)


def emit_switch(target: str, pipeline: ir.Pipeline, out: Path, up_ports: tuple[int, ...]) -> Any:
    """Render ``pipeline`` (its up port already lowered) into ``out`` for ``target``, with the
    network options of a switch whose physical up ports are ``up_ports``."""
    backend = importlib.import_module(f"backends.{target}")
    network = (backend.network_options(up_ports),) if hasattr(backend, "network_options") else ()
    return backend.emit(pipeline, out, *network)
