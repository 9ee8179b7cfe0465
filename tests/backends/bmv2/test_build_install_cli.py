"""`p4sub build` / `p4sub install` without a switch: user errors exit 2 with a clear message, and
the installer's JSON <-> protobuf conversion round-trips (when p4runtime-shell is available)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import backends.bmv2 as bmv2
from compiler.base.manifest import find_listed
from compiler.base.outputs import staged_dir
from p4sub import main
from p4sub.install import CLIENT, TargetError, find_p4rt_python, print_report
from tests.backends.bmv2 import helpers as h


@pytest.fixture()
def out(tmp_path):
    spec = h.spec_from_text(h.SCALAR_SPEC, str(tmp_path))
    pipeline = h.compile_text(spec, h.SCALAR_RULES, per_field={"ipv4.diffserv": "ternary"}).pipeline
    d = tmp_path / "out"
    with staged_dir(d, "compile") as stage:  # as p4sub compile writes it: install needs the manifest
        bmv2.emit(pipeline, stage)
    return d


def test_build_without_p4c_exits_2_and_says_how_to_get_it(out, capsys):
    assert main(["build", str(out), "--p4c", str(out / "no-such-p4c")]) == 2
    err = capsys.readouterr().err
    assert "p4c-bm2-ss is not on PATH" in err and "github.com/p4lang/p4c" in err


def test_build_without_a_program_exits_2(tmp_path, capsys):
    assert main(["build", str(tmp_path)]) == 2
    assert "program.p4: no such file" in capsys.readouterr().err


def test_build_reports_compiler_errors(out, tmp_path, capsys):
    fake = tmp_path / "fake-p4c"
    fake.write_text("#!/bin/sh\necho 'program.p4(3): error: something' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert main(["build", str(out), "--p4c", str(fake)]) == 2
    assert "something" in capsys.readouterr().err


def test_install_needs_the_build_outputs(out, capsys):
    assert main(["install", str(out)]) == 2
    assert "program.json: no such file" in capsys.readouterr().err


def test_install_explains_a_missing_p4runtime_shell(out, tmp_path, capsys):
    (out / "program.json").write_text("{}")
    (out / "p4info.txt").write_text("")
    find_listed(out).record(["program.json", "p4info.txt"])  # as p4sub build does
    python = sys.executable if not _has_shell(sys.executable) else "/bin/false"
    assert main(["install", str(out), "--p4rt-python", python]) == 2
    err = capsys.readouterr().err
    assert "p4runtime-shell" in err and "pip install p4runtime-shell==0.0.6" in err


def _has_shell(python: str) -> bool:
    return subprocess.run([python, "-c", "import p4runtime_sh"], capture_output=True).returncode == 0


def test_report_of_a_refused_install_is_an_error_naming_the_entry():
    report = {"grpc": "127.0.0.1:9559", "device_id": 0, "pipeline": "unchanged", "plan": {"INSERT": 3},
              "refused": "INSERT MyIngress.t [...]", "summary": "the switch refused INSERT MyIngress.t [...]: "
              "OUT_OF_RANGE: bad; the 2 updates already written were rolled back"}
    with pytest.raises(TargetError, match="refused INSERT MyIngress.t.*rolled back"):
        print_report(report)
    with pytest.raises(TargetError, match="read-back differs"):
        print_report({"plan": {}, "summary": "wrote 1 of 1 updates", "differences": ["insert needed: x"]})
    with pytest.raises(TargetError, match="no P4Runtime session"):
        print_report({"error": "no P4Runtime session with device 0"})


def _p4rt_python():
    try:
        return find_p4rt_python()
    except TargetError:
        return None


P4INFO = textwrap.dedent("""
    tables {
      preamble { id: 1 name: "MyIngress.field_ipv4_ttl" }
      match_fields { id: 1 name: "meta.p4sub_state" bitwidth: 4 match_type: EXACT }
      match_fields { id: 2 name: "ipv4.ttl" bitwidth: 8 match_type: RANGE }
      action_refs { id: 10 }
      size: 64
    }
    tables {
      preamble { id: 2 name: "MyIngress.field_ipv4_dst_addr" }
      match_fields { id: 1 name: "meta.p4sub_state" bitwidth: 4 match_type: EXACT }
      match_fields { id: 2 name: "ipv4.dst_addr" bitwidth: 32 match_type: LPM }
      action_refs { id: 10 }
      size: 64
    }
    actions { preamble { id: 10 name: "MyIngress.set_state" } params { id: 1 name: "state_" bitwidth: 4 } }
