"""A BMv2 switch in a throwaway network namespace, for the integration tests.

Port ``i`` of the switch is veth ``s<i>``; its peer ``h<i>`` is where the test sends and listens.
Everything runs inside the namespace (the switch's gRPC server listens on the namespace's own
loopback), and :meth:`Bmv2Switch.close` removes the namespace with all its interfaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PKTIO = Path(__file__).with_name("pktio.py")


def tool(name: str) -> str | None:
    """A toolchain binary: on PATH, or under /usr/local/bin."""
    return shutil.which(name) or (f"/usr/local/bin/{name}" if Path(f"/usr/local/bin/{name}").exists() else None)


def require_cli_switch() -> None:
    """Skip, with the reason, a test that loads commands.txt into simple_switch in a network namespace."""
    import pytest

    if tool("p4c-bm2-ss") is None or tool("simple_switch") is None or tool("simple_switch_CLI") is None:
        pytest.skip("p4c-bm2-ss, simple_switch or simple_switch_CLI is not installed")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Bmv2Switch:
    def __init__(self, ports: list[int], workdir: Path, grpc_port: int = 9559, program_json: Path | None = None,
                 thrift_port: int = 9090) -> None:
        """With ``program_json``: plain ``simple_switch`` running that program (configured through the
        Thrift CLI); without: ``simple_switch_grpc`` with no program (configured through P4Runtime)."""
        self.ns = f"p4sub-t{os.getpid()}"
        self.ports = ports
        self.grpc = f"127.0.0.1:{grpc_port}"
        self.thrift_port = thrift_port
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        run(["ip", "netns", "add", self.ns])
        try:
            self.sh(["ip", "link", "set", "lo", "up"])
            self.sh(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
            self.sh(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
            for p in ports:
                self.sh(["ip", "link", "add", f"s{p}", "type", "veth", "peer", "name", f"h{p}"])
                for side in (f"s{p}", f"h{p}"):
                    self.sh(["ip", "link", "set", side, "up"])
            self.cli_only = program_json is not None
            binary = "simple_switch" if self.cli_only else "simple_switch_grpc"
            args = [tool(binary), "--device-id", "0", "--log-file", str(workdir / "switch"), "--log-flush",
                    "--thrift-port", str(thrift_port),
                    # The notification socket is a file, outside the namespace: one per test process, so that
                    # switches of parallel workers do not collide on /tmp/bmv2-0-*.ipc (short: sun_path limit).
                    "--notifications-addr", f"ipc:///tmp/{self.ns}-notifications.ipc"]
            for p in ports:
                args += ["-i", f"{p}@s{p}"]
            if program_json:
                args.append(str(program_json))
            else:
                args += ["--no-p4", "--", "--grpc-server-addr", self.grpc]
            self.log = open(workdir / "switch.out", "w")
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *args], stdout=self.log,
                                         stderr=subprocess.STDOUT)
            self._wait_for_grpc()
        except BaseException:
            self.close()
            raise

    def sh(self, cmd: list[str], **kw) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", self.ns, *cmd], **kw)

    def _wait_for_grpc(self, timeout: float = 20) -> None:
        host, port = ("127.0.0.1", str(self.thrift_port)) if self.cli_only else self.grpc.split(":")
        probe = (f"import socket,sys; s=socket.socket(); s.settimeout(0.5); "
                 f"sys.exit(s.connect_ex(('{host}', {port})))")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the switch exited: {(self.workdir / 'switch.out').read_text()}")
            if subprocess.run(["ip", "netns", "exec", self.ns, sys.executable, "-c", probe]).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(f"the switch did not open port {port}")

    def p4sub(self, *args: str) -> subprocess.CompletedProcess:
        """``p4sub ARGS`` inside the namespace (so that it reaches the switch's gRPC server)."""
        return subprocess.run(["ip", "netns", "exec", self.ns, sys.executable, "-m", "p4sub", *args],
                              capture_output=True, text=True, cwd=ROOT)

    def cli(self, commands: str) -> str:
        """Feed ``simple_switch_CLI`` commands; returns its output."""
        # The CLI is a `#!/usr/bin/env python3` script that needs BMv2's thrift modules: run it with
        # the system's python3, not this test's virtualenv (which is first on PATH).
        venv_bin = str(Path(sys.prefix) / "bin")
        path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
        return self.sh(["env", f"PATH={path}", tool("simple_switch_CLI"), "--thrift-port", str(self.thrift_port)],
                       input=commands, timeout=300).stdout

    def exchange(self, send: list[tuple[int, bytes]], listen: list[int], udp_ports: list[int],
                 at: list[float] | None = None, gap: float = 0.02, settle: float = 1.5) -> list[tuple[int, bytes]]:
        """Send (port, packet) pairs into the switch; return what came out as (port, packet).
        ``at``: when to send each, in seconds from the first (then :attr:`sent_at` says when they went);
        else ``gap`` seconds between packets. The capture ends after ``settle`` seconds without a new packet."""
        req = self.workdir / "pktio-req.json"
        res = self.workdir / "pktio-res.json"
        request = {"send": [[f"h{p}", data.hex()] for p, data in send],
                   "listen": [f"h{p}" for p in listen], "udp_ports": udp_ports, "gap": gap, "settle": settle}
        if at is not None:
            request["at"] = at
        req.write_text(json.dumps(request))
        self.sh([sys.executable, str(PKTIO), str(req), str(res)], timeout=300)
        if at is not None:
            self.sent_at = json.loads(Path(str(res) + ".sent").read_text())
        return [(int(iface[1:]), bytes.fromhex(data)) for iface, data in json.loads(res.read_text())]

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        Path(f"/tmp/{self.ns}-notifications.ipc").unlink(missing_ok=True)
