"""Counters on TNA: one ``Register`` and one ``RegisterAction`` per counted value, within one stage.

Each value a rule reads (a count, a sum) is a register of ``(end, value)`` pairs of 32-bit words, so
that the window roll-over and the update are one stateful-ALU operation on one word pair, as a
Tofino stage's stateful ALU does them (docs/compiler.md, "Stateful subscriptions")::

    RegisterAction<p4sub_pair_t, bit<K>, bit<32>>(reg) upd = {
        void apply(inout p4sub_pair_t cell, out bit<32> read) {
            if (cell.end == 0 || meta.p4sub_now - cell.end < 0x80000000) {   // now >= end
                cell.end = meta.p4sub_now + WINDOW;  cell.value = <1, or the field>;
            } else {
                cell.value = cell.value + <1, or the field>;
            }
            read = cell.value;
        }
    };

A counter's count and sum registers see the same packets and times, so they open their windows
together without passing a flag between stages (both sit in one stage). The clock is the
parser's ``global_tstamp`` (ns) in 1.024 µs ticks (``[41:10]``), the window rounded up to whole
ticks; ends are 32-bit and compared modulo 2^32 (a cell idle for more than 2^31 ticks, about 36
minutes, may continue its old window, and an end that is exactly 0 reads as a fresh cell). The
cell is the low bits of the key's ``CRC32`` (the same CRC-32 as v1model's and the model's, so
``SLOTS`` must be a power of two). Tofino has no divider: ``avg`` is refused, as are widths other
than 32 (the pair's words are 32-bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from backends.common.headers import Member, bits
from backends.common.names import meta_member
from backends.common.state import inputs
from compiler import ir
from compiler.base import TargetError

PAIR = "p4sub_pair_t"
NOW = "p4sub_now"
TICK_NS = 1024
#: A window end is compared with the 32-bit tick clock modulo 2^32 (``now - end < 2^31``): longer
#: windows would read as already over.
MAX_TICKS = 1 << 31


@dataclass
class TnaState:
    """What the program needs: types, metadata members, declarations in the ingress, apply lines."""

    types: list[str] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)
    declarations: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    registers: int = 0  # stateful ALUs, all in the stage before the tables that match the reads


def window_ticks(window_us: int) -> int:
    """The window in 1.024 µs ticks, rounded up (never shorter than asked)."""
    return max(1, math.ceil(window_us * 1000 / TICK_NS))


def render_state(pipeline: ir.Pipeline, intrinsic: dict[str, str], prsr_md: str) -> TnaState:
    out = TnaState()
    if not pipeline.updates:
        return out
    out.types.append(f"struct {PAIR} {{\n    bit<32> end;\n    bit<32> value;\n}}")
    out.members.append(Member(bits(32), NOW))
    out.lines += ["// Counters (docs/compiler.md, \"Stateful subscriptions\"): update, then read.",
                  f"meta.{NOW} = {prsr_md}.global_tstamp[41:10];  // 1.024 us ticks"]
    for u in pipeline.updates:
        _counter(pipeline, u, intrinsic, out)
    return out


def _counter(pipeline: ir.Pipeline, u: ir.StateUpdate, intrinsic: dict[str, str], out: TnaState) -> None:
    if u.width != 32:
        raise TargetError(f"tofino: counter {u.counter} is {u.width} bits wide; Tofino counters are 32-bit (the "
                          "stateful ALU's word pairs): declare it with width=32 (the default)")
    if window_ticks(u.window_us) >= MAX_TICKS:
        most = (MAX_TICKS - 1) * TICK_NS // 1000
        raise TargetError(f"tofino: counter {u.counter} has a window of {u.window_us:,} us; the 32-bit tick clock "
                          f"(1.024 us ticks, compared modulo 2^32) measures windows up to {most:,} us (about "
                          f"{most / 60e6:.0f} minutes)")
    reads = {r.function: f"meta.{meta_member(r.field)}" for r in u.reads}
    if "avg" in reads:
        attr = next(r.attribute for r in u.reads if r.function == "avg")
        raise TargetError(f"tofino: {attr} divides a sum by a count, and Tofino's ALUs have no divider; test "
                          f"sum({u.counter}) and count({u.counter}) instead, or use the BMv2 target")
    if u.index and u.size & (u.size - 1):
        raise TargetError(f"tofino: counter {u.counter} has {u.size} slots; on Tofino the cell is the low bits of "
                          "the key's CRC32, so the number of slots must be a power of two")
    io = inputs(pipeline, u, intrinsic)
    p = f"p4sub_{u.counter}"
    k = max(1, (u.size - 1).bit_length())
    index = f"meta.{p}_cell"
    out.members.append(Member(bits(k), f"{p}_cell"))
    if u.index:
        nbytes = (io.key_width + 7) // 8
        key = io.key if io.key_width == 8 * nbytes else f"(bit<{8 * nbytes}>){io.key}"
        out.declarations.append(f"Hash<bit<32>>(HashAlgorithm_t.CRC32) {p}_hash;")
    ticks = window_ticks(u.window_us)
    # A register per value read: a sum keeps its own window, so a count no rule reads is not kept.
    registers = [("count", u.count, "32w1")] if "count" in reads or not u.total else []
    if u.total:
        registers.append(("sum", u.total, f"(bit<32>){io.value}"))
    out.registers += len(registers)
    body = [f"// {u.counter}: window {u.window_us} us ({ticks} ticks), {u.size} cell(s)"
            + (f" by crc32({u.index})" if u.index else "")] + [f"{f} = 32w0;" for f in reads.values()]
    update = []
    if u.index:
        update.append(f"{index} = {p}_hash.get({{ {key} }})[{k - 1}:0];")
    else:
        update.append(f"{index} = {k}w0;")
    for function, name, add in registers:
        out.declarations += [
            f"Register<{PAIR}, bit<{k}>>({u.size}) {name};",
            f"RegisterAction<{PAIR}, bit<{k}>, bit<32>>({name}) {name}_update = {{",
            f"    void apply(inout {PAIR} cell, out bit<32> read) {{",
            f"        if (cell.end == 32w0 || meta.{NOW} - cell.end < 32w0x80000000) {{",
            f"            cell.end = meta.{NOW} + 32w{ticks};",
            f"            cell.value = {add};",
            "        } else {",
            f"            cell.value = cell.value + {add};",
            "        }",
            "        read = cell.value;",
            "    }",
            "};",
        ]
        target = reads.get(function)
        call = f"{name}_update.execute({index})"
        update.append(f"{target} = {call};" if target else f"{call};")
    out.lines += body + [f"if ({io.valid}) {{"] + ["    " + line for line in update] + ["}"]
