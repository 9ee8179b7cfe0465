"""Where the messages are in a packet: the facts a backend needs to evaluate batched messages.

The IR evaluates one *message* per row. A packet may carry several: ITCH puts several Add Orders
after one MoldUDP64 header (``add_order[12]``), INT a stack of hops (``int_hop[8]``). This module
finds, from the spec and the tables' keys, the stack the queries read and what else belongs to a
message, so that a backend can evaluate message ``i`` and, for ITCH, remove the messages a port did
not subscribe to.

Conventions (documented in docs/bmv2.md, overridable by passing the names explicitly):

* the *query stack* is the header stack holding the packet fields the tables match; at most one
  stack may be queried (scalar query headers may be queried alongside it: they are the same for
  every message);
* the messages are formed by the *parallel stacks*: the query stack and the stacks of the same
  size declared next to it (:func:`backends.common.parser.emit_groups`); message ``j`` is element
  ``j`` of each (ITCH: the MoldUDP64 message-length block
  and the Add Order itself). Its size on the wire is the sum of their element widths;
* the *count field* is a field of a scalar header, declared before the query stack, whose name is
  one of :data:`COUNT_NAMES` (MoldUDP64's ``msg_cnt`` / ``message_count``);
* the *length fields* are the IPv4 total length and the UDP length (instances named ``ipv4`` /
  ``udp``, fields named as in :data:`LENGTH_NAMES`), and the UDP checksum, which pruning clears to
  zero (legal for UDP over IPv4) rather than recomputing over the payload.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.common.names import is_meta, split_field
from backends.common.parser import emit_groups
from compiler import ir
from compiler.base import TargetError
from compiler.spec import Spec

COUNT_NAMES = ("msg_cnt", "message_count", "msg_count", "messagecount", "count", "cnt")
LENGTH_NAMES = {
    "ipv4": ("total_len", "totallen", "total_length", "totallength", "len", "length"),
    "udp": ("length", "len", "length_", "udp_length", "hdr_length"),
}
CHECKSUM_NAMES = ("checksum", "csum", "hdr_checksum", "hdrchecksum")


@dataclass(frozen=True)
class MessageLayout:
    """Where the queried messages are.

    ``stack`` is None (and ``depth`` 1) when every queried header is a scalar header: then a packet
    is one message and nothing below applies. ``message_bytes`` is the wire size of one message
    (the parallel stacks' element widths, in bytes).
    """

    query_headers: tuple[str, ...]
    query_fields: tuple[str, ...]
    stack: str | None = None
    depth: int = 1
    parallel: tuple[str, ...] = ()
    message_bytes: int = 0
    count_field: str | None = None
    length_fields: tuple[str, ...] = ()
    udp_checksum: str | None = None

    @property
    def batched(self) -> bool:
        return self.stack is not None and self.depth > 1

    @property
    def can_prune(self) -> bool:
        """Pruning needs the count field: without it the packet would lie about its contents."""
        return self.batched and self.count_field is not None


def _field_named(spec: Spec, header: str, names: tuple[str, ...]) -> str | None:
    inst = spec.header(header)
    if inst is None or inst.stack_size:
        return None
    htype = spec.header_types.get(inst.type_name)
    if htype is None:
        return None
    by_lower = {f.name.lower(): f.name for f in htype.fields}
    for n in names:
        if n in by_lower:
            return f"{header}.{by_lower[n]}"
    return None


def message_layout(pipeline: ir.Pipeline, *, count_field: str | None = None,
                   length_fields: tuple[str, ...] | None = None, udp_checksum: str | None = None) -> MessageLayout:
    """The message layout of a pipeline's spec (see the module docstring for the conventions).

    Raises :class:`TargetError` when the tables query two stacks of different sizes (a message
    would not be one element of each).
    """
    spec = pipeline.spec
    # Packet fields only: intrinsic metadata (the ingress port) belongs to no header and no message,
    # and stateful values (compiler.stateful) are computed before the tables.
    stateful = pipeline.state_reads()
    fields = tuple(sorted({k.field for t in pipeline.tables for k in t.keys if not is_meta(k.field)
                           and k.field not in stateful and spec.header(split_field(k.field)[0]) is not None}))
    headers = tuple(sorted({split_field(f)[0] for f in fields}))
    stacks = sorted({h for h in headers if (spec.header(h) and spec.header(h).stack_size)})
    if not stacks:
        return MessageLayout(headers, fields)
    sizes = {spec.header(h).stack_size for h in stacks}
    if len(sizes) > 1:
        raise TargetError(f"the tables query header stacks of different sizes ({', '.join(stacks)}); "
                          "a message must be one element of each")
    depth = sizes.pop()
    stack = stacks[0]
    parallel = next(g for g in emit_groups(spec) if stack in g)
    message_bits = sum(spec.header_types[spec.header(h).type_name].width for h in parallel)
    first_stack = min(i for i, h in enumerate(spec.headers) if h.name in parallel)
    if count_field is None:
        for h in spec.headers[:first_stack]:
            count_field = _field_named(spec, h.name, COUNT_NAMES)
            if count_field:
                break
    if length_fields is None:
        found = []
        for h in spec.headers[:first_stack]:
            for proto, names in LENGTH_NAMES.items():
                if h.name.lower() == proto:
                    ref = _field_named(spec, h.name, names)
                    if ref:
                        found.append(ref)
        length_fields = tuple(found)
    if udp_checksum is None:
        udp = next((h for h in spec.headers[:first_stack] if h.name.lower() == "udp"), None)
        udp_checksum = _field_named(spec, udp.name, CHECKSUM_NAMES) if udp else None
    return MessageLayout(headers, fields, stack, depth, parallel, message_bits // 8, count_field,
                         tuple(length_fields), udp_checksum)


@dataclass(frozen=True)
class Ipv4Checksum:
    """An IPv4 header whose checksum a deparser can recompute: the fields summed and the checksum field."""

    header: str
    fields: tuple[tuple[str, int], ...]
    checksum: str


def ipv4_checksum(spec: Spec) -> Ipv4Checksum | None:
    """The spec's IPv4 header if it has the usual layout (20 bytes, version first, checksum at bit 80)."""
    for inst in spec.headers:
        if inst.stack_size or "ipv4" not in inst.name.lower():
            continue
        htype = spec.header_types.get(inst.type_name)
        if htype is None or htype.width != 160 or not htype.fields or htype.fields[0].width != 4:
            continue
        offset = 0
        checksum = None
        summed = []
        for f in htype.fields:
            if offset == 80 and f.width == 16 and f.name.lower() in CHECKSUM_NAMES:
                checksum = f.name
            else:
                summed.append((f.name, f.width))
            offset += f.width
        if checksum:
            return Ipv4Checksum(inst.name, tuple(summed), checksum)
    return None
