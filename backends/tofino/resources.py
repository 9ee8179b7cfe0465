"""Will it fit? An estimate of a Tofino program's stages, SRAM, TCAM and multicast groups.

The estimate follows the layout rules of bf-p4c's own first-pass estimate (p4c ``34b86e9b``,
``backends/tofino/bf-p4c/mau/resource_estimate.cpp`` and ``mau/table_format.h``), applied to the
sizes p4sub declares (the IR's entry counts times headroom):

* **Exact tables** live in SRAM hash tables. An entry stores its key minus the 10 "ghost" bits the
  hash's RAM row implies (``RAM_GHOST_BITS``), rounded up to whole bytes, plus 4 version bits, the
  action-instruction bits (log2 of the table's actions) and the immediate action data (action
  parameters up to 32 bits ride in the entry). Up to 5 entries share a 128-bit word
  (``MAX_GROUPS_PER_RAM``); wider entries span several RAMs side by side. A table takes
  ``ceil(size / (entries_per_word * 1024))`` RAMs deep, at least 4 (bf-p4c's minimum of four hash
  ways), or 1 when the key is under 10 bits and fits one RAM; a key at most 18 bits wide takes the
  RAMs that hold every one of its values when that is fewer (identity hash: a 12-bit key, 1 RAM).
* **Ternary, LPM and range tables** live in TCAM: 512 rows per block, and as many blocks side by side
  as the key's match bytes need: 11 nibbles per 44-bit block, one of them the table's version
  (:func:`backends.tofino.ranges.tcam_blocks_wide`, after bf-p4c's table format, not its first-pass
  estimate, which put 6 bytes in one block: bf-p4c placed them in two). A range key takes one byte
  per nibble (its nibbles must fit a 5-byte ternary ixbar group). Rows: one per entry, except range
  tables, which get what ``@entries_with_ranges`` (emitted by the renderer from the real entries)
  makes bf-p4c reserve. Action instruction and immediate data
  go in a ternary-indirect SRAM table: one word of at least 8 bits (a power of two) per entry.
* **Stages**: a table that reads a metadata field an earlier table writes (a match dependency), or
  writes one it writes (an action dependency), starts in a later stage; a table applied only on
  another's miss is mutually exclusive with it and may share its stage. A table too big for the
  memory left in a stage continues in the next ones. Ingress and egress share the physical stages'
  memory (Tofino's MAU stages serve both threads); each thread has its own dependency chain. A stage
  also has 12 ternary-crossbar groups of 5 bytes and 128 exact-crossbar bytes: a table takes its
  groups (TCAM) or its key bytes (SRAM) in every stage it is in.
* **Counters** (:mod:`backends.tofino.state`) update their registers before the tables: a count in
  the first stage, a sum's window there and its value in the second, so a table matching a count
  starts in stage 1 at the earliest and one matching a sum in stage 2; every other ingress table
  follows the counters' statements into stage 1 (bf-p4c placed examples/stateful so). A register
  takes the RAMs its cells fill (1,024 rows of 128 bits each) and one spare, in its stage.
* **Port bitmaps of several lanes** are ORed into the first by a tree of one-operation tables that
  combines the two earliest-final bitmaps first (:func:`backends.tofino.op_tree.timed_tree`), a
  stage per operation after the later of its two; ``p4sub_no_ports`` reads the result.
* **Recirculation** (``allow_recirculation``): when the ingress chain needs more than 12 stages, it
  is cut at a table boundary into two passes; the second pass reuses the same physical stages, so
  memory is still counted once per physical stage. Each pass costs the packet another trip through
  the pipe (half the pipe's bandwidth for the traffic that recirculates).
* **Multicast**: one PRE group per IR multicast group against 65,536 MGIDs; one L1 node per group.
* **The network stage** of a routed switch (:mod:`backends.tofino.network`): its two const tables
  (ingress: is the ingress port an up port; egress: is the egress port one) are exact tables like
  any other, one entry per up port, and depend on no p4sub table, so they go to the first stage of
  their gress. Its bridged bits (ingress port, up bit) are PHV, which the estimate does not model;
  ``resources.json`` reports the bridged header's size under ``notes.bridged_bits``.

Percentages are of the whole chip (12 stages x 80 SRAM blocks, 12 x 24 TCAM blocks, 64K groups), as
in Camus Table 1. What is not modelled: map RAMs, hash-distribution units, PHV allocation, the tables
bf-p4c makes of the apply block's own statements, and bf-p4c's freedom to trade table shapes; this is
an estimate, not a placement (docs/tofino.md, "Judged by bf-p4c", sets it beside bf-p4c's).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from backends.tofino.batch import NO_PORTS_TABLE
from backends.tofino.layout import KeyLayout, Layout, TableLayout, entries_with_ranges
from backends.tofino.network import network_stage
from backends.tofino.op_tree import timed_tree
from backends.tofino.ranges import nibbles, tcam_blocks_wide, ternary_groups
from backends.tofino.state import registers
from backends.tofino.target import Target
from compiler import ir
from compiler.base import ResourceError
from compiler.ir import lane_ports


@dataclass(frozen=True)
class TableUse:
    """What one table costs: memory blocks, the shape behind them, and the stages it occupies."""

    name: str
    gress: str
    memory: str  # "sram" (exact hash) or "tcam"
    entries: int
    size: int
    tcam_rows: int
    entry_bits: int
    entries_per_word: int
    sram_blocks: int
    tcam_blocks: int
    ixbar: int = 0  # crossbar it needs in every stage it is in: exact bytes (SRAM) or ternary groups (TCAM)
    tcam_wide: int = 1  # TCAM blocks side by side: a table split over stages moves whole rows of them
    first_stage: int = -1
    last_stage: int = -1
    passes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Estimate:
    """The resource estimate ``resources.json`` holds; percentages are of the whole chip."""

    target: str
    tables: tuple[TableUse, ...]
    stages: int
    stages_available: int
    passes: int
    sram_blocks: int
    sram_blocks_available: int
    tcam_blocks: int
    tcam_blocks_available: int
    multicast_groups: int
    multicast_groups_available: int
    pre_nodes: int
    sram_percent: float
    tcam_percent: float
    multicast_percent: float

    def to_json(self) -> dict:
        data = {"source": "estimate", **asdict(self)}  # `p4sub build` replaces the figures by bf-p4c's
        data["tables"] = [asdict(t) for t in self.tables]
        data["camus_table1"] = {"sram_percent": round(self.sram_percent, 2), "tcam_percent": round(self.tcam_percent, 2),
                                "multicast_percent": round(self.multicast_percent, 2)}
        return data


# ------------------------------------------------------------------------------------------------
# Memory per table
# ------------------------------------------------------------------------------------------------


def action_overhead_bits(table: ir.Table, pipeline: ir.Pipeline) -> tuple[int, int]:
    """(instruction bits, immediate data bits) of a table's actions."""
    actions = [pipeline.action(a) for a in table.actions]
    instr = (len(actions) - 1).bit_length() if len(actions) > 1 else 0
    data = max((sum(p.width for p in a.params) for a in actions), default=0)
    return instr, data


