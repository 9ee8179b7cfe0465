"""How a Pipeline IR's tables become Tofino tables: one match kind per key and the entries to install.

The IR is target-neutral; Tofino adds one restriction and one opportunity:

* a ``range`` key must fit in five PHV nibbles (20 bits, :attr:`Target.widest_range_key`). A wider
  range key becomes two keys, slices of its field: the high bits ``ternary``, the low bits a native
  ``range`` (:mod:`backends.tofino.slices`; every range entry becomes at most three pieces with its
  priority, or, in a code table, priority steps). When that key would be wider in TCAM blocks than
  the whole field as ``ternary``, the field stays whole and every range entry becomes its prefix
  cover (all prefixes keep the entry's priority, so lookups are unchanged: one range's prefixes are
  disjoint, and entries of different ranges are ordered by priority exactly as before). This choice
  reads the keys' widths only, so the program's keys do not change with the rules;
* a range key whose entries are all single values is an ``exact`` key (SRAM hash instead of TCAM),
  when no two entries then collide; so is a narrow one whose ranges hold few values per entry (a
  compressed code: each range becomes one exact entry per value, ``expand_points``), TCAM being the
  scarcer memory;
* among keys that may stay ``range``, the cheaper of the nibble encoding and the prefix cover is
  taken, counted in TCAM rows over the table's actual entries.

The choices depend on the entries, so the program and ``entries.bfrt.json`` are always rendered
together from one :class:`Layout`; :func:`plan` is the single place that makes them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from backends.tofino.ranges import nibble_rows, nibbles, prefix_cover, tcam_blocks_wide
from backends.tofino.slices import pieces, steps
from backends.tofino.target import TOFINO1, Target
from compiler import ir
from compiler.base import ResourceError, limits


@dataclass(frozen=True)
class TofinoOptions:
    """Choices the Tofino backend makes that a user may want to change.

    ``points_as_exact`` turns range keys whose entries are all single values into exact keys;
    ``allow_recirculation`` lets a pipeline with more dependent tables than stages run in two passes
    (see :mod:`backends.tofino.resources`); ``headroom`` sizes tables whose entry count grew by prefix
    expansion, like :class:`compiler.tables.TableOptions`; ``batch`` says how packets with several
    messages are evaluated (:mod:`backends.tofino.batch`); ``variable_advance`` what the parser does
    where the spec skips a packet-dependent number of bytes, which Tofino's parser cannot:
    ``stop`` parses no further (the rest of the packet is payload), ``refuse`` raises;
    ``fold_misses`` when miss tables become wildcard entries of their field tables
    (:mod:`backends.tofino.fold`); ``network_up_ports`` makes the program one switch of a routed
    network, with the network stage of :mod:`backends.tofino.network` (None: a lone switch).
    """

    target: Target = TOFINO1
    points_as_exact: bool = True
    expand_points: int = 16  # a narrow range key becomes exact when its ranges hold at most this many values per entry
    expand_limit: int = 1 << 20  # ... and at most this many in all
    allow_recirculation: bool = False
    headroom: float = 1.25
    batch: str = "auto"
    variable_advance: str = "stop"
    fold_misses: str = "auto"  # "auto" (only when it does not fit otherwise), "always", "never"
    network_up_ports: tuple[int, ...] | None = None
    wide_ranges: str = "auto"  # a range key too wide for "range": "auto" (cheapest), "prefix-cover", "slices"
    low_slice_bits: int = 0  # the low slice's width when sliced (0: the cheapest multiple of a nibble)


@dataclass(frozen=True)
class KeyLayout:
    """A key as Tofino matches it. ``encoding`` says how IR matches were turned into Tofino ones."""

    field: str
    width: int
    match_kind: str
    ir_kind: str
    encoding: str  # "native", "prefix-cover" (range -> ternary), "points"/"expand" (range -> exact values),
    # "slices"/"steps" (a wide range key cut in a ternary high and a range low slice, backends.tofino.slices)
    bits: tuple[int, int] | None = None  # (msb, lsb) of ``field`` when the key matches a slice of it

    @property
    def name(self) -> str:
        """The key's control-plane name: the field, or its slice as P4 writes it (``add_order.price[15:0]``)."""
        return self.field if self.bits is None else f"{self.field}[{self.bits[0]}:{self.bits[1]}]"


