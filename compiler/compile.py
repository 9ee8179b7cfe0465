"""The compiler's front door: spec and rules in, a checked Pipeline IR and its statistics out."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from compiler import bdd, ir
from compiler.dnf import DEFAULT_LIMIT
from compiler.lang import read_rules
from compiler.rules import RuleSet
from compiler.spec import Spec
from compiler.tables import TableOptions, build_pipeline, pipeline_stats
from compiler.typecheck import TypedRules, check_rules


@dataclass(frozen=True)
class CompileOptions:
    field_order: tuple[str, ...] = ()
    dnf_limit: int = DEFAULT_LIMIT
    tables: TableOptions = field(default_factory=TableOptions)
    port_bits: int = 9


@dataclass
class Compiled:
    typed: TypedRules
    diagram: bdd.Diagram
    pipeline: ir.Pipeline
    stats: dict


def compile_rules(spec: Spec, rules: RuleSet, options: CompileOptions = CompileOptions()) -> Compiled:
    """Type-check, build the diagram, slice it into tables; timing covers all three."""
    start = time.perf_counter()
    typed = check_rules(rules, spec, port_bits=options.port_bits)
    diagram = bdd.build(typed, field_order=options.field_order or None, dnf_limit=options.dnf_limit)
    pipeline = build_pipeline(diagram, spec, options.tables)
    seconds = time.perf_counter() - start
    return Compiled(typed, diagram, pipeline, pipeline_stats(pipeline, seconds))


def compile_files(spec_path: str | Path, rules_path: str | Path, options: CompileOptions = CompileOptions()) -> Compiled:
    from compiler.spec_reader import read_spec

    return compile_rules(read_spec(spec_path), read_rules(rules_path), options)


def field_order_arg(text: str | None) -> Sequence[str]:
    return tuple(f.strip() for f in text.split(",") if f.strip()) if text else ()
