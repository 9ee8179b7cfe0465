"""Outputs appear whole or not at all (issue 19): a `gen` that fails or is interrupted halfway leaves
the file that was at its path untouched and no partial file beside it."""

from __future__ import annotations

import pytest

from compiler.base.atomic import staged
from p4sub import main


def test_an_interrupted_gen_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    import apps.int.generator as generator

    target = tmp_path / "trace.pcap"
    target.write_bytes(b"a good old trace")

    def half_then_interrupt(path, cfg, progress):
        with open(path, "wb") as f:
            f.write(b"\xd4\xc3\xb2\xa1 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(generator, "write_int_trace", half_then_interrupt)
    assert main(["gen", "int", "--packets", "10", "-o", str(target), "--quiet"]) == 130  # "p4sub: interrupted"
    assert target.read_bytes() == b"a good old trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.pcap"]


def test_a_finished_gen_replaces_the_file_whole(tmp_path):
    target = tmp_path / "feed.pcap"
    target.write_bytes(b"old")
    assert main(["gen", "itch", "--messages", "500", "--seed", "1", "-o", str(target), "--quiet"]) == 0
    assert target.read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feed.pcap"]
    rules = tmp_path / "r.sub"
    assert main(["gen", "rules", "--workload", "siena", "--filters", "5", "-o", str(rules), "--quiet"]) == 0
    assert rules.read_text().count(";") >= 5 and sorted(p.name for p in tmp_path.iterdir()) == ["feed.pcap", "r.sub"]


def test_staging_refuses_a_directory_and_reports_an_unwritable_place(tmp_path):
    from compiler.base.errors import P4subError

    with pytest.raises(P4subError, match="is a directory"):
        with staged(tmp_path):
            pass
    with pytest.raises(P4subError, match="cannot write"):
        with staged(tmp_path / "missing-dir" / "f.pcap"):
            pass


# -- output directories: compile and route write a staging directory and swap it in whole -----------

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from compiler.base.manifest import MANIFEST, file_sha256

REPO = Path(__file__).resolve().parents[3]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")
NET_RULES = 'add_order.price > 10 : fwd(h1, h3);\nadd_order.stock == "GOOGL" : fwd(h2);\n'


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.endswith((".staging", ".old", ".partial")))


def p4sub(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_target_none_rerun_leaves_no_file_of_the_bmv2_compile(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out)[0] == 0
    assert (out / "program.p4").is_file()
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(snapshot(out)) == sorted([*manifest["files"], MANIFEST])
    assert not (out / "program.p4").exists() and manifest["kind"] == "compile"
    assert manifest["command"] == ["compile", ITCH, ITCH_RULES, "-o", str(out)]
    assert all(file_sha256(out / name) == sha for name, sha in manifest["files"].items())
    assert leftovers(tmp_path) == []


def test_a_reroute_over_another_topology_leaves_no_switch_of_the_old_one(tmp_path, capsys):
    out, rules = tmp_path / "net", tmp_path / "r.rules"
    rules.write_text(NET_RULES)
    fat = REPO / "examples/fat-tree-4.topo"
    assert p4sub(capsys, "route", fat, REPO / "examples/fat-tree-4.rules", "--spec", ITCH, "-o", out, "--quiet",
                 "--jobs", "1")[0] == 0
    assert (out / "c1").is_dir()
    assert p4sub(capsys, "route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "-o", out, "--quiet")[0] == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["l1", "l2", "s1"]
    assert sorted(snapshot(out)) == sorted([*json.loads((out / MANIFEST).read_text())["files"], MANIFEST])
    assert p4sub(capsys, "route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "-o", out, "--quiet",
                 "--delivery", "header-stack", "--target", "bmv2")[0] == 0
    assert (out / "delivery.json").is_file() and not (out / "network.json").exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("dot", ["missing/x.dot", "."])
def test_a_failing_dot_leaves_the_old_directory_as_it_was(tmp_path, capsys, dot):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out)[0] == 0
    before = snapshot(out)
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out, "--dot", tmp_path / dot)
    assert code == 2 and str(tmp_path) in err
    assert snapshot(out) == before and leftovers(tmp_path) == []


