"""``p4sub install OUT``: push a built pipeline and its entries to a running switch.

``--target bmv2`` (default) talks P4Runtime through p4runtime-shell. p4runtime-shell pins old
protobuf and IPython releases, so it usually lives in its own virtualenv: the installer runs
``backends/bmv2/p4rt_client.py`` with the first Python that can import ``p4runtime_sh``, looked
up in this order: ``--p4rt-python``, ``$P4SUB_P4RT_PYTHON``, the running interpreter,
``~/.local/share/p4sub/p4rt-venv/bin/python``.

``--target tofino`` calls ``backends.tofino.install.install(out_dir, args)`` with the parsed
arguments: ``args.grpc`` (``HOST:PORT`` or None for the target's default), ``args.device_id``
(int), ``args.program_name`` (str or None: the name in OUT), ``args.dry_run`` (bool: plan and
report, write nothing), ``args.batch_size`` (int: updates per write). It returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from compiler.base import P4subError, TargetError, listed
from p4sub import add_command

TARGETS = ("bmv2", "tofino")
DEFAULT_GRPC = {"bmv2": "127.0.0.1:9559"}
DEFAULT_VENV_PYTHON = Path.home() / ".local/share/p4sub/p4rt-venv/bin/python"
CLIENT = Path(__file__).resolve().parents[2] / "backends" / "bmv2" / "p4rt_client.py"
HOW_TO_GET = ("p4runtime-shell is not installed. Put it in its own virtualenv (it pins protobuf<3.21 and "
              "ipython 7.31):\n"
              f"  python3 -m venv {DEFAULT_VENV_PYTHON.parent.parent}\n"
              f"  {DEFAULT_VENV_PYTHON.parent}/pip install p4runtime-shell==0.0.6\n"
              "or point --p4rt-python / $P4SUB_P4RT_PYTHON at a Python that has it.")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "install", "install a built pipeline and its entries on a running switch (atomic updates)",
                    "p4sub install out --target bmv2 --grpc 127.0.0.1:9559 --device-id 0")
    p.add_argument("out", help="directory written by `p4sub compile --target ...` and `p4sub build`")
    p.add_argument("--target", choices=TARGETS, default="bmv2", help="switch kind (default bmv2)")
    p.add_argument("--grpc", default=None, help="HOST:PORT of the switch's gRPC server (bmv2: 127.0.0.1:9559)")
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime / BF Runtime device id (default 0)")
    p.add_argument("--program-name", default=None, help="program name on the switch (tofino; default from OUT)")
    p.add_argument("--dry-run", action="store_true", help="show what would be written; write nothing")
    p.add_argument("--batch-size", type=int, default=500, help="updates per write request (default 500)")
    p.add_argument("--election-id", type=int, default=1, help="P4Runtime election id (bmv2; default 1)")
    p.add_argument("--p4rt-python", default=None, help="Python interpreter that has p4runtime-shell (bmv2)")
    p.add_argument("--hitless", action="store_true",
                   help="install over the running OLD_OUT so that every packet is forwarded as by the old or the new rules")
    p.add_argument("--from", dest="hitless_from", metavar="OLD_OUT", default=None,
                   help="with --hitless: the output the switch holds now (default: the one OUT was updated from)")
    p.set_defaults(func=run)


def _has_p4runtime_shell(python: str) -> bool:
    try:
        proc = subprocess.run([python, "-c", "import p4runtime_sh.p4runtime"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def find_p4rt_python(explicit: str | None = None) -> str:
    """The first interpreter that can import p4runtime-shell (see the module docstring), or TargetError."""
    if explicit:
        if Path(explicit).exists() and _has_p4runtime_shell(explicit):
            return explicit
        raise TargetError(f"{explicit} cannot import p4runtime_sh.\n{HOW_TO_GET}")
    for c in (os.environ.get("P4SUB_P4RT_PYTHON"), sys.executable, str(DEFAULT_VENV_PYTHON)):
        if c and Path(c).exists() and _has_p4runtime_shell(c):
            return c
    raise TargetError(HOW_TO_GET)


def install_bmv2(out: Path, args: argparse.Namespace, plan: Path | None = None) -> int:
    if not (out / "program.p4").is_file() and (out / "p4sub_control.p4").is_file():
        # The installer makes the switch hold exactly the wanted entries: it would delete the
        # entries of the user's own tables and groups, which are not in entries.p4rt.json.
        raise P4subError(f"{out} holds the include-mode control (p4sub_control.p4): p4sub install would replace the "
                         "entries of your program's own tables too; load commands.txt with simple_switch_CLI, or "
                         "write entries.p4rt.json's updates with your controller (docs/bmv2.md, \"Include mode\")")
    for name, hint in (("program.p4", "p4sub compile ... --target bmv2"), ("entries.p4rt.json", "p4sub compile ... --target bmv2"),
                       ("program.json", f"p4sub build {out}"), ("p4info.txt", f"p4sub build {out}")):
        if not (out / name).is_file():
            raise P4subError(f"{out / name}: no such file (run `{hint}` first)")
    if args.batch_size < 1:
        raise P4subError("--batch-size must be at least 1")
    python = find_p4rt_python(args.p4rt_python)
    cmd = [python, str(CLIENT), "--grpc", args.grpc or DEFAULT_GRPC["bmv2"], "--device-id", str(args.device_id),
           "--election-id", str(args.election_id), "--p4info", str(out / "p4info.txt"),
           "--config", str(out / "program.json"),
           *(["--plan", str(plan)] if plan else ["--entries", str(out / "entries.p4rt.json")]),
           "--batch-size", str(args.batch_size)] + (["--dry-run"] if args.dry_run else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise TargetError(f"the P4Runtime installer failed (exit {proc.returncode}):\n{proc.stderr.strip()}") from None
    return print_report(report)


def print_report(report: dict) -> int:
    """Print the installer's report; 0 when everything wanted is on the switch, else raise TargetError."""
    where = f"device {report.get('device_id')} at {report.get('grpc')}"
    if "error" in report:
        raise TargetError(f"{where}: {report['error']}")
    plan = report.get("plan", {})
    print(f"{where}: pipeline {report.get('pipeline', '?')}; plan: {plan.get('INSERT', 0)} insert, "
          f"{plan.get('MODIFY', 0)} modify, {plan.get('DELETE', 0)} delete")
    if "hitless" in report:
        print("hitless: " + ", ".join(f"{k} {v}" for k, v in report["hitless"].items()))
    if report.get("dry_run"):
        for line in report.get("updates", []):
            print(f"  {line}")
        return 0
    if report.get("refused"):
        raise TargetError(report["summary"])
    if "summary" in report:
        print(report["summary"])
    if report.get("differences"):
        raise TargetError("read-back differs from what was written:\n  " + "\n  ".join(report["differences"]))
    print("read back: the switch holds exactly the wanted entries and groups")
    return 0


