"""Split mode: one copy of the tables serves every message of a stack, one message per packet.

The union mode (:mod:`backends.tofino.batch`) copies the field tables once per message slot, which at
10k filters and more does not fit a Tofino (twelve ITCH copies of the price code table and of the
egress keep tables). Camus §6 ("Parsing Deep") parses deep with recirculation copies that start at
different messages; split mode does that with the single-message program's tables:

* **pass 1** (a packet from a front port): the parser extracts the stack as the spec says (elements
  numbered from the back, :mod:`backends.tofino.stack_parse`) and marks each element it extracts
  (``meta.p4sub_valid_m<i>``). With back numbering the extracted elements are a contiguous range
  ``[lo, hi]`` (``hi`` is the first message on the wire, ``lo`` the last one parsed). The table
  ``p4sub_split_copies``, exact on the marks, multicasts the packet to group ``split_group(lo, hi)``:
  one copy to the recirculation port per message, each with its own replication id
  ``SPLIT_RID + 16 * r + e`` (element ``e``, wire position ``r = hi - e``). No other table runs. A
  packet with no message is dropped.
* **pass-1 egress**: a copy whose ``egress_rid`` is a split rid gets the 2-byte ``p4sub_split``
  header in front (the rid), and recirculates.
* **pass 2** (a packet from the recirculation port): the parser extracts ``p4sub_split`` and then the
  packet as in pass 1. ``p4sub_split_pick`` (exact on the rid) copies element ``e``'s queried fields to
  metadata (the tables match those copies), invalidates every other element of the message's stacks
  (so only message ``e`` is deparsed), and fixes the headers that count or measure the messages (see
  :class:`Fix`). Then the single-message tables run once and their leaf sends the packet to its
  ports through the single program's multicast groups: each port gets only the messages it
  subscribed to, one per packet.

Costs (:func:`cost`): two passes per message; one recirculated copy of the whole packet per message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from backends.common.messages import MessageLayout, ipv4_checksum
from backends.common.names import meta_member
from backends.tofino.batch import Batched
from backends.tofino.target import Target
from compiler import ir
from compiler.base import TargetError
from compiler.spec import Spec

#: Replication ids of the split copies: ``SPLIT_RID + 16 * position + element``. The single program's
#: groups carry their group id as rid (1 up to the group count), which stays below.
SPLIT_RID = 0xF000
#: Split groups' ids: ``SPLIT_GROUP + 16 * lo + hi`` (below the union group 0xFFFF).
SPLIT_GROUP = 0xF000
#: PRE node ids of the split copies (the single program's nodes have the group's id, below 2^16).
SPLIT_NODE = 0x10000
MAX_DEPTH = 16
HEADER = "p4sub_split"
HEADER_BYTES = 2
COPIES_TABLE = "p4sub_split_copies"
COPIES_ACTION = "p4sub_split_to"
NONE_ACTION = "p4sub_split_none"
PICK_TABLE = "p4sub_split_pick"
RID_FIELD = "meta.p4sub_split_rid"
#: Tofino 1 has one 100 Gb/s recirculation port per pipe (port 68 on pipe 0: docs/tofino.md,
#: "Recirculation"); Intel's Tofino documentation gives recirculation bandwidth per pipe as 100 Gb/s.
RECIRCULATION_GBPS = 100
#: Ethernet per-frame overhead on a port: preamble and start delimiter 8 bytes, gap 12, FCS 4.
WIRE_OVERHEAD = 24
_SEQ_NAMES = ("seq", "sequence", "seq_num", "sequence_number")


def split_group(lo: int, hi: int) -> int:
    return SPLIT_GROUP + 16 * lo + hi


def split_rid(position: int, element: int) -> int:
    return SPLIT_RID + 16 * position + element


def valid_field(i: int) -> str:
    return f"meta.p4sub_valid_m{i}"


def copy_field(field: str) -> str:
    """The metadata copy of a stacked queried field (``add_order.price`` -> ``meta.p4sub_msg_add_order_price``)."""
    return "meta.p4sub_msg_" + re.sub(r"[^A-Za-z0-9]", "_", field)


def pick_action(e: int) -> str:
    return f"p4sub_pick_m{e}"


@dataclass(frozen=True)
class Fix:
    """What pass 2 rewrites so that a packet of one message says so (constants from the spec).

    ``count``: the message count field (MoldUDP64 ``msg_cnt``) set to 1; ``lengths``: (field, bytes)
    the length fields set to the bytes from their header to the end of one message (IPv4
    ``total_len``, UDP ``length``); the messages that followed the kept one stay in the frame as bytes
    past the IPv4 length (receivers drop them as Ethernet padding; Tofino cannot cut a packet short);
    ``udp_checksum`` set to 0 (no checksum, allowed over IPv4); ``seq``: the sequence number of the
    first message (MoldUDP64 ``seq``) advanced by the message's position; ``ipv4``: the IPv4 checksum,
    recomputed by the ingress deparser.
    """

    count: str | None
    lengths: tuple[tuple[str, int], ...]
    udp_checksum: str | None
    seq: str | None
    ipv4: object | None


def fix_of(spec: Spec, messages: MessageLayout) -> Fix:
    first_stack = min(i for i, h in enumerate(spec.headers) if h.name in messages.parallel)

    def bytes_from(header: str) -> int:
        start = next(i for i, h in enumerate(spec.headers) if h.name == header)
        width = sum(spec.header_types[h.type_name].width for h in spec.headers[start:first_stack])
        return width // 8 + messages.message_bytes
    lengths = tuple((f, bytes_from(f.split(".", 1)[0])) for f in messages.length_fields)
    seq = None
    if messages.count_field:
        inst = spec.header(messages.count_field.split(".", 1)[0])
        htype = spec.header_types[inst.type_name]
        seq = next((f"{inst.name}.{f.name}" for f in htype.fields if f.name.lower() in _SEQ_NAMES), None)
    return Fix(messages.count_field, lengths, messages.udp_checksum, seq, ipv4_checksum(spec))


def check(pipeline: ir.Pipeline, messages: MessageLayout) -> None:
    """Refuse what split mode does not render (with the reason)."""
    if messages.stack is None or messages.depth < 2:
        raise TargetError("tofino: batch mode split needs a queried header stack of several messages")
    if messages.depth > MAX_DEPTH:
        raise TargetError(f"tofino: batch mode split: a stack of {messages.depth} messages (at most {MAX_DEPTH})")
    if any(t.role == "call" for t in pipeline.tables):
        raise TargetError("tofino: user actions (call tables) with batch mode split; use batch mode first")
    if pipeline.updates:
        raise TargetError("tofino: counters with batch mode split (the first pass would count the packet too)")
    top = max((g.id for g in pipeline.multicast_groups), default=0)
    if top >= SPLIT_GROUP:
        raise TargetError(f"tofino: batch mode split: multicast group {top} collides with the split groups "
                          f"({SPLIT_GROUP:#x} and above)")


def split(pipeline: ir.Pipeline, messages: MessageLayout) -> Batched:
    """The single-message pipeline with pass 1's copies table and pass 2's pick table added."""
    check(pipeline, messages)
    depth = messages.depth
    spec = pipeline.spec
    stacked = tuple(f for f in messages.query_fields if f.split(".", 1)[0] in messages.parallel)
    widths = {f: _width(spec, f) for f in stacked}
    valid = [valid_field(i) for i in range(depth)]
    metadata = [ir.Metadata(v, 1) for v in valid] + [ir.Metadata(copy_field(f), widths[f]) for f in stacked]
    metadata.append(ir.Metadata(RID_FIELD, 16))
    group_param = ir.Param("group", 16)
    copies = ir.Action(COPIES_ACTION, (group_param,), (ir.Primitive("set_mcast_group", ("group",)),))
    none = ir.Action(NONE_ACTION, (), (ir.Primitive("drop"),))
    copies_table = ir.Table(COPIES_TABLE, tuple(ir.Key(v, 1, "exact") for v in valid), (COPIES_ACTION, NONE_ACTION),
                            NONE_ACTION, size=max(64, depth * (depth + 1) // 2), role="split")
    entries = []
    for lo in range(depth):
        for hi in range(lo, depth):
            matches = tuple(ir.Exact(1 if lo <= i <= hi else 0) for i in range(depth))
            entries.append(ir.Entry(COPIES_TABLE, matches, COPIES_ACTION, (split_group(lo, hi),)))
    # The pick actions' IR bodies say what they write (the estimate orders the tables by it); their
    # P4 text is :func:`pick_text`'s.
    position = ir.Param("position", 64)
    picks = [ir.Action(pick_action(e), (position,), tuple(ir.Primitive("set_meta", (f, "position")) for f in stacked))
             for e in range(depth)]
    pick_table = ir.Table(PICK_TABLE, (ir.Key(RID_FIELD, 16, "exact"),), tuple(a.name for a in picks) + ("NoAction",),
                          "NoAction", size=max(64, depth * (depth + 1) // 2), role="split")
    for e in range(depth):
        for r in range(depth - e):
            entries.append(ir.Entry(PICK_TABLE, (ir.Exact(split_rid(r, e)),), pick_action(e), (r,)))
    groups = tuple(ir.MulticastGroup(split_group(lo, hi), ()) for lo in range(depth) for hi in range(lo, depth))
    rewritten = replace(pipeline, metadata=pipeline.metadata + tuple(metadata),
                        actions=pipeline.actions + (copies, none) + tuple(picks),
                        tables=pipeline.tables + (copies_table, pick_table),
                        entries=pipeline.entries + tuple(entries))
    names = [t.name for t in rewritten.tables]
    slot_of = {n: None for n in names}
    gress_of = {n: "ingress" for n in names}
    # The copies table runs on pass 1's branch, the others on pass 2's. First in the order the estimate
    # reads, so that it shares the first stage with the pick table (it writes only the forwarding,
    # which the leaf writes after it) rather than following the leaf.
    order = (COPIES_TABLE, PICK_TABLE) + pipeline.control
    return Batched(replace(rewritten, control=order), "split", slot_of, gress_of,
                   tuple((None, n) for n in order), groups=pipeline.multicast_groups,
                   valid_fields=tuple(valid), split_groups=groups)


def _width(spec: Spec, ref: str) -> int:
    header, name = ref.split(".", 1)
    htype = spec.header_types[spec.header(header).type_name]
    return next(f.width for f in htype.fields if f.name == name)


def pick_text(e: int, messages: MessageLayout, fix: Fix, stacked: tuple[str, ...]) -> str:
    """``p4sub_pick_m<e>``: element ``e``'s queried fields to metadata, every other element of the
    message's stacks invalid, the count, lengths and sequence number fixed."""
    lines = [f"@name(\"{pick_action(e)}\") action {pick_action(e)}(bit<64> position) {{"]
    for f in stacked:
        header, name = f.split(".", 1)
        lines.append(f"    meta.{meta_member(copy_field(f))} = hdr.{header}[{e}].{name};")
    for h in messages.parallel:
        lines += [f"    hdr.{h}[{i}].setInvalid();" for i in range(messages.depth) if i != e]
    if fix.count:
        lines.append(f"    hdr.{fix.count} = 1;")
    for f, n in fix.lengths:
        lines.append(f"    hdr.{f} = {n};")
    if fix.udp_checksum:
        lines.append(f"    hdr.{fix.udp_checksum} = 0;")
    if fix.seq:
        lines.append(f"    hdr.{fix.seq} = hdr.{fix.seq} + position;")
    lines.append("}")
    return "\n".join(lines)