def test_a_dot_inside_the_output_is_part_of_it_and_one_outside_appears_with_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out, "--dot", out / "d.dot", "--dot", tmp_path / "e.dot")[0] == 0
    assert not (out / "d.dot").exists() and (tmp_path / "e.dot").read_text().startswith("digraph")
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out, "--dot", out / "d.dot")[0] == 0
    assert "d.dot" in json.loads((out / MANIFEST).read_text())["files"]


def test_a_directory_p4sub_did_not_write_is_refused_and_left_alone(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", mine)
    assert code == 2 and f"{mine}: not empty and has no {MANIFEST}" in err
    assert snapshot(mine) == {"thesis.tex": b"years of work"}
    a_file = tmp_path / "f"
    a_file.write_text("x")
    code, err = p4sub(capsys, "route", "leaf-spine:2,1,2", ITCH_RULES, "--spec", ITCH, "-o", a_file)
    assert code == 2 and "is a file" in err and a_file.read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", empty)[0] == 0 and (empty / MANIFEST).is_file()
    (empty / "notes.txt").write_text("mine")  # put into a p4sub output afterwards: not destroyed either
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", empty)
    assert code == 2 and "holds notes.txt, which no p4sub command wrote" in err
    assert (empty / "notes.txt").read_text() == "mine"
    (empty / MANIFEST).write_text("{not json")
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", empty)
    assert code == 2 and f"{MANIFEST}: damaged" in err
    assert leftovers(tmp_path) == []


# A compile stopped by SIGINT while it writes (the pipeline saved into the staging directory, the rest
# not yet): the old directory is as it was and the staging directory is gone.
_SLOW_WRITER = """
import sys, time
import compiler.ir as ir
import compiler.network.compile as network_compile
real_save, real_network = ir.save, network_compile.write_network

def save(pipeline, path):
    real_save(pipeline, path)
    print("halfway", flush=True)
    time.sleep(120)

def write_network(out, *args):
    real_network(out, *args)
    print("halfway", flush=True)
    time.sleep(120)

ir.save, network_compile.write_network = save, write_network
from p4sub import main
sys.exit(main(sys.argv[1:]))
"""


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT as a terminal delivers it: a suite started in the background (``nohup``, ``&`` in a
    script) runs with SIGINT ignored, which p4sub rightly keeps ignored; these tests are about a
    user's Ctrl-C, so the child starts with the default disposition (Python then installs its own)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("command, sig", [("compile", signal.SIGINT), ("compile", signal.SIGTERM),
                                         ("compile-update", signal.SIGINT), ("route", signal.SIGINT)])
def test_sigint_halfway_through_writing_leaves_the_old_directory_and_no_staging(tmp_path, capsys, command, sig):
    out = tmp_path / "out"
    rules = tmp_path / "r.rules"
    rules.write_text(NET_RULES)
    if command == "route":
        first = ["route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "-o", out, "--quiet", "--jobs", "1"]
        second = ["route", REPO / "examples/fat-tree-4.topo", REPO / "examples/fat-tree-4.rules", "--spec", ITCH,
                  "-o", out, "--quiet", "--jobs", "1"]
    else:
        first = ["compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out]
        second = (["compile", ITCH, ITCH_RULES, "-o", out] if command == "compile"
                  else ["compile", "--update", out, ITCH_RULES, "--target", "bmv2", "-o", out])
    assert p4sub(capsys, *first)[0] == 0
    before = snapshot(out)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, *map(str, second)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_ctrl_c_as_at_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while proc.stdout.readline().strip() != "halfway":
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        staging = [p for p in tmp_path.iterdir() if p.name.endswith(".staging")]
        assert len(staging) == 1
        assert any(staging[0].rglob("pipeline.json")) or any(staging[0].rglob("network.json"))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig and "interrupted" in err and "Traceback" not in err, err  # 130, 143
    assert snapshot(out) == before
    assert leftovers(tmp_path) == []


# -- install reads the manifest ---------------------------------------------------------------------


def _tofino_dry_run(capsys, out: Path) -> tuple[int, str]:
    return p4sub(capsys, "install", out, "--target", "tofino", "--dry-run")


def test_install_pushes_only_files_the_manifest_lists_with_their_hash(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "tofino", "-o", out)[0] == 0
    assert _tofino_dry_run(capsys, out)[0] == 0
    entries = out / "entries.bfrt.json"
    good = entries.read_bytes()
    entries.write_bytes(good.replace(b'"table_name"', b'"table_name" ', 1))  # one byte more
    code, err = _tofino_dry_run(capsys, out)
    assert code == 2 and f"{entries}: changed since p4sub wrote it" in err
    entries.write_bytes(good)
    manifest = out / MANIFEST
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "files": {k: v for k, v in doc["files"].items() if k != "program.p4"}}))
    code, err = _tofino_dry_run(capsys, out)
    assert code == 2 and f"{out / 'program.p4'}: not in {manifest}" in err
    manifest.write_text(manifest.read_text()[:40])
    code, err = _tofino_dry_run(capsys, out)
    assert code == 2 and f"{manifest}: damaged" in err
    manifest.unlink()
    code, err = _tofino_dry_run(capsys, out)
    assert code == 2 and f"{out}: has no {MANIFEST}" in err and "recompile" in err
    code, err = p4sub(capsys, "install", out, "--target", "bmv2")
    assert code == 2 and "recompile" in err


