"""A whole network of BMv2 ``simple_switch`` processes in one throwaway network namespace.

Every link of a :class:`compiler.network.topology.Topology` is a veth pair: switch ``s`` (id ``i``) port
``p`` is interface ``s<i>p<p>``; host ``h`` (id ``j``) is interface ``h<j>``, where the test sends
and listens. Each switch runs its own ``program.json`` with its own Thrift port and notification
socket, and gets its ``commands.txt`` through ``simple_switch_CLI`` (run with the system python3, as
:meth:`tests.backends.bmv2.switch.Bmv2Switch.cli` explains). Packets go in and out through the
packet exchanger of the single-switch tests (``tests/backends/bmv2/pktio.py``).
:meth:`Bmv2Fabric.close` stops every switch and removes the namespace with all its interfaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from compiler.network.topology import Topology
from tests.backends.bmv2.switch import PKTIO, run, tool

THRIFT_BASE = 9090


def switch_iface(topology: Topology, switch: str, port: int) -> str:
    return f"s{topology.node_id(switch)}p{port}"


def host_iface(topology: Topology, host: str) -> str:
    return f"h{topology.node_id(host)}"


def system_path() -> str:
    """PATH without this interpreter's virtualenv, so ``#!/usr/bin/env python3`` finds the system python."""
    venv_bin = str(Path(sys.prefix) / "bin")
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)


class Bmv2Fabric:
    def __init__(self, topology: Topology, programs: dict[str, Path], workdir: Path) -> None:
        """``programs``: switch -> its compiled ``program.json``."""
        self.topology = topology
        self.workdir = workdir
        self.ns = f"p4sub-net{os.getpid()}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = []
        self.thrift = {s: THRIFT_BASE + topology.node_id(s) for s in topology.switches()}
        run(["ip", "netns", "add", self.ns])
        try:
            self.sh(["ip", "link", "set", "lo", "up"])
            self.sh(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
            self.sh(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
            for u, pu, v, pv in topology.links():
                a, b = (self.iface(u, pu), self.iface(v, pv))
                self.sh(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
                for side in (a, b):
                    self.sh(["ip", "link", "set", side, "up"])
            for s in topology.switches():
                self._start(s, programs[s])
            for s in topology.switches():
                self._wait(s)
        except BaseException:
            self.close()
            raise

    def iface(self, node: str, port: int) -> str:
        t = self.topology
        return switch_iface(t, node, port) if t.is_switch(node) else host_iface(t, node)

    def sh(self, cmd: list[str], **kw) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", self.ns, *cmd], **kw)

    def _start(self, switch: str, program: Path) -> None:
        i = self.topology.node_id(switch)
        args = [tool("simple_switch"), "--device-id", str(i), "--thrift-port", str(self.thrift[switch]),
                "--notifications-addr", f"ipc://{self.workdir}/notifications-{i}.ipc"]
        for p in self.topology.ports(switch):
            args += ["-i", f"{p}@{switch_iface(self.topology, switch, p)}"]
        args.append(str(program))
        log = open(self.workdir / f"{switch}.out", "w")
        self.logs.append(log)
        self.procs[switch] = subprocess.Popen(["ip", "netns", "exec", self.ns, *args], stdout=log,
                                              stderr=subprocess.STDOUT)

    def _wait(self, switch: str, timeout: float = 30) -> None:
        probe = (f"import socket,sys; s=socket.socket(); s.settimeout(0.5); "
                 f"sys.exit(s.connect_ex(('127.0.0.1', {self.thrift[switch]})))")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.procs[switch].poll() is not None:
                raise RuntimeError(f"switch {switch} exited: {(self.workdir / f'{switch}.out').read_text()}")
            if subprocess.run(["ip", "netns", "exec", self.ns, sys.executable, "-c", probe]).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"switch {switch} did not open Thrift port {self.thrift[switch]}")

    def load(self, commands: dict[str, str]) -> None:
        """Feed every switch its ``simple_switch_CLI`` commands (all switches at once); raise on any error."""
        env_path = system_path()
        running = {}
        for s, text in commands.items():
            proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "env", f"PATH={env_path}", tool("simple_switch_CLI"),
                                     "--thrift-port", str(self.thrift[s])], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            proc.stdin.write(text)
            proc.stdin.close()
            running[s] = proc
        for s, proc in running.items():
            out = proc.stdout.read()
            proc.wait(300)
            bad = [line for line in out.splitlines() if "Error" in line or "Invalid" in line or "error" in line]
            if proc.returncode != 0 or bad:
                raise RuntimeError(f"simple_switch_CLI for {s} (exit {proc.returncode}): {bad[:5] or out[-2000:]}")

    def exchange(self, send: list[tuple[str, bytes]], udp_ports: list[int], timeout: float = 30,
                 gap: float = 0.02, settle: float = 1.5) -> list[tuple[str, bytes]]:
        """Send (host, frame) pairs; return every UDP frame to ``udp_ports`` seen on any host interface,
        as (host, frame). Frames a host sent itself are among them (the capture sees both directions)."""
        by_iface = {host_iface(self.topology, h): h for h in self.topology.hosts()}
        req = self.workdir / "pktio-req.json"
        res = self.workdir / "pktio-res.json"
        req.write_text(json.dumps({"send": [[host_iface(self.topology, h), data.hex()] for h, data in send],
                                   "listen": sorted(by_iface), "udp_ports": udp_ports, "timeout": timeout,
                                   "gap": gap, "settle": settle}))
        self.sh([sys.executable, str(PKTIO), str(req), str(res)], timeout=timeout + 120)
        return [(by_iface[iface], bytes.fromhex(data)) for iface, data in json.loads(res.read_text())]

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in self.logs:
            log.close()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
