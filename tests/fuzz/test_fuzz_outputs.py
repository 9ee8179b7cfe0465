"""Fuzz where outputs go (issue 27 item 1 and a probe's kin): every writing command given a device, a
FIFO with or without a reader, a directory, a path under a file, a symbolic link, '-' or '' exits 0 or
2 with a message, within the deadline, leaves devices devices and a file it did not write whole."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.helpers import SETTINGS, run_cli, snapshot

REPO = Path(__file__).resolve().parents[2]
ITCH, RULES = str(REPO / "apps/itch/itch.p4"), str(REPO / "apps/itch/rules.sub")
KINDS = ["new", "existing-file", "dev-null", "dev-full", "fifo-no-reader", "fifo-reader", "directory",
         "under-a-file", "link-to-file", "dangling-link", "dash", "empty"]
COMMANDS = {
    "gen rules": lambda o: ["gen", "rules", "--workload", "itch", "--filters", "20", "-q", "-o", o],
    "gen itch": lambda o: ["gen", "itch", "--messages", "300", "-q", "-o", o],
    "gen rules --spec-out": lambda o: ["gen", "rules", "--workload", "siena", "--filters", "10", "-q", "-o", "RULES",
                                      "--spec-out", o],
    "compile --dot": lambda o: ["compile", ITCH, RULES, "-o", "OUT", "--dot", o],
    "compile -o": lambda o: ["compile", ITCH, RULES, "-o", o],
}


@pytest.fixture()
def place(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_outputs")


def _target(root: Path, kind: str) -> tuple[str, threading.Thread | None]:
    path = root / "target"
    reader = None
    if kind == "existing-file":
        path.write_text("an existing file\n")
    elif kind in ("fifo-no-reader", "fifo-reader"):
        os.mkfifo(path)
        if kind == "fifo-reader":
            reader = threading.Thread(target=lambda: path.read_bytes(), daemon=True)
            reader.start()
    elif kind == "directory":
        path.mkdir()
        (path / "keep.txt").write_text("the user's\n")
    elif kind == "under-a-file":
        path.write_text("a file\n")
        return str(path / "x"), None
    elif kind == "link-to-file":
        (root / "real").write_text("linked\n")
        path.symlink_to(root / "real")
    elif kind == "dangling-link":
        path.symlink_to(root / "nowhere" / "x")
    return {"dev-null": "/dev/null", "dev-full": "/dev/full", "dash": "-", "empty": ""}.get(kind, str(path)), reader


@SETTINGS
@given(command=st.sampled_from(sorted(COMMANDS)), kind=st.sampled_from(KINDS))
def test_outputs_of_every_kind(place, command, kind):
    import tempfile

    root = Path(tempfile.mkdtemp(prefix=f"{command.replace(' ', '_')}-{kind}-", dir=place))
    if kind == "fifo-reader" and command == "compile -o":
        return  # a FIFO is no output directory: covered by fifo-no-reader
    target, reader = _target(root, kind)
    before = snapshot(root)
    argv = [a.replace("RULES", str(root / "r.sub")).replace("OUT", str(root / "out")) for a in COMMANDS[command](target)]
    devices = {d: os.stat(d).st_rdev for d in ("/dev/null", "/dev/full")}
    code, err = run_cli(*argv)
    if reader is not None:
        if code == 2:  # refused before the reader's open() was waiting: give it its end of file
            with open(target, "wb"):
                pass
        reader.join(timeout=10)
        assert not reader.is_alive()
    for d, rdev in devices.items():
        assert stat.S_ISCHR(os.stat(d).st_mode) and os.stat(d).st_rdev == rdev, f"{d} is no longer the device"
    if code == 2:
        after = snapshot(root)
        assert {k: v for k, v in after.items() if k in before} == before, "a failed command changed a file"
    refused = {"dev-full", "fifo-no-reader", "directory", "under-a-file", "dash", "empty", "dangling-link"}
    if command == "gen rules":
        refused.discard("dash")  # -o - writes the rules to stdout
    if command == "compile -o":
        refused -= {"dangling-link"}  # an output directory is made, through a link too (docs/compiler.md)
        refused |= {"existing-file", "link-to-file", "dev-null"}
    if kind in refused:
        assert code == 2, (argv, err)
