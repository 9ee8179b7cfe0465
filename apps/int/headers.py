"""INT-MD over UDP (P4.org INT v2.1): the shim header, the metadata header and the hop stack.

Wire layout after the UDP header whose destination port announces INT (INT has no IANA port;
p4sub's spec uses 0x1234 = 4660 by default)::

    shim (4):  Type(4) NPT(2) R(2) | Length(8) | original UDP port / IP proto / DSCP (16)
    MD (12):   Ver=2(4) D E M Reserved(12) HopML(5) RemainingHopCount(8)
               InstructionBitmap(16) DomainSpecificID(16) DSInstruction(16) DSFlags(16)
    stack:     one HopML*4-byte record per hop, newest first
    ...        then the original UDP payload (NPT=1)

``Length`` counts the MD header and the stack in 4-byte words, not the shim (since v2.0).
Stack bytes beyond a whole number of hop records are the source's 'source-only' domain-specific
metadata; they are kept as ``source_only``.

Decoding counts damage (a stack longer than the packet, a Hop ML smaller than the bitmap needs,
a version other than 2, a shim type that is not INT) and never raises for bad bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from apps.int.metadata import INT_MD_LAYOUT, HopMetadata, decode_metadata, encode_metadata, metadata_length
from apps.pcap import DamageCounter

INT_TYPE_MD = 1
INT_TYPE_DESTINATION = 2
INT_TYPE_MX = 3
NPT_DSCP, NPT_UDP_PORT, NPT_IP_PROTO = 0, 1, 2
SHIM_SIZE = 4
MD_HEADER_SIZE = 12
DEFAULT_INT_PORT = 0x1234

_MD = struct.Struct("!IHHHH")


@dataclass(frozen=True)
class IntMdHeader:
    """The 12-byte INT-MD metadata header (flags D, E, M; Hop ML in 4-byte words)."""

    instruction_bitmap: int
    hop_ml: int
    remaining_hop_count: int
    discard: bool = False
    max_hops_exceeded: bool = False
    mtu_exceeded: bool = False
    domain_specific_id: int = 0
    ds_instruction: int = 0
    ds_flags: int = 0
    version: int = 2


@dataclass(frozen=True)
class IntMd:
    """Shim + INT-MD header + hop stack (``hops[0]`` is the newest, i.e. the last node so far)."""

    header: IntMdHeader
    hops: tuple[HopMetadata, ...]
    npt: int = NPT_UDP_PORT
    shim_value: int = 0  # original UDP destination port (NPT=1), IP protocol (NPT=2) or DSCP
    source_only: bytes = b""
    int_type: int = INT_TYPE_MD


def new_header(instruction_bitmap: int, hops: int, max_hops: int = 8, **flags: int | bool) -> IntMdHeader:
    """A header as the source sets it: Hop ML from the bitmap, remaining count after ``hops`` pushes."""
    ml = metadata_length(instruction_bitmap) // 4
    return IntMdHeader(instruction_bitmap, ml, max(0, max_hops - hops), **flags)  # type: ignore[arg-type]


def encode_int_md(md: IntMd) -> bytes:
    """Shim, MD header and stack, with the shim length computed from the stack."""
    h = md.header
    record = h.hop_ml * 4
    stack = b"".join(encode_metadata(hop, h.instruction_bitmap, INT_MD_LAYOUT) for hop in md.hops)
    if len(stack) != record * len(md.hops):
        raise ValueError(f"hop records are not Hop ML*4 = {record} bytes each")
    stack += md.source_only
    words, rest = divmod(MD_HEADER_SIZE + len(stack), 4)
    if rest or words > 0xFF:
        raise ValueError("INT stack must be whole 4-byte words and at most 255 words with its header")
    if not 0 <= h.hop_ml <= 31:
        raise ValueError("Hop ML must be 0..31")
    shim = bytes(((md.int_type & 0xF) << 4 | (md.npt & 3) << 2, words)) + (md.shim_value & 0xFFFF).to_bytes(2, "big")
    word0 = (
        (h.version & 0xF) << 28 | int(h.discard) << 27 | int(h.max_hops_exceeded) << 26
        | int(h.mtu_exceeded) << 25 | (h.hop_ml & 0x1F) << 8 | (h.remaining_hop_count & 0xFF)
    )
    return shim + _MD.pack(word0, h.instruction_bitmap, h.domain_specific_id, h.ds_instruction, h.ds_flags) + stack


def decode_int_md(
    data: bytes | memoryview, offset: int, end: int, damage: DamageCounter, skipped: DamageCounter | None = None
) -> tuple[IntMd, int] | None:
    """Decode shim + MD + stack at ``data[offset:end]``; return it and the offset after the stack.

    None when the bytes are not a usable INT-MD instance: damage is counted, except for the
    other INT types (INT-Destination, INT-MX), which are well-formed but carry no stack and
    are counted in ``skipped`` as ``int_not_md``.
    """
    if end - offset < SHIM_SIZE + MD_HEADER_SIZE:
        damage.add("int_short")
        return None
    b0, length = data[offset], data[offset + 1]
    int_type, npt = b0 >> 4, (b0 >> 2) & 3
    shim_value = int.from_bytes(data[offset + 2 : offset + 4], "big")
    if int_type != INT_TYPE_MD:
        if int_type in (INT_TYPE_DESTINATION, INT_TYPE_MX):
            if skipped is not None:
                skipped.add("int_not_md")
        else:
            damage.add("int_type")
        return None
    stack_end = offset + SHIM_SIZE + 4 * length
    if 4 * length < MD_HEADER_SIZE or stack_end > end:
        damage.add("int_length")
        return None
    md = offset + SHIM_SIZE
    word0, bitmap, ds_id, ds_instr, ds_flags = _MD.unpack_from(data, md)
    version = word0 >> 28
    if version != 2:
        damage.add("int_version")
        return None
    hop_ml = (word0 >> 8) & 0x1F
    header = IntMdHeader(
        bitmap, hop_ml, word0 & 0xFF, bool(word0 >> 27 & 1), bool(word0 >> 26 & 1), bool(word0 >> 25 & 1),
        ds_id, ds_instr, ds_flags, version,
    )
    record = hop_ml * 4
    stack = md + MD_HEADER_SIZE
    stack_len = stack_end - stack
    if record < metadata_length(bitmap) or (record == 0 and stack_len):
        damage.add("int_hop_ml")
        return None
    n = stack_len // record if record else 0
    hops = tuple(decode_metadata(data, stack + i * record, bitmap, record, INT_MD_LAYOUT) for i in range(n))
    source_only = bytes(data[stack + n * record : stack_end])
    return IntMd(header, hops, npt, shim_value, source_only, int_type), stack_end
