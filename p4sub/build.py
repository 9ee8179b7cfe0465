"""``p4sub build OUT``: compile ``OUT/program.p4`` with p4c for BMv2 (``program.json`` + ``p4info.txt``)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compiler.base import MANIFEST, P4subError, TargetError, find_listed
from p4sub import add_command

COMPILER = "p4c-bm2-ss"
HOW_TO_GET = (f"{COMPILER} is not on PATH. It is part of p4c (https://github.com/p4lang/p4c): build it from source "
              "(cmake with -DENABLE_BMV2=ON) or install a p4lang package for your distribution, then put the directory "
              f"holding {COMPILER} on PATH (or pass --p4c PATH). See docs/bmv2.md.")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "build", "compile a BMv2 output directory's program.p4 with p4c-bm2-ss",
                    "p4sub build out   # after: p4sub compile SPEC RULES --target bmv2 -o out")
    p.add_argument("out", help="directory written by `p4sub compile --target bmv2`")
    p.add_argument("--p4c", default=None, help=f"path of {COMPILER} (default: found on PATH)")
    p.add_argument("--extra", action="append", default=[], metavar="ARG", help="extra argument for p4c; repeatable")
    p.set_defaults(func=run)


def build_command(program: Path, into: Path, compiler: str, extra: list[str] = ()) -> list[str]:
    return [compiler, "--p4runtime-files", str(into / "p4info.txt"), "-o", str(into / "program.json"),
            *extra, str(program)]


BUILT = ("program.json", "p4info.txt")


def given_compiler(path: str) -> str:
    """``--p4c PATH`` checked before anything runs: an executable file, else TargetError saying which
    it is not (a missing file, a directory, a file without execute permission)."""
    where = Path(path)
    if not where.exists():
        raise TargetError(f"--p4c {path}: no such file; give the path of {COMPILER} (or leave --p4c out to "
                          f"find it on PATH). {HOW_TO_GET}")
    if not where.is_file():
        raise TargetError(f"--p4c {path}: is a directory, not the {COMPILER} program; give the program's path "
                          f"(e.g. {where / COMPILER})" if where.is_dir() else
                          f"--p4c {path}: not a regular file; give the path of {COMPILER}")
    if not os.access(where, os.X_OK):
        raise TargetError(f"--p4c {path}: not executable (no execute permission); give the path of {COMPILER} "
                          f"or chmod +x it")
    return path


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if not (out / "program.p4").is_file() and (out / "p4sub_control.p4").is_file():
        raise P4subError(f"{out} holds the include-mode control (p4sub_control.p4), not a whole program: compile your "
                         f"own program that #includes it, e.g. p4c-bm2-ss -I {out} --p4runtime-files p4info.txt -o "
                         "program.json YOUR_PROGRAM.p4 (docs/bmv2.md, \"Include mode\")")
    if not (out / "program.p4").is_file():
        raise P4subError(f"{out / 'program.p4'}: no such file (run `p4sub compile SPEC RULES --target bmv2 -o {out}`)")
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
        cmd = build_command(out / "program.p4", scratch, compiler, args.extra)
        print(" ".join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as exc:  # a script whose interpreter is missing, a binary for another machine
            raise TargetError(f"{compiler}: cannot run it as {COMPILER}: {exc.strerror or exc}") from None
        if proc.stdout:
            print(proc.stdout, end="")
        if proc.returncode != 0:
            raise TargetError(f"{COMPILER} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
        if proc.stderr.strip():
            print(proc.stderr.strip())
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
