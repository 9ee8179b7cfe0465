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
from pathlib import Path
from typing import Any, Callable

from compiler import ir
from compiler.base import P4subError


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
