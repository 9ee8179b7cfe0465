"""Write a VT combined compile (``p4sub route ... --delivery vt[:STRATEGY]``) to its output directory.

::

    OUT/delivery.json   the plan: receiver sets, VTs (links), per switch its check_tree entries,
                        links and pushes (labels as 16-bit hex words)
    OUT/stats.json      labels by type, stack bytes, check_tree entries, fallbacks, ...
    OUT/topology.topo   the topology, exactly
    OUT/hosts.rules     the network rules with host ids as fwd ports
    OUT/pipeline.json   the receiver-set pipeline every ingress switch runs (Pipeline IR)
    OUT/<switch>/...    with --target bmv2: program.p4, entries.p4rt.json, commands.txt, bmv2.json;
                        with --target tofino: program.p4, entries.bfrt.json, tofino.json

Everything is rendered before the first file is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.stack_network import write_network
from compiler import rules as ast
from compiler.base import P4subError
from compiler.compile import CompileOptions
from compiler.delivery.vt import VtPlan, plan_vt, vt_plan_json
from compiler.network import Topology
from compiler.spec import Spec


def render_vt_target(plan: VtPlan, target: str) -> dict[str, dict[str, str]]:
    if target == "bmv2":
        from backends.bmv2.vt_program import render_vt
    elif target == "tofino":
        from backends.tofino.vt_program import render_vt
    else:
        raise P4subError(f"--delivery vt --target {target}: expected bmv2 or tofino")
    return {s: render_vt(plan, s) for s in plan.switches}


def compile_vt(topology: Topology, rules: ast.RuleSet, spec: Spec, strategy: str, out_dir: str | Path, *,
               max_rules: int | None, target: str | None = None, max_labels: int | None = None,
               options: CompileOptions = CompileOptions(), mode: str = "single") -> tuple[VtPlan, dict[str, Any]]:
    """Plan, render for ``target`` and write ``out_dir``; returns the plan and the statistics."""
    plan = plan_vt(topology, rules, spec, strategy, max_rules=max_rules, target=target, max_labels=max_labels,
                   options=options, mode=mode)
    files = render_vt_target(plan, target) if target else {}
    stats = plan.stats()
    stats["switches"] = {s.name: {"id": s.switch_id, "ingress": s.ingress, "pushes": len(s.pushes),
                                  "check_tree": len(s.trees), "links": len(s.links), "clone_sessions": len(s.ports)}
                         for s in plan.switches.values()}
    stats["target"] = target
    stats["compile"] = {k: v for k, v in plan.compile_stats.items() if isinstance(v, (int, float, str))}
    write_network(out_dir, files, topology, rules, plan.pipeline, vt_plan_json(plan), stats)
    return plan, stats
