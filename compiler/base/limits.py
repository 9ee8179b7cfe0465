"""Time and memory bounds on a compile (``--budget time=SECONDS,memory=SIZE``).

A fit search (lane counts, widening steps, a target refusing layouts) can run for minutes and grow
to tens of GB on rules that do not fit. Bounding it means stopping it *and keeping what it found*:
the best layout so far is held by the search's own loops, so the bound is cooperative. Long loops
call :func:`checkpoint`, which raises :class:`OutOfBudget` once the deadline has passed or resident
memory has passed the ceiling, and the loops that hold a result catch it and return that result.

Memory is read by a watcher thread every :data:`POLL_SECONDS` (``/proc/self/statm``), not at each
checkpoint, which hot loops call millions of times. A step that runs on without reaching a
checkpoint (one large diagram operation in C) is stopped by the watcher itself once resident memory
passes :data:`HARD_FACTOR` times the ceiling: it raises :class:`OutOfBudget` in the main thread
through a signal, as Ctrl-C raises KeyboardInterrupt, so staged outputs are cleaned up as on an
interrupt. Never a 20 GB process.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from compiler.base.errors import P4subError

POLL_SECONDS = 0.05
#: Resident memory past this many times the ceiling stops the compile wherever it is.
HARD_FACTOR = 1.5
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?$", re.IGNORECASE)


class OutOfBudget(P4subError):
    """The compile's time or memory budget ran out (``kind``: ``time`` or ``memory``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def parse_size(text: str) -> int:
    """``4G``, ``512M``, ``1.5GB``, ``2048`` (bytes): a size in bytes."""
    m = _SIZE.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise P4subError(f"memory={text!r}: expected a size such as 4G, 512M or 1.5GB")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


def physical_memory() -> int:
    """The machine's memory in bytes (0 when the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return 0


def default_memory() -> int | None:
    """The ceiling when ``--budget`` names none: half the machine's memory, at least 2 GB: a compile
    that needs more on this machine would push everything else out of it."""
    total = physical_memory()
    return max(2 << 30, total // 2) if total else None


def resident_bytes() -> int:
    """This process's resident memory (0 where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class _Watch:
    seconds: float | None
    memory: int | None
    start: float
    deadline: float
    tripped: OutOfBudget | None = None
    peak: int = 0


_active: _Watch | None = None


def checkpoint() -> None:
    """Raise :class:`OutOfBudget` when the active bound has run out; free when none is active."""
    w = _active
    if w is None:
        return
    if w.tripped is None and time.monotonic() > w.deadline:
        w.tripped = OutOfBudget("time", f"the time budget of {w.seconds:g} s ran out")
    if w.tripped is not None:
        raise w.tripped


def remaining() -> float | None:
    """Seconds left under the active bound (None: unbounded)."""
    w = _active
    return None if w is None or w.seconds is None else max(0.0, w.deadline - time.monotonic())


def active() -> bool:
    return _active is not None


@contextmanager
def share(fraction: float) -> Iterator[None]:
    """Run the body with at most ``fraction`` of the time left: a step that may take all of it (the
    exact layout of rules that do not fit) leaves the rest to the steps that can still answer. Its
    :class:`OutOfBudget` is raised as the whole budget's; after it, :func:`remaining` tells whether
    time is left."""
    w = _active
    if w is None or w.seconds is None:
        yield
        return
    saved = w.deadline
    now = time.monotonic()
    w.deadline = min(saved, now + fraction * max(0.0, saved - now))
    try:
        yield
    finally:
        w.deadline = saved
        if w.tripped is not None and w.tripped.kind == "time" and time.monotonic() <= saved:
            w.tripped = None  # only the share ran out


@contextmanager
def grace(fraction: float) -> Iterator[None]:
    """Run the body with at least ``fraction`` of the time budget ahead of it, past the deadline if
    need be: judging a layout the search found (a target's resource model laying it out) is what
    turns it into an answer, so it is not cut off just as the deadline passes; it still cannot run
    on without end. Memory is bounded as before."""
    w = _active
    if w is None or w.seconds is None:
        yield
        return
    saved = w.deadline
    w.deadline = max(saved, time.monotonic() + fraction * w.seconds)
    if w.tripped is not None and w.tripped.kind == "time":
        w.tripped = None
    try:
        yield
    finally:
        w.deadline = saved


@contextmanager
def bounded(seconds: float | None, memory: int | None) -> Iterator[None]:
    """Run the body under a time and memory bound (either may be None). Nested bounds keep the outer
    one (a routed network's switches compile under the network's bound)."""
    global _active
    if _active is not None or (seconds is None and memory is None):
        yield
        return
    now = time.monotonic()
    watch = _Watch(seconds, memory, now, now + seconds if seconds is not None else float("inf"))
    stop = threading.Event()
    main = threading.main_thread()
    hard = signal.SIGUSR1 if threading.current_thread() is main else None
    previous = signal.signal(hard, _raise_tripped) if hard is not None else None

    def watch_memory() -> None:
        while True:
            used = resident_bytes()
            watch.peak = max(watch.peak, used)
            if memory is not None and used > memory:
                if watch.tripped is None:
                    watch.tripped = _memory_ran_out(memory, used)
                if hard is not None and used > HARD_FACTOR * memory:
                    signal.pthread_kill(main.ident, hard)
                    return
            if stop.wait(POLL_SECONDS):
                return

    watcher = threading.Thread(target=watch_memory, name="p4sub-memory", daemon=True) if memory is not None else None
    if memory is not None and (used := resident_bytes()) > memory:
        # Already past the ceiling: a short compile must not finish between the watcher's polls.
        watch.tripped = _memory_ran_out(memory, used)
    _active = watch
    try:
        if watcher is not None:
            watcher.start()  # inside the try: its hard stop may come before the body starts
        yield
    finally:
        _active = None
        stop.set()
        if watcher is not None and watcher.is_alive():
            watcher.join()
        if hard is not None and previous not in (signal.SIG_DFL, None):
            # Left installed over the default (which ends the process): a signal the watcher sent
            # just before the body ended may still be on its way; with no bound active it does nothing.
            signal.signal(hard, previous)


def _memory_ran_out(memory: int, used: int) -> OutOfBudget:
    return OutOfBudget("memory", f"the memory ceiling of {format_size(memory)} was reached ({format_size(used)} resident)")


def _raise_tripped(signum, frame) -> None:
    w = _active
    if w is not None:
        raise OutOfBudget("memory", f"{w.tripped} and the compile went on to {HARD_FACTOR:g} times it in one step; "
                                    "it was stopped there")
