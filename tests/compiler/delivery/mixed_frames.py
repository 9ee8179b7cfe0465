"""Frames whose own label carries every tag of the mixed encoding, for both targets' stack tests.

The own label of ``switch`` sits between two labels of core switch c1, so that reactive pruning has
one label to pop before it and one to keep after it. Tags: 0 port (including the ports 0 and 17,
which select nothing), 1 bitmask (with the ingress port in it, which the switch must not send back
to), 2 group, 3 unused (no port).
"""

from __future__ import annotations

from compiler.delivery.combined import CombinedPlan

ETHERNET = bytes.fromhex("020000000002020000000001")


def mixed_tag_frames(plan: CombinedPlan, switch: str) -> tuple[int, list[tuple[int, int, int, bytes]]]:
    """The ingress port and ``(tag, value, copies expected, frame)`` per case."""
    sp = plan.switches[switch]
    ports = list(sp.ports)
    in_port = ports[0]
    shift, vb = plan.tag_shift, 8 * plan.value_bytes
    other = plan.switches["c1"].switch_id
    bit = {p: 1 << (p - 1) for p in ports}
    cases = [
        (0, ports[1], 1), (1, bit[ports[1]] | bit[ports[2]] | bit[ports[3]], 3), (2, bit[ports[1]] | bit[ports[3]], 2),
        (1, bit[in_port] | bit[ports[2]], 1), (3, bit[ports[1]], 0), (0, 0, 0), (0, 17, 0),
    ]
    out = []
    for tag, value, copies in cases:
        labels = [(other, 5), (sp.switch_id, tag << shift | value), (other, 9)]
        raw = b"".join((i << vb | v).to_bytes(plan.label_bytes, "big") for i, v in labels)
        frame = ETHERNET + b"\x88\xb5\x08\x00" + len(labels).to_bytes(2, "big") + raw + bytes(range(30))
        out.append((tag, value, copies, frame))
    return in_port, out
