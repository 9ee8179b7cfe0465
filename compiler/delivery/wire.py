"""Byte layouts shared by every delivery scheme: Ethernet, the stack shim, fixed-width labels.

A frame carrying a header stack looks like this (all fields big-endian)::

    dst MAC (6) | src MAC (6) | EtherType 0x88B5 (2) | inner EtherType (2) | count (2) | count labels | payload

The publisher's original frame is ``dst | src | inner EtherType | payload``; the shim moves the
original EtherType behind ours, so the last-hop switch restores the original frame byte for byte
by dropping the shim (:func:`detach_stack`). The count is 16 bits: a switch/port stack for a
255-switch Jellyfish at 90 % subscribers needs about 460 labels (the dissertation leaves the Size
width open; its Ch. 5 program uses 16 bits).

0x88B5 and 0x88B6 are the IEEE 802 "local experimental" EtherTypes. Header stacks use the first;
the baselines' shims (zFilter, BIER-style bitstring, Elmo) use the second, since a network runs one
scheme at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

ETHERTYPE_STACK = 0x88B5
ETHERTYPE_BASELINE = 0x88B6
ETHERTYPE_IPV4 = 0x0800
ETH_HEADER = 14
STACK_SHIM = 4  # inner EtherType + count
BROADCAST_MAC = b"\xff" * 6

_STACK_TYPE = ETHERTYPE_STACK.to_bytes(2, "big")
_BASELINE_TYPE = ETHERTYPE_BASELINE.to_bytes(2, "big")


def host_mac(host_id: int) -> bytes:
    """A locally administered unicast MAC for host ``host_id`` (02:00:00:xx:xx:xx)."""
    return b"\x02\x00\x00" + host_id.to_bytes(3, "big")


def group_mac(group_id: int) -> bytes:
    """A locally administered multicast MAC naming a stored tree (03:00:00:xx:xx:xx)."""
    return b"\x03\x00\x00" + group_id.to_bytes(3, "big")


def ethernet_frame(dst: bytes, src: bytes, ethertype: int, payload: bytes) -> bytes:
    return dst + src + ethertype.to_bytes(2, "big") + payload


@dataclass(frozen=True)
class LabelLayout:
    """A fixed-width label: ``id_bytes`` of switch id, then ``value_bytes`` of forwarding value.

    Fields are whole bytes so that a switch id always starts on a label boundary (P4 headers are
    byte multiples anyway) and the label width is what the dissertation's evaluation used for a
    255-switch network: 2 bytes for switch/port, 3 bytes for switch/bitmask and mc-group.
    """

    id_bytes: int
    value_bytes: int

    @property
    def size(self) -> int:
        return self.id_bytes + self.value_bytes

    def pack(self, labels: list[tuple[int, int]]) -> bytes:
        ib, vb = self.id_bytes, self.value_bytes
        return b"".join(i.to_bytes(ib, "big") + v.to_bytes(vb, "big") for i, v in labels)

    def unpack(self, raw: bytes) -> tuple[list[int], list[int]]:
        """Split packed labels into parallel lists of ids and values."""
        size, ib = self.size, self.id_bytes
        if ib == 1:
            ids = list(raw[0::size])
        else:
            ids = [int.from_bytes(raw[k : k + ib], "big") for k in range(0, len(raw), size)]
        values = [int.from_bytes(raw[k + ib : k + size], "big") for k in range(0, len(raw), size)]
        return ids, values


class Malformed(Exception):
    """A frame a switch cannot parse; carries the drop reason counted by the simulator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def make_stack(labels: bytes, count: int) -> bytes:
    """The stack a publisher computes: 16-bit count, then the packed labels."""
    return count.to_bytes(2, "big") + labels


def attach_stack(frame: bytes, stack: bytes) -> bytes:
    """Insert ``stack`` (count + labels) after the Ethernet addresses of ``frame``; the frame's
    EtherType moves behind ours. Adds ``2 + len(stack)`` bytes."""
    return frame[:12] + _STACK_TYPE + frame[12:14] + stack + frame[14:]


@dataclass(frozen=True)
class ParsedStack:
    """A received stack frame: where things are, so switches can slice labels without copying."""

    frame: bytes
    count: int
    label_size: int

    @property
    def labels(self) -> bytes:
        start = ETH_HEADER + STACK_SHIM
        return self.frame[start : start + self.count * self.label_size]

    def rebuild(self, labels: bytes, count: int) -> bytes:
        """The same frame with a different stack; an empty stack becomes the original frame."""
        f = self.frame
        body = f[ETH_HEADER + STACK_SHIM + self.count * self.label_size :]
        if count == 0:
            return f[:12] + f[14:16] + body
        return f[:16] + count.to_bytes(2, "big") + labels + body

    def strip(self) -> bytes:
        """The publisher's original frame: the shim and every label removed."""
        return self.rebuild(b"", 0)


def parse_stack(frame: bytes, layout: LabelLayout) -> ParsedStack:
    """Check and split a stack frame; raises :class:`Malformed` with the drop reason."""
    if len(frame) < ETH_HEADER + STACK_SHIM or frame[12:14] != _STACK_TYPE:
        raise Malformed("not-a-stack")
    count = int.from_bytes(frame[16:18], "big")
    if count == 0:
        raise Malformed("empty-stack")
    if len(frame) < ETH_HEADER + STACK_SHIM + count * layout.size:
        raise Malformed("truncated")
    return ParsedStack(frame, count, layout.size)


def detach_stack(frame: bytes, layout: LabelLayout) -> tuple[int, bytes, bytes]:
    """``(count, packed labels, original frame)`` of a stack frame."""
    parsed = parse_stack(frame, layout)
    return parsed.count, parsed.labels, parsed.strip()


def attach_baseline(frame: bytes, header: bytes) -> bytes:
    """Insert a baseline shim (inner EtherType + ``header``) after the Ethernet addresses."""
    return frame[:12] + _BASELINE_TYPE + frame[12:14] + header + frame[14:]


def split_baseline(frame: bytes, header_len: int) -> tuple[bytes, bytes]:
    """``(header, original frame)`` of a baseline frame; raises :class:`Malformed`."""
    if len(frame) < ETH_HEADER + 2 + header_len or frame[12:14] != _BASELINE_TYPE:
        raise Malformed("truncated" if frame[12:14] == _BASELINE_TYPE else "not-a-baseline-frame")
    header = frame[16 : 16 + header_len]
    return header, frame[:12] + frame[14:16] + frame[16 + header_len :]


def read_baseline(frame: bytes, header_len: int, cost) -> tuple[bytes, bytes] | None:
    """:func:`split_baseline` for a switch: a malformed frame is dropped (its reason counted by
    ``cost.drop``) and gives None."""
    try:
        return split_baseline(frame, header_len)
    except Malformed as exc:
        cost.drop(exc.reason)
        return None


def rebuild_baseline(frame: bytes, header_len: int, header: bytes) -> bytes:
    """The same baseline frame with a new header of the same length."""
    return frame[:16] + header + frame[16 + header_len :]
