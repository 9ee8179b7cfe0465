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

When OLD_OUT keeps an incremental session (``compile --session``, or any ``--update`` output:
``session.pickle``, checked by :mod:`compiler.incremental.cache`), the pipeline and the rules are not
read back: the session is loaded, the rule files are diffed by lines (:mod:`compiler.rules.linediff`,
only changed lines parsed), the target's files are written from OLD_OUT's where an entity did not
change (``emit_update``: BMv2), and NEW_OUT keeps the session as a hard link of OLD_OUT's plus a
journal of the updates since (``session.journal.json``; past ``cache.JOURNAL_LIMIT`` the session is
pickled again). docs/compiler.md, "Updates as a user sees them".
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
from compiler.base import (MANIFEST, P4subError, bulk_objects, file_sha256, find_listed, output_dir, read_text,
                           staged_dir)
from compiler.compile import CompileOptions
from compiler.incremental import Incremental, Update, cache, diff_pipelines, hitless
from compiler.incremental.delta import same_program
from compiler.incremental.delta import save as save_delta
from compiler.rules import linediff, read_rules

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


#: What --update reads from OLD_OUT besides pipeline.json, checked against the manifest when present
#: (the kept session, session.pickle, is checked by compiler.incremental.cache before it is read).
READ_FROM_BASE = (RULES_COPY, LANES, "sources.json", "stats.json")


def check_base(old_out: Path):
    """OLD_OUT's files that the update reads are the ones p4sub wrote, as install checks them: an update
    built on a hand-edited pipeline.json would install a delta against a pipeline no switch runs. The
    other files are checked when present (without the rules' copy the update compiles in full, as
    before). A base without a manifest (an older p4sub's output) is built on, with a note."""
    base = find_listed(old_out)
    if base is None:
        print(f"note: {old_out} has no {MANIFEST}: its pipeline.json cannot be checked against what p4sub wrote",
              file=sys.stderr)
        return None
    base.check(["pipeline.json", *(name for name in READ_FROM_BASE if (old_out / name).exists())])
    return base


def keep_session(spec, compiled, options: CompileOptions, rules, stage: Path) -> None:
    """``compile --session``: the incremental session of this compile, kept as ``session.pickle``
    (:mod:`compiler.incremental.cache`) for later updates. Call after pipeline.json and the rules' copy
    are in ``stage``. The session's pipeline must be the compile's, entries and groups in the same order
    (an update reuses the lines of the old files by position): else no session is kept, with a note."""
    inc = Incremental.from_compiled(spec, compiled, options)
    mine, theirs = inc.pipeline(), compiled.pipeline
    if mine.entries != theirs.entries or mine.multicast_groups != theirs.multicast_groups:
        print("note: --session: the session reads this pipeline back in another order; none kept", file=sys.stderr)
        return
    save_session(inc, stage, rules)


def save_session(inc: Incremental, stage: Path, rules=None) -> None:
    """Write ``inc`` to ``stage/session.pickle`` with the header that ties it to ``stage``'s
    pipeline.json and rules' copy (``rules``: the copy's parsed rules, to tell whether it is
    line-structured)."""
    header = _header(stage, rules)
    inc.detach_rules(None)
    inc.warm()
    cache.save(inc, stage / cache.NAME, header)


def _header(stage: Path, rules=None, diff: linediff.LineDiff | None = None) -> cache.Header:
    """What ties a session to ``stage``'s pipeline.json and rules' copy; whether the copy is
    line-structured comes from its parsed ``rules``, or from the line ``diff`` that vouched for it."""
    if diff is not None:
        structured, last_terminated = True, diff.last_terminated
    else:
        lines = read_text(stage / RULES_COPY, "rule file").split("\n")
        structured = rules is not None and linediff.line_structured(lines, rules)
        last = next((line for line in reversed(lines) if linediff.content(line)), "")
        last_terminated = linediff.terminated(last) if last else True
    return cache.Header(file_sha256(stage / "pipeline.json"), file_sha256(stage / RULES_COPY), structured,
                        last_terminated)


def run_update(args, options: CompileOptions, spec_path: str | None, rules_path: str) -> int:
    with bulk_objects():
        return _run_update(args, options, spec_path, rules_path)


def _session(old_out: Path, listed, spec_path: str | None, timings: dict) -> cache.Kept | None:
    """OLD_OUT's kept session when every check passes, else None (with a note saying why)."""
    t = time.perf_counter()
    found = cache.load(old_out, listed, RULES_COPY)
    if isinstance(found, str):
        if (old_out / cache.NAME).exists():
            print(f"note: {old_out}: {found}: reading the pipeline back instead", file=sys.stderr)
        return None
    if spec_path is not None:
        from compiler.spec import read_spec

        if read_spec(spec_path) != found.session.base_spec:
            print(f"note: {spec_path} is not the spec {old_out} was compiled with: reading the pipeline back",
                  file=sys.stderr)
            return None
    timings["load_session"] = time.perf_counter() - t
    return found


