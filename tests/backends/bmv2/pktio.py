"""Send packets and capture what comes back (run inside the test's network namespace).

Usage: ``python pktio.py REQUEST.json RESULT.json``. The request holds ``send`` (a list of
``[interface, hex]``), ``listen`` (interfaces to capture on), ``udp_ports`` (destination ports of
the packets to keep), ``settle`` (seconds of quiet after the last packet) and optionally ``at``
(when to send each packet, in seconds from the first: the times actually reached go to
``RESULT.json.sent``). The result is a list
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
    at = req.get("at")  # send times in seconds from the first send (timed traffic), else a fixed gap
    start = time.monotonic()
    sent = []
    for i, (iface, data) in enumerate(req["send"]):
        if at is not None:
            time.sleep(max(0.0, start + at[i] - time.monotonic()))
        sent.append(time.monotonic() - start)
        sendp(Ether(bytes.fromhex(data)), iface=iface, verbose=False)
        if at is None:
            time.sleep(req.get("gap", 0.02))
    if at is not None:
        open(sys.argv[2] + ".sent", "w").write(json.dumps(sent))
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
