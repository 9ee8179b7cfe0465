"""Compile a whole network: route the host subscriptions, then compile every switch on its own.

Per-switch compiles depend on nothing but their rules, so they run in parallel: a process pool by
default (each worker writes its switches' directories; forked where the platform allows, so that a
worker reads its rules from inherited memory instead of unpickling them), or Spark when a master
URL is given (each task compiles one rule set and sends its files and statistics back; the driver
writes them, so executors need no shared disk). Switches with equal rule sets share one compile
(:func:`same_rule_sets`), and compiles in one process share what is worked out per filter
(:mod:`compiler.rules.memo`). The biggest rule sets start first, so the pool drains evenly.

The output directory (read back by :mod:`runtime.netsim`)::

    OUT/network.json        topology, port maps, hosts, policy, α, the up-port convention
    OUT/topology.topo       the topology, exactly (compiler.network.topology_file)
    OUT/hosts.rules         the network rules with host ids as fwd ports (ground truth for netsim)
    OUT/stats.json          entries, table bits and compile seconds per switch, per layer, totals
    OUT/<switch>/rules.sub  the switch's rules (port 0 = the logical up port)
    OUT/<switch>/pipeline.json   its Pipeline IR, the logical up port still port 0
    OUT/<switch>/stats.json
    OUT/<switch>/...        with a target: what backends.<target>.emit writes for the pipeline
                            with the up port lowered statically (compiler.network.routing.lower_up_port)
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from compiler import ir
from compiler import rules as ast
from compiler.approximate import Alpha, check_alpha
from compiler.base import P4subError, gc_pause, limits
from compiler.compile import CompileOptions, compile_rules
from compiler.network.routing import UP_PORT, SwitchRules, lower_up_port, route, send_misses_up, with_up_rule
from compiler.network.topology import Topology
from compiler.network.topology_file import write_topology
from compiler.rules import check_rules
from compiler.rules import memo as filter_memo
from compiler.spec import Spec

LAYER_NAMES = {1: "edge", 2: "aggregation", 3: "core"}
HOST_ID_BITS = 32  # network rules forward to host ids, not to 9-bit ports


#: Renders one switch's pipeline for a target into its directory, given its physical up ports
#: (``backends.switch_emitter``). Handed in, so that the compiler never imports a backend; picklable,
#: so that it travels to Spark executors with the task.
SwitchEmit = Callable[[ir.Pipeline, Path, tuple[int, ...]], Any]


@dataclass(frozen=True)
class SwitchTask:
    """One rule set to compile and every switch that holds it (picklable, for Spark).

    ``switches`` have equal rules and the same ``miss_up`` (:func:`same_rule_sets`), so one compile
    serves them all: a fat tree's core switches, or the aggregation switches of one pod, hold the
    same rules. Each still gets its own directory, with its own up ports lowered.
    """

    switches: tuple[SwitchRules, ...]
    spec: Spec
    options: CompileOptions
    out_dir: str | None
    emit: SwitchEmit | None

    @property
    def rules(self) -> SwitchRules:
        """The switch whose rules are compiled (the first; the others are equal)."""
        return self.switches[0]


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


def same_rule_sets(per_switch: Mapping[str, SwitchRules]) -> list[tuple[SwitchRules, ...]]:
    """The switches grouped by rule set: equal rules (in the same order) and the same ``miss_up``.

    Rules are compared by identity, element by element: :func:`compiler.network.routing.route` gives every
    switch the same rule object for the same (filter, ports), so equal sets are tuples of the same
    objects, and comparing identities costs no walk of the filter trees (hashing 95k filters per
    switch would cost more than the compile it saves). Rule sets that are equal without sharing
    objects are simply compiled apart. Groups come in the order of their first switch.
    """
    groups: dict[tuple[bool, tuple[int, ...]], list[SwitchRules]] = {}
    for sr in per_switch.values():
        groups.setdefault((sr.miss_up, tuple(map(id, sr.rules.rules))), []).append(sr)
    return [tuple(g) for g in groups.values()]


def compile_switch(task: SwitchTask, keep_pipeline: bool = False) -> list[dict[str, Any]]:
    """Compile the task's rule set once; per switch holding it, its statistics (and its directory
    when ``task.out_dir`` is set). Copies carry ``compiled_as``, the switch whose compile they share.

    The switch compiles as a lone switch does (:func:`compiler.compile.compile_rules`: lanes, port
    bitmaps, the budget, widening when nothing exact fits), with the options given; only
    ``delivery="groups"`` keeps MR's catch-all as the leaf table's default action (one lane).
    """
    sr = task.rules
    rules, options = switch_rules(sr, task.options)
    if options.field_order:  # one network-wide order; each switch uses the fields its own rules test
        tested = {c.attribute.name for r in rules for c in ast.comparisons(r.filter)}
        options = dataclasses.replace(options, field_order=tuple(f for f in options.field_order if f in tested))
    # The diagram and its tables are millions of live objects; --budget time=,memory= bound each switch.
    try:  # outside the bound: its hard stop may land while the bound is being set up
        with gc_pause.paused(), limits.bounded(options.budget.seconds, options.budget.memory):
            compiled = compile_rules(task.spec, rules, options)
    except limits.OutOfBudget as exc:
        raise P4subError(f"{exc.message}; raise --budget time=/memory=") from None
    misses_up = sr.miss_up and rules is sr.rules
    pipeline = send_misses_up(compiled.pipeline) if misses_up else compiled.pipeline
    text = _rules_text(rules) if task.out_dir is not None else ""
    out = []
    for member in task.switches:
        stats = dict(compiled.stats)
        stats.update(switch=member.switch, layer=member.layer, rules=len(member.rules), up_ports=list(member.up_ports),
                     fits=not stats["budget_misses"], budget=dataclasses.asdict(options.budget))
        if member is not sr:
            stats["compiled_as"] = sr.switch
        if task.out_dir is not None:
            _write_switch(Path(task.out_dir) / member.switch, member, text, pipeline, stats, task.emit, misses_up)
        if keep_pipeline:
            stats["_pipeline"] = pipeline
        out.append(stats)
    return out


def switch_rules(sr: SwitchRules, options: CompileOptions) -> tuple[ast.RuleSet, CompileOptions]:
    """The rules a switch compiles and the options it compiles them with.

    ``delivery="groups"`` is the first compiler's layout, one lane, with MR's catch-all as the leaf
    table's default action (:func:`compiler.network.routing.send_misses_up`); any other delivery
    compiles MR's catch-all as a rule (:func:`compiler.network.routing.with_up_rule`), which every
    layout, lanes and bitmaps included, carries as it carries any rule. Unless told otherwise, the
    lanes are chosen among lanes by port, one lane and lanes by hub (``lane_partition="auto"``).
    """
    if options.delivery == "groups":
        return sr.rules, dataclasses.replace(options, lanes=None)
    if options.lane_partition is None:  # a routed switch: few ports that thousands of rules share
        options = dataclasses.replace(options, lane_partition="auto")
    return (with_up_rule(sr.rules) if sr.miss_up else sr.rules), options


def _write_switch(out: Path, sr: SwitchRules, text: str, pipeline: ir.Pipeline, stats: Mapping[str, Any],
                  emit: SwitchEmit | None, misses_up: bool) -> None:
    """One switch's directory; ``text`` is its rules as ``rules.sub`` holds them."""
    out.mkdir(parents=True, exist_ok=True)
    if emit is not None:
        emit(lower_up_port(pipeline, sr.up_ports), out, sr.up_ports)
    ir.save(pipeline, out / "pipeline.json")
    header = (f"# rules of switch {sr.switch} (layer {sr.layer}); port {UP_PORT} is the logical up port "
              f"(physical up ports {', '.join(map(str, sr.up_ports)) or 'none'})\n"
              + (f"# MR: a packet no rule matches goes to port {UP_PORT} (the leaf table's default action)\n"
                 if misses_up else ""))
    (out / "rules.sub").write_text(header + text, encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")


#: Rule text already rendered by this process: ``id(rule) -> (rule, text)``. The rule is kept so
#: that its id is not reused. Switches share most rule objects (a TR edge switch's up-port rules
#: are those of every other edge switch but its own hosts'), and rendering a 95k-rule set costs
#: about 0.8 s; emptied when :func:`compile_network` returns.
_TEXT: dict[int, tuple[ast.Rule, str]] = {}


def _rules_text(rules: ast.RuleSet) -> str:
    """``str(rules)``, each rule rendered once per process."""
    parts = []
    for rule in rules:
        found = _TEXT.get(id(rule))
        if found is None:
            found = _TEXT[id(rule)] = (rule, str(rule))
        parts.append(found[1])
    return "\n".join(parts) + ("\n" if parts else "")


def _run_task(task: SwitchTask) -> list[dict[str, Any]]:
    try:
        return compile_switch(task)
    except P4subError as exc:  # carried back as data: exceptions with locations pickle poorly across Spark
        return [{"switch": sr.switch, "error": str(exc)} for sr in task.switches]


#: The tasks of the pool being run, for workers forked from this process (see :func:`_run_forked`).
_FORKED_TASKS: list[SwitchTask] = []


def _run_forked(index: int) -> list[dict[str, Any]]:
    """Run task ``index`` of :data:`_FORKED_TASKS`, which a forked worker has from its parent's
    memory: only the index goes through the pipe. Pickling a core switch's 95k rules took about
    3 s and unpickling them 3 to 8 s, against a 4 to 6 s compile."""
    return _run_task(_FORKED_TASKS[index])


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
    emit: SwitchEmit | None = None,
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
    Switches with equal rule sets are compiled once (:func:`same_rule_sets`). ``target`` names the
    target ``emit`` renders each switch for (``backends.switch_emitter(target)``); it is recorded in
    ``network.json``. Without ``emit`` only the pipelines are written.
    """
    try:
        # Every switch compiles a slice of the same filters: what is worked out per filter is
        # shared, here and in the workers forked from here (compiler.rules.memo).
        with gc_pause.paused(), filter_memo.sharing(spec):  # routing builds millions of live objects
            return _compile_network(topology, rules, spec, policy, alpha, options, out_dir, target, emit, jobs,
                                    master, keep_pipelines, progress, spark_conf)
    finally:
        _TEXT.clear()


def _compile_network(topology: Topology, rules: ast.RuleSet, spec: Spec, policy: str, alpha: Alpha,
                     options: CompileOptions, out_dir: str | Path | None, target: str | None,
                     emit: SwitchEmit | None, jobs: int | None,
                     master: str | None, keep_pipelines: bool, progress: Callable[[int, int, str], None] | None,
                     spark_conf: Mapping[str, str] | None) -> NetworkResult:
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
    tasks = sorted((SwitchTask(group, spec, options, out, emit) for group in same_rule_sets(per_switch)),
                   key=lambda t: -len(t.rules.rules))
    total = len(per_switch)
    compile_start = time.perf_counter()
    pipelines: dict[str, ir.Pipeline] = {}
    results: list[dict[str, Any]] = []
    if keep_pipelines:
        if master:
            raise P4subError("pipelines are kept only for in-process compiles (no --master)")
        for t in tasks:
            for r in compile_switch(t, keep_pipeline=True):
                pipelines[r["switch"]] = r.pop("_pipeline")
                results.append(r)
    elif master:
        results = [r for rs in _on_spark(tasks, master, spark_conf) for r in rs]
    elif (jobs or os.cpu_count() or 1) <= 1 or len(tasks) <= 1:
        for t in tasks:
            results.extend(_run_task(t))
            _report(progress, len(results), total, results[-len(t.switches):])
    else:
        results = _in_pool(tasks, jobs or os.cpu_count() or 1, progress, total)
    errors = [r for r in results if "error" in r]
    if errors:
        raise P4subError("; ".join(f"switch {r['switch']}: {r['error']}" for r in errors[:5]))
    wall = time.perf_counter() - compile_start
    stats = network_stats(topology, results, policy=policy, alpha=alpha, route_seconds=route_seconds,
                          compile_wall_seconds=wall, rules=len(rules))
    if out is not None:
        write_network(Path(out), topology, rules, per_switch, stats, policy, alpha, target)
    return NetworkResult(stats, pipelines)


def _in_pool(tasks: list[SwitchTask], jobs: int, progress: Callable[[int, int, str], None] | None,
             total: int) -> list[dict[str, Any]]:
    """The tasks in a process pool; with the ``fork`` start method, workers read the tasks from the
    memory they inherit (:func:`_run_forked`) instead of unpickling them."""
    global _FORKED_TASKS
    fork = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork") if fork else None
    done: dict[int, list[dict[str, Any]]] = {}
    count = 0
    _FORKED_TASKS = tasks if fork else []
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
            futures = {(pool.submit(_run_forked, i) if fork else pool.submit(_run_task, t)): i
                       for i, t in enumerate(tasks)}
            try:
                for future in as_completed(futures):
                    i = futures[future]
                    done[i] = future.result()
                    count += len(done[i])
                    _report(progress, count, total, done[i])
            except BaseException:  # SIGINT: the switches not yet started are not compiled
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        _FORKED_TASKS = []
    return [r for i in range(len(tasks)) for r in done[i]]


def _report(progress: Callable[[int, int, str], None] | None, done: int, total: int,
            results: list[Mapping[str, Any]]) -> None:
    if progress is not None:
        last = results[0]["switch"] + (f" and {len(results) - 1} more with the same rules" if len(results) > 1 else "")
        progress(done, total, f"{done}/{total} switches compiled (last: {last})")


def _on_spark(tasks: list[SwitchTask], master: str, conf: Mapping[str, str] | None) -> list[list[dict[str, Any]]]:
    """Compile on Spark (:mod:`compiler.base.spark_session`: the workers run this interpreter on the
    shipped p4sub code), one task per distinct rule set. Executors need not share a disk with the
    driver: each compiles into a scratch directory and sends the files back, and the driver writes
    them under OUT."""
    from compiler.base import spark, spark_errors

    with spark(master, conf, "p4sub route") as session:
        rdd = session.sparkContext.parallelize(tasks, numSlices=len(tasks))
        with spark_errors("the per-switch compiles", session):
            results = rdd.map(_run_task_returning_files).collect()
    for task, result in zip(tasks, results):
        for r in result:
            files = r.pop("_files", {})
            if task.out_dir is not None:
                for name, data in files.items():
                    path = Path(task.out_dir) / r["switch"] / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
    return results


def _run_task_returning_files(task: SwitchTask) -> list[dict[str, Any]]:
    """:func:`_run_task` in a scratch directory; each switch's files come back as its ``_files``."""
    if task.out_dir is None:
        return _run_task(task)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="p4sub-switch-") as scratch:
        results = _run_task(dataclasses.replace(task, out_dir=scratch))
        for r in results:
            root = Path(scratch) / r["switch"]
            if "error" not in r:
                r["_files"] = {p.relative_to(root).as_posix(): p.read_bytes()
                               for p in sorted(root.rglob("*")) if p.is_file()}
    return results