#: What each target's installer reads from OUT: each must be listed in the manifest with its hash.
PUSHED = {"bmv2": ("program.p4", "program.json", "p4info.txt", "entries.p4rt.json"),
          "tofino": ("program.p4", "entries.bfrt.json")}


def check_manifest(out: Path, names: tuple[str, ...]) -> None:
    """Push only what p4sub wrote, as it wrote it: every file the installer reads is listed in the
    manifest of OUT (or of its routed network) with the SHA-256 it has now, and a network holds
    only the switch directories its route wrote. Files absent altogether are left to the
    installer, whose message says which command makes them; include-mode directories have no
    program.p4, and are refused by the installer for another reason."""
    manifest = listed(out, "p4sub install pushes only what the manifest lists")
    manifest.check_switch_directories()
    manifest.check([name for name in names if (out / name).exists() or manifest.lists(name)])


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if not out.is_dir():
        raise P4subError(f"{out}: no such directory")
    check_manifest(out, PUSHED[args.target] + (("pipeline.json",) if args.hitless else ()))
    if args.hitless or args.hitless_from:
        return install_hitless(out, args)
    if args.target == "tofino":
        module = importlib.import_module("backends.tofino.install")
        return int(module.install(out, args) or 0)
    return install_bmv2(out, args)


def hitless_pipelines(out: Path, args: argparse.Namespace):
    """(old, new) pipelines of a hitless install: OLD_OUT from --from, or the ``updated_from`` of
    OUT's sources.json (``compile --update`` records it)."""
    from compiler import ir

    if not args.hitless:
        raise P4subError("--from names the output the switch holds for --hitless; add --hitless")
    old_out = args.hitless_from
    if old_out is None:
        try:
            old_out = json.loads((out / "sources.json").read_text(encoding="utf-8")).get("updated_from")
        except (OSError, json.JSONDecodeError, AttributeError):
            old_out = None
        if not isinstance(old_out, str):
            raise P4subError(f"{out} was not written by `p4sub compile --update`: name the output the switch holds "
                             "with --from OLD_OUT")
    if not Path(old_out).is_dir():
        raise P4subError(f"{old_out}: no such output directory (the output the switch holds, for --hitless)")
    check_manifest(Path(old_out), ("pipeline.json",))  # the plan starts from what the switch holds
    return ir.load(Path(old_out)), ir.load(out), _mid(out, Path(old_out))


def _mid(out: Path, old_out: Path):
    """The pipeline between of OUT (``compile --update`` in several lanes: the old rules plus the added
    ones), when OUT was updated from ``old_out`` itself; else None."""
    from compiler import ir
    from compiler.incremental.hitless import MID

    if not (out / MID).is_file():
        return None
    try:
        updated_from = json.loads((out / "sources.json").read_text(encoding="utf-8")).get("updated_from")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(updated_from, str) or Path(updated_from).resolve() != old_out.resolve():
        return None
    check_manifest(out, (MID,))
    return ir.load(out / MID)


def install_hitless(out: Path, args: argparse.Namespace) -> int:
    """``--hitless``: the plan rendered for the target, then written in order (see the module docstring)."""
    import tempfile

    old, new, mid = hitless_pipelines(out, args)
    if args.target == "tofino":
        module = importlib.import_module("backends.tofino.hitless")
        return int(module.install(old, new, out, args) or 0)
    from backends.bmv2.hitless import hitless_request, options_of

    request = hitless_request(old, new, options_of(out), mid)
    with tempfile.TemporaryDirectory(prefix="p4sub-hitless-") as tmp:
        plan = Path(tmp) / "hitless.p4rt.json"
        plan.write_text(json.dumps(request) + "\n", encoding="utf-8")
        return install_bmv2(out, args, plan)
