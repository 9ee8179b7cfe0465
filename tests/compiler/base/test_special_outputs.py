"""Outputs that are not regular files (issue 27, item 1): a device, FIFO or socket named as an output is
written in place, never renamed over; a write error there is exit 2 with the system's reason.

The devices are made afresh in tmp_path with the numbers of the machine's /dev/full and /dev/null, so
that a regression replaces a copy rather than the machine's own device.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from p4sub import main

REPO = Path(__file__).resolve().parents[3]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")


def device(tmp_path: Path, name: str) -> Path:
    """A character device in tmp_path with the numbers of ``/dev/NAME``; skips where none can be made."""
    real = Path("/dev") / name
    if os.geteuid() != 0:
        pytest.skip(f"making a copy of {real} needs root (mknod)")
    if not real.exists() or not stat.S_ISCHR(real.stat().st_mode):
        pytest.skip(f"{real} is missing or not a character device on this machine")
    node = tmp_path / name
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, real.stat().st_rdev)
        with open(node, "wb") as f:  # a file system mounted nodev refuses to open it
            if name == "null":
                f.write(b"x")
    except OSError as exc:
        pytest.skip(f"cannot make a working {real} in {tmp_path}: {exc.strerror}")
    return node


def still_device(node: Path, name: str) -> bool:
    st = node.stat()
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat(f"/dev/{name}").st_rdev


def entries(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


GENS = {
    "gen itch": ["gen", "itch", "--messages", "2000", "-q", "-o"],
    "gen itch binaryfile.gz": ["gen", "itch", "--messages", "2000", "--format", "binaryfile.gz", "-q", "-o"],
    "gen rules": ["gen", "rules", "--workload", "itch", "--filters", "50", "-q", "-o"],
    "gen int": ["gen", "int", "--packets", "50", "-q", "-o"],
    "gen --spec": ["gen", "--spec", ITCH, "--packets", "50", "-q", "-o"],
}


@pytest.mark.parametrize("command", list(GENS))
def test_gen_to_a_full_device_is_an_error_and_leaves_the_device(tmp_path, capsys, command):
    full = device(tmp_path, "full")
    assert main([*GENS[command], str(full)]) == 2
    assert f"{full}: cannot write: No space left on device" in capsys.readouterr().err
    assert still_device(full, "full") and entries(tmp_path) == ["full"]


def test_gen_rules_spec_out_to_a_full_device_is_an_error(tmp_path, capsys):
    full = device(tmp_path, "full")
    rules = tmp_path / "out" / "siena.sub"
    rules.parent.mkdir()
    assert main(["gen", "rules", "--workload", "siena", "--filters", "5", "-q", "-o", str(rules),
                 "--spec-out", str(full)]) == 2
    assert f"{full}: cannot write: No space left on device" in capsys.readouterr().err
    assert still_device(full, "full") and entries(tmp_path) == ["full", "out"]


@pytest.mark.parametrize("command", list(GENS))
def test_gen_to_dev_null_works_and_leaves_the_device(tmp_path, command):
    null = device(tmp_path, "null")
    assert main([*GENS[command], str(null)]) == 0
    assert still_device(null, "null") and entries(tmp_path) == ["null"]


def test_compile_dot_to_a_full_device_is_an_error_and_writes_no_directory(tmp_path, capsys):
    full = device(tmp_path, "full")
    assert main(["compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "out"), "--dot", str(full)]) == 2
    assert f"{full}: cannot write: No space left on device" in capsys.readouterr().err
    assert still_device(full, "full") and entries(tmp_path) == ["full"]


def test_compile_dot_to_dev_null_works(tmp_path):
    null = device(tmp_path, "null")
    assert main(["compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "out"), "--dot", str(null)]) == 0
    assert still_device(null, "null") and entries(tmp_path) == ["null", "out"]


def test_a_device_as_an_output_directory_is_refused(tmp_path, capsys):
    null = device(tmp_path, "null")
    assert main(["compile", ITCH, ITCH_RULES, "-o", str(null)]) == 2
    assert f"{null}: is a device, FIFO or socket, not an output directory" in capsys.readouterr().err
    assert still_device(null, "null")


def test_a_report_file_that_is_a_device_is_written_in_place(tmp_path, capsys):
    report = tmp_path / "report"
    report.mkdir()
    null = device(report, "null")
    os.rename(null, report / "delivery.json")
    argv = ["eval", "delivery", "--topology", "fat-tree:4", "--runs", "1", "--subscribers", "50", "--no-plots",
            "--quiet", "--report", str(report)]
    assert main(argv) == 0
    assert still_device(report / "delivery.json", "null") and entries(report) == ["delivery.json", "delivery.md"]
    full = device(tmp_path, "full")
    os.replace(full, report / "delivery.json")
    assert main(argv) == 2
    assert "delivery.json: cannot put the report in place: No space left on device" in capsys.readouterr().err
    assert still_device(report / "delivery.json", "full")


def test_a_fifo_is_written_in_place_for_its_reader(tmp_path):
    fifo = tmp_path / "rules.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main([*GENS["gen rules"], str(fifo)]) == 0
    reader.join(30)
    assert not reader.is_alive() and got[0].count(b": fwd(") == 50
    assert stat.S_ISFIFO(fifo.stat().st_mode) and entries(tmp_path) == ["rules.fifo"]


def test_a_socket_is_not_replaced_and_its_error_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a Unix socket's path is at most ~107 bytes
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("s.sock")
        assert main([*GENS["gen itch"], "s.sock"]) == 2
    assert "s.sock: cannot write: No such device or address" in capsys.readouterr().err
    assert stat.S_ISSOCK(os.stat("s.sock").st_mode) and entries(tmp_path) == ["s.sock"]


def test_a_symlink_is_followed_the_file_it_names_replaced_and_the_link_kept(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rules.sub").write_text("old")
    link = tmp_path / "rules.sub"
    link.symlink_to(data / "rules.sub")
    assert main([*GENS["gen rules"], str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(data / "rules.sub")
    assert (data / "rules.sub").read_text().count(": fwd(") == 50
    assert entries(data) == ["rules.sub"] and entries(tmp_path) == ["data", "rules.sub"]


def test_a_symlink_to_a_device_writes_the_device(tmp_path):
    null = device(tmp_path, "null")
    (tmp_path / "link").symlink_to(null)
    assert main([*GENS["gen itch"], str(tmp_path / "link")]) == 0
    assert (tmp_path / "link").is_symlink() and still_device(null, "null")


@pytest.mark.parametrize("command", ["gen itch", "gen int", "gen --spec"])
def test_a_binary_gen_to_dash_is_refused_not_written_as_a_file_named_dash(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    assert main([*GENS[command], "-"]) == 2
    err = capsys.readouterr().err
    assert "-o -: " in err and "is binary and is not written to stdout" in err and "-o /dev/stdout" in err
    assert entries(tmp_path) == []
