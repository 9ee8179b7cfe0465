"""Outputs appear whole or not at all (issue 19): a `gen` that fails or is interrupted halfway leaves
the file that was at its path untouched and no partial file beside it."""

from __future__ import annotations

import pytest

from compiler.cli import main
from compiler.outputs import staged


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
    from compiler.errors import P4subError

    with pytest.raises(P4subError, match="is a directory"):
        with staged(tmp_path):
            pass
    with pytest.raises(P4subError, match="cannot write"):
        with staged(tmp_path / "missing-dir" / "f.pcap"):
            pass