def network_stats(topology: Topology, results: list[Mapping[str, Any]], **extra: Any) -> dict[str, Any]:
    """Per switch, per layer (sums; the max compile time is the layer's recompile time) and totals.

    A switch that shares another's compile (``compiled_as``) shows that compile's seconds, its
    recompile time, but the sums of compile seconds count each compile once, and ``compiles`` says
    how many there were."""
    top = max((topology.layer(s) for s in topology.switches()), default=1)
    switches = {}
    layers: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: topology.node_id(r["switch"])):
        s = r["switch"]
        row = {k: r[k] for k in ("layer", "rules", "total_entries", "table_bits", "multicast_groups", "states",
                                 "compile_seconds", "delivery", "lanes", "exact", "fits", "budget_misses", "tables")}
        for k in ("lane_partition", "lane_ports"):  # bitmap layouts: how the rules were split into lanes
            if k in r:
                row[k] = r[k]
        own = "compiled_as" not in r
        if not own:
            row["compiled_as"] = r["compiled_as"]
        switches[s] = row
        name = layer_name(r["layer"], top)
        agg = layers.setdefault(name, {"layer": r["layer"], "switches": 0, "rules": 0, "entries": 0, "table_bits": 0,
                                       "multicast_groups": 0, "compile_seconds": 0.0, "max_compile_seconds": 0.0,
                                       "max_entries": 0, "compiles": 0})
        agg["switches"] += 1
        agg["rules"] += r["rules"]
        agg["entries"] += r["total_entries"]
        agg["max_entries"] = max(agg["max_entries"], r["total_entries"])
        agg["table_bits"] += r["table_bits"]
        agg["multicast_groups"] += r["multicast_groups"]
        if own:
            agg["compiles"] += 1
            agg["compile_seconds"] = round(agg["compile_seconds"] + r["compile_seconds"], 4)
        agg["max_compile_seconds"] = max(agg["max_compile_seconds"], r["compile_seconds"])
    for agg in layers.values():
        agg["mean_entries"] = round(agg["entries"] / agg["switches"], 1)
    totals = {
        "switches": len(switches),
        "entries": sum(r["total_entries"] for r in switches.values()),
        "table_bits": sum(r["table_bits"] for r in switches.values()),
        "multicast_groups": sum(r["multicast_groups"] for r in switches.values()),
        "compiles": sum(1 for r in switches.values() if "compiled_as" not in r),
        "compile_seconds": round(sum(r["compile_seconds"] for r in switches.values() if "compiled_as" not in r), 4),
        "all_fit": all(r["fits"] for r in switches.values()),
        "all_exact": all(r["exact"] for r in switches.values()),
        "largest": max(({"switch": s, "entries": r["total_entries"], "lanes": r["lanes"], "delivery": r["delivery"],
                         "lane_partition": r.get("lane_partition")}
                        for s, r in switches.items()), key=lambda x: x["entries"], default=None),
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
