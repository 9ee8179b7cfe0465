"""Counters on TNA: a ``Register`` and a ``RegisterAction`` per counted value, in one or two stages.

A counter whose rules read only its count keeps it in a register of ``(end, value)`` pairs of 32-bit
words, so that the window roll-over and the update are one stateful-ALU operation on one word pair,
as a Tofino stage's stateful ALU does them (docs/compiler.md, "Stateful subscriptions")::

    RegisterAction<p4sub_pair_t, bit<K>, bit<32>>(reg) upd = {
        void apply(inout p4sub_pair_t cell, out bit<32> read) {
            if (cell.end == 0 || meta.p4sub_now - cell.end < 0x80000000) {   // now >= end
                cell.end = meta.p4sub_now + WINDOW;  cell.value = 1;
            } else {
                cell.value = cell.value + 1;
            }
            read = cell.value;
        }
    };

A sum cannot be kept so: its update reads two 32-bit words of the packet, the clock and the summed
field, and a Tofino 1 stateful ALU takes two only from the exact-match crossbar, each a whole
aligned 32-bit container; the clock is a slice of a 48-bit timestamp, which spans two containers
(the hash path carries 52 bits, not 64), so bf-p4c refused the pair ("could not fit within the
input crossbar by itself"). A counter with a sum therefore keeps its window ends in a register of
their own, whose action returns whether it opened a new window (an 8-bit flag), and its count and
sum in one-word registers of the next stage that start again from the packet when the flag is set.
Both read the same window, so count and sum stay in step.

The clock is the MAC's arrival timestamp ``ig_intr_md.ingress_mac_tstamp`` (ns, written by the
parser) in 1.024 µs ticks (``[41:10]``), read by the stateful ALUs themselves, and the cell is the
hash unit's output addressing the register directly: a copy of either into metadata would be an
action of its own, a stage before the registers (bf-p4c placed examples/stateful in 7 stages with
both copies, 5 without). The window is rounded up to whole ticks; ends are 32-bit and compared modulo 2^32 (a cell idle for more than 2^31 ticks,
about 36 minutes, may continue its old window, and an end that is exactly 0 reads as a fresh cell).
The cell is the low bits of the key's ``CRC32`` (the same CRC-32 as v1model's and the model's, so
``SLOTS`` must be a power of two). Tofino has no divider: ``avg`` is refused, as are widths other
than 32 (the registers' words are 32-bit).
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
    registers: int = 0  # stateful ALUs, in the one or two stages before the tables that match the reads


def registers(u: ir.StateUpdate) -> list[tuple[int, int]]:
    """(stage, word bits) of the registers counter ``u`` takes, as :func:`render_state` writes them:
    a count alone, one register of (end, value) pairs in the first stage; with a sum, the window ends
    there and the values (the count when a rule reads it, the sum) in the next."""
    if not u.total:
        return [(0, 64)]
    return [(0, 32)] + [(1, 32)] * (1 + any(r.function == "count" for r in u.reads))


def window_ticks(window_us: int) -> int:
    """The window in 1.024 µs ticks, rounded up (never shorter than asked)."""
    return max(1, math.ceil(window_us * 1000 / TICK_NS))


def render_state(pipeline: ir.Pipeline, intrinsic: dict[str, str], ingress_md: str) -> TnaState:
    """Registers of ``pipeline``'s counters; ``ingress_md`` names the ingress control's intrinsic metadata."""
    out = TnaState()
    if not pipeline.updates:
        return out
    out.types.append(f"struct {PAIR} {{\n    bit<32> end;\n    bit<32> value;\n}}")
    out.lines.append("// Counters (docs/compiler.md, \"Stateful subscriptions\"): update, then read.")
    now = f"{ingress_md}.ingress_mac_tstamp[41:10]"  # 1.024 us ticks
    for u in pipeline.updates:
        _counter(pipeline, u, intrinsic, now, out)
    return out


def _counter(pipeline: ir.Pipeline, u: ir.StateUpdate, intrinsic: dict[str, str], now: str, out: TnaState) -> None:
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
    index = f"{k}w0"
    if u.index:
        nbytes = (io.key_width + 7) // 8
        key = io.key if io.key_width == 8 * nbytes else f"(bit<{8 * nbytes}>){io.key}"
        out.declarations.append(f"Hash<bit<32>>(HashAlgorithm_t.CRC32) {p}_hash;")
        index = f"{p}_hash.get({{ {key} }})[{k - 1}:0]"
    ticks = window_ticks(u.window_us)
    expired = f"{now} - {{end}} < 32w0x80000000"
    # The reads start at 0 from the parser (every p4sub metadata member does), which is what a rule
    # sees when the counted header is absent; zeroing them here would be a stage of its own.
    body = [f"// {u.counter}: window {u.window_us} us ({ticks} ticks), {u.size} cell(s)"
            + (f" by crc32({u.index})" if u.index else "")]
    update = []
    if not u.total:
        name = u.count
        out.registers += 1
        out.declarations += _action(f"Register<{PAIR}, bit<{k}>>({u.size}) {name};",
                                    f"RegisterAction<{PAIR}, bit<{k}>, bit<32>>({name}) {name}_update", f"inout {PAIR} cell",
                                    f"cell.end == 32w0 || {expired.format(end='cell.end')}",
                                    [f"cell.end = {now} + 32w{ticks};", "cell.value = 32w1;"],
                                    ["cell.value = cell.value + 32w1;"], "read = cell.value;")
        update.append(_execute(reads.get("count"), name, index))
    else:
        fresh = f"{p}_fresh"
        out.members.append(Member(bits(8), fresh))
        window = f"{p}_window"
        out.declarations += _action(f"Register<bit<32>, bit<{k}>>({u.size}) {window};",
                                    f"RegisterAction<bit<32>, bit<{k}>, bit<8>>({window}) {window}_update",
                                    "inout bit<32> end", f"end == 32w0 || {expired.format(end='end')}",
                                    [f"end = {now} + 32w{ticks};", "read = 8w1;"], ["read = 8w0;"], None,
                                    read_type="bit<8>")
        update.append(f"meta.{fresh} = {window}_update.execute({index});")
        # A register per value read: a sum keeps its window in the window register, so a count no rule
        # reads is not kept.
        values = ([("count", u.count, "32w1")] if "count" in reads else []) + [("sum", u.total, f"(bit<32>){io.value}")]
        for function, name, add in values:
            out.declarations += _action(f"Register<bit<32>, bit<{k}>>({u.size}) {name};",
                                        f"RegisterAction<bit<32>, bit<{k}>, bit<32>>({name}) {name}_update",
                                        "inout bit<32> value", f"meta.{fresh} == 8w1", [f"value = {add};"],
                                        [f"value = value + {add};"], "read = value;")
            update.append(_execute(reads.get(function), name, index))
        out.registers += 1 + len(values)
    out.lines += body + [f"if ({io.valid}) {{"] + ["    " + line for line in update] + ["}"]


def _action(register: str, head: str, cell: str, condition: str, then: list[str], otherwise: list[str],
            result: str | None, read_type: str = "bit<32>") -> list[str]:
    """A register and its action: ``if (condition) then else otherwise``, then ``result``."""
    return [register, f"{head} = {{", f"    void apply({cell}, out {read_type} read) {{",
            f"        if ({condition}) {{", *(f"            {line}" for line in then), "        } else {",
            *(f"            {line}" for line in otherwise), "        }",
            *([f"        {result}"] if result else []), "    }", "};"]


def _execute(target: str | None, name: str, index: str) -> str:
    call = f"{name}_update.execute({index})"
    return f"{target} = {call};" if target else f"{call};"
