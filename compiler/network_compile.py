"""Compile a whole network: route the host subscriptions, then compile every switch on its own.

Per-switch compiles share nothing, so they run in parallel: a process pool by default (each worker
writes its switch's directory), or Spark when a master URL is given (each task compiles one switch
and sends its files and statistics back; the driver writes them, so executors need no shared disk).
The biggest rule sets start first, so the pool drains evenly.

The output directory (read back by :mod:`runtime.netsim`)::

    OUT/network.json        topology, port maps, hosts, policy, α, the up-port convention
    OUT/topology.topo       the topology, exactly (compiler.topology_file)
    OUT/hosts.rules         the network rules with host ids as fwd ports (ground truth for netsim)
    OUT/stats.json          entries, table bits and compile seconds per switch, per layer, totals
    OUT/<switch>/rules.sub  the switch's rules (port 0 = the logical up port)
    OUT/<switch>/pipeline.json   its Pipeline IR, the logical up port still port 0
    OUT/<switch>/stats.json
    OUT/<switch>/...        with a target: what backends.<target>.emit writes for the pipeline
                            with the up port lowered statically (compiler.routing.lower_up_port)
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from compiler import ir
from compiler import rules as ast
from compiler.approximate import Alpha, check_alpha
from compiler.compile import CompileOptions, compile_rules
from compiler.errors import P4subError
from compiler.routing import UP_PORT, SwitchRules, lower_up_port, route, send_misses_up
from compiler.spec import Spec
from compiler.topology import Topology
from compiler.topology_file import write_topology
from compiler.typecheck import check_rules

LAYER_NAMES = {1: "edge", 2: "aggregation", 3: "core"}
HOST_ID_BITS = 32  # network rules forward to host ids, not to 9-bit ports


@dataclass(frozen=True)
class SwitchTask:
    """Everything one worker needs (picklable)."""

    rules: SwitchRules
    spec: Spec
    options: CompileOptions
    out_dir: str | None
    target: str | None


@dataclass
class NetworkResult:
    stats: dict[str, Any]
    pipelines: dict[str, ir.Pipeline] = field(default_factory=dict)


def layer_name(layer: int, top: int) -> str:
    """``edge``/``aggregation``/``core`` in three-tier networks, ``leaf``/``spine`` in two-tier ones, else ``layer<N>``."""
    if top == 3:
        return LAYER_NAMES[layer]
    if top == 2:
        return "leaf" if layer == 1 else "spine"
    return f"layer{layer}"


def compile_switch(task: SwitchTask, keep_pipeline: bool = False) -> dict[str, Any]:
    """Compile one switch's rules; write its directory when ``task.out_dir`` is set."""
    sr = task.rules
    # The network transforms (misses up, the logical up port) rewrite leaf tables: one lane, groups.
    options = dataclasses.replace(task.options, delivery="groups", lanes=None)
    if options.field_order:  # one network-wide order; each switch uses the fields its own rules test
        tested = {c.attribute.name for r in sr.rules for c in ast.comparisons(r.filter)}
        options = dataclasses.replace(options, field_order=tuple(f for f in options.field_order if f in tested))
    compiled = compile_rules(task.spec, sr.rules, options)
    if sr.miss_up:
        compiled = dataclasses.replace(compiled, pipeline=send_misses_up(compiled.pipeline))
    stats = dict(compiled.stats)
    stats.update(switch=sr.switch, layer=sr.layer, rules=len(sr.rules), up_ports=list(sr.up_ports))
    if task.out_dir is not None:
        out = Path(task.out_dir) / sr.switch
        out.mkdir(parents=True, exist_ok=True)
        if task.target:
            backend = importlib.import_module(f"backends.{task.target}")
            network = (backend.network_options(sr.up_ports),) if hasattr(backend, "network_options") else ()
            backend.emit(lower_up_port(compiled.pipeline, sr.up_ports), out, *network)
        ir.save(compiled.pipeline, out / "pipeline.json")
        header = (f"# rules of switch {sr.switch} (layer {sr.layer}); port {UP_PORT} is the logical up port "
                  f"(physical up ports {', '.join(map(str, sr.up_ports)) or 'none'})\n"
                  + (f"# MR: a packet no rule matches goes to port {UP_PORT} (the leaf table's default action)\n"
                     if sr.miss_up else ""))
        (out / "rules.sub").write_text(header + str(sr.rules), encoding="utf-8")
        (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    if keep_pipeline:
        stats["_pipeline"] = compiled.pipeline
    return stats


def _run_task(task: SwitchTask) -> dict[str, Any]:
    try:
        return compile_switch(task)
    except P4subError as exc:  # carried back as data: exceptions with locations pickle poorly across Spark
        return {"switch": task.rules.switch, "error": str(exc)}


def compile_network(
    topology: Topology,
    rules: ast.RuleSet,
    spec: Spec,
    *,
    policy: str = "tr",
    alpha: Alpha = Alpha(),
    options: CompileOptions = CompileOptions(),
    out_dir: str | Path | None = None,
    target: str | None = None,
    jobs: int | None = None,
    master: str | None = None,
    keep_pipelines: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> NetworkResult:
    """Route ``rules`` (host-id network rules) over ``topology`` and compile every switch.

    ``jobs``: worker processes (default: CPU count; 1 compiles in this process). ``master``: a
    Spark master URL (``local[2]``, ``spark://...``) to compile on Spark instead, with
    ``spark_conf`` as extra Spark settings. With
    ``keep_pipelines`` (in-process only) the pipelines are returned too, and nothing need be written.
    ``progress(done, total, label)`` is called as switch compiles finish (not on Spark).
    """
    start = time.perf_counter()
    typed = check_rules(rules, spec, port_bits=HOST_ID_BITS)
    check_alpha(alpha, typed.fields)
    unknown = [f for f in options.field_order if f not in typed.fields]
    if unknown:
        raise P4subError(f"--field-order names {', '.join(unknown)}, which no rule tests "
                         f"(fields tested: {', '.join(typed.fields) or 'none'})")
    per_switch = route(topology, rules, typed.fields, policy, alpha)
    route_seconds = time.perf_counter() - start
    out = str(out_dir) if out_dir is not None else None
    if target:
        try:
            importlib.import_module(f"backends.{target}")
        except ImportError as exc:
            raise P4subError(f"--target {target}: the backend cannot be loaded ({exc})") from None
    tasks = sorted((SwitchTask(sr, spec, options, out, target) for sr in per_switch.values()),
                   key=lambda t: -len(t.rules.rules))
    compile_start = time.perf_counter()
    pipelines: dict[str, ir.Pipeline] = {}
    if keep_pipelines:
        if master:
            raise P4subError("pipelines are kept only for in-process compiles (no --master)")
        results = []
        for t in tasks:
            r = compile_switch(t, keep_pipeline=True)
            pipelines[r["switch"]] = r.pop("_pipeline")
            results.append(r)
    elif master:
        results = _on_spark(tasks, master, spark_conf)
    elif (jobs or os.cpu_count() or 1) <= 1 or len(tasks) <= 1:
        results = []
        for t in tasks:
            results.append(_run_task(t))
            _report(progress, len(results), len(tasks), results[-1])
    else:
        with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as pool:
            futures = {pool.submit(_run_task, t): i for i, t in enumerate(tasks)}
            done: dict[int, dict[str, Any]] = {}
            try:
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    _report(progress, len(done), len(tasks), done[futures[future]])
            except BaseException:  # SIGINT: the switches not yet started are not compiled
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            results = [done[i] for i in range(len(tasks))]
    errors = [r for r in results if "error" in r]
    if errors:
        raise P4subError("; ".join(f"switch {r['switch']}: {r['error']}" for r in errors[:5]))
    wall = time.perf_counter() - compile_start
    stats = network_stats(topology, results, policy=policy, alpha=alpha, route_seconds=route_seconds,
                          compile_wall_seconds=wall, rules=len(rules))
    if out is not None:
        write_network(Path(out), topology, rules, per_switch, stats, policy, alpha, target)
    return NetworkResult(stats, pipelines)


def _report(progress: Callable[[int, int, str], None] | None, done: int, total: int, result: Mapping[str, Any]) -> None:
    if progress is not None:
        progress(done, total, f"{done}/{total} switches compiled (last: {result['switch']})")


def _on_spark(tasks: list[SwitchTask], master: str, conf: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """Compile on Spark (:mod:`compiler.spark_session`: the workers run this interpreter on the
    shipped p4sub code). Executors need not share a disk with the driver: each compiles into a
    scratch directory and sends the files back, and the driver writes them under OUT."""
    from compiler.spark_session import spark, spark_errors

    with spark(master, conf, "p4sub route") as session:
        rdd = session.sparkContext.parallelize(tasks, numSlices=len(tasks))
        with spark_errors("the per-switch compiles", session):
            results = rdd.map(_run_task_returning_files).collect()
    for task, result in zip(tasks, results):
        files = result.pop("_files", {})
        if task.out_dir is not None:
            for name, data in files.items():
                path = Path(task.out_dir) / task.rules.switch / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return results


def _run_task_returning_files(task: SwitchTask) -> dict[str, Any]:
    """:func:`_run_task` in a scratch directory; the switch's files come back as ``_files``."""
    if task.out_dir is None:
        return _run_task(task)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="p4sub-switch-") as scratch:
        result = _run_task(dataclasses.replace(task, out_dir=scratch))
        root = Path(scratch) / task.rules.switch
        if "error" not in result:
            result["_files"] = {p.relative_to(root).as_posix(): p.read_bytes()
                                for p in sorted(root.rglob("*")) if p.is_file()}
    return result


def network_stats(topology: Topology, results: list[Mapping[str, Any]], **extra: Any) -> dict[str, Any]:
    """Per switch, per layer (sums; the max compile time is the layer's recompile time) and totals."""
    top = max((topology.layer(s) for s in topology.switches()), default=1)
    switches = {}
    layers: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: topology.node_id(r["switch"])):
        s = r["switch"]
        row = {k: r[k] for k in ("layer", "rules", "total_entries", "table_bits", "multicast_groups", "states",
                                 "compile_seconds", "tables")}
        switches[s] = row
        name = layer_name(r["layer"], top)
        agg = layers.setdefault(name, {"layer": r["layer"], "switches": 0, "rules": 0, "entries": 0, "table_bits": 0,
                                       "multicast_groups": 0, "compile_seconds": 0.0, "max_compile_seconds": 0.0,
                                       "max_entries": 0})
        agg["switches"] += 1
        agg["rules"] += r["rules"]
        agg["entries"] += r["total_entries"]
        agg["max_entries"] = max(agg["max_entries"], r["total_entries"])
        agg["table_bits"] += r["table_bits"]
        agg["multicast_groups"] += r["multicast_groups"]
        agg["compile_seconds"] = round(agg["compile_seconds"] + r["compile_seconds"], 4)
        agg["max_compile_seconds"] = max(agg["max_compile_seconds"], r["compile_seconds"])
    for agg in layers.values():
        agg["mean_entries"] = round(agg["entries"] / agg["switches"], 1)
    totals = {
        "switches": len(switches),
        "entries": sum(r["total_entries"] for r in switches.values()),
        "table_bits": sum(r["table_bits"] for r in switches.values()),
        "multicast_groups": sum(r["multicast_groups"] for r in switches.values()),
        "compile_seconds": round(sum(r["compile_seconds"] for r in switches.values()), 4),
    }
    extra = {k: (alpha_json(v) if isinstance(v, Alpha) else v) for k, v in extra.items()}
    return {"switches": switches, "layers": dict(sorted(layers.items(), key=lambda kv: kv[1]["layer"])),
            "totals": totals, **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in extra.items()}}