def _run_update(args, options: CompileOptions, spec_path: str | None, rules_path: str) -> int:
    old_out, out = Path(args.update), Path(args.out)
    output_dir(out)  # an -o that would be refused is said now, not after the update
    timings: dict[str, float] = {}
    t = time.perf_counter()
    listed = check_base(old_out)
    backend = _backend(args)
    try:
        old_stats = json.loads((old_out / "stats.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        old_stats = {}
    timings["check_base"] = time.perf_counter() - t
    kept = _session(old_out, listed, spec_path, timings)
    mid = None  # the old rules plus the added ones, when an update in several lanes both adds and removes
    new_rules = None  # parsed whole only where the line diff cannot be used
    diff = None
    calls: list = []  # the session's update calls, for the journal
    if kept is not None:
        inc, header = kept.session, kept.header
        old = inc.pipeline()
        copy = old_out / RULES_COPY
        inc.detach_rules(lambda: read_rules(copy))
        t = time.perf_counter()
        if header.line_structured:
            diff = linediff.diff_lines(read_text(copy, "rule file"), read_text(rules_path, "rule file"), rules_path,
                                       old_last_terminated=header.last_terminated)
        if diff is not None:
            add, remove = diff.added, diff.removed
        else:
            new_rules = read_rules(rules_path)
            add, remove = inc.diff(new_rules)
        timings["diff_rules"] = time.perf_counter() - t
        update, mid, calls = _apply(inc, old, add, remove, checked=diff is not None)
        timings["update"] = update.seconds
    else:
        from compiler.compile import compile_rules, like
        from compiler.spec import read_spec

        t = time.perf_counter()
        old = ir.load(old_out / "pipeline.json")
        spec = read_spec(spec_path) if spec_path else old.spec
        if backend is not None and hasattr(backend, "compile_options"):  # the target's encodings, for a full compile
            options = replace(options, tables=backend.compile_options(spec, options.tables))
        timings["load_old_pipeline"] = time.perf_counter() - t
        t = time.perf_counter()
        new_rules = read_rules(rules_path)
        old_path = old_rules_path(old_out)
        old_rules = read_rules(old_path) if old_path is not None else None
        timings["parse_rules"] = time.perf_counter() - t
        if old_rules is None:
            print(f"note: {old_out} keeps no copy of its rules ({RULES_COPY}): full compile, delta by diffing",
                  file=sys.stderr)
            t = time.perf_counter()
            compiled = compile_rules(spec, new_rules, like(old, options))  # the old program's layout, widths, sizes
            update = Update(diff_pipelines(old, compiled.pipeline), False, f"{old_out} has no copy of its rules",
                            not same_program(old, compiled.pipeline))
            inc = Incremental.from_compiled(spec, compiled, like(old, options))
            timings["update"] = time.perf_counter() - t
        else:
            print(f"note: {old_out} keeps no incremental session ({cache.NAME}: compile with --session): "
                  "reading the pipeline and every rule back", file=sys.stderr)
            t = time.perf_counter()
            inc = Incremental(spec, old_rules, old, options, exact=old_stats.get("exact", True), stats=old_stats,
                              lanes=old_lanes(old_out))
            timings["read_back_state"] = time.perf_counter() - t
            t = time.perf_counter()
            add, remove = inc.diff(new_rules)
            timings["diff_rules"] = time.perf_counter() - t
            update, mid, calls = _apply(inc, old, add, remove)
            timings["update"] = update.seconds
    t = time.perf_counter()
    pipeline, stats = inc.pipeline(), inc.stats()
    members = None
    if pipeline.lanes > 1 and inc.incremental:
        members = inc.lane_members(new_rules if new_rules is not None else read_rules(rules_path))
    timings["materialize"] = time.perf_counter() - t
    t = time.perf_counter()
    with staged_dir(out, "compile --update", args.argv) as stage:
        if backend is not None:
            emit_options = (backend.options_from_args(args),) if hasattr(backend, "options_from_args") else ()
            if not _emit_reusing(backend, old_out, listed, old, pipeline, update, stage, emit_options):
                backend.emit(pipeline, stage, *emit_options)
        timings["write_target"] = time.perf_counter() - t
        t = time.perf_counter()
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
        timings["write_pipeline"] = time.perf_counter() - t
        t = time.perf_counter()
        if (kept is not None and update.incremental and calls
                and len(kept.calls) + len(calls) <= cache.JOURNAL_LIMIT):
            old_counts = _journal_counts(old_out) if kept.calls else []
            cache.save_journal(stage, kept, kept.calls + [c for c, _ in calls], old_counts + [n for _, n in calls],
                               _header(stage, new_rules, diff), old_out / cache.NAME)
        else:
            save_session(inc, stage, new_rules if new_rules is not None else read_rules(rules_path))
        timings["write_session"] = time.perf_counter() - t
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


def _apply(inc: Incremental, old: ir.Pipeline, add, remove, checked: bool = False):
    """The update of ``inc`` by the rule changes; with several lanes that both add and remove, the
    additions first and the pipeline between (a rule may move between lanes). Also the calls made,
    as the journal keeps them: ((added rules' text, removed rules' text), counts after)."""
    def call(a, r) -> Update:
        up = inc.update(a, r, checked=checked)
        calls.append(([str(x) for x in a], [str(x) for x in r]))
        counts.append(list(inc.counts()))
        return up

    calls: list = []
    counts: list = []
    if old.lanes > 1 and add and remove:
        added = call(add, ())
        mid = inc.pipeline()
        update = _joined(added, call((), remove), old, inc.pipeline())
    else:
        update, mid = call(add, remove), None
    return update, mid, list(zip(calls, counts))


def _journal_counts(old_out: Path) -> list:
    """The counts OLD_OUT's journal holds (checked when it was loaded)."""
    return json.loads((old_out / cache.JOURNAL).read_text(encoding="utf-8"))["counts"]


def _emit_reusing(backend, old_out: Path, listed, old: ir.Pipeline, new: ir.Pipeline, update: Update, stage: Path,
                  emit_options: tuple) -> bool:
    """The target's files written from OLD_OUT's where the target knows how (``emit_update``); False: emit them all."""
    emit_update = getattr(backend, "emit_update", None)
    if emit_update is None or listed is None or update.program_changed:
        return False
    return emit_update(old_out, old, new, update.delta, stage, *emit_options)


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
