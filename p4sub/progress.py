"""Progress of long commands on stderr: a bar on a terminal, a line every 10 % in a log."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A one-line progress bar on a terminal, a line every 10 % otherwise."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = self.stream.isatty()
        self.next_decile = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        frac = done / total
        if self.tty:
            if now - self.last < 0.1 and done < total:
                return
            self.last = now
            filled = int(self.width * frac)
            eta = (now - self.start) / done * (total - done)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[{bar}] {frac:4.0%} {label}  eta {eta:4.0f}s ")
            if done == total:
                self.stream.write("\n")
        elif frac * 10 >= self.next_decile or done == total:
            self.next_decile = int(frac * 10) + 1
            self.stream.write(f"[{frac:4.0%}] {label} ({now - self.start:.0f}s)\n")
        self.stream.flush()
