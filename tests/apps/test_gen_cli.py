"""``p4sub gen``: each subcommand writes what the library would, and bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.int.generator import IntTraceConfig, write_int_trace
from apps.itch.binaryfile import read_binary_file
from apps.itch.feed import FeedConfig, generate_messages, write_itch_feed
from apps.workloads import itch_rules, workload_text
from p4sub import main


def test_gen_itch_writes_the_library_feed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "feed.pcap"
    assert main(["gen", "itch", "--messages", "3000", "--symbols", "20", "--zipf", "1.1", "--batch", "2-7",
                 "--seed", "3", "--progress", "-o", str(out)]) == 0
    write_itch_feed(tmp_path / "lib.pcap", FeedConfig(messages=3000, symbols=20, zipf=1.1, batch=(2, 7), seed=3))
    assert out.read_bytes() == (tmp_path / "lib.pcap").read_bytes()
    err = capsys.readouterr().err
    assert "gen itch: 3,000/3,000 (100%" in err and "wrote" in err and "3,000 messages" in err


def test_gen_itch_binaryfile(tmp_path: Path) -> None:
    out = tmp_path / "day.NASDAQ_ITCH50.gz"
    assert main(["gen", "itch", "--messages", "500", "--symbols", "5", "--format", "binaryfile.gz", "-q", "-o", str(out)]) == 0
    got, damage = read_binary_file(out)
    assert got == list(generate_messages(FeedConfig(messages=500, symbols=5))) and damage.total == 0


def test_gen_int_writes_the_library_trace(tmp_path: Path) -> None:
    out = tmp_path / "int.pcap"
    assert main(["gen", "int", "--packets", "500", "--switches", "20", "--hops", "2-4", "--anomalies", "0.1",
                 "--seed", "9", "--reports", "-q", "-o", str(out)]) == 0
    write_int_trace(tmp_path / "lib.pcap", IntTraceConfig(packets=500, switches=20, hops=(2, 4), anomalies=0.1, seed=9, reports=True))
    assert out.read_bytes() == (tmp_path / "lib.pcap").read_bytes()


def test_gen_rules_to_file_and_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rules.sub"
    assert main(["gen", "rules", "--workload", "itch", "--filters", "100", "--constraints", "3", "--seed", "2", "-o", str(out)]) == 0
    assert out.read_text() == workload_text(itch_rules(100, constraints=3, seed=2))
    capsys.readouterr()
    assert main(["gen", "rules", "--workload", "int", "--filters", "4", "-q"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5  # comment line + 4 rules


@pytest.mark.parametrize("sub", ["itch", "int", "rules"])
def test_every_subcommand_has_help_with_an_example(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gen", sub, "--help"])
    assert exc.value.code == 0
    assert f"example:\n  p4sub gen {sub}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gen", "itch", "--messages", "10", "-o", "x.pcap"], "--messages must be at least"),
        (["gen", "itch", "--session", "WAY-TOO-LONG-SESSION", "-o", "x.pcap"], "session"),
        (["gen", "int", "--hops", "0-3", "-o", "x.pcap"], "--hops"),
        (["gen", "rules", "--workload", "siena", "--filters", "5", "--operators", "~"], "unknown operators"),
        (["gen", "rules", "--workload", "itch", "--filters", "5", "--constraints", "9"], "1 to 5"),
        (["gen", "rules", "--workload", "int", "--filters", "5", "--constraints", "5"], "1 to 4"),
        (["gen", "rules", "--workload", "int", "--filters", "5", "--constraints", "1-3"], "single --constraints"),
        (["gen", "rules", "--workload", "hicn", "--filters", "5", "--constraints", "2"], "does not apply"),
        (["gen", "rules", "--workload", "hicn", "--filters", "5", "-o", "/nonexistent/dir/r.sub"], "cannot write"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.pcap").exists()


def test_gen_without_what_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen"]) == 2
    assert "itch" in capsys.readouterr().out
