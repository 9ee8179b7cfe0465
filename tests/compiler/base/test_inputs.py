"""Every input goes through one opener (compiler/base/inputs.py): regular files only, never a wait on a
FIFO, a size limit on what is read whole (not on traces), errno as words, UTF-8 with a skipped BOM
and bad bytes at line:column. Issue 19, "Inputs"."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest

from compiler import ir
from compiler.base import inputs
from compiler.base.errors import P4subError, ParseError, SpecError
from compiler.base.inputs import InputError, open_input, read_text
from compiler.network.host_rules import read_network_rules
from compiler.network.topology import fat_tree
from compiler.network.topology_file import import_graphml, read_topology
from compiler.rules.parser import read_rules
from compiler.spec.reader import read_spec
from p4sub import main

REPO = Path(__file__).resolve().parents[3]
ITCH = str(REPO / "apps/itch/itch.p4")


@pytest.fixture()
def fifo(tmp_path) -> Path:
    """A named pipe nobody writes to: opening it for reading the usual way blocks forever."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _within(seconds: float, call):
    """Run ``call`` in a thread; fail (rather than hang the suite) when it takes longer."""
    box: dict = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked?)"
    if "error" in box:
        raise box["error"]
    return box.get("value")


READERS = {
    "rules": lambda p: read_rules(p),
    "spec": lambda p: read_spec(p),
    "topology": lambda p: read_topology(p),
    "graphml": lambda p: import_graphml(p),
    "network rules": lambda p: read_network_rules(p, fat_tree(4)),
    "pipeline.json": lambda p: ir.load(p),
    "pcap": lambda p: __import__("apps.pcap", fromlist=["PcapReader"]).PcapReader(p),
    "itch binaryfile": lambda p: list(__import__("apps.itch.binaryfile", fromlist=["x"]).BinaryFileReader(p)),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_a_fifo_at_once(fifo, reader):
    with pytest.raises(P4subError, match="FIFO"):
        _within(10, lambda: READERS[reader](fifo))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_refuses_a_directory_and_a_device(tmp_path, reader):
    if reader == "pipeline.json":  # a directory is where pipeline.json is looked for
        (tmp_path / "pipeline.json").mkdir()
    with pytest.raises(P4subError, match="is a directory"):
        _within(10, lambda: READERS[reader](tmp_path))
    with pytest.raises(P4subError, match="character device"):
        _within(10, lambda: READERS[reader]("/dev/zero"))


def test_cli_inputs_that_are_fifos_exit_2_quickly(fifo, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", ITCH, str(REPO / "apps/itch/rules.sub"), "-o", str(out)]) == 0
    cases = [
        ["check", str(fifo), str(REPO / "apps/itch/rules.sub")],
        ["check", ITCH, str(fifo)],
        ["simulate", str(out), "--packets", str(fifo)],
        ["compile", ITCH, str(REPO / "apps/itch/rules.sub"), "-o", str(tmp_path / "o2"), "--trace", str(fifo)],
        ["replay", str(out), "--trace", str(fifo)],  # said before Spark starts
    ]
    for argv in cases:
        capsys.readouterr()
        started = time.monotonic()
        assert _within(20, lambda: main(argv)) == 2, argv
        assert time.monotonic() - started < 20
        assert "FIFO" in capsys.readouterr().err, argv


def test_errno_becomes_words(tmp_path, monkeypatch):
    with pytest.raises(InputError, match=r"nope\.sub: no such rule file") as info:
        read_text(tmp_path / "nope.sub", "rule file")
    assert info.value.reason == "no such file"
    with pytest.raises(InputError, match="is a directory"):
        read_text(tmp_path, "rule file")
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        read_text(tmp_path / "f" / "g", "rule file")

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(inputs.os, "open", denied)  # root reads everything: fake the refusal
    with pytest.raises(InputError, match=r"f: cannot read spec file: permission denied"):
        read_text(tmp_path / "f", "spec file")


def test_size_limit_applies_to_whole_reads_and_is_overridable(tmp_path, monkeypatch):
    rules = tmp_path / "r.sub"
    rules.write_text("add_order.shares == 1 : fwd(1);\n" * 100)
    monkeypatch.setenv(inputs.MAX_BYTES_ENV, "1000")
    with pytest.raises(InputError, match=r"has 3,200 bytes or more; p4sub reads inputs of up to 1,000 bytes "
                                         r"\(set P4SUB_MAX_INPUT_BYTES"):
        read_rules(rules)
    monkeypatch.setenv(inputs.MAX_BYTES_ENV, "4000")
    assert len(read_rules(rules)) == 100
    monkeypatch.setenv(inputs.MAX_BYTES_ENV, "lots")
    with pytest.raises(P4subError, match="expected a positive number of bytes"):
        read_rules(rules)
    assert inputs.DEFAULT_MAX_BYTES == 256 * 1024 * 1024


def test_traces_have_no_size_limit_but_must_be_regular_files(tmp_path, monkeypatch):
    from apps.pcap import read_pcap, write_pcap

    trace = tmp_path / "t.pcap"
    write_pcap(trace, [(i * 1000, bytes(100)) for i in range(50)])
    monkeypatch.setenv(inputs.MAX_BYTES_ENV, "1000")  # far below the trace's size
    assert len(read_pcap(trace)[0]) == 50
    with open_input(trace, "trace", limit=False) as f:
        assert len(f.read()) > 1000


def test_utf8_bom_is_skipped_in_rule_and_spec_files(tmp_path):
    rules = tmp_path / "r.sub"
    rules.write_bytes(b"\xef\xbb\xbfadd_order.shares == 12 : fwd(1);\n")
    rule = read_rules(rules).rules[0]
    assert rule.location.line == 1 and rule.location.column == 1
    spec = tmp_path / "s.p4"
    spec.write_bytes(b"\xef\xbb\xbf" + Path(ITCH).read_bytes())
    assert "add_order.price" in read_spec(spec).query_fields


def test_bytes_that_are_not_utf8_are_reported_at_line_and_column(tmp_path):
    rules = tmp_path / "r.sub"
    rules.write_bytes(b"add_order.shares == 12 : fwd(1);\n# \xc3\xa9 \xff\n")
    with pytest.raises(ParseError, match=r"rule file is not UTF-8 text: byte 0xff") as info:
        read_rules(rules)
    assert (info.value.location.line, info.value.location.column) == (2, 5)  # '#', ' ', 'é', ' ', then the byte
    spec = tmp_path / "s.p4"
    spec.write_bytes(b"header h_t { bit<8> f; }\n\n  \xfe")
    with pytest.raises(SpecError, match="not UTF-8") as info:
        read_spec(spec)
    assert (info.value.location.line, info.value.location.column) == (3, 3)


def test_a_json_lines_trace_with_bad_bytes_names_the_line(tmp_path):
    from compiler.base.inputs import text_lines

    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    lines = text_lines(trace, "trace")
    assert next(lines) == '{"a": 1}\n'
    with pytest.raises(ParseError, match="not UTF-8") as info:
        next(lines)
    assert (info.value.location.line, info.value.location.column) == (2, 8)


def test_stdin_is_bounded_and_decoded_with_a_location(monkeypatch):
    import io

    from compiler.base.inputs import read_stdin

    monkeypatch.setenv(inputs.MAX_BYTES_ENV, "1000")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\0" * 5000)))  # as `< /dev/zero`, cut short
    with pytest.raises(InputError, match="more than 1,000 bytes"):
        read_stdin("packets input")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"a": 1}\n\xff')))
    with pytest.raises(ParseError, match="not UTF-8") as info:
        read_stdin("packets input")
    assert str(info.value.location) == "<stdin>:2:1"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'\xef\xbb\xbf{"a": 1}\n')))
    assert read_stdin("packets input") == '{"a": 1}\n'
