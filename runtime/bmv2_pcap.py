"""Run a BMv2 program on packets from files: ``simple_switch --use-files``, no network namespace.

``simple_switch --use-files WAIT`` reads interface ``X``'s packets from ``X_in.pcap`` and writes what
leaves on it to ``X_out.pcap``, after waiting WAIT seconds: the window in which the entries are loaded
through ``simple_switch_CLI``. This is the quickest way to ask a real BMv2 what it does with a trace
(the network-namespace harness in tests/backends/bmv2 is the way for P4Runtime and timing).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from apps.pcap import read_pcap, write_pcap
from compiler.base import P4subError

WAIT_S = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(program_json: Path, commands: str, ports: list[int], sends: dict[int, list[bytes]],
        timeout: float = 60.0) -> dict[int, list[bytes]]:
    """What leaves each of ``ports`` when ``sends`` (port -> frames) enter the program with
    ``commands`` (simple_switch_CLI text) loaded."""
    switch, cli = shutil.which("simple_switch"), shutil.which("simple_switch_CLI")
    if switch is None or cli is None:
        raise P4subError("simple_switch and simple_switch_CLI must be on PATH (BMv2, see docs/bmv2.md)")
    with tempfile.TemporaryDirectory(prefix="p4sub-bmv2-") as tmp:
        work = Path(tmp)
        for p in ports:
            write_pcap(work / f"p{p}_in.pcap", [(i * 1000, f) for i, f in enumerate(sends.get(p, []))],
                       nanosecond=False)
        thrift = _free_port()
        args = [switch, "--use-files", str(WAIT_S), "--thrift-port", str(thrift)]
        for p in ports:
            args += ["-i", f"{p}@p{p}"]
        proc = subprocess.Popen(args + [str(program_json)], cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 10
            while True:  # the CLI needs the Thrift server up
                done = subprocess.run([cli, "--thrift-port", str(thrift)], input=commands, capture_output=True,
                                      text=True, timeout=60)
                if "Could not connect" not in done.stdout + done.stderr or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if "Error" in done.stdout or "Invalid" in done.stdout:
                raise P4subError("simple_switch_CLI refused an entry: " + next(
                    line for line in done.stdout.splitlines() if "Error" in line or "Invalid" in line))
            expected_in = sum(len(v) for v in sends.values())
            last, stable_since = -1, time.monotonic()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:  # done when the outputs stop growing after the wait
                time.sleep(0.5)
                size = sum((work / f"p{p}_out.pcap").stat().st_size for p in ports if (work / f"p{p}_out.pcap").exists())
                if size != last:
                    last, stable_since = size, time.monotonic()
                elif time.monotonic() - stable_since > 2 + expected_in / 2000:
                    break
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        out = {}
        for p in ports:
            path = work / f"p{p}_out.pcap"
            out[p] = [r.data for r in read_pcap(path)[0]] if path.exists() and path.stat().st_size else []
        return out
