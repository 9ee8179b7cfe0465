"""``p4sub build OUT``: compile ``OUT/program.p4`` with the target's own compiler.

BMv2: p4c-bm2-ss writes ``program.json`` and ``p4info.txt``. Tofino: bf-p4c writes
``program.tofino/`` (``tofino.bin``, ``bf-rt.json``, ``pipe/context.json`` and, with ``-g``, its
logs), and the placement its logs give replaces p4sub's estimate in ``resources.json`` (the estimate
stays beside it, with its error per resource): once bf-p4c has run, every figure there is its.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compiler.base import MANIFEST, P4subError, TargetError, find_listed, staged
from p4sub import add_command

COMPILER = "p4c-bm2-ss"
HOW_TO_GET = (f"{COMPILER} is not on PATH. It is part of p4c (https://github.com/p4lang/p4c): build it from source "
              "(cmake with -DENABLE_BMV2=ON) or install a p4lang package for your distribution, then put the directory "
              f"holding {COMPILER} on PATH (or pass --p4c PATH). See docs/bmv2.md.")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "build", "compile an output directory's program.p4 with the target's compiler "
                    "(p4c-bm2-ss for BMv2, bf-p4c for Tofino)",
                    "p4sub build out   # after: p4sub compile SPEC RULES --target bmv2|tofino -o out")
    p.add_argument("out", help="directory written by `p4sub compile --target bmv2|tofino` (or a routed switch's)")
    p.add_argument("--p4c", default=None, help=f"path of {COMPILER} (default: found on PATH)")
    p.add_argument("--bf-p4c", default=None, help="path of bf-p4c, for a Tofino output (default: found on PATH)")
    p.add_argument("--extra", action="append", default=[], metavar="ARG", help="extra argument for the compiler; "
                   "repeatable")
    p.set_defaults(func=run)


def build_command(program: Path, into: Path, compiler: str, extra: list[str] = ()) -> list[str]:
    return [compiler, "--p4runtime-files", str(into / "p4info.txt"), "-o", str(into / "program.json"),
            *extra, str(program)]


BUILT = ("program.json", "p4info.txt")


def given_compiler(path: str, compiler: str = COMPILER, how_to_get: str = HOW_TO_GET, flag: str = "--p4c") -> str:
    """``--p4c PATH`` checked before anything runs: an executable file, else TargetError saying which
    it is not (a missing file, a directory, a file without execute permission)."""
    where = Path(path)
    if not where.exists():
        raise TargetError(f"{flag} {path}: no such file; give the path of {compiler} (or leave {flag} out to "
                          f"find it on PATH). {how_to_get}")
    if not where.is_file():
        raise TargetError(f"{flag} {path}: is a directory, not the {compiler} program; give the program's path "
                          f"(e.g. {where / compiler})" if where.is_dir() else
                          f"{flag} {path}: not a regular file; give the path of {compiler}")
    if not os.access(where, os.X_OK):
        raise TargetError(f"{flag} {path}: not executable (no execute permission); give the path of {compiler} "
                          f"or chmod +x it")
    return path


def output_target(out: Path) -> str:
    """``tofino`` when ``out`` holds a Tofino compile (BF Runtime entries, ``tofino.json``, or a
    ``resources.json`` that says so), else ``bmv2``."""
    if (out / "tofino.json").is_file() or (out / "entries.bfrt.json").is_file():
        return "tofino"
    try:
        return "tofino" if json.loads((out / RESOURCES).read_text()).get("target") == "tofino" else "bmv2"
    except (OSError, ValueError, AttributeError):
        return "bmv2"


def run_compiler(cmd: list[str], name: str) -> subprocess.CompletedProcess:
    """Run a target compiler, its output shown; TargetError with its messages when it fails."""
    print(" ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:  # a script whose interpreter is missing, a binary for another machine
        raise TargetError(f"{cmd[0]}: cannot run it as {name}: {exc.strerror or exc}") from None
    if proc.stdout:
        print(proc.stdout, end="")
    if proc.returncode != 0:
        raise TargetError(f"{name} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    if proc.stderr.strip():
        print(proc.stderr.strip())
    return proc


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if not (out / "program.p4").is_file() and (out / "p4sub_control.p4").is_file():
        raise P4subError(f"{out} holds the include-mode control (p4sub_control.p4), not a whole program: compile your "
                         f"own program that #includes it, e.g. p4c-bm2-ss -I {out} --p4runtime-files p4info.txt -o "
                         "program.json YOUR_PROGRAM.p4 (docs/bmv2.md, \"Include mode\")")
    if not (out / "program.p4").is_file():
        raise P4subError(f"{out / 'program.p4'}: no such file (run `p4sub compile SPEC RULES --target bmv2 -o {out}`)")
    if output_target(out) == "tofino":
        return run_tofino(args, out)
    compiler = given_compiler(args.p4c) if args.p4c else shutil.which(COMPILER)
    if compiler is None:
        raise TargetError(HOW_TO_GET)
    manifest = find_listed(out)
    if manifest is not None:
        manifest.check(["program.p4"])  # never build, then install, a program p4sub did not write
    else:  # an older p4sub's output, or a directory a test or script rendered: built, but install refuses it
        print(f"note: {out} has no {MANIFEST}: built, but p4sub install will refuse it until it is recompiled",
              file=sys.stderr)
    # p4c writes under temporary names (a directory in OUT), renamed into place when it succeeded:
    # a failing or interrupted build leaves the previous program.json and p4info.txt.
    scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=out))
    try:
        run_compiler(build_command(out / "program.p4", scratch, compiler, args.extra), COMPILER)
        for name in BUILT:
            if not (scratch / name).is_file():
                raise TargetError(f"{COMPILER} exited 0 but wrote no {name}")
        for name in BUILT:
            os.replace(scratch / name, out / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if manifest is not None:
        manifest.record(BUILT)
    print(f"wrote {out / 'program.json'} and {out / 'p4info.txt'}"
          + (f" (recorded in {manifest.root / MANIFEST})" if manifest is not None else ""))
    return 0


RESOURCES = "resources.json"
TOFINO_BUILD = "program.tofino"
#: What ``build`` records of bf-p4c's output in the manifest (what an install reads).
TOFINO_RECORDED = ("bf-rt.json", "pipe/context.json", "pipe/tofino.bin", "manifest.json")


def run_tofino(args: argparse.Namespace, out: Path) -> int:
    """bf-p4c on a Tofino output: ``program.tofino/``, and its placement in ``resources.json``."""
    from backends.tofino import bf_p4c

    compiler = (given_compiler(args.bf_p4c, bf_p4c.COMPILER, bf_p4c.HOW_TO_GET, "--bf-p4c") if args.bf_p4c
                else shutil.which(bf_p4c.COMPILER))
    if compiler is None:
        raise TargetError(bf_p4c.HOW_TO_GET)
    manifest = find_listed(out)
    has_estimate = (out / RESOURCES).is_file()  # delivery-tree programs (header stack, VT) have none
    if manifest is not None:
        manifest.check(["program.p4", *([RESOURCES] if has_estimate else [])])
    else:
        print(f"note: {out} has no {MANIFEST}: built, but p4sub install will refuse it until it is recompiled",
              file=sys.stderr)
    previous = read_estimate(out / RESOURCES) if has_estimate else {"target": "tofino", "tables": []}
    estimate = previous.get("estimate", previous)  # built before: the estimate is kept beside bf-p4c's figures
    scratch = Path(tempfile.mkdtemp(prefix=".build.", dir=out))
    try:
        into = scratch / TOFINO_BUILD
        run_compiler(bf_p4c.command(out / "program.p4", into, compiler, args.extra), bf_p4c.COMPILER)
        measured = bf_p4c.read(into)
        check_names(out, into)
        resources = judged(estimate, measured, bf_p4c.compare(estimate, measured), bf_p4c.version(compiler))
        if (out / TOFINO_BUILD).exists():  # the old build out of the way first: never half of each
            os.replace(out / TOFINO_BUILD, scratch / "old")
        os.replace(into, out / TOFINO_BUILD)
        with staged(out / RESOURCES) as tmp:
            Path(tmp).write_text(json.dumps(resources, indent=2) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if manifest is not None:
        manifest.record([RESOURCES, *(f"{TOFINO_BUILD}/{n}" for n in TOFINO_RECORDED if (out / TOFINO_BUILD / n).is_file())])
    c = resources["comparison"]["totals"]
    estimated = (f"p4sub estimated {c['stages']['estimate']}, {c['sram_blocks']['estimate']} and "
                 f"{c['tcam_blocks']['estimate']}" if c["stages"]["estimate"] is not None else "p4sub has no estimate")
    print(f"bf-p4c placed the program in {measured.stages} stages, {measured.sram_blocks} SRAM and "
          f"{measured.tcam_blocks} TCAM blocks ({estimated}); wrote {out / TOFINO_BUILD} and {out / RESOURCES}")
    return 0


def check_names(out: Path, into: Path) -> None:
    """``entries.bfrt.json`` against bf-p4c's ``bf-rt.json``: a name BF Runtime would refuse at install
    time is a TargetError now (nothing replaced)."""
    from backends.tofino import bfrt_check
    from backends.tofino.install import load_entries

    entries, schema = out / "entries.bfrt.json", into / "bf-rt.json"
    if not entries.is_file():
        return
    if not schema.is_file():
        raise TargetError(f"bf-p4c exited 0 but wrote no {schema.name}")
    found = bfrt_check.problems(load_entries(entries), json.loads(schema.read_text()))
    if found:
        raise TargetError(f"{entries}: names that bf-p4c's bf-rt.json does not have (an install would be refused):\n  "
                          + "\n  ".join(found))


def read_estimate(path: Path) -> dict:
    """``resources.json`` as compile (or an earlier build) wrote it; P4subError at its line and column."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise P4subError(f"{path}:{exc.lineno}:{exc.colno}: not a resources.json p4sub wrote ({exc.msg}); "
                         "recompile with --target tofino") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise P4subError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(doc, dict):
        raise P4subError(f"{path}:1:1: expected a JSON object (the resource estimate); recompile with --target tofino")
    return doc


def judged(estimate: dict, measured, comparison: dict, version: str) -> dict:
    """``resources.json`` after bf-p4c ran: its figures at the top (``source: bf-p4c``), the estimate
    whole under ``estimate``, the two compared under ``comparison``; multicast stays the estimate's
    (the PRE is configured at run time, bf-p4c does not see it)."""
    top = {**estimate, "source": "bf-p4c", "compiler": version, "stages": measured.stages,
           "sram_blocks": measured.sram_blocks, "sram_blocks_available": measured.sram_blocks_available,
           "tcam_blocks": measured.tcam_blocks, "tcam_blocks_available": measured.tcam_blocks_available,
           "sram_percent": measured.sram_percent, "tcam_percent": measured.tcam_percent,
           "map_rams": measured.map_rams}
    top["camus_table1"] = {"sram_percent": round(measured.sram_percent, 2),
                           "tcam_percent": round(measured.tcam_percent, 2),
                           "multicast_percent": round(estimate.get("multicast_percent", 0.0), 2)}
    top["tables"] = estimate.get("tables", [])
    return {**top, "estimate": estimate, "bf_p4c": measured.to_json(), "comparison": comparison}
