"""Wire-format packets for the BMv2 tests, built with ``struct`` (no p4sub code), and what each
port should receive according to the reference model.

ITCH: Ethernet / IPv4 / UDP (dport 1234) / MoldUDP64 / blocks of (length, Add Order).
INT:  Ethernet / IPv4 / UDP (dport 0x1234) / INT shim / INT-MD header / hops (16 bytes each).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from runtime.model import Model

ITCH_PORT = 1234
INT_PORT = 0x1234
ETH = bytes.fromhex("020000000002" "020000000001") + b"\x08\x00"


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_udp(payload: bytes, dport: int, udp_checksum: int = 0x1111) -> bytes:
    """IPv4 (no options) + UDP around ``payload``; the UDP checksum is an arbitrary nonzero value."""
    udp = struct.pack("!HHHH", 40000, dport, 8 + len(payload), udp_checksum) + payload
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 7, 0, 64, 17, 0,
                       bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    head = head[:10] + struct.pack("!H", ipv4_checksum(head)) + head[12:]
    return ETH + head + udp


def itch_probes(model: Model, rng: random.Random, packets: int = 40) -> tuple[list, list]:
    """``packets`` ITCH packets of 1 to 5 random Add Orders sent on port 0, and what each port must
    receive of them (:func:`expected_itch`)."""
    send, expected = [], []
    for seq in range(packets):
        orders = random_orders(rng, rng.randint(1, 5), seq * 100)
        send.append((0, itch_packet(orders, seq)))
        expected += list(expected_itch(model, orders, seq).items())
    return send, expected


@dataclass(frozen=True)
class AddOrder:
    stock: bytes
    price: int
    shares: int
    side: bytes
    ref: int

    def body(self) -> bytes:
        """The 36-byte message: type 'A', locate, tracking, 6-byte timestamp, ref, side, shares, stock, price."""
        return (b"A" + struct.pack("!HH", 7, 0) + (123456789).to_bytes(6, "big") + struct.pack("!Q", self.ref)
                + self.side + struct.pack("!I", self.shares) + self.stock.ljust(8, b" ") + struct.pack("!I", self.price))

    def values(self) -> dict[str, int]:
        return {"add_order.stock": int.from_bytes(self.stock.ljust(8, b" "), "big"), "add_order.price": self.price,
                "add_order.shares": self.shares, "add_order.buy_sell_indicator": self.side[0]}


def itch_packet(orders: list[AddOrder], seq: int, udp_checksum: int = 0x1111) -> bytes:
    blocks = b"".join(struct.pack("!H", 36) + o.body() for o in orders)
    mold = b"P4SUBTEST1" + struct.pack("!QH", seq, len(orders)) + blocks
    return ipv4_udp(mold, ITCH_PORT, udp_checksum)


def random_orders(rng: random.Random, n: int, first_ref: int) -> list[AddOrder]:
    stocks = [b"GOOGL", b"AAPL", b"MSFT", b"IBM"]
    prices = [100, 502500, 502501, 900000, 2000000]
    shares = [1, 1000, 1001, 50000]
    return [AddOrder(rng.choice(stocks), rng.choice(prices), rng.choice(shares), rng.choice([b"B", b"S"]),
                     first_ref + i) for i in range(n)]


def expected_itch(model: Model, orders: list[AddOrder], seq: int) -> dict[int, bytes]:
    """Port -> the packet that port must receive: only the messages it subscribed to, count and
    lengths fixed; the UDP checksum is cleared when messages were removed."""
    sets = [model.run_one(o.values())[0] for o in orders]
    out = {}
    for port in sorted(set().union(*sets)):
        kept = [o for o, s in zip(orders, sets) if port in s]
        out[port] = itch_packet(kept, seq, udp_checksum=0x1111 if len(kept) == len(orders) else 0)
    return out


@dataclass(frozen=True)
class Hop:
    switch_id: int
    latency: int
    occupancy: int

    def bytes(self) -> bytes:
        return struct.pack("!IHHI", self.switch_id, 1, 2, self.latency) + bytes([0]) + self.occupancy.to_bytes(3, "big")

    def values(self) -> dict[str, int]:
        return {"int_hop.switch_id": self.switch_id, "int_hop.hop_latency": self.latency,
                "int_hop.queue_occupancy": self.occupancy}


def int_packet(hops: list[Hop], tag: int) -> bytes:
    shim = struct.pack("!BBH", 0x10, 3 + 4 * len(hops), 0)
    md = struct.pack("!HHHHHH", 0x2000, (4 << 8) | 5, 0xF000, tag, 0, 0)  # ver 2, hop ML 4, remaining 5
    return ipv4_udp(shim + md + b"".join(h.bytes() for h in hops), INT_PORT)


def random_hops(rng: random.Random, n: int) -> list[Hop]:
    return [Hop(rng.choice([1, 5, 7, 9]), rng.choice([10, 1000, 1001, 5000]), rng.choice([0, 63, 64, 1000]))
            for _ in range(n)]


def expected_int(model: Model, hops: list[Hop], tag: int) -> dict[int, bytes]:
    """Port -> packet: the union of the hops' ports, each getting the packet unchanged."""
    ports = set().union(*(model.run_one(h.values())[0] for h in hops))
    return {p: int_packet(hops, tag) for p in sorted(ports)}


PLEROMA_PORT = 4000
ETH6 = bytes.fromhex("020000000002" "020000000001") + b"\x86\xdd"


def ipv6_udp(dst: int, payload: bytes, dport: int = PLEROMA_PORT) -> bytes:
    """Ethernet / IPv6 (destination ``dst``, a 128-bit integer) / UDP around ``payload`` (a PLEROMA
    event: its dz is in the destination address). The UDP checksum is left 0: no switch checks it."""
    udp = struct.pack("!HHHH", 40000, dport, 8 + len(payload), 0) + payload
    head = struct.pack("!IHBB16s16s", 6 << 28, len(udp), 17, 64, (0xFE80 << 112 | 1).to_bytes(16, "big"),
                       dst.to_bytes(16, "big"))
    return ETH6 + head + udp