@dataclass(frozen=True)
class TableLayout:
    """One table as rendered: keys, entries (expanded), declared size and TCAM rows the entries use."""

    name: str
    table: ir.Table
    keys: tuple[KeyLayout, ...]
    entries: tuple[ir.Entry, ...]
    size: int
    tcam_rows: int
    gress: str = "ingress"

    @property
    def uses_tcam(self) -> bool:
        return any(k.match_kind in ("ternary", "range", "lpm") for k in self.keys)

    @property
    def needs_priority(self) -> bool:
        return any(k.match_kind in ("ternary", "range") for k in self.keys)

    @property
    def range_keys(self) -> tuple[KeyLayout, ...]:
        return tuple(k for k in self.keys if k.match_kind == "range")

    @property
    def groups(self) -> list[tuple[KeyLayout, ...]]:
        """The Tofino keys of each IR key, in order: (high, low) for a sliced one, else the one key."""
        out: list[tuple[KeyLayout, ...]] = []
        keys = iter(self.keys)
        for k in keys:
            out.append((k, next(keys)) if k.encoding in ("slices", "steps") else (k,))
        return out


@dataclass(frozen=True)
class Layout:
    """Every table of a pipeline as rendered on one target, in the IR's table order."""

    pipeline: ir.Pipeline
    target: Target
    tables: tuple[TableLayout, ...]
    options: TofinoOptions = field(default_factory=TofinoOptions)

    def table(self, name: str) -> TableLayout:
        return next(t for t in self.tables if t.name == name)


def plan(pipeline: ir.Pipeline, options: TofinoOptions = TofinoOptions(),
         gress: dict[str, str] | None = None) -> Layout:
    """Choose every key's Tofino match kind and expand the entries accordingly.

    ``gress`` says which tables run in the egress (default: all in the ingress).
    """
    by_table: dict[str, list[ir.Entry]] = {t.name: [] for t in pipeline.tables}
    for entry in pipeline.entries:
        by_table[entry.table].append(entry)
    gress = gress or {}
    tables = tuple(_table_layout(t, by_table[t.name], options, gress.get(t.name, "ingress")) for t in pipeline.tables)
    return Layout(pipeline, options.target, tables, options)


def _table_layout(table: ir.Table, entries: list[ir.Entry], options: TofinoOptions, gress: str) -> TableLayout:
    limits.checkpoint()  # a compile's --budget time=/memory= (compiler.base.limits): laying out tables takes minutes at scale
    target = options.target
    groups: list[tuple[KeyLayout, ...]] = []  # the Tofino keys of each IR key (two for a sliced one)
    for i, key in enumerate(table.keys):
        if key.match_kind not in target.match_kinds:
            raise ResourceError(f"table {table.name}: key {key.field} has match kind {key.match_kind!r}, "
                                f"which {target.name} does not have ({', '.join(target.match_kinds)})")
        if key.match_kind == "range":
            groups.append(_range_choice(table, i, entries, options))
        else:
            groups.append((KeyLayout(key.field, key.width, key.match_kind, key.match_kind, "native"),))
    keys = tuple(k for group in groups for k in group)
    if keys and keys[0].encoding == "steps":
        rendered = _step_entries(table, entries, keys, target)
    else:
        rendered = _render_entries(entries, groups)
    rows = sum(_rows(e, keys, target) for e in rendered) if any(k.match_kind != "exact" for k in keys) else 0
    size = table.size
    if len(rendered) > len(entries):
        size = max(size, math.ceil(len(rendered) * options.headroom))
    return TableLayout(table.name, table, keys, tuple(rendered), size, rows, gress)


def _range_choice(table: ir.Table, index: int, entries: list[ir.Entry],
                  options: TofinoOptions) -> tuple[KeyLayout, ...]:
    target = options.target
    key = table.keys[index]

    def whole(kind: str, encoding: str) -> tuple[KeyLayout, ...]:
        return (KeyLayout(key.field, key.width, kind, key.match_kind, encoding),)

    ranges = [e.matches[index] for e in entries]
    if options.points_as_exact and ranges and all(r.lo == r.hi for r in ranges):
        others_exact = all(k.match_kind == "exact" for j, k in enumerate(table.keys) if j != index)
        distinct = len({tuple(_exact_value(m) for m in e.matches) for e in entries}) == len(entries)
        if others_exact and distinct:
            return whole("exact", "points")
    fits = nibbles(key.width, target.nibble_bits) <= target.max_range_nibbles
    if fits and options.expand_points and _expandable(table, index, entries, options):
        return whole("exact", "expand")
    if not fits:
        return _wide_choice(table, index, ranges, options)
    nibble_cost = sum(nibble_rows(r.lo, r.hi, key.width, target.nibble_bits) for r in ranges)
    cover_cost = sum(len(prefix_cover(r.lo, r.hi, key.width)) for r in ranges)
    if cover_cost < nibble_cost:
        return whole("ternary", "prefix-cover")
    return whole("range", "native")


