"""Hostile arguments that gave a traceback or were silently accepted (issue 27, items 4 and 5): each is
exit status 2 with a message naming the argument or the rule, and writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4sub import main

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")
STATEFUL_SPEC = str(REPO / "examples/stateful/itch-rate.p4")
FAT_TREE = str(REPO / "examples/fat-tree-4.topo")


def p4sub(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


# -- item 4: tracebacks ------------------------------------------------------------------------------

@pytest.mark.parametrize("delivery", ["vt:broadcast", "vt", "header-stack:port", "header-stack"])
@pytest.mark.parametrize("target", ["bmv2", None])
def test_route_with_delivery_trees_refuses_stateful_rules_at_the_rule(tmp_path, capsys, delivery, target):
    rules = tmp_path / "st.rules"
    rules.write_text('add_order.stock == "GOOGL": fwd(h1);\nadd_order.stock == "GOOGL" and rate > 3: fwd(h2);\n')
    argv = ["route", FAT_TREE, rules, "--spec", STATEFUL_SPEC, "--delivery", delivery, "-o", tmp_path / "net",
            "--quiet", *(["--target", target] if target else [])]
    code, err = p4sub(capsys, *argv)
    assert code == 2 and f"{rules}:2:32: rate reads a counter" in err and "--delivery filters" in err
    assert "Traceback" not in err and not (tmp_path / "net").exists()


@pytest.mark.parametrize("extra", [[], ["--scenarios", "uniform"]])
def test_eval_vt_refuses_a_negative_payload(capsys, extra):
    code, err = p4sub(capsys, "eval", "vt", "--topology", "fat-tree:4", "--payload", "-1", "--quiet", *extra)
    assert code == 2 and "--payload -1: payload bytes after the Ethernet header must be >= 0" in err


@pytest.fixture()
def bmv2_out(tmp_path, capsys) -> Path:
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", out)[0] == 0
    return out


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind, expected", [
    ("not executable", "not executable (no execute permission)"),
    ("directory", "is a directory, not the p4c-bm2-ss program"),
    ("missing", "no such file; give the path of p4c-bm2-ss"),
    ("bad interpreter", "cannot run it as p4c-bm2-ss: No such file or directory"),
])
def test_build_with_a_p4c_that_cannot_run_says_why(tmp_path, capsys, bmv2_out, kind, expected):
    p4c = tmp_path / "p4c"
    if kind == "not executable":
        p4c.write_text("#!/bin/sh\nexit 0\n")
        p4c.chmod(0o644)
    elif kind == "directory":
        p4c.mkdir()
    elif kind == "bad interpreter":
        p4c.write_text("#!/nonexistent/interpreter\n")
        p4c.chmod(0o755)
    before = snapshot(bmv2_out)
    code, err = p4sub(capsys, "build", bmv2_out, "--p4c", p4c)
    assert code == 2 and expected in err and "Traceback" not in err
    assert snapshot(bmv2_out) == before and [p.name for p in bmv2_out.iterdir() if p.name.startswith(".")] == []


# -- item 5: silent acceptance -----------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["--split", "0"], "--split 0: the port blocks of mcgroup-split and mixed groups must be at least 1"),
    (["--static-share", "2"], "--static-share 2.0: the share of receivers the hybrid's stored tree serves must be"),
    (["--static-share", "nan"], "--static-share nan: the share of receivers"),
])
def test_eval_delivery_refuses_out_of_range_options(tmp_path, capsys, argv, expected):
    code, err = p4sub(capsys, "eval", "delivery", "--topology", "fat-tree:4", "--runs", "1", "--quiet",
                      "--report", tmp_path / "r", *argv)
    assert code == 2 and expected in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, option", [
    (["itch", "--zipf", "nan"], "--zipf"),
    (["itch", "--zipf", "-1"], "--zipf"),
    (["itch", "--zipf", "inf"], "--zipf"),
    (["rules", "--workload", "itch", "--filters", "5", "--symbol-zipf", "nan"], "--symbol-zipf"),
    (["rules", "--workload", "siena", "--filters", "5", "--zipf", "nan", "--value-distribution", "zipf"], "--zipf"),
    (["siena", "--packets", "5", "--zipf", "-1", "--value-distribution", "zipf"], "--zipf"),
])
def test_gen_refuses_a_zipf_exponent_that_is_not_a_finite_number_at_least_0(tmp_path, capsys, argv, option):
    with pytest.raises(SystemExit) as exited:
        main(["gen", *argv, "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"argument {option}: a Zipf exponent must be a finite number >= 0" in err
    assert list(tmp_path.iterdir()) == []


def test_feed_config_refuses_a_nan_exponent():
    from apps.itch.feed import FeedConfig
    from compiler.base import P4subError

    with pytest.raises(P4subError, match="--zipf nan: the exponent must be a finite number >= 0"):
        FeedConfig(zipf=float("nan")).validate()


def test_compile_update_refuses_a_base_whose_pipeline_changed_since_p4sub_wrote_it(tmp_path, capsys):
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", base)[0] == 0
    pipeline = base / "pipeline.json"
    pipeline.write_text(pipeline.read_text().replace("\n", "\n "))  # the same JSON, other bytes: still refused
    before = snapshot(base)
    code, err = p4sub(capsys, "compile", "--update", base, ITCH_RULES, "--target", "bmv2", "-o", tmp_path / "u")
    assert code == 2 and f"{pipeline}: changed since p4sub wrote it" in err
    assert snapshot(base) == before and sorted(p.name for p in tmp_path.iterdir()) == ["base"]


def test_compile_update_still_builds_on_an_unchanged_base(tmp_path, capsys):
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", "bmv2", "-o", base)[0] == 0
    code, err = p4sub(capsys, "compile", "--update", base, ITCH_RULES, "--target", "bmv2", "-o", tmp_path / "u")
    assert code == 0 and (tmp_path / "u" / "delta.json").is_file()


@pytest.mark.parametrize("target", ["bmv2", "none"])
def test_an_exact_compile_over_budget_is_an_error(tmp_path, capsys, target):
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "--target", target, "--budget", "stages=1", "--exact",
                      "-o", tmp_path / "out")
    assert code == 2 and "--budget stages=1: the exact compile does not fit: " in err and "> 1 stages" in err
    assert not (tmp_path / "out").exists()


def test_an_inexact_compile_over_budget_still_warns(tmp_path, capsys):
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "--budget", "stages=1", "-o", tmp_path / "out")
    assert code == 0 and "warning: the pipeline does not fit the budget" in err


@pytest.mark.parametrize("delivery", ["vt:", "header-stack:"])
def test_an_empty_strategy_after_the_colon_is_refused(tmp_path, capsys, delivery):
    code, err = p4sub(capsys, "route", FAT_TREE, REPO / "examples/fat-tree-4.rules", "--spec", ITCH,
                      "--delivery", delivery, "-o", tmp_path / "net", "--quiet")
    assert code == 2 and f"--delivery '{delivery}': nothing after ':'" in err and not (tmp_path / "net").exists()


@pytest.mark.parametrize("linktype, shown", [(113, "113 (Linux cooked capture (SLL))"), (147, "147,")])
def test_a_capture_without_ethernet_packets_is_refused(tmp_path, linktype, shown):
    from apps.pcap import PcapWriter, TraceError, require_packets

    trace = tmp_path / "t.pcap"
    with PcapWriter(trace, linktype=linktype) as w:
        for i in range(3):
            w.write(b"\x00" * 60, 10**9 + i)
    with pytest.raises(TraceError, match=re.escape(f"t.pcap: no Ethernet packet (link type 1): its link type is {shown}")):
        require_packets(trace)
    ethernet = tmp_path / "e.pcap"
    with PcapWriter(ethernet) as w:
        w.write(b"\x00" * 60, 10**9)
    require_packets(ethernet)


def test_replay_of_a_linux_cooked_capture_is_an_error_before_spark(tmp_path, capsys):
    from apps.pcap import PcapWriter

    out, trace = tmp_path / "out", tmp_path / "sll.pcap"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    with PcapWriter(trace, linktype=113) as w:
        w.write(b"\x00" * 60, 10**9)
    code, err = p4sub(capsys, "replay", out, "--trace", trace, "--report", tmp_path / "r")
    assert code == 2 and f"{trace}: no Ethernet packet" in err and not (tmp_path / "r").exists()


def test_compile_trace_of_a_linux_cooked_capture_is_refused_as_replay_refuses_it(tmp_path, capsys):
    # compile --trace read an SLL capture as Ethernet: the sample was garbage and nothing said so (a probe's case)
    from apps.pcap import PcapWriter

    trace = tmp_path / "sll.pcap"
    with PcapWriter(trace, linktype=113) as w:
        w.write(b"\x00" * 60, 10**9)
    code, err = p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", tmp_path / "out", "--trace", trace)
    assert code == 2 and f"{trace}: no Ethernet packet" in err and not (tmp_path / "out").exists()


def test_a_capture_of_only_damaged_bytes_holds_no_packets(tmp_path):
    # one record header claiming 4 GiB, then the file ends: the reader's resynchronisation found no record
    import struct

    from apps.pcap import TraceError, require_packets

    trace = tmp_path / "huge.pcap"
    trace.write_bytes(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)
                      + struct.pack("<IIII", 1, 0, 0xFFFFFFF0, 0xFFFFFFF0))
    with pytest.raises(TraceError, match="holds no packets"):
        require_packets(trace)


@pytest.mark.parametrize("counter, target, expected", [
    ("@query_counter(rate, 100000000000000000000000000000, 1024", "bmv2",
     ":33:22: @query_counter(name, window_us, slots): window_us 100,000,000,000,000,000,000,000,000,000 is longer "
     "than the 281,474,976,710,655 us"),
    ("@query_counter(rate, 100000, 1099511627776", "bmv2",
     ":33:30: @query_counter(name, window_us, slots): slots 1,099,511,627,776 is more than the 4,294,967,295 cells"),
    ("@query_counter(rate, 100000, 4294967296", "none", "slots 4,294,967,296 is more than the 4,294,967,295 cells"),
    ("@query_counter(rate, 3600000000, 1024", "tofino",
     "tofino: counter rate has a window of 3,600,000,000 us; the 32-bit tick clock"),
])
def test_a_counter_no_switch_could_keep_is_refused(tmp_path, capsys, counter, target, expected):
    spec = tmp_path / "rate.p4"
    spec.write_text(Path(STATEFUL_SPEC).read_text().replace("@query_counter(rate, 100000, 1024", counter))
    code, err = p4sub(capsys, "compile", spec, REPO / "examples/stateful/itch-rate.rules", "--target", target,
                      "-o", tmp_path / "out")
    assert code == 2 and expected in err and not (tmp_path / "out").exists()


def test_the_longest_windows_each_target_keeps_still_compile(tmp_path, capsys):
    spec, rules = tmp_path / "rate.p4", tmp_path / "rate.rules"
    rules.write_text('add_order.stock == "GOOGL" and rate > 3: fwd(2);\n')  # Tofino has no avg()
    text = Path(STATEFUL_SPEC).read_text()
    for window, target in [((1 << 48) - 1, "bmv2"), (2_199_023_254, "tofino")]:
        spec.write_text(text.replace("@query_counter(rate, 100000, 1024", f"@query_counter(rate, {window}, 1024"))
        code, err = p4sub(capsys, "compile", spec, rules, "--target", target, "-o", tmp_path / target)
        assert code == 0, err


# -- item 6: unclear messages ------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["compile", ITCH, ITCH_RULES, "-o", "{f}/x"], "{f}/x: {f} is a file, so no output directory can be made under it"),
    (["compile", ITCH, ITCH_RULES, "-o", "{f}/x/y"], "{f}/x/y: {f} is a file, so no output directory can be made"),
    (["gen", "itch", "--messages", "500", "-q", "-o", "{f}/x"], "{f}/x: {f} is a file, so nothing can be written under"),
    (["gen", "rules", "--workload", "itch", "--filters", "5", "-q", "-o", "{f}/x"], "{f} is a file, so nothing can"),
])
def test_an_output_under_a_file_names_the_file_in_the_way(tmp_path, capsys, argv, expected):
    blocker = tmp_path / "passwd"
    blocker.write_text("root:x:0:0\n")
    code, err = p4sub(capsys, *[a.replace("{f}", str(blocker)) for a in argv])
    assert code == 2 and expected.replace("{f}", str(blocker)) in err and "File exists" not in err
    assert blocker.read_text() == "root:x:0:0\n" and sorted(p.name for p in tmp_path.iterdir()) == ["passwd"]


def test_an_invisible_character_is_named(tmp_path, capsys):
    rules = tmp_path / "r.sub"
    rules.write_text('add_order.stock == "GOOGL" and add_order.pr\u200bice > 5: fwd(1);\n')
    code, err = p4sub(capsys, "check", ITCH, rules)
    assert code == 2 and f"{rules}:1:44: unexpected character '\\u200b' (U+200B ZERO WIDTH SPACE, invisible)" in err


def test_a_huge_identifier_is_not_echoed_whole(tmp_path, capsys):
    rules = tmp_path / "r.sub"
    rules.write_text("add_order." + "x" * 1_000_000 + " > 5: fwd(1);\n")
    code, err = p4sub(capsys, "check", ITCH, rules)
    assert code == 2 and "unknown field 'add_order.xxx" in err and "...[1,000,012 characters]..." in err
    assert len(err) < 2_000


def test_a_pcap_where_text_is_read_is_called_a_pcap(tmp_path, capsys):
    trace = tmp_path / "feed.pcap"
    assert p4sub(capsys, "gen", "itch", "--messages", "200", "-q", "-o", trace)[0] == 0
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", tmp_path / "out")[0] == 0
    code, err = p4sub(capsys, "simulate", tmp_path / "out", "--packets", trace)
    assert code == 2 and "packets file is not UTF-8 text" in err and "it is a pcap capture, not text" in err
    code, err = p4sub(capsys, "check", ITCH, trace)
    assert code == 2 and "rule file is not UTF-8 text" in err and "it is a pcap capture" in err


def test_replay_of_a_capture_with_no_message_is_an_error(tmp_path, capsys):
    # Ethernet records of nothing ITCH (as a reader's resynchronisation recovers from a damaged capture):
    # "replayed 0 messages", exit 0 before (a probe's case)
    from apps.pcap import PcapWriter

    out, trace = tmp_path / "out", tmp_path / "zeros.pcap"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    with PcapWriter(trace) as w:
        for i in range(4):
            w.write(bytes(60), 10**9 + i)
    code, err = p4sub(capsys, "replay", out, "--trace", trace, "--quiet", "--report", tmp_path / "r")
    assert code == 2 and "no message the spec reads in it" in err and not (tmp_path / "r").exists()


def test_netsim_calls_a_damaged_capture_a_capture(tmp_path, capsys):
    # a .pcap whose magic is no capture's was read as JSON lines: "trace is not UTF-8 text" (a probe's case)
    net, trace = tmp_path / "net", tmp_path / "bad.pcap"
    assert p4sub(capsys, "route", "examples/fat-tree-4.topo", "examples/fat-tree-4.rules", "--spec", ITCH, "-o", net,
                 "--quiet")[0] == 0
    trace.write_bytes(b"XXXX" + bytes(60))
    code, err = p4sub(capsys, "netsim", net, "--trace", trace, "--publisher", "h1")
    assert code == 2 and "not a pcap or pcapng file (magic 0x58585858)" in err


def test_an_update_over_a_base_whose_pipeline_is_no_longer_a_file_says_what_it_is(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    (out / "pipeline.json").unlink()
    (out / "pipeline.json").mkdir()
    code, err = p4sub(capsys, "compile", "--update", out, ITCH_RULES, "-o", tmp_path / "new")
    assert code == 2 and "pipeline.json: listed in" in err and "but is a directory now" in err


def test_verify_without_recorded_rules_speaks_of_verify(tmp_path, capsys):
    out = tmp_path / "out"
    assert p4sub(capsys, "compile", ITCH, ITCH_RULES, "-o", out)[0] == 0
    (out / "sources.json").unlink()
    code, err = p4sub(capsys, "verify", out)
    assert code == 2 and "verify needs the rules the pipeline was compiled from: pass --rules RULES" in err
    assert "replay" not in err