def stacked_fields(messages: MessageLayout) -> tuple[str, ...]:
    return tuple(f for f in messages.query_fields if f.split(".", 1)[0] in messages.parallel)


def pre_records(groups: tuple[ir.MulticastGroup, ...], target: Target) -> tuple[list[dict], list[dict]]:
    """``$pre.node`` records (one per copy: the recirculation port, rid = the copy's element and
    position) and the ``$pre.mgid`` records of the split groups."""
    nodes, mgids = [], []
    for g in groups:
        lo, hi = divmod(g.id - SPLIT_GROUP, 16)
        ids = []
        for e in range(lo, hi + 1):
            node = SPLIT_NODE + 16 * (g.id - SPLIT_GROUP) + e
            ids.append(node)
            nodes.append({"table_name": "$pre.node", "key": {"$MULTICAST_NODE_ID": {"value": node}},
                          "data": {"$MULTICAST_RID": split_rid(hi - e, e), "$MULTICAST_LAG_ID": [],
                                   "$DEV_PORT": [target.recirculation_port]}})
        mgids.append({"table_name": "$pre.mgid", "key": {"$MGID": {"value": g.id}},
                      "data": {"$MULTICAST_NODE_ID": ids, "$MULTICAST_NODE_L1_XID_VALID": [False] * len(ids),
                               "$MULTICAST_NODE_L1_XID": [0] * len(ids)}})
    return nodes, mgids