def _wide_choice(table: ir.Table, index: int, ranges: list[ir.Range],
                 options: TofinoOptions) -> tuple[KeyLayout, ...]:
    """A range key wider than a native range: (high, low) slices (:mod:`backends.tofino.slices`), the
    low slice the widest whole number of nibbles up to 20 bits that keeps the table's key in the
    fewest TCAM blocks side by side; or its prefix cover, when that alone needs fewer blocks side by
    side. Decided from the keys' widths, not the entries, so that the program (its keys) stays the
    same when the rules change; ``options.wide_ranges`` and ``options.low_slice_bits`` may force it."""
    target = options.target
    key = table.keys[index]
    other_bytes = sum(math.ceil(k.width / 8) for j, k in enumerate(table.keys) if j != index)
    low_widths = ([options.low_slice_bits] if options.low_slice_bits else
                  range(target.nibble_bits, target.widest_range_key + 1, target.nibble_bits))
    sliced = [(tcam_blocks_wide(other_bytes + math.ceil((key.width - low) / 8) + nibbles(low, target.nibble_bits)),
               -low) for low in low_widths if 0 < low < key.width]
    cover_wide = tcam_blocks_wide(other_bytes + math.ceil(key.width / 8))
    if options.wide_ranges == "prefix-cover" or not sliced or (
            options.wide_ranges == "auto" and cover_wide < min(sliced)[0]):
        return (KeyLayout(key.field, key.width, "ternary", key.match_kind, "prefix-cover"),)
    low = -min(sliced)[1]
    encoding = "steps" if _stepped(table, ranges) else "slices"
    return (KeyLayout(key.field, key.width - low, "ternary", key.match_kind, encoding, (key.width - 1, low)),
            KeyLayout(key.field, low, "range", key.match_kind, encoding, (low - 1, 0)))


def _stepped(table: ir.Table, ranges: list[ir.Range]) -> bool:
    """Whether a table may be rendered as :func:`slices.steps`: a code table (nothing reads whether it
    hit, so a value in a gap may match an entry that runs its default action) whose one key's
    entries are disjoint."""
    if table.role != "code" or len(table.keys) != 1 or table.on_miss is not None or not ranges:
        return False
    ordered = sorted(ranges, key=lambda r: r.lo)
    return all(a.hi < b.lo for a, b in zip(ordered, ordered[1:]))


def _filled(ranges: list[ir.Range], width: int) -> list[tuple[int, int]]:
    """Disjoint ranges, sorted, with the gaps between them and after the last one as ranges of their own."""
    out: list[tuple[int, int]] = []
    for r in sorted(ranges, key=lambda r: r.lo):
        if out and r.lo > out[-1][1] + 1:
            out.append((out[-1][1] + 1, r.lo - 1))
        out.append((r.lo, r.hi))
    if out[-1][1] < (1 << width) - 1:
        out.append((out[-1][1] + 1, (1 << width) - 1))
    return out


def _step_entries(table: ir.Table, entries: list[ir.Entry], keys: tuple[KeyLayout, ...],
                  target: Target) -> list[ir.Entry]:
    """A code table's entries as :func:`slices.steps`: interval ``i`` (gaps included, which run the
    default action) gets priority ``i + 1``."""
    width = table.keys[0].width
    low = keys[1].width
    by_lo = {e.matches[0].lo: e for e in entries}
    intervals = _filled([e.matches[0] for e in entries], width)
    out: list[ir.Entry] = []
    for piece, i in steps(intervals, width, low, target.nibble_bits):
        entry = by_lo.get(intervals[i][0])
        action, args = (entry.action, entry.args) if entry is not None else (table.default_action, table.default_args)
        out.append(ir.Entry(table.name, (ir.Ternary(piece.high_value, piece.high_mask),
                                         ir.Range(piece.low_lo, piece.low_hi)), action, args, i + 1))
    return out


