"""``p4sub compile --update OLD_OUT [SPEC] NEW_RULES -o NEW_OUT``: the incremental compile on the command line.

The old pipeline is read back from ``OLD_OUT/pipeline.json`` (the diagram is in its entries) and
the old rules from the copy every compile leaves in ``OLD_OUT/compiled_rules.sub`` (or the file
``sources.json`` names, when its SHA-256 still matches); the rule multisets are diffed and the
difference applied by :class:`compiler.incremental.Incremental`. NEW_OUT is written like a normal
compile (``pipeline.json``, ``stats.json``, ``sources.json``, the rules' copy, the target's files)
plus ``delta.json``: the entries and multicast groups to add, modify and delete to go from the
old pipeline to the new one. When the update needed a full compile, ``delta.json`` says why
(``fallback_reason``) and whether the new pipeline still installs on the old program
(``program_changed``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from compiler import ir
from compiler.base import MANIFEST, P4subError, bulk_objects, find_listed, output_dir, staged_dir
from compiler.compile import CompileOptions
from compiler.incremental import Incremental, Update, diff_pipelines, hitless
from compiler.incremental.delta import same_program
from compiler.incremental.delta import save as save_delta
from compiler.rules import read_rules

RULES_COPY = "compiled_rules.sub"
LANES = "lanes.json"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def keep_rules(rules: Path, out: Path) -> dict:
    """Copy the compiled rules into OUT (``--update`` diffs against them later) and say where they came from."""
    copy = out / RULES_COPY
    if not (copy.exists() and copy.samefile(rules)):
        shutil.copyfile(rules, copy)
    return {"rules_sha256": sha256(rules)}


def keep_lanes(lanes, out: Path) -> None:
    """``lanes.json``: which rules (indexes in the rules' copy) each lane holds, for a pipeline in
    several lanes (``--update`` must remove a rule from the lane that has it)."""
    path = out / LANES
    if lanes is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps({"lanes": [list(lane) for lane in lanes]}) + "\n", encoding="utf-8")


def old_lanes(old_out: Path) -> list[list[int]] | None:
    try:
        return json.loads((old_out / LANES).read_text(encoding="utf-8"))["lanes"]
    except (OSError, KeyError, TypeError, json.JSONDecodeError):
        return None


def old_rules_path(old_out: Path) -> Path | None:
    """The rules OLD_OUT was compiled from: its copy, or the recorded file if unchanged since."""
    copy = old_out / RULES_COPY
    if copy.is_file():
        return copy
    try:
        sources = json.loads((old_out / "sources.json").read_text(encoding="utf-8"))
        path = Path(sources["rules"])
        if path.is_file() and sources.get("rules_sha256") == sha256(path):
            return path
    except (OSError, KeyError, TypeError, json.JSONDecodeError):
        pass
    return None


#: What --update reads from OLD_OUT besides pipeline.json, checked against the manifest when present.
READ_FROM_BASE = (RULES_COPY, LANES, "sources.json", "stats.json")


def check_base(old_out: Path) -> None:
    """OLD_OUT's files that the update reads are the ones p4sub wrote, as install checks them: an update
    built on a hand-edited pipeline.json would install a delta against a pipeline no switch runs. The
    other files are checked when present (without the rules' copy the update compiles in full, as
    before). A base without a manifest (an older p4sub's output) is built on, with a note."""
    base = find_listed(old_out)
    if base is None:
        print(f"note: {old_out} has no {MANIFEST}: its pipeline.json cannot be checked against what p4sub wrote",
              file=sys.stderr)
        return
    base.check(["pipeline.json", *(name for name in READ_FROM_BASE if (old_out / name).exists())])


def run_update(args, options: CompileOptions, spec_path: str | None, rules_path: str) -> int:
    with bulk_objects():
        return _run_update(args, options, spec_path, rules_path)


def _run_update(args, options: CompileOptions, spec_path: str | None, rules_path: str) -> int:
    from compiler.compile import compile_rules, like
    from compiler.spec import read_spec

    old_out, out = Path(args.update), Path(args.out)
    output_dir(out)  # an -o that would be refused is said now, not after the update
    timings: dict[str, float] = {}
    t = time.perf_counter()
    check_base(old_out)
    old = ir.load(old_out / "pipeline.json")
    spec = read_spec(spec_path) if spec_path else old.spec
    backend = _backend(args)
    if backend is not None and hasattr(backend, "compile_options"):  # the target's encodings, for a full compile
        options = replace(options, tables=backend.compile_options(spec, options.tables))
    try:
        old_stats = json.loads((old_out / "stats.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        old_stats = {}
    timings["load_old_pipeline"] = time.perf_counter() - t
    t = time.perf_counter()
    new_rules = read_rules(rules_path)
    old_path = old_rules_path(old_out)
    old_rules = read_rules(old_path) if old_path is not None else None
    timings["parse_rules"] = time.perf_counter() - t
    mid = None  # the old rules plus the added ones, when an update in several lanes both adds and removes
    if old_rules is None:
        print(f"note: {old_out} keeps no copy of its rules ({RULES_COPY}): full compile, delta by diffing",
              file=sys.stderr)
        t = time.perf_counter()
        compiled = compile_rules(spec, new_rules, like(old, options))  # the old program's layout, widths, sizes
        update = Update(diff_pipelines(old, compiled.pipeline), False, f"{old_out} has no copy of its rules",
                        not same_program(old, compiled.pipeline))
        pipeline, stats = compiled.pipeline, compiled.stats
        members = compiled.lanes.lanes if compiled.lanes and pipeline.lanes > 1 else None
        timings["update"] = time.perf_counter() - t
    else:
        t = time.perf_counter()
        inc = Incremental(spec, old_rules, old, options, exact=old_stats.get("exact", True), stats=old_stats,
                          lanes=old_lanes(old_out))
        timings["read_back_state"] = time.perf_counter() - t
        t = time.perf_counter()
        add, remove = inc.diff(new_rules)
        timings["diff_rules"] = time.perf_counter() - t
        if old.lanes > 1 and add and remove:  # a rule may move between lanes: keep the pipeline between
            added = inc.update(add, ())
            mid = inc.pipeline()
            update = _joined(added, inc.update((), remove), old, inc.pipeline())
        else:
            update = inc.update(add, remove)
        timings["update"] = update.seconds
        t = time.perf_counter()
        pipeline, stats = inc.pipeline(), inc.stats()
        members = inc.lane_members(new_rules)
        timings["materialize"] = time.perf_counter() - t
    t = time.perf_counter()
    with staged_dir(out, "compile --update", args.argv) as stage:
        if backend is not None:
            emit_options = (backend.options_from_args(args),) if hasattr(backend, "options_from_args") else ()
            backend.emit(pipeline, stage, *emit_options)
        ir.save(pipeline, stage / "pipeline.json")
        # Only an incremental update keeps every rule in its lane (a full compile may deal them out again).
        if (mid is not None and update.incremental and not update.program_changed
                and len(hitless.changed_lanes(old, pipeline)) > 1):
            ir.save(mid, stage / hitless.MID)  # install --hitless plans through it (hitless.plan_through)
        stats = {**stats, "update": update.to_json()}
        (stage / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        sources = {"spec": str(Path(spec_path).resolve()) if spec_path else _old_source(old_out, "spec"),
                   "rules": str(Path(rules_path).resolve()),
                   "updated_from": str(old_out.resolve()), **keep_rules(Path(rules_path), stage)}
        (stage / "sources.json").write_text(json.dumps(sources, indent=2) + "\n", encoding="utf-8")
        keep_lanes(members, stage)
        timings["write"] = time.perf_counter() - t
        save_delta(update.delta, stage / "delta.json", {"from": str(old_out.resolve()), **update.to_json(),
                                                        "timings": {k: round(v, 4) for k, v in timings.items()}})
    d = update.delta
    how = "incremental" if update.incremental else f"full compile ({update.reason})"
    print(f"update {old_out} -> {out}: {how}; {len(d.added)} entries added, {len(d.modified)} modified, "
          f"{len(d.deleted)} deleted; {len(d.groups_added)} groups added, {len(d.groups_modified)} modified, "
          f"{len(d.groups_deleted)} deleted")
    print("  " + ", ".join(f"{k} {v:.3f} s" for k, v in timings.items()))
    if update.program_changed:
        print("warning: the new rules need another program (tables, widths or sizes differ): install "
              f"{out} as a new program, not delta.json", file=sys.stderr)
    print(f"wrote {out / 'pipeline.json'} and {out / 'delta.json'}")
    return 0


def _joined(first: Update, second: Update, old: ir.Pipeline, new: ir.Pipeline) -> Update:
    """One update of two made one after the other (the additions, then the removals)."""
    return Update(diff_pipelines(old, new), first.incremental and second.incremental, first.reason or second.reason,
                  first.program_changed or second.program_changed or not same_program(old, new),
                  first.seconds + second.seconds)


def _old_source(old_out: Path, key: str) -> str | None:
    try:
        value = json.loads((old_out / "sources.json").read_text(encoding="utf-8")).get(key)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _backend(args):
    import importlib

    return importlib.import_module(f"backends.{args.target}") if args.target != "none" else None


def check_update_args(args) -> tuple[str | None, str]:
    """(spec or None: the one in OLD_OUT's pipeline.json, new rules) from the positionals."""
    if args.like:
        raise P4subError("--update keeps the old program already; leave out --like")
    if args.spec and args.rules:
        return args.spec, args.rules
    if args.spec:
        return None, args.spec
    raise P4subError("--update OLD_OUT needs the new rule file: p4sub compile --update OLD_OUT NEW_RULES -o NEW_OUT")