def cost(spec: Spec, messages: MessageLayout, target: Target) -> dict:
    """Passes, recirculated copies and bytes per input packet, and the input rate the recirculation
    port allows, for a packet carrying the whole stack (the worst case; a packet of n messages makes n
    copies)."""
    first_stack = min(i for i, h in enumerate(spec.headers) if h.name in messages.parallel)
    before = sum(spec.header_types[h.type_name].width for h in spec.headers[:first_stack]) // 8
    full = before + messages.depth * messages.message_bytes
    per_copy = full + HEADER_BYTES
    bits = messages.depth * (per_copy + WIRE_OVERHEAD) * 8
    rate = RECIRCULATION_GBPS * 1e9 / bits
    return {
        "mode": "split",
        "passes_per_message": 2,
        "recirculated_copies_per_packet": f"one per message parsed (up to {messages.depth})",
        "max_recirculated_copies_per_packet": messages.depth,
        "full_packet_bytes": full,
        "recirculated_bytes_per_copy": per_copy,
        "max_recirculated_bytes_per_packet": messages.depth * per_copy,
        "recirculation_gbps_assumed": RECIRCULATION_GBPS,
        "recirculation_port": target.recirculation_port,
        "wire_overhead_bytes_per_frame": WIRE_OVERHEAD,
        "max_input_packets_per_s_full_stack": round(rate),
        "max_messages_per_s": round(rate * messages.depth),
        "note": (f"each message parsed costs one copy of the whole packet through the recirculation port "
                 f"({RECIRCULATION_GBPS} Gb/s per pipe assumed) and a second pass through the ingress; the rate "
                 f"is for packets of {messages.depth} messages ({full} bytes) on one pipe's recirculation port"),
    }