def _expandable(table: ir.Table, index: int, entries: list[ir.Entry], options: TofinoOptions) -> bool:
    """Whether the range key is cheaper as exact values in SRAM: the other keys exact, the ranges
    holding at most ``expand_points`` times as many values as there are entries (a small domain, such
    as a compressed code), and no two entries sharing a value (they partition each state's domain)."""
    if not entries or any(k.match_kind != "exact" for j, k in enumerate(table.keys) if j != index):
        return False
    points = sum(e.matches[index].hi - e.matches[index].lo + 1 for e in entries)
    if points > options.expand_points * len(entries) or points > options.expand_limit:
        return False
    seen: set[tuple] = set()
    for e in entries:
        rest = tuple(_exact_value(m) for j, m in enumerate(e.matches) if j != index)
        r = e.matches[index]
        for v in range(r.lo, r.hi + 1):
            if (rest, v) in seen:
                return False
            seen.add((rest, v))
    return True


def _exact_value(match: ir.Match) -> object:
    if isinstance(match, ir.Range):
        return match.lo
    return match


def _render_entries(entries: list[ir.Entry], groups: list[tuple[KeyLayout, ...]]) -> list[ir.Entry]:
    """Each IR entry as the Tofino entries that match exactly its values (one per combination of
    its keys' re-encodings), with its priority where the table has one."""
    if all(g[0].encoding == "native" for g in groups):
        return list(entries)
    prioritised = any(k.match_kind in ("ternary", "range") for g in groups for k in g)
    out: list[ir.Entry] = []
    for entry in entries:
        options: list[list[tuple[ir.Match, ...]]] = []
        for match, group in zip(entry.matches, groups):
            enc = group[0].encoding
            if enc == "points":
                options.append([(ir.Exact(match.lo),)])
            elif enc == "expand":
                options.append([(ir.Exact(v),) for v in range(match.lo, match.hi + 1)])
            elif enc == "prefix-cover":
                options.append([(ir.Ternary(v, m),) for v, m in prefix_cover(match.lo, match.hi, group[0].width)])
            elif enc == "slices":
                full = group[0].width + group[1].width
                options.append([(ir.Ternary(p.high_value, p.high_mask), ir.Range(p.low_lo, p.low_hi))
                                for p in pieces(match.lo, match.hi, full, group[1].width)])
            else:
                options.append([(match,)])
        for combo in _product(options):
            out.append(ir.Entry(entry.table, tuple(m for part in combo for m in part), entry.action, entry.args,
                                entry.priority if prioritised else 0))
    return out


def _product(options: list[list[tuple[ir.Match, ...]]]) -> list[list[tuple[ir.Match, ...]]]:
    combos: list[list[tuple[ir.Match, ...]]] = [[]]
    for choices in options:
        combos = [c + [m] for c in combos for m in choices]
    return combos


def _rows(entry: ir.Entry, keys: list[KeyLayout] | tuple[KeyLayout, ...], target: Target) -> int:
    """TCAM rows one rendered entry takes: the product of its range keys' nibble rows (1 otherwise)."""
    rows = 1
    for match, key in zip(entry.matches, keys):
        if key.match_kind == "range":
            rows *= nibble_rows(match.lo, match.hi, key.width, target.nibble_bits)
    return rows


def entries_with_ranges(layout: TableLayout, target: Target) -> int | None:
    """The ``@entries_with_ranges(N)`` that makes bf-p4c reserve at least the rows this table needs.

    bf-p4c reserves ``N * L + (size - N)`` rows for a range table, L being the most rows one entry
    can take (``min(2 * nibbles - 1, 8)``); without the pragma it assumes N = size / 4.
    """
    if not layout.range_keys:
        return None
    worst = 1
    for key in layout.range_keys:
        worst *= min(2 * nibbles(key.width, target.nibble_bits) - 1, target.multirange_row_limit)
    if worst <= 1:
        return None
    n_entries = max(1, len(layout.entries))
    needed = math.ceil(layout.tcam_rows * layout.size / n_entries)
    n = math.ceil(max(0, needed - layout.size) / (worst - 1))
    return max(1, min(layout.size, n))


def match_kind_counts(layout: Layout) -> dict[str, int]:
    """How many keys of each Tofino match kind the program declares (for reports)."""
    return dict(Counter(k.match_kind for t in layout.tables for k in t.keys))
