"""Write a combined compile (``p4sub route ... --delivery header-stack:E``) to its output directory.

::

    OUT/delivery.json        the plan: receiver sets, pushes per ingress switch (labels or stored
                             tree), stored trees and group counts per switch (compiler.delivery.combined)
    OUT/stats.json           label bytes, stack bytes, entries per transit switch, fallbacks, ...
    OUT/topology.topo        the topology, exactly
    OUT/hosts.rules          the network rules with host ids as fwd ports
    OUT/pipeline.json        the receiver-set pipeline every ingress switch runs (Pipeline IR)
    OUT/<switch>/...         with a target: that target's stack program and entries for the switch
                             (bmv2: program.p4, entries.p4rt.json, commands.txt, bmv2.json;
                             tofino: program.p4, entries.bfrt.json, tofino.json)

Every file of every switch is rendered before the first one is written, so a plan that a target
cannot take leaves ``OUT`` untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler import ir
from compiler import rules as ast
from compiler.base import P4subError
from compiler.compile import CompileOptions
from compiler.delivery import CombinedPlan, plan_combined, plan_json
from compiler.network import Topology, write_topology
from compiler.spec import Spec


def render_target(plan: CombinedPlan, target: str) -> dict[str, dict[str, str]]:
    """{switch: {file name: text}} for ``target``."""
    if target == "bmv2":
        from backends.bmv2.stack_program import render_stack
    elif target == "tofino":
        from backends.tofino.stack_program import render_stack
    else:
        raise P4subError(f"--target {target}: no header-stack program for this target")
    return {s: render_stack(plan, s) for s in plan.switches}


def compile_combined(
    topology: Topology,
    rules: ast.RuleSet,
    spec: Spec,
    encoding: str,
    out_dir: str | Path,
    *,
    target: str | None = None,
    max_labels: int | None = None,
    options: CompileOptions = CompileOptions(),
) -> tuple[CombinedPlan, dict[str, Any]]:
    """Plan, render for ``target`` and write ``out_dir``; returns the plan and the statistics."""
    plan = plan_combined(topology, rules, spec, encoding, target=target, max_labels=max_labels, options=options)
    files = render_target(plan, target) if target else {}
    stats = plan.stats()
    stats["switches"] = {
        s.name: {"id": s.switch_id, "ingress": s.ingress, "pushes": len(s.pushes),
                 "stored_fallbacks": sum(1 for p in s.pushes if p.kind == "stored"),
                 "stored_entries": len(s.stored), "multicast_groups": len(s.groups),
                 "transit_entries": s.entry_count() - len(s.pushes)}
        for s in plan.switches.values()
    }
    stats["target"] = target
    stats["compile"] = {k: v for k, v in plan.compile_stats.items() if isinstance(v, (int, float, str))}
    write_network(out_dir, files, topology, rules, plan.pipeline, plan_json(plan), stats)
    return plan, stats


def write_network(out_dir: str | Path, files: dict[str, dict[str, str]], topology, rules, pipeline: ir.Pipeline,
                  delivery: dict, stats: dict) -> None:
    """A delivery network's output: each switch's rendered files in its directory, the topology, the
    hosts' rules, the ingress pipeline, the delivery plan and the statistics (header stacks and
    virtual trees write the same layout)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for switch, named in files.items():
        d = out / switch
        d.mkdir(parents=True, exist_ok=True)
        for name, text in named.items():
            (d / name).write_text(text, encoding="utf-8")
    write_topology(topology, out / "topology.topo")
    (out / "hosts.rules").write_text(str(rules), encoding="utf-8")
    ir.save(pipeline, out / "pipeline.json")
    (out / "delivery.json").write_text(json.dumps(delivery, indent=1) + "\n", encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
