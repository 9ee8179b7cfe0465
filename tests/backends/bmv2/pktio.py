"""Send packets and capture what comes back (run inside the test's network namespace).

Usage: ``python pktio.py REQUEST.json RESULT.json``. The request holds ``send`` (a list of
``[interface, hex]``), ``listen`` (interfaces to capture on), ``udp_ports`` (destination ports of
the packets to keep) and ``settle`` (seconds of quiet after the last packet). The result is a list
of ``[interface, hex]`` received.
"""

from __future__ import annotations

import json
import sys
import time

from scapy.all import UDP, AsyncSniffer, Ether, conf, sendp  # noqa: E402


def main() -> int:
    req = json.loads(open(sys.argv[1]).read())
    ports = set(req["udp_ports"])
    conf.verb = 0
    got: list[list[str]] = []
    sniffers = []
    for iface in req["listen"]:
        def keep(pkt, iface=iface):
            if UDP in pkt and pkt[UDP].dport in ports:
                got.append([iface, bytes(pkt).hex()])
        s = AsyncSniffer(iface=iface, prn=keep, store=False)
        s.start()
        sniffers.append(s)
    time.sleep(1.0)
    for iface, data in req["send"]:
        sendp(Ether(bytes.fromhex(data)), iface=iface, verbose=False)
        time.sleep(req.get("gap", 0.02))
    last = -1
    deadline = time.time() + req.get("timeout", 30)
    while time.time() < deadline:
        time.sleep(req.get("settle", 1.5))
        if len(got) == last:
            break
        last = len(got)
    for s in sniffers:
        s.stop()
    open(sys.argv[2], "w").write(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
