"""Packets and traces for examples/stateful/itch-rate.p4: one ITCH-like Add Order per UDP packet.

``python -m apps.itch.orders OUT.pcap [--seed N] [--seconds S]`` writes a trace where a few
stocks trade steadily and some burst (many orders within one 100 ms window), so that the rate rules
of itch-rate.rules switch on and off across window boundaries. The tests build packets with
:func:`order_frame` and replay such traces (docs/replay.md, "Stateful rules").
"""

from __future__ import annotations

import argparse
import random
import struct
import sys

ITCH_PORT = 26400
STOCKS = ("GOOGL", "MSFT", "AAPL", "AMZN", "NVDA", "META")


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def order_frame(stock: str, shares: int, price: int, side: bytes = b"B", order_ref: int = 0,
                dst_port: int = ITCH_PORT) -> bytes:
    """Ethernet, IPv4, UDP (to ``dst_port``) and one 36-byte Add Order ('A'); ``price`` has 4 implied decimals."""
    body = struct.pack("!cHH6sQcI8sI", b"A", 1, 0, (0).to_bytes(6, "big"), order_ref, side, shares,
                       stock.encode("ascii").ljust(8), price)
    udp = struct.pack("!HHHH", 40000, dst_port, 8 + len(body), 0) + body
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                               bytes([10, 0, 0, 1]), bytes([10, 0, 1, 1])))
    ip[10:12] = _checksum(bytes(ip)).to_bytes(2, "big")
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    return eth + bytes(ip) + udp


def burst_trace(seed: int = 0, seconds: float = 2.0, rate_hz: float = 200.0) -> list[tuple[int, bytes]]:
    """``(timestamp_ns, frame)`` in time order: steady orders for every stock at ``rate_hz`` in all,
    and now and then a burst of 3 to 12 orders of one stock within a few milliseconds."""
    rng = random.Random(seed)
    out: list[tuple[int, bytes]] = []
    t = 0.0
    while t < seconds:
        t += rng.expovariate(rate_hz)
        stock = rng.choice(STOCKS)
        if rng.random() < 0.05:
            for k in range(rng.randint(3, 12)):
                out.append((int((t + k * 0.002) * 1e9), order_frame(stock, rng.randint(1, 900), rng.randint(1, 10**6))))
            t += 0.03
        else:
            out.append((int(t * 1e9), order_frame(stock, rng.randint(1, 900), rng.randint(1, 10**6))))
    out.sort(key=lambda item: item[0])
    return out


def main(argv: list[str] | None = None) -> int:
    from apps.pcap import write_pcap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    n = write_pcap(args.out, burst_trace(args.seed, args.seconds))
    print(f"{args.out}: {n} packets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
