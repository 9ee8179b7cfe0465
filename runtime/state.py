"""The reference model's state: counters kept over a trace, batch after batch, vectorised.

A stateful pipeline (:class:`compiler.ir.StateUpdate`) updates its counters before any table and
the tables match the values read back. :class:`StateEngine` does that for whole batches of rows
with numpy, carrying the registers from one batch to the next; the semantics it implements are in
docs/compiler.md ("Stateful subscriptions"), and a plain per-message loop in the tests, which shares
no code with this module, is the oracle it is held to.

How a batch is done without a Python loop per message, for one counter:

* time: ``timestamp_ns // 1000``, made non-decreasing by a running maximum carried across batches
  (a switch's clock never goes back);
* the rows that update (their ``when`` headers valid) are sorted by cell, stably, so each cell's
  rows form a *run* in arrival order with non-decreasing times;
* window starts: a window opens at the first row whose time reaches the cell's current end. With
  all runs in one sorted array keyed ``(run, time)``, one ``searchsorted`` finds the next start of
  every run at once; a round per window (the most windows any cell opens in the batch), each over
  the runs still open;
* counts and sums are segmented scans: positions and cumulative sums restarted at every window
  start, plus the carried count and sum for rows that continue the cell's window from earlier
  batches; the last row of each run writes the cell back.
"""

from __future__ import annotations

import zlib
from typing import Any, Mapping

import numpy as np

from compiler import ir
from compiler.base import P4subError
from compiler.rules import validity
from compiler.stateful import field_width

#: The column that gives each row's ingress time, in nanoseconds (replay's readers fill it from the capture).
TIME_COLUMN = "timestamp_ns"


def cells(values: np.ndarray, width: int, size: int) -> np.ndarray:
    """Each key's cell: the CRC-32 of its big-endian bytes (width rounded up to bytes), modulo ``size``."""
    if size == 1 or len(values) == 0:
        return np.zeros(len(values), dtype=np.int64)
    nbytes = (width + 7) // 8
    uniq, inverse = np.unique(values, return_inverse=True)
    hashed = np.array([zlib.crc32(int(v).to_bytes(nbytes, "big")) % size for v in uniq.tolist()], dtype=np.int64)
    return hashed[inverse.reshape(-1)]


class StateEngine:
    """The registers of a pipeline's updates, and how a batch of rows reads and changes them."""

    def __init__(self, pipeline: ir.Pipeline) -> None:
        self.updates = pipeline.updates
        spec = pipeline.spec
        refs = {ref for u in self.updates for ref in (u.index, u.value) if ref}
        self.widths = {ref: field_width(spec, ref) for ref in refs}
        #: Packet fields the updates read (keys and summed fields) and the validity columns they test.
        self.inputs = sorted(refs)
        self.validity = sorted({validity.field_name(h) for u in self.updates for h in u.when})
        self.reset()

    def reset(self) -> None:
        """Empty registers and a clock at 0: a switch that just started."""
        self.clock = 0
        self.end = {u.counter: np.zeros(u.size, dtype=np.int64) for u in self.updates}
        self.count = {u.counter: np.zeros(u.size, dtype=np.uint64) for u in self.updates}
        self.total = {u.counter: np.zeros(u.size, dtype=np.uint64) for u in self.updates}

    def run(self, columns: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
        """Update the registers with ``n`` rows in order and return, per rule attribute a read stands
        for, the value each row reads (0 for rows that do not carry the counter's headers)."""
        if TIME_COLUMN not in columns:
            raise P4subError(f"a stateful pipeline needs each row's time: a {TIME_COLUMN} column "
                             "(replay reads it from the capture)")
        stamps = np.asarray(columns[TIME_COLUMN], dtype=np.int64)
        if len(stamps) != n:
            raise P4subError(f"{TIME_COLUMN} has {len(stamps)} rows, the batch {n}")
        if n and int(stamps.min()) < 0:
            raise P4subError(f"{TIME_COLUMN}: negative timestamps")
        time = np.maximum.accumulate(np.maximum(stamps // 1000, self.clock)) if n else stamps
        if n:
            self.clock = int(time[-1])
        out: dict[str, np.ndarray] = {}
        for u in self.updates:
            values = self._update(u, columns, time, n)
            for r in u.reads:
                out[r.attribute] = values[r.function]
        return out

    def _update(self, u: ir.StateUpdate, columns: Mapping[str, Any], time: np.ndarray, n: int) -> dict[str, np.ndarray]:
        mask = np.uint64((1 << u.width) - 1)
        carried = np.ones(n, dtype=bool)
        for h in u.when:
            col = columns.get(validity.field_name(h))
            if col is not None:
                carried &= np.asarray(col).astype(bool)
        rows = np.flatnonzero(carried)
        out = {f: np.zeros(n, dtype=np.uint64) for f in ("count", "sum", "avg")}
        if len(rows) == 0:
            return out
        cell = (cells(np.asarray(columns[u.index])[rows], self.widths[u.index], u.size) if u.index
                else np.zeros(len(rows), dtype=np.int64))
        value = (np.asarray(columns[u.value])[rows].astype(np.uint64) if u.value
                 else np.zeros(len(rows), dtype=np.uint64))
        order = np.argsort(cell, kind="stable")
        c, t, v = cell[order], time[rows][order], value[order]
        m = len(c)
        first = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
        last = np.concatenate([first[1:], [m]])  # one past each run's end
        run_cell = c[first]
        run_of = np.repeat(np.arange(len(first)), last - first)
        # One sorted key over all runs: (run, time), time relative to the batch's first.
        t0 = int(t.min())
        span = int(t.max()) - t0 + 2
        key = run_of * span + (t - t0)
        starts = np.zeros(m, dtype=bool)
        end = self.end[u.counter][run_cell].copy()
        live = np.arange(len(first))
        ptr = first.copy()
        while len(live):
            target = live * span + np.clip(end[live] - t0, 0, span - 1)
            j = np.maximum(np.searchsorted(key, target, side="left"), ptr[live])
            found = j < last[live]
            live, j = live[found], j[found]
            starts[j] = True
            end[live] = t[j] + u.window_us
            ptr[live] = j + 1
        # Segments: a window start, or a run's first row (which may continue a carried window).
        boundary = starts.copy()
        boundary[first] = True
        seg = np.cumsum(boundary) - 1
        seg_first = np.flatnonzero(boundary)
        continues = ~starts[seg_first]  # a run's first segment that continues the cell's window
        seg_cell = c[seg_first]
        base_count = np.where(continues, self.count[u.counter][seg_cell], np.uint64(0))
        base_sum = np.where(continues, self.total[u.counter][seg_cell], np.uint64(0))
        position = (np.arange(m) - seg_first[seg]).astype(np.uint64)
        count = (base_count[seg] + position + np.uint64(1)) & mask
        running = np.cumsum(v, dtype=np.uint64)
        before = np.concatenate([[np.uint64(0)], running])[seg_first]
        total = (base_sum[seg] + running - before[seg]) & mask
        self.end[u.counter][run_cell] = end
        self.count[u.counter][run_cell] = count[last - 1]
        self.total[u.counter][run_cell] = total[last - 1]
        avg = np.zeros(m, dtype=np.uint64)
        nonzero = count != 0
        avg[nonzero] = total[nonzero] // count[nonzero]
        back = rows[order]
        out["count"][back], out["sum"][back], out["avg"][back] = count, total, avg
        return out