def test_install_refuses_a_switch_directory_its_route_did_not_write(tmp_path, capsys):
    import shutil

    rules = tmp_path / "r.rules"
    rules.write_text(NET_RULES)
    net = tmp_path / "net"
    assert p4sub(capsys, "route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "--target", "tofino", "-o", net,
                 "--quiet")[0] == 0
    assert _tofino_dry_run(capsys, net / "l1")[0] == 0
    shutil.copytree(net / "l1", net / "l9")  # a switch of an earlier route, copied back in
    code, err = _tofino_dry_run(capsys, net / "l1")
    assert code == 2 and f"{net / 'l9'}: a directory the route that wrote {net} did not write" in err
    code, err = _tofino_dry_run(capsys, net / "l9")
    assert code == 2 and f"{net / 'l9'}: not in {net / MANIFEST}" in err
    shutil.rmtree(net / "l9")
    (net / "l1" / "entries.bfrt.json").write_text("{}")
    code, err = _tofino_dry_run(capsys, net / "l1")
    assert code == 2 and f"{net / 'l1' / 'entries.bfrt.json'}: changed since p4sub wrote it" in err


def test_build_records_what_it_wrote_and_install_checks_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out)[0] == 0
    fake = _fake_p4c(tmp_path)
    code, _ = p4sub(capsys, "build", out, "--p4c", fake)
    assert code == 0
    doc = json.loads((out / MANIFEST).read_text())
    assert doc["files"]["program.json"] == file_sha256(out / "program.json") and "p4info.txt" in doc["files"]
    assert not [p for p in out.iterdir() if p.name.startswith(".build.")]
    built = snapshot(out)
    failing = tmp_path / "failing-p4c"  # writes half its output, then fails
    failing.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -o) echo 'half' > $2; shift;; esac; shift; done\n"
                       "echo 'program.p4(1): error: no' >&2\nexit 1\n")
    failing.chmod(0o755)
    assert p4sub(capsys, "build", out, "--p4c", failing)[0] == 2
    assert snapshot(out) == built
    (out / "p4info.txt").write_text("pkg_info { arch: \"other\" }\n")
    code, err = p4sub(capsys, "install", out, "--p4rt-python", "/bin/false")
    assert code == 2 and f"{out / 'p4info.txt'}: changed since p4sub wrote it" in err
    (out / "program.p4").write_text("// edited by hand\n")
    code, err = p4sub(capsys, "build", out, "--p4c", fake)
    assert code == 2 and f"{out / 'program.p4'}: changed since p4sub wrote it" in err


def _fake_p4c(tmp_path: Path) -> Path:
    fake = tmp_path / "fake-p4c"  # writes what p4c-bm2-ss would: -o FILE and --p4runtime-files FILE
    fake.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -o) echo '{}' > $2; shift;; "
                    "--p4runtime-files) echo 'pkg_info {}' > $2; shift;; esac; shift; done\n")
    fake.chmod(0o755)
    return fake


