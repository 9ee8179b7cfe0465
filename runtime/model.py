"""The reference switch: runs a Pipeline IR on packets exactly as a P4Runtime target would.

Two implementations of table lookup live here on purpose:

* :func:`lookup` follows the P4Runtime specification literally for one key tuple: every entry is
  tested, exact keys must be equal, a ternary key matches when ``value & mask == entry & mask``, a
  range key when ``lo <= value <= hi``, an LPM key on its prefix; among matching entries the highest
  priority wins (ternary/range tables) or the longest prefix (LPM tables).
* :class:`Model` is vectorised with numpy for batches: each table is compiled once into sorted
  arrays (the exact keys ranked into one integer, the one non-exact key resolved into disjoint
  intervals with the winning entry per interval), and a batch is looked up with gathers where the
  key space is small (dense arrays; wide exact keys with few values through a perfect hash; the
  intervals of a range table through one array per (state, position among the intervals' lows)),
  and with ``searchsorted`` otherwise.

Tests hold the two to each other on random tables; replay and the property tests use the fast one.
Each message is one row: a packet with a stack of several messages is several rows.
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from compiler import ir
from compiler.base import P4subError
from compiler.rules import validity
from runtime.batch import batch_rows
from runtime.state import StateEngine

# ------------------------------------------------------------------------------------------------
# The literal P4Runtime semantics (one key tuple at a time)
# ------------------------------------------------------------------------------------------------


def match_one(match: ir.Match, value: int, width: int) -> bool:
    if isinstance(match, ir.Exact):
        return value == match.value
    if isinstance(match, ir.Range):
        return match.lo <= value <= match.hi
    if isinstance(match, ir.Ternary):
        return value & match.mask == match.value & match.mask
    shift = width - match.prefix_len
    return (value >> shift) == (match.value >> shift)


def lookup(table: ir.Table, entries: Sequence[ir.Entry], key: Sequence[int]) -> ir.Entry | None:
    """The entry a P4Runtime target picks for ``key`` in ``table``, or None on a miss."""
    best: ir.Entry | None = None
    best_rank = -1
    lpm_index = next((i for i, k in enumerate(table.keys) if k.match_kind == "lpm"), None)
    for entry in entries:
        if all(match_one(m, v, k.width) for m, v, k in zip(entry.matches, key, table.keys)):
            if table.needs_priority:
                rank = entry.priority
            elif lpm_index is not None:
                rank = entry.matches[lpm_index].prefix_len
            else:
                return entry
            if rank > best_rank:
                best, best_rank = entry, rank
    return best


# ------------------------------------------------------------------------------------------------
# Vectorised tables
# ------------------------------------------------------------------------------------------------


def _as_array(values: Iterable[int] | np.ndarray, width: int) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values.astype(np.uint64, copy=False) if width <= 64 else values.astype(object)
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=object)
    return arr.astype(np.uint64) if width <= 64 else arr


DENSE_LIMIT = 1 << 22
#: Wide exact keys with at most this many known values (stock symbols, a few addresses) are ranked
#: through a perfect hash: one multiply and two gathers per row instead of a binary search.
HASH_LIMIT = 512
#: At most 2^BUCKET_BITS buckets per sorted list of interval lows (:meth:`_Ranker.count_le`).
BUCKET_BITS = 18


def _perfect_hash(values: np.ndarray, seed: int = 1) -> tuple[np.uint64, np.uint64, np.ndarray] | None:
    """A multiplicative hash ``(v * a mod 2^64) >> shift`` that is injective on ``values``.

    A random multiplier is injective on n values with probability about ``exp(-n^2 / 2m)`` in ``m``
    slots (the birthday bound), so the table has ``2 n^2`` slots and a few multipliers are tried.
    Returns the multiplier, the shift and the slot -> rank array (-1 for empty slots), or None.
    """
    rng = np.random.default_rng(seed)
    bits = max(1, (2 * len(values) * len(values)).bit_length())
    shift = np.uint64(64 - bits)
    for _ in range(16):
        multiplier = np.uint64(int(rng.integers(1 << 62)) * 2 + 1)
        slots = ((values * multiplier) >> shift).astype(np.int64)
        if len(np.unique(slots)) == len(values):
            slot_rank = np.full(1 << bits, -1, dtype=np.int32)
            slot_rank[slots] = np.arange(len(values), dtype=np.int32)
            return multiplier, shift, slot_rank
    return None


class _Ranker:
    """Maps values to their index among a sorted set of known values (-1 when unknown).

    Small known values (state ids, codes) get a dense index array and wide ones with few values a
    perfect hash, so ranking is a gather instead of a binary search per row; :meth:`count_le`
    (positions among interval lows) goes through buckets.
    """

    def __init__(self, known: Iterable[int], width: int) -> None:
        self.width = width
        self.values = _as_array(sorted(set(known)), width)
        self.dense: np.ndarray | None = None
        self.hashed: tuple[np.uint64, np.uint64, np.ndarray] | None = None
        if len(self.values) and width <= 64 and int(self.values[-1]) < DENSE_LIMIT:
            self.dense = np.full(int(self.values[-1]) + 1, -1, dtype=np.int64)
            self.dense[self.values.astype(np.int64)] = np.arange(len(self.values))
        elif 0 < len(self.values) <= HASH_LIMIT and width <= 64:
            self.hashed = _perfect_hash(self.values)

    def __len__(self) -> int:
        return len(self.values)

    @functools.cached_property
    def buckets(self) -> tuple[np.uint64, np.ndarray, np.ndarray] | None:
        """For :meth:`count_le` (built on first use: most rankers never count): the shift from a
        value's offset to its bucket, each bucket's count, and whether a known value lies inside it."""
        if len(self.values) < 8 or self.width > 64:
            return None
        first, span = int(self.values[0]), int(self.values[-1]) - int(self.values[0])
        bits = min(len(self.values).bit_length() + 4, BUCKET_BITS)
        shift = max(0, span.bit_length() - bits)
        starts = (np.arange((span >> shift) + 1, dtype=np.uint64) << np.uint64(shift)) + np.uint64(first)
        base = np.searchsorted(self.values, starts, side="right")
        room = np.uint64((1 << 64) - 1) - starts  # the last bucket must not wrap past 2^64 - 1
        ends = starts + np.minimum(room, np.uint64((1 << shift) - 1))
        mixed = np.searchsorted(self.values, ends, side="right") != base
        return np.uint64(shift), base.astype(np.int32), mixed

    def count_le(self, values: np.ndarray) -> np.ndarray:
        """How many known values are ``<=`` each value (``searchsorted(side="right")``), int64.

        The span of the known values is cut into equal buckets: where no known value falls strictly
        inside a value's bucket, the count is the bucket's; only the rows in the other buckets pay
        for a binary search.
        """
        if self.buckets is None:
            return np.searchsorted(self.values, values, side="right").astype(np.int64)
        shift, base, mixed = self.buckets
        first, last = self.values[0], self.values[-1]
        b = ((np.minimum(np.maximum(values, first), last) - first) >> shift).astype(np.int64)
        out = base[b].astype(np.int64)
        out[values < first] = 0
        inside = mixed[b] & (values >= first)
        if inside.any():
            out[inside] = np.searchsorted(self.values, values[inside], side="right")
        return out

    def rank(self, values: np.ndarray) -> np.ndarray:
        if len(self.values) == 0:
            return np.full(len(values), -1, dtype=np.int64)
        if self.dense is not None:
            inside = values < len(self.dense)
            return np.where(inside, self.dense[np.where(inside, values, 0).astype(np.int64)], -1)
        if self.hashed is not None:
            multiplier, shift, slot_rank = self.hashed
            rank = slot_rank[((values * multiplier) >> shift).astype(np.int64)].astype(np.int64)
            return np.where(self.values[np.maximum(rank, 0)] == values, rank, -1)
        idx = np.searchsorted(self.values, values)
        idx_c = np.minimum(idx, len(self.values) - 1)
        found = self.values[idx_c] == values
        return np.where(found, idx_c, -1).astype(np.int64)


@dataclass
class _CompiledTable:
    """Sorted arrays for one table: exact keys ranked and combined, one optional interval key."""

    table: ir.Table
    exact_idx: list[int]
    rankers: list[_Ranker]
    interval_idx: int | None
    # exact-only: sorted combined keys and the entry index per key
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    entry_of: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # with an interval key: per disjoint segment (group, lo, hi, entry), sorted by (group, lo)
    seg_group: np.ndarray | None = None
    seg_lo: np.ndarray | None = None
    seg_hi: np.ndarray | None = None
    lo_ranker: _Ranker | None = None
    seg_key: np.ndarray | None = None
    shift: int | None = None  # when (group << width | value) fits in 64 bits, no ranking of values is needed
    # (group, rank of the value among the distinct lows) -> the segment with the largest low <= value
    dense_segment: np.ndarray | None = None
    dense_entry: np.ndarray | None = None  # exact-only tables over a small group space: group -> entry


def _interval(match: ir.Match, width: int) -> tuple[int, int] | None:
    """A match as a closed interval, or None when it is not one (a ternary mask that is not a prefix)."""
    top = (1 << width) - 1
    if isinstance(match, ir.Range):
        return match.lo, match.hi
    if isinstance(match, ir.Exact):
        return match.value, match.value
    if isinstance(match, ir.Lpm):
        free = width - match.prefix_len
        lo = (match.value >> free) << free
        return lo, lo | ((1 << free) - 1)
    inv = top ^ match.mask
    if inv & (inv + 1):
        return None
    lo = match.value & match.mask
    return lo, lo | inv


def _resolve(intervals: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int]]:
    """Disjoint segments (lo, hi, entry) where the highest-ranked covering interval wins.

    ``intervals`` are (lo, hi, rank, entry). Ties go to the entry listed first, as targets that
    accept equal priorities do for overlapping entries (P4Runtime leaves that case to the target).
    """
    points = sorted({lo for lo, _, _, _ in intervals} | {hi + 1 for _, hi, _, _ in intervals})
    starts: dict[int, list] = {}
    for lo, hi, rank, entry in intervals:
        starts.setdefault(lo, []).append((-rank, entry, hi))
    heap: list = []
    out: list[tuple[int, int, int]] = []
    for i, p in enumerate(points[:-1]):
        for item in starts.get(p, ()):
            heapq.heappush(heap, item)
        while heap and heap[0][2] < p:
            heapq.heappop(heap)
        if heap:
            end = points[i + 1] - 1
            entry = heap[0][1]
            if out and out[-1][2] == entry and out[-1][1] == p - 1:
                out[-1] = (out[-1][0], end, entry)
            else:
                out.append((p, end, entry))
    return out


def _compile_table(table: ir.Table, entries: list[ir.Entry]) -> _CompiledTable:
    kinds = [k.match_kind for k in table.keys]
    non_exact = [i for i, k in enumerate(kinds) if k != "exact"]
    if len(non_exact) > 1:
        raise P4subError(f"table {table.name}: the reference model handles one non-exact key per table")
    interval_idx = non_exact[0] if non_exact else None
    exact_idx = [i for i in range(len(kinds)) if i != interval_idx]
    rankers = [_Ranker((e.matches[i].value for e in entries), table.keys[i].width) for i in exact_idx]
    ct = _CompiledTable(table, exact_idx, rankers, interval_idx)

    def group_of(entry: ir.Entry) -> int:
        g = 0
        for r, i in zip(rankers, exact_idx):
            g = g * (len(r) + 1) + int(np.searchsorted(r.values, _as_array([entry.matches[i].value], r.width))[0])
        return g

    if interval_idx is None:
        combined = np.array([group_of(e) for e in entries], dtype=np.int64)
        order = np.argsort(combined, kind="stable")
        ct.keys, ct.entry_of = combined[order], order.astype(np.int64)
        space = 1
        for r in rankers:
            space *= len(r) + 1
        if space <= DENSE_LIMIT:
            ct.dense_entry = np.full(space, -1, dtype=np.int64)
            ct.dense_entry[ct.keys[::-1]] = ct.entry_of[::-1]  # the first of equal keys wins
        return ct
    width = table.keys[interval_idx].width
    lpm = kinds[interval_idx] == "lpm"
    groups: dict[int, list] = {}
    for n, e in enumerate(entries):
        iv = _interval(e.matches[interval_idx], width)
        if iv is None:
            raise P4subError(f"table {table.name}: ternary masks that are not prefixes are not modelled")
        rank = e.matches[interval_idx].prefix_len if lpm else e.priority
        groups.setdefault(group_of(e), []).append((iv[0], iv[1], rank, n))
    seg_g, seg_lo, seg_hi, seg_e = [], [], [], []
    for g in sorted(groups):
        for lo, hi, entry in _resolve(groups[g]):
            seg_g.append(g)
            seg_lo.append(lo)
            seg_hi.append(hi)
            seg_e.append(entry)
    ct.lo_ranker = _Ranker(seg_lo, width)
    ct.seg_group = np.array(seg_g, dtype=np.int64)
    ct.seg_lo = _as_array(seg_lo, width)
    ct.seg_hi = _as_array(seg_hi, width)
    ct.entry_of = np.array(seg_e, dtype=np.int64)
    # Sort key: group * (#distinct lows + 1) + (1 + index of the segment's low among distinct lows).
    pos = np.searchsorted(ct.lo_ranker.values, ct.seg_lo, side="right") if len(seg_lo) else np.zeros(0, np.int64)
    ct.seg_key = ct.seg_group * (len(ct.lo_ranker) + 1) + pos.astype(np.int64)
    groups_bits = max(1, int(ct.seg_group.max(initial=0)).bit_length())
    if width <= 64 and groups_bits + width <= 63:
        ct.shift = width
    slots = (int(ct.seg_group.max(initial=0)) + 1) * (len(ct.lo_ranker) + 1)
    if slots <= DENSE_LIMIT and len(seg_lo):
        # Every slot (group g, position q) names the last segment at or before it; it is g's
        # candidate for values whose position among the distinct lows is q.
        rank_key = np.sort(ct.seg_key)
        candidate = np.searchsorted(rank_key, np.arange(slots), side="right") - 1
        same_group = ct.seg_group[np.argsort(ct.seg_key, kind="stable")][np.maximum(candidate, 0)] == (
            np.arange(slots) // (len(ct.lo_ranker) + 1))
        ct.dense_segment = np.where((candidate >= 0) & same_group, candidate, -1)
    if ct.shift is not None:
        ct.seg_key = (ct.seg_group.astype(np.uint64) << np.uint64(width)) | ct.seg_lo.astype(np.uint64)
    order = np.argsort(ct.seg_key, kind="stable")
    for name in ("seg_group", "seg_lo", "seg_hi", "entry_of", "seg_key"):
        setattr(ct, name, getattr(ct, name)[order])
    return ct


def _lookup_batch(ct: _CompiledTable, columns: list[np.ndarray]) -> np.ndarray:
    """Entry index per row, -1 on a miss."""
    n = len(columns[0]) if columns else 0
    group = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for r, i in zip(ct.rankers, ct.exact_idx):
        rank = r.rank(columns[i])
        valid &= rank >= 0
        group = group * (len(r) + 1) + np.maximum(rank, 0)
    if ct.interval_idx is None:
        if len(ct.keys) == 0:
            return np.full(n, -1, dtype=np.int64)
        if ct.dense_entry is not None:
            return np.where(valid, ct.dense_entry[group], -1)
        idx = np.minimum(np.searchsorted(ct.keys, group), len(ct.keys) - 1)
        hit = valid & (ct.keys[idx] == group)
        return np.where(hit, ct.entry_of[idx], -1)
    if ct.seg_key is None or len(ct.seg_key) == 0:
        return np.full(n, -1, dtype=np.int64)
    values = columns[ct.interval_idx]
    if ct.dense_segment is not None:
        pos = ct.lo_ranker.count_le(values)
        seg = ct.dense_segment[group * (len(ct.lo_ranker) + 1) + pos]
        seg_c = np.maximum(seg, 0)
        return np.where(valid & (seg >= 0) & (values <= ct.seg_hi[seg_c]), ct.entry_of[seg_c], -1)
    if ct.shift is not None:
        key = (group.astype(np.uint64) << np.uint64(ct.shift)) | values.astype(np.uint64)
    else:
        pos = ct.lo_ranker.count_le(values)
        key = group * (len(ct.lo_ranker) + 1) + pos
    idx = np.searchsorted(ct.seg_key, key, side="right") - 1
    idx_c = np.maximum(idx, 0)
    hit = valid & (idx >= 0) & (ct.seg_group[idx_c] == group) & (ct.seg_lo[idx_c] <= values) & (values <= ct.seg_hi[idx_c])
    return np.where(hit, ct.entry_of[idx_c], -1)


# ------------------------------------------------------------------------------------------------
# The pipeline
# ------------------------------------------------------------------------------------------------


@dataclass
class Result:
    """Per row: the egress port (-1 none), the multicast group (0 none), drop flag, final metadata."""

    port: np.ndarray
    group: np.ndarray
    dropped: np.ndarray
    metadata: dict[str, np.ndarray]
    calls: dict[str, list[tuple[np.ndarray, np.ndarray]]]
    group_ports: dict[int, frozenset[int]]

    def ports_of(self, i: int) -> frozenset[int]:
        if self.group[i]:
            return self.group_ports[int(self.group[i])]
        if self.port[i] >= 0 and not self.dropped[i]:
            return frozenset([int(self.port[i])])
        return frozenset()

    def port_sets(self) -> list[frozenset[int]]:
        return [self.ports_of(i) for i in range(len(self.port))]


def _args_array(entries: list[ir.Entry]) -> np.ndarray | None:
    """Action arguments as a 2-D array (rows = entries), int64 when they fit, else Python ints."""
    if not entries:
        return None
    width = max(len(e.args) for e in entries)
    rows = [list(e.args) + [0] * (width - len(e.args)) for e in entries]
    if all(0 <= a < (1 << 63) for row in rows for a in row):
        return np.array(rows, dtype=np.int64).reshape(len(rows), width)
    return np.array(rows, dtype=object).reshape(len(rows), width)


class Model:
    """A compiled Pipeline IR, ready to run batches of messages given as field columns."""

    def __init__(self, pipeline: ir.Pipeline) -> None:
        self.pipeline = pipeline
        by_table: dict[str, list[ir.Entry]] = {t.name: [] for t in pipeline.tables}
        for e in pipeline.entries:
            by_table[e.table].append(e)
        self.entries: dict[str, list[ir.Entry]] | None = by_table  # None in a for_batches() copy
        self.tables = {t.name: t for t in pipeline.tables}
        self.actions = {a.name: a for a in pipeline.actions}
        self.compiled = {name: _compile_table(self.tables[name], es) for name, es in by_table.items()}
        self.args = {name: _args_array(es) for name, es in by_table.items()}
        self.action_names = {name: sorted({e.action for e in es}) for name, es in by_table.items()}
        self.action_code = {name: np.array([self.action_names[name].index(e.action) for e in es], dtype=np.int64)
                            for name, es in by_table.items()}
        self.group_ports = {g.id: frozenset(g.ports) for g in pipeline.multicast_groups}
        self.meta_width = {m.name: m.width for m in pipeline.metadata}
        # The default path's tables (compiler.default_path) are filled by the user at run time: with
        # no entries they take their default action, so their keys need no input.
        keys = {k.field for t in pipeline.tables for k in t.keys if not k.field.startswith("meta.")
                and (t.name not in pipeline.default_control or by_table[t.name])}
        # Stateful values are computed from the counters' own inputs (runtime.state), not read.
        self.state = StateEngine(pipeline) if pipeline.updates else None
        if self.state is not None:
            keys = (keys - set(pipeline.state_reads())) | set(self.state.inputs) | set(self.state.validity)
        self.guard = tuple(validity.field_name(h) for h in pipeline.guard_headers())
        self.queried = tuple(validity.field_name(h) for h in pipeline.queried_headers())
        #: The packet fields the tables read (what a reader must supply) and the validity bits the
        #: program tests (in its guard or as keys), which :meth:`with_validity` can derive.
        self.inputs = sorted(f for f in keys if not validity.is_validity(f))
        self.validity = sorted({f for f in keys if validity.is_validity(f)} | set(self.guard)
                               | (set(self.queried) if pipeline.default_control else set()))
        self.widths = {k.field: k.width for t in pipeline.tables for k in t.keys} | {g: 1 for g in self.validity}
        if self.state is not None:
            self.widths.update(self.state.widths)

    def set_entries(self, table: str, entries: Sequence[ir.Entry]) -> None:
        """Replace one table's entries, recompiling that table only (an update landing write by
        write: runtime.update_replay)."""
        es = list(entries)
        self.entries[table] = es
        self.compiled[table] = _compile_table(self.tables[table], es)
        self.args[table] = _args_array(es)
        self.action_names[table] = sorted({e.action for e in es})
        self.action_code[table] = np.array([self.action_names[table].index(e.action) for e in es], dtype=np.int64)

    def set_groups(self, groups: Iterable[ir.MulticastGroup]) -> None:
        self.group_ports = {g.id: frozenset(g.ports) for g in groups}

    def for_batches(self) -> "Model":
        """A copy that runs batches (:meth:`run`) exactly as this model does, without the IR entries
        and multicast groups its tables and groups were compiled from.

        That IR is most of a pickled model (for 100k rules: 31,701 entries and 1.7M group ports,
        half a second to unpickle in every process it is shipped to) and :meth:`run` never reads it:
        replay broadcasts this copy to Spark's executors and caches it. :meth:`run_one`, which
        traces the entries one message hits, needs a model built from the pipeline itself.
        """
        import copy
        import dataclasses

        slim = copy.copy(self)
        slim.pipeline = dataclasses.replace(self.pipeline, entries=(), multicast_groups=())
        slim.entries = None
        return slim

    def reset_state(self) -> None:
        """Forget the counters (a switch that just started); a no-op for a stateless pipeline."""
        if self.state is not None:
            self.state.reset()

    def with_validity(self, columns: Mapping[str, Sequence[int] | np.ndarray], n: int | None = None) -> dict:
        """``columns`` completed with the validity bits the program tests.

        A validity column ``h.$valid`` given is used as is (readers that parse packets give it, as
        the switch's parser decides it); one left out is 1: rows of a reader that yields only
        complete messages carry every header they have fields of. The fields of a header that is
        invalid in every row may be left out (they read as 0): the diagram tests validity wherever
        such a field would decide.
        """
        out = dict(columns)
        if n is None:
            n = batch_rows(columns, None)
        for f in self.validity:
            if f not in out:
                out[f] = np.ones(n, dtype=np.uint64)
        for f in self.inputs:
            if f not in out:
                valid = out.get(validity.field_name(f.split(".", 1)[0]))
                if valid is not None and not np.asarray(valid).astype(bool).any():
                    out[f] = np.zeros(n, dtype=np.uint64) if self.widths[f] <= 64 else np.zeros(n, dtype=object)
        return out

    def run(self, columns: Mapping[str, Sequence[int] | np.ndarray], rows: int | None = None) -> Result:
        """Run a batch given as field columns. ``rows`` is the batch size; it may be left out when
        there are columns (then they give it), and must be given for a pipeline that reads no field.

        Rows whose guard headers are not all valid skip the tables and are dropped (the program's
        ``if`` around the tables)."""
        n = batch_rows({f: columns[f] for f in self.inputs if f in columns} or columns, rows)
        columns = self.with_validity(columns, n)
        missing = [f for f in self.inputs if f not in columns]
        if missing:
            raise P4subError(f"packets lack field(s) {', '.join(missing)} that the pipeline matches on")
        cols = {f: _as_array(columns[f], self.widths[f]) for f in self.inputs + self.validity}
        meta = {m: np.zeros(n, dtype=np.uint64) if w <= 64 else np.zeros(n, dtype=object)
                for m, w in self.meta_width.items()}
        if self.state is not None:
            # Every row updates the counters first (before the default path and the guard), then
            # the tables match what it read, which is also left in the reads' metadata.
            cols.update(self.state.run(columns, n))
            for attribute, read in self.pipeline.state_reads().items():
                meta[read.field] = cols[attribute].copy()
        res = Result(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), meta, {},
                     self.group_ports)
        rows = np.arange(n)
        if self.pipeline.default_control:
            looked_at = np.zeros(n, dtype=bool)
            for q in self.queried:
                looked_at |= cols[q].astype(bool)
            if not self.queried:
                looked_at[:] = True
            for name in self.pipeline.default_control:
                self._apply(name, rows[~looked_at], cols, res)
            rows = rows[looked_at]
        if self.guard:
            passed = np.ones(len(rows), dtype=bool)
            for g in self.guard:
                passed &= cols[g][rows].astype(bool)
            res.dropped[rows[~passed]] = True
            rows = rows[passed]
        for name in self.pipeline.control:
            self._apply(name, rows, cols, res)
        if self.pipeline.delivery.is_bitmap:
            self._deliver_bitmap(res, rows)
        return res

    def _deliver_bitmap(self, res: Result, rows: np.ndarray) -> None:
        """Port-bitmap delivery of the rows the tables ran for: a packet with bits set goes to the
        delivery group, and each copy whose port's bit is clear is dropped at the egress. The copies
        that survive are reported as a group per distinct bitmap (ids past every real group's), so
        readers of ``Result`` need not know."""
        delivery = self.pipeline.delivery
        bitmap = res.metadata[delivery.fields[0]].copy()
        for f in delivery.fields[1:]:
            bitmap |= res.metadata[f]
        res.metadata[delivery.fields[0]] = bitmap
        values, inverse = np.unique(bitmap[rows], return_inverse=True)
        base = max(self.group_ports, default=0) + 1
        group_ports = dict(self.group_ports)
        ids = np.zeros(len(values), dtype=np.int64)
        for k, v in enumerate(values.tolist()):
            if int(v):
                ids[k] = base + k
                group_ports[base + k] = delivery.ports_of(int(v))
        group = ids[inverse.reshape(-1)] if len(rows) else np.zeros(0, dtype=np.int64)
        res.group[rows] = group
        res.port[rows] = -1
        res.dropped[rows] = group == 0
        res.group_ports = group_ports

    def _apply(self, name: str, rows: np.ndarray, cols: dict[str, np.ndarray], res: Result) -> None:
        table = self.tables[name]
        ct = self.compiled[name]
        if len(self.action_code[name]) and len(rows):  # the table has entries
            key_cols = [(res.metadata[k.field] if k.field.startswith("meta.") else cols[k.field])[rows] for k in table.keys]
            hit_entry = _lookup_batch(ct, key_cols)
        else:
            hit_entry = np.full(len(rows), -1, dtype=np.int64)
        hit = hit_entry >= 0
        if hit.any():
            hit_rows, hit_idx = rows[hit], hit_entry[hit]
            codes = self.action_code[name][hit_idx]
            for code, action in enumerate(self.action_names[name]):
                sel = codes == code if len(self.action_names[name]) > 1 else slice(None)
                args = self.args[name][hit_idx[sel]] if self.args[name] is not None else None
                self._execute(action, hit_rows[sel], args, res)
        missed = rows[~hit]
        if len(missed):
            if table.on_miss:
                self._apply(table.on_miss, missed, cols, res)
            else:
                default_args = np.tile(np.array(table.default_args, dtype=np.int64), (len(missed), 1)) if table.default_args else None
                self._execute(table.default_action, missed, default_args, res)

    def _execute(self, action_name: str, rows: np.ndarray, args: np.ndarray | None, res: Result) -> None:
        action = self.actions[action_name]
        param_index = {p.name: i for i, p in enumerate(action.params)}

        def arg(name: str) -> np.ndarray:
            return args[:, param_index[name]] if args is not None else np.zeros(len(rows), np.int64)

        for prim in action.body:
            if prim.op == "set_meta":
                res.metadata[prim.args[0]][rows] = arg(prim.args[1]).astype(res.metadata[prim.args[0]].dtype)
            elif prim.op == "or_meta":
                column = res.metadata[prim.args[0]]
                column[rows] = column[rows] | arg(prim.args[1]).astype(column.dtype)
            elif prim.op == "set_egress_port":
                res.port[rows] = arg(prim.args[0])
                res.dropped[rows] = False
            elif prim.op == "set_mcast_group":
                res.group[rows] = arg(prim.args[0])
            elif prim.op == "drop":
                res.dropped[rows] = True
            elif prim.op == "user":
                res.calls.setdefault(prim.args[0], []).append((rows, args if args is not None else np.zeros((len(rows), 0))))

    # -- one packet, literally --------------------------------------------------------------
    def run_one(self, values: Mapping[str, int]) -> tuple[frozenset[int], list[tuple[str, ir.Entry | None]]]:
        """One message through :func:`lookup` (no vectorisation); returns its ports and the trace.

        Validity as in :meth:`with_validity`; a packet that carries none of the queried headers goes
        through the default path, one without a guard header through no table."""
        if self.entries is None:
            raise P4subError("this copy of the model (Model.for_batches) runs batches only; run_one needs Model(pipeline)")
        values = {f: int(c[0]) for f, c in self.with_validity({f: [v] for f, v in values.items()}, 1).items()}
        meta = {m: 0 for m in self.meta_width}
        port, group, dropped = -1, 0, False
        trace: list[tuple[str, ir.Entry | None]] = []
        control = self.pipeline.control
        if self.pipeline.default_control and self.queried and not any(values.get(q, 0) for q in self.queried):
            control = self.pipeline.default_control
        elif not all(values.get(g, 0) for g in self.guard):
            return frozenset(), trace

        def apply(name: str) -> None:
            nonlocal port, group, dropped
            table = self.tables[name]
            entries = self.entries[name]
            key = [meta[k.field] if k.field.startswith("meta.") else values[k.field] for k in table.keys] if entries else []
            entry = lookup(table, entries, key) if entries else None
            trace.append((name, entry))
            if entry is None and table.on_miss:
                apply(table.on_miss)
                return
            action_name, args = (entry.action, entry.args) if entry else (table.default_action, table.default_args)
            action = self.actions[action_name]
            bound = dict(zip((p.name for p in action.params), args))
            for prim in action.body:
                if prim.op == "set_meta":
                    meta[prim.args[0]] = bound[prim.args[1]]
                elif prim.op == "or_meta":
                    meta[prim.args[0]] |= bound[prim.args[1]]
                elif prim.op == "set_egress_port":
                    port, dropped = bound[prim.args[0]], False
                elif prim.op == "set_mcast_group":
                    group = bound[prim.args[0]]
                elif prim.op == "drop":
                    dropped = True

        for name in control:
            apply(name)
        delivery = self.pipeline.delivery
        if delivery.is_bitmap and control is self.pipeline.control:
            bitmap = 0
            for f in delivery.fields:
                bitmap |= meta[f]
            return delivery.ports_of(bitmap), trace
        if group:
            return self.group_ports[group], trace
        return (frozenset([port]) if port >= 0 and not dropped else frozenset()), trace