""")


@pytest.mark.skipif(_p4rt_python() is None, reason="no Python with p4runtime-shell (see p4sub install --help)")
def test_installer_json_to_protobuf_round_trip(tmp_path):
    entities = [
        {"table_entry": {"table_name": "MyIngress.field_ipv4_ttl",
                         "match": [{"field_name": "meta.p4sub_state", "exact": {"value": "0x03"}},
                                   {"field_name": "ipv4.ttl", "range": {"low": "0x0b", "high": "0xff"}}],
                         "action": {"action": {"action_name": "MyIngress.set_state",
                                               "params": [{"param_name": "state_", "value": "0x07"}]}},
                         "priority": 1}},
        {"table_entry": {"table_name": "MyIngress.field_ipv4_dst_addr",
                         "match": [{"field_name": "meta.p4sub_state", "exact": {"value": "0x00"}},
                                   {"field_name": "ipv4.dst_addr", "lpm": {"value": "0x0a000000", "prefix_len": 8}}],
                         "action": {"action": {"action_name": "MyIngress.set_state",
                                               "params": [{"param_name": "state_", "value": "0x01"}]}}}},
        {"packet_replication_engine_entry": {"multicast_group_entry": {
            "multicast_group_id": 1, "replicas": [{"egress_port": 1, "instance": 1}, {"egress_port": 3, "instance": 1}]}}},
    ]
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(CLIENT.parent)!r})
        import p4rt_client as c
        from google.protobuf import text_format
        from p4.config.v1 import p4info_pb2
        names = c.Names(text_format.Parse({P4INFO!r}, p4info_pb2.P4Info()))
        ents = json.loads(sys.stdin.read())
        protos = [c.to_proto(e, names) for e in ents]
        assert protos[0].table_entry.match[1].range.low == b"\\x0b"
        assert protos[1].table_entry.match[1].lpm.value == b"\\x0a\\x00\\x00\\x00"
        assert protos[0].table_entry.priority == 1 and protos[1].table_entry.priority == 0
        print(json.dumps([c.from_proto(p, names) for p in protos]))
    """)
    proc = subprocess.run([_p4rt_python(), "-c", script], input=json.dumps(entities), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == entities


@pytest.mark.skipif(_p4rt_python() is None, reason="no Python with p4runtime-shell (see p4sub install --help)")
def test_installer_reads_per_update_outcomes_from_a_partly_refused_batch():
    """A CONTINUE_ON_ERROR batch reports one p4.Error per update, OK for the applied ones."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(CLIENT.parent)!r})
        import grpc
        import p4rt_client as c
        from google.rpc import code_pb2, status_pb2
        from p4.v1 import p4runtime_pb2

        status = status_pb2.Status(code=code_pb2.UNKNOWN)
        for code, msg in ((code_pb2.OK, ""), (code_pb2.OUT_OF_RANGE, "bad key"), (code_pb2.OK, "")):
            status.details.add().Pack(p4runtime_pb2.Error(canonical_code=code, message=msg))

        class Refused(grpc.RpcError):
            def __init__(self, meta): self.meta = meta
            def code(self): return grpc.StatusCode.UNKNOWN
            def details(self): return "batch failed"
            def trailing_metadata(self): return self.meta

        print(c.batch_errors(Refused((("grpc-status-details-bin", status.SerializeToString()),)), 3))
        print(c.batch_errors(Refused(()), 2))
    """)
    proc = subprocess.run([_p4rt_python(), "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[None, 'OUT_OF_RANGE: bad key', None]"
    assert lines[1] == "['UNKNOWN: batch failed', 'UNKNOWN: batch failed']"