def _pow2_at_least(bits: int) -> int:
    return 1 << max(0, (bits - 1).bit_length())


def sram_for_exact(t: TableLayout, pipeline: ir.Pipeline, target: Target) -> tuple[int, int, int]:
    """(blocks, entry bits, entries per word) of an exact-match table."""
    key_bits = sum(k.width for k in t.keys)
    instr, data = action_overhead_bits(t.table, pipeline)
    blocks_extra = 0
    if data > target.max_immediate_bits:  # action data moves to its own table, addressed by the entry
        ad_bits = max(8, _pow2_at_least(data))
        per_word_ad = max(1, target.sram_width // ad_bits)
        width_ad = max(1, ad_bits // target.sram_width)
        blocks_extra = math.ceil(t.size / (per_word_ad * target.sram_rows)) * width_ad
        data = 0
    # The RAM row a hash selects implies 10 key bits, and in a table of ways 8 RAMs deep the RAM within
    # the way 3 more (bf-p4c stored 27 of hICN's 40 key bits at 1M ids; ITCH's (state, code) table of
    # 115k entries, 34 RAMs, kept 14 of its 24). Entries are packed bit by bit, not byte by byte.
    rough = math.ceil(t.size / (target.max_entries_per_word * target.sram_rows))
    deep_ways = rough >= 4 * 8
    stored = max(0, key_bits - target.ghost_bits - (3 if deep_ways else 0))
    entry_bits = stored + target.version_bits + instr + data
    if entry_bits <= target.sram_width:
        per_word, width = min(target.max_entries_per_word, target.sram_width // entry_bits), 1
    else:
        per_word, width = 1, math.ceil(entry_bits / target.sram_width)
    depth = math.ceil(t.size / (per_word * target.sram_rows))
    if not (key_bits < target.ghost_bits and depth == 1):
        depth = max(4, depth)
        # Identity hash (p4c's can_be_identity_hash): a key at most 8 bits wider than the RAM row
        # index takes the RAMs that hold all its 2^extra values, when that is no more than the ways.
        extra = key_bits - target.ghost_bits
        if extra <= 8:
            identity = _pow2_at_least(math.ceil((1 << max(0, extra)) / per_word))
            if identity <= depth:
                depth = identity
    return depth * width + blocks_extra, entry_bits, per_word


def tcam_match_bytes(keys: tuple[KeyLayout, ...], target: Target) -> int:
    """Ternary-crossbar bytes of a TCAM key: whole bytes per field, one byte per range nibble."""
    total = 0
    for k in keys:
        if k.match_kind == "range":
            total += nibbles(k.width, target.nibble_bits)
        else:
            total += math.ceil(k.width / 8)
    return total


def tcam_rows_reserved(t: TableLayout, target: Target) -> int:
    """TCAM rows bf-p4c reserves for the declared size (range tables per ``@entries_with_ranges``)."""
    n = entries_with_ranges(t, target)
    if n is None:
        return t.size
    worst = 1
    for key in t.range_keys:
        worst *= min(2 * nibbles(key.width, target.nibble_bits) - 1, target.multirange_row_limit)
    return n * worst + (t.size - n)


def table_use(t: TableLayout, pipeline: ir.Pipeline, target: Target) -> TableUse:
    if not t.uses_tcam:
        blocks, bits, per_word = sram_for_exact(t, pipeline, target)
        key_bytes = sum(math.ceil(k.width / 8) for k in t.keys)
        return TableUse(t.name, t.gress, "sram", len(t.entries), t.size, 0, bits, per_word, blocks, 0, key_bytes)
    rows = tcam_rows_reserved(t, target)
    match_bytes = tcam_match_bytes(t.keys, target)
    wide = tcam_blocks_wide(match_bytes, len(t.range_keys))
    tcam = math.ceil(rows / target.tcam_rows) * wide
    instr, data = action_overhead_bits(t.table, pipeline)
    sram = 0
    if instr + data:
        tind_bits = max(8, _pow2_at_least(instr + data))
        per_word = max(1, target.sram_width // tind_bits)
        sram = math.ceil(t.size / (per_word * target.sram_rows))
    return TableUse(t.name, t.gress, "tcam", len(t.entries), t.size, rows, match_bytes * 8, 1, sram, tcam,
                    ternary_groups(match_bytes, len(t.range_keys)), wide)


# ------------------------------------------------------------------------------------------------
# Dependencies and stages
# ------------------------------------------------------------------------------------------------


def _writes(table: ir.Table, pipeline: ir.Pipeline) -> set[str]:
    out: set[str] = set()
    for name in table.actions:
        for prim in pipeline.action(name).body:
            if prim.op in ("set_meta", "or_meta"):
                out.add(prim.args[0])
            elif prim.op in ("set_egress_port", "set_mcast_group", "drop"):
                out.add(f"$forwarding.{prim.op}")
    return out


def _reads(table: ir.Table) -> set[str]:
    return {k.field for k in table.keys}


def apply_order(pipeline: ir.Pipeline, control: tuple[str, ...] | None = None) -> list[tuple[str, str | None]]:
    """Tables in application order, each with the table whose miss applies it (None for top level)."""
    out: list[tuple[str, str | None]] = []
    for name in pipeline.control if control is None else control:
        out.append((name, None))
        prev = name
        while (miss := pipeline.table(prev).on_miss) is not None:
            out.append((miss, prev))
            prev = miss
    return out


def dependencies(pipeline: ir.Pipeline, order: list[tuple[str, str | None]]) -> dict[str, set[str]]:
    """For each table, the earlier tables it must follow into a later stage (match/action dependencies).

    A table applied on another's miss (directly or down a miss chain) never runs in the same packet
    as it, so the two may share a stage.
    """
    exclusive: dict[str, set[str]] = {}
    for name, parent in order:
        exclusive[name] = set()
        if parent is not None:
            exclusive[name] = {parent} | exclusive[parent]
    deps: dict[str, set[str]] = {}
    seen: list[str] = []
    for name, _ in order:
        t = pipeline.table(name)
        reads, writes = _reads(t), _writes(t, pipeline)
        deps[name] = set()
        for earlier in seen:
            if earlier in exclusive[name]:
                continue
            e = pipeline.table(earlier)
            ew = _writes(e, pipeline)
            if reads & ew or writes & ew:
                deps[name].add(earlier)
        seen.append(name)
    return deps


class _Stages:
    """Free memory per physical stage, and a greedy placement of tables in dependency order."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.sram = [target.sram_blocks_per_stage] * target.stages
        self.tcam = [target.tcam_blocks_per_stage] * target.stages
        self.ids = [target.logical_tables_per_stage] * target.stages
        self.exact_ixbar = [target.exact_ixbar_bytes_per_stage] * target.stages
        self.ternary_ixbar = [target.ternary_groups_per_stage] * target.stages

    def snapshot(self) -> tuple[list[int], ...]:
        return tuple(list(x) for x in (self.sram, self.tcam, self.ids, self.exact_ixbar, self.ternary_ixbar))

    def restore(self, snap: tuple[list[int], ...]) -> None:
        self.sram, self.tcam, self.ids, self.exact_ixbar, self.ternary_ixbar = (list(x) for x in snap)

    def place(self, use: TableUse, earliest: int, limit: int) -> tuple[int, int] | None:
        """Occupy stages from ``earliest`` (virtual; physical = virtual mod stages) until the table fits.

        Returns (first, last) virtual stage, or None when it would run past ``limit`` (exclusive).
        """
        need_s, need_t = use.sram_blocks, use.tcam_blocks
        first = None
        v = earliest
        while v < limit:
            p = v % self.target.stages
            take_s = min(need_s, self.sram[p])
            take_t = min(need_t, self.tcam[p] // use.tcam_wide * use.tcam_wide)
            # A stage is worth starting or continuing in when it holds some of the table's main memory
            # (TCAM for TCAM tables); the ternary-indirect SRAM follows wherever the TCAM goes.
            if use.memory == "tcam" and need_t:
                useful = take_t > 0
            elif need_s:
                useful = take_s > 0
            else:
                useful = need_s == need_t == 0
            ixbar = self.ternary_ixbar if use.memory == "tcam" else self.exact_ixbar
            if self.ids[p] and useful and ixbar[p] >= use.ixbar:
                self.sram[p] -= take_s
                self.tcam[p] -= take_t
                self.ids[p] -= 1
                ixbar[p] -= use.ixbar
                need_s -= take_s
                need_t -= take_t
                if first is None:
                    first = v
                if not need_s and not need_t:
                    return first, v
            v += 1
        return None


def _schedule(layout: Layout, uses: dict[str, TableUse], allow_recirculation: bool,
              independent: tuple[TableLayout, ...] = ()) -> dict[str, tuple[int, int]]:
    """Stages of every table; ``independent`` tables (the network stage's) depend on none and go first."""
    target = layout.target
    pipeline = layout.pipeline
    passes = target.passes_with_recirculation if allow_recirculation else 1
    stages = _Stages(target)
    placed: dict[str, tuple[int, int]] = {}
    ready = counter_stages(pipeline)
    for stage, rams in register_rams(pipeline, target):
        stages.sram[stage] -= rams
        stages.ids[stage] -= 1
    for control, gress in ((pipeline.control, "ingress"), (_egress_control(layout), "egress")):
        for t in independent:
            if t.gress == gress:
                spot = stages.place(uses[t.name], 0, target.stages)
                if spot is None:
                    _raise_no_room(t.name, uses, placed, target, allow_recirculation, gress)
                placed[t.name] = spot
        order = apply_order(pipeline, control) if gress == "ingress" else [(n, None) for n in control]
        deps = dependencies(pipeline, order)
        units = _units(order)
        pass_start = 0
        limit_passes = passes if gress == "ingress" else 1
        for unit in units:
            snap = stages.snapshot()
            earliest = {n: _ready(pipeline.table(n), ready) for n in unit} if gress == "ingress" else {}
            result = _place_unit(unit, deps, placed, uses, stages, pass_start, target.stages * limit_passes, earliest)
            if result is not None and result[0] // target.stages != result[1] // target.stages:
                result = None  # a unit (a table and its miss chain) must run in one pass
            if result is None and pass_start + target.stages < target.stages * limit_passes:
                stages.restore(snap)
                for name in unit:
                    placed.pop(name, None)
                pass_start += target.stages
                result = _place_unit(unit, deps, placed, uses, stages, pass_start, pass_start + target.stages,
                                     earliest)
            if result is None:
                _raise_no_room(unit[0], uses, placed, target, allow_recirculation, gress)
        if gress == "ingress" and NO_PORTS_TABLE in uses and pipeline.delivery.is_bitmap:
            # the lanes' bitmaps ORed (the renderer's tree), then the table that reads the result
            _, done = timed_tree("", list(pipeline.delivery.fields), lane_ready(pipeline, placed))
            spot = stages.place(uses[NO_PORTS_TABLE], max(done, pass_start), target.stages * limit_passes)
            if spot is None:
                _raise_no_room(NO_PORTS_TABLE, uses, placed, target, allow_recirculation, gress)
            placed[NO_PORTS_TABLE] = spot
    return placed


def lane_ready(pipeline: ir.Pipeline, placed: dict[str, tuple[int, int]]) -> list[int]:
    """Per port-bitmap field of ``pipeline.delivery`` (one per lane), the first stage at which it is
    final: after the last stage of its lane's placed tables (0 for a lane with none)."""
    last: dict[str, int] = {}
    for t in pipeline.tables:
        if t.name in placed and t.name != NO_PORTS_TABLE:
            field = lane_ports(t.lane)
            last[field] = max(last.get(field, 0), placed[t.name][1] + 1)
    return [last.get(f, 0) for f in pipeline.delivery.fields]


def register_rams(pipeline: ir.Pipeline, target: Target) -> list[tuple[int, int]]:
    """(stage, SRAM blocks) of every counter register: the RAMs its cells fill, and the spare RAM
    a stateful table takes beside them (bf-p4c: 2 blocks for 1,024 cells of 32 or 64 bits)."""
    return [(stage, math.ceil(u.size * bits / (target.sram_rows * target.sram_width)) + 1)
            for u in pipeline.updates for stage, bits in registers(u)]


def counter_stages(pipeline: ir.Pipeline) -> dict[str, int]:
    """The stage from which each counter read is in metadata ("" for every other ingress table)."""
    if not pipeline.updates:
        return {}
    ready = {"": 1}
    for u in pipeline.updates:
        for r in u.reads:
            ready[r.field] = 2 if u.total else 1
    return ready


def _ready(table: ir.Table, ready: dict[str, int]) -> int:
    return max([ready.get("", 0)] + [ready.get(k.field, 0) for k in table.keys])


def _units(order: list[tuple[str, str | None]]) -> list[list[str]]:
    units: list[list[str]] = []
    for name, parent in order:
        if parent is None:
            units.append([name])
        else:
            units[-1].append(name)
    return units


def _place_unit(unit: list[str], deps: dict[str, set[str]], placed: dict[str, tuple[int, int]],
                uses: dict[str, TableUse], stages: _Stages, pass_start: int, limit: int,
                ready: dict[str, int]) -> tuple[int, int] | None:
    lo, hi = None, None
    for name in unit:
        earliest = max([pass_start + ready.get(name, 0)] + [placed[d][1] + 1 for d in deps[name] if d in placed])
        spot = stages.place(uses[name], earliest, limit)
        if spot is None:
            return None
        placed[name] = spot
        lo = spot[0] if lo is None else min(lo, spot[0])
        hi = spot[1] if hi is None else max(hi, spot[1])
    return (lo, hi) if lo is not None else None


def _egress_control(layout: Layout) -> tuple[str, ...]:
    return tuple(t.name for t in layout.tables if t.gress == "egress")


def _raise_no_room(name: str, uses: dict[str, TableUse], placed: dict[str, tuple[int, int]], target: Target,
                   recirculation: bool, gress: str) -> None:
    last = max((v[1] for v in placed.values()), default=-1)
    use = uses[name]
    passes = target.passes_with_recirculation if recirculation else 1
    hint = "" if recirculation else ("; --allow-recirculation would give it a second pass (single-message"
                                     " packets), or --batch first evaluates only the first message of a packet")
    raise ResourceError(
        f"{gress} table {name} does not fit: it needs {use.sram_blocks} SRAM and {use.tcam_blocks} TCAM blocks "
        f"after stage {last} of {target.stages * passes} ({target.name} has {target.stages} stages, "
        f"{target.sram_blocks_per_stage} SRAM and {target.tcam_blocks_per_stage} TCAM blocks per stage){hint}")


# ------------------------------------------------------------------------------------------------
# The estimate
# ------------------------------------------------------------------------------------------------


def estimate(layout: Layout, check: bool = True) -> Estimate:
    """The resource estimate of a rendered pipeline.

    With ``check`` (what ``emit`` uses) a pipeline that cannot fit raises :class:`ResourceError`
    naming the table and the shortfall; without it the figures are returned as they are (stages
    left unassigned), which is what the benchmark needs to print a percentage above 100.
    """
    target = layout.target
    pipeline = layout.pipeline
    uses = {t.name: table_use(t, pipeline, target) for t in layout.tables}
    stage = network_stage(layout.options.network_up_ports, target)
    network = stage.table_layouts(target) if stage else ()
    if network:
        with_actions = replace(pipeline, actions=pipeline.actions + stage.actions())
        uses.update({t.name: table_use(t, with_actions, target) for t in network})
    sram = sum(u.sram_blocks for u in uses.values()) + sum(rams for _, rams in register_rams(pipeline, target))
    tcam = sum(u.tcam_blocks for u in uses.values())
    groups = len(pipeline.multicast_groups)
    placed: dict[str, tuple[int, int]] = {}
    if check:
        _check_totals(uses, sram, tcam, target)
        _check_groups(pipeline, target)
        placed = _schedule(layout, uses, layout.options.allow_recirculation, network)
    tables = []
    for t in layout.tables + network:
        u = uses[t.name]
        if t.name in placed:
            first, last = placed[t.name]
            passes = tuple(sorted({first // target.stages, last // target.stages}))
            u = TableUse(**{**asdict(u), "first_stage": first % target.stages, "last_stage": last % target.stages,
                            "passes": passes})
        tables.append(u)
    used_virtual = max((v[1] for v in placed.values()), default=-1) + 1
    n_passes = max(1, math.ceil(used_virtual / target.stages))
    stages_used = min(used_virtual, target.stages)
    return Estimate(
        target=target.name, tables=tuple(tables), stages=stages_used, stages_available=target.stages,
        passes=n_passes, sram_blocks=sram, sram_blocks_available=target.sram_total, tcam_blocks=tcam,
        tcam_blocks_available=target.tcam_total, multicast_groups=groups,
        multicast_groups_available=target.multicast_groups, pre_nodes=groups,
        sram_percent=100.0 * sram / target.sram_total, tcam_percent=100.0 * tcam / target.tcam_total,
        multicast_percent=100.0 * groups / target.multicast_groups)


def _check_totals(uses: dict[str, TableUse], sram: int, tcam: int, target: Target) -> None:
    for kind, total, cap in (("SRAM", sram, target.sram_total), ("TCAM", tcam, target.tcam_total)):
        if total > cap:
            attr = "sram_blocks" if kind == "SRAM" else "tcam_blocks"
            big = max(uses.values(), key=lambda u: getattr(u, attr))
            raise ResourceError(f"the tables need {total} {kind} blocks and {target.name} has {cap} "
                                f"({total - cap} short); the largest is {big.name} with {getattr(big, attr)} blocks "
                                f"for {big.entries} entries")


def _check_groups(pipeline: ir.Pipeline, target: Target) -> None:
    groups = pipeline.multicast_groups
    if len(groups) > target.usable_groups:
        raise ResourceError(f"{len(groups)} multicast groups; {target.name}'s PRE has {target.usable_groups} "
                            f"({len(groups) - target.usable_groups} short)")
    for g in groups:
        if not target.first_group_id <= g.id < target.multicast_groups:
            raise ResourceError(f"multicast group id {g.id} is outside {target.first_group_id}.."
                                f"{target.multicast_groups - 1}")
        bad = [p for p in g.ports if p >= 1 << target.port_width]
        if bad:
            raise ResourceError(f"multicast group {g.id}: ports {bad} do not fit {target.port_width} bits")