def alpha_json(alpha: Alpha) -> dict[str, Any]:
    return {"default": str(alpha.default) if alpha.default is not None else None,
            "per_field": {k: str(v) for k, v in sorted(alpha.per_field.items())}}


def write_network(out: Path, topology: Topology, rules: ast.RuleSet, per_switch: Mapping[str, SwitchRules],
                  stats: dict[str, Any], policy: str, alpha: Alpha, target: str | None) -> None:
    """``network.json``, ``topology.topo``, ``hosts.rules`` and ``stats.json`` (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    write_topology(topology, out / "topology.topo")
    # No comment line: a comment sends the parser off its fast path, and netsim reads this file
    # back (a minute for 100k rules instead of seconds). network.json says what the ports mean.
    (out / "hosts.rules").write_text(str(rules), encoding="utf-8")
    switches = []
    for s in topology.switches():
        sr = per_switch[s]
        switches.append({
            "name": s, "id": topology.node_id(s), "layer": topology.layer(s),
            "ports": {str(p): list(topology.peer(s, p)) for p in topology.ports(s)},
            "up_ports": list(sr.up_ports), "down_ports": list(sr.down_ports), "host_ports": list(sr.host_ports),
            "dir": s,
        })
    hosts = []
    for h in topology.hosts():
        sw, port = topology.host_attachment(h)
        hosts.append({"name": h, "id": topology.node_id(h), "switch": sw, "port": port})
    network = {
        "format": "p4sub-network/1",
        "topology": topology.name, "topology_file": "topology.topo", "rules_file": "hosts.rules",
        "rules_note": "fwd ports in rules_file are host ids (see \"hosts\")",
        "policy": policy, "alpha": alpha_json(alpha), "target": target,
        "up_port": {"marker": UP_PORT, "select": "hash",
                    "note": "pipeline.json forwards to port 0 for the logical up port; the network stage drops "
                            "it for packets that came in on an up port, else replaces it by one physical up port "
                            "chosen per packet by hash; target files use lower_up_port (static per leaf state)"},
        "switches": switches, "hosts": hosts,
    }
    (out / "network.json").write_text(json.dumps(network, indent=2) + "\n", encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