def test_build_of_a_routed_switch_records_into_the_networks_manifest(tmp_path, capsys):
    rules, net = tmp_path / "r.rules", tmp_path / "net"
    rules.write_text(NET_RULES)
    assert p4sub(capsys, "route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "--target", "bmv2", "-o", net,
                 "--quiet")[0] == 0
    assert p4sub(capsys, "build", net / "l1", "--p4c", _fake_p4c(tmp_path))[0] == 0
    files = json.loads((net / MANIFEST).read_text())["files"]
    assert files["l1/program.json"] == file_sha256(net / "l1" / "program.json") and "l2/program.json" not in files
    assert not (net / "l1" / MANIFEST).exists()
    assert p4sub(capsys, "route", "leaf-spine:2,1,2", rules, "--spec", ITCH, "-o", net, "--quiet")[0] == 0  # built files too
    assert not (net / "l1" / "program.json").exists()


def test_without_renameat2_the_old_directory_is_renamed_aside_and_removed(tmp_path, capsys, monkeypatch):
    import compiler.base.outputs as outputs

    monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out)[0] == 0
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    assert not (out / "program.p4").exists() and (out / "pipeline.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# -- report directories: added to, each file whole, nothing changed by a failed run -------------------

from compiler.base.outputs import staged_report


def test_a_report_replaces_its_own_files_keeps_the_others_and_leaves_no_staging(tmp_path):
    report = tmp_path / "r"
    report.mkdir()
    (report / "summary.json").write_text("old")
    (report / "notes.txt").write_text("mine")
    with staged_report(report) as stage:
        (stage / "summary.json").write_text("new")
        (stage / "sub").mkdir()
        (stage / "sub" / "plot.png").write_bytes(b"png")
        assert not (report / "sub").exists()  # nothing appears before the report is complete
    assert (report / "summary.json").read_text() == "new" and (report / "notes.txt").read_text() == "mine"
    assert (report / "sub" / "plot.png").read_bytes() == b"png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_a_failing_report_changes_nothing(tmp_path, failure):
    report = tmp_path / "r"
    report.mkdir()
    (report / "summary.json").write_text("old")
    with pytest.raises(failure):
        with staged_report(report) as stage:
            (stage / "summary.json").write_text("half")
            raise failure()
    assert (report / "summary.json").read_text() == "old" and [p.name for p in report.iterdir()] == ["summary.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_report_under_a_file_is_refused_before_the_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["eval", "delivery", "--topology", "fat-tree:4", "--report", str(blocker / "r")]) == 2
    assert f"{blocker} is a file" in capsys.readouterr().err
    assert main(["netsim", str(tmp_path / "nowhere"), "--trace", str(blocker), "--publisher", "h1",
                 "--report", str(blocker)]) == 2
    assert "is a file, not a report directory" in capsys.readouterr().err


SWAP_SCRIPT = r"""
import os, signal, sys
from pathlib import Path
import compiler.base.outputs as outputs

out, exchange, old = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
if old != "absent":
    out.mkdir()
if old == "full":
    (out / "program.p4").write_text("old")
    outputs.write_manifest(out, "compile", [])
real_exchange, real_rename = outputs._exchange, os.rename

def exchange_then_kill(a, b):
    done = real_exchange(a, b)
    os.kill(os.getpid(), signal.SIGTERM)  # blocked now: pending until the swap is over
    return done

outputs._exchange = exchange_then_kill if exchange else (lambda a, b: False)

def rename(a, b):
    real_rename(a, b)
    if str(b) == str(out):  # a directory has just landed at OUT
        os.kill(os.getpid(), signal.SIGTERM)

outputs.os.rename = rename

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, interrupt)
try:
    with outputs.staged_dir(out, "compile", []) as stage:
        (stage / "program.p4").write_text("new")
except KeyboardInterrupt:
    sys.exit(143)
sys.exit(0)
"""


@pytest.mark.parametrize("exchange", [True, False])
@pytest.mark.parametrize("old", ["full", "empty", "absent"])
def test_a_signal_that_arrives_during_the_swap_undoes_it(tmp_path, exchange, old):
    """A SIGTERM while the swap holds signals back: delivered after it, the command is interrupted, so
    the old directory is put back (found by a probe: OUT held the new compile after 'interrupted').
    In a process of its own: signal masks are per thread, and pytest-xdist runs tests off the main one."""
    import subprocess
    import sys

    out = tmp_path / "out"
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", SWAP_SCRIPT, str(out), "1" if exchange else "0", old],
                          capture_output=True, text=True, timeout=60, cwd=repo)
    assert done.returncode == 143, done.stderr
    if old == "absent":
        assert not out.exists()
    elif old == "empty":
        assert out.is_dir() and not any(out.iterdir())
    else:
        assert (out / "program.p4").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if old != "absent" else [])


def test_a_second_interrupt_during_the_cleanup_is_ignored(tmp_path, monkeypatch):
    """Ctrl-C twice, 50 ms apart (a probe's case): the first interrupts, the second lands in the cleanup and
    must neither raise there (a traceback, the staging directory left behind) nor change the exit code."""
    import os
    import signal

    import compiler.base.outputs as outputs

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # see _ctrl_c_as_at_a_terminal

    real_rmtree = outputs.shutil.rmtree

    def second_ctrl_c_then_rmtree(path, *args, **kwargs):
        if str(path).endswith(".staging"):
            os.kill(os.getpid(), signal.SIGINT)
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(outputs.shutil, "rmtree", second_ctrl_c_then_rmtree)

    def interrupted_emit(pipeline, out_dir, *args):
        os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C, while the output is being written
        raise AssertionError("the first SIGINT did not interrupt")

    import backends.bmv2 as bmv2

    monkeypatch.setattr(bmv2, "emit", interrupted_emit)
    out = tmp_path / "out"
    try:
        assert main(["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "--target", "bmv2", "-o", str(out)]) == 130
        assert sorted(p.name for p in tmp_path.iterdir()) == []
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_a_spec_out_that_cannot_be_written_leaves_the_rules_file_as_it_was(tmp_path):
    rules = tmp_path / "old.sub"
    rules.write_text("old\n")
    (tmp_path / "adir").mkdir()
    for spec_out in ("/dev/full", str(tmp_path / "adir")):
        assert main(["gen", "rules", "--workload", "siena", "--filters", "20", "-q", "-o", str(rules),
                     "--spec-out", spec_out]) == 2
        assert rules.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "old.sub"]


def test_a_fifo_without_a_reader_is_refused_at_once_and_one_with_a_reader_gets_the_output(tmp_path, capsys):
    import os
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["gen", "rules", "--workload", "itch", "--filters", "20", "-q", "-o", str(fifo)]) == 2
    assert "a FIFO with no reader" in capsys.readouterr().err
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        import time

        for _ in range(100):  # the reader's open() must be waiting before the writer checks for it
            if main(["gen", "rules", "--workload", "itch", "--filters", "20", "-q", "-o", str(fifo)]) == 0:
                break
            time.sleep(0.05)
    finally:
        reader.join(timeout=10)
    assert got and got[0].count(b"\n") == 21


def test_outputs_get_the_permissions_a_shell_would_give_them(tmp_path):
    import os
    import stat

    mask = os.umask(0o022)
    try:
        new = tmp_path / "new.sub"
        assert main(["gen", "rules", "--workload", "itch", "--filters", "5", "-q", "-o", str(new)]) == 0
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        kept = tmp_path / "kept.sub"
        kept.write_text("x")
        kept.chmod(0o640)
        assert main(["gen", "rules", "--workload", "itch", "--filters", "5", "-q", "-o", str(kept)]) == 0
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
        out = tmp_path / "out"
        assert main(["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "-o", str(out)]) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o755
    finally:
        os.umask(mask)


@pytest.mark.parametrize("argv, message", [
    (["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "-o", "-"], "'-': not a directory name"),
    (["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "-o", ""], "'': not a directory name"),
    (["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "-o", "OUT", "--dot", "-"], "'-': not a file name"),
])
def test_dash_and_empty_are_no_output_names(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    shutil.copytree(repo / "apps/itch", tmp_path / "apps/itch")
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apps"]


def test_an_empty_budget_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        main(["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "-o", "x", "--budget", "", "--exact"])
    assert info.value.code == 2 and "--budget: '' names nothing" in capsys.readouterr().err
