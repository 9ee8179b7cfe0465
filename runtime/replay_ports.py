"""Port sets as bit masks, so that replay handles millions of messages without a Python set each.

Replay compares two port sets per message (what the switch delivered, what the rules want). A
:class:`PortSpace` numbers the ports that can appear and stores a set as ``words`` 64-bit words;
a batch of sets is a ``(rows, words)`` uint64 array. Counting "how many rows have port p" or "how
many bytes went to port p" for every port is then one unpack of the bits per block of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, Sequence

import numpy as np

BLOCK_ROWS = 1 << 16
WEIGHT_SLICE = 1 << 13


@dataclass(frozen=True)
class PortSpace:
    """The ports replay can see, in increasing order; bit ``i`` of a mask stands for ``ports[i]``."""

    ports: tuple[int, ...]
    _index: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if list(self.ports) != sorted(set(self.ports)) or any(p < 0 for p in self.ports):
            raise ValueError("ports must be distinct, non-negative and increasing")
        object.__setattr__(self, "_index", {p: i for i, p in enumerate(self.ports)})

    @classmethod
    def of(cls, ports: Iterable[int]) -> "PortSpace":
        return cls(tuple(sorted(set(int(p) for p in ports))))

    @property
    def words(self) -> int:
        return max(1, (len(self.ports) + 63) // 64)

    def bit(self, port: int) -> int:
        """The bit position of ``port``; KeyError when the space does not hold it."""
        return self._index[port]

    def mask(self, ports: Iterable[int]) -> np.ndarray:
        """One port set as a ``(words,)`` uint64 mask."""
        out = np.zeros(self.words, dtype=np.uint64)
        for p in ports:
            i = self._index[int(p)]
            out[i // 64] |= np.uint64(1) << np.uint64(i % 64)
        return out

    def masks(self, sets: Sequence[Collection[int]]) -> np.ndarray:
        """Many port sets at once, as ``(len(sets), words)`` masks: one numpy pass for all of them
        (a rule file or a pipeline's multicast groups hold tens of thousands of sets)."""
        out = self.empty(len(sets))
        lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
        index = self._index
        bits = np.fromiter((index[int(p)] for s in sets for p in s), dtype=np.int64, count=int(lengths.sum()))
        rows = np.repeat(np.arange(len(sets), dtype=np.int64), lengths)
        np.bitwise_or.at(out, (rows, bits >> 6), np.left_shift(np.uint64(1), (bits & 63).astype(np.uint64)))
        return out

    def empty(self, rows: int) -> np.ndarray:
        return np.zeros((rows, self.words), dtype=np.uint64)

    def sets(self, masks: np.ndarray) -> list[frozenset[int]]:
        """Masks back to port sets (for tests and small outputs)."""
        bits = self.bits(masks)
        return [frozenset(self.ports[i] for i in np.flatnonzero(row)) for row in bits]

    def bits(self, masks: np.ndarray) -> np.ndarray:
        """``(rows, len(ports))`` booleans: column i says whether the row holds ``ports[i]``."""
        raw = np.ascontiguousarray(masks, dtype="<u8").view(np.uint8)
        bits = np.unpackbits(raw, axis=1, bitorder="little")
        return bits[:, : len(self.ports)].view(bool)

    def counts(self, masks: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Per port: how many rows hold it, or (with ``weights``) the sum of their weights. int64."""
        total = np.zeros(len(self.ports), dtype=np.int64)
        for start in range(0, len(masks), BLOCK_ROWS):
            bits = self.bits(masks[start : start + BLOCK_ROWS])
            total += count_bits(bits, None if weights is None else weights[start : start + BLOCK_ROWS])
        return total


def count_bits(bits: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Column sums of a ``(rows, ports)`` boolean matrix, or of ``weights`` where the bit is set.

    Plain sums add the bytes of the matrix in 32-bit lanes (a block is at most 2^16 rows). Weighted
    sums go through BLAS in float64 over slices of :data:`WEIGHT_SLICE` rows, which is exact as long
    as every total stays below 2^53 (checked; otherwise int64 arithmetic); rows with no bit set are
    skipped first when they are the many (false positives are usually rare).
    """
    if weights is None:
        return np.add.reduce(bits.view(np.uint8), axis=0, dtype=np.int64 if len(bits) >= 1 << 31 else np.int32).astype(np.int64)
    weights = np.asarray(weights, dtype=np.int64)
    rows = np.flatnonzero(bits.any(axis=1))
    if len(rows) < len(bits) // 2:
        bits, weights = bits[rows], weights[rows]
    if not len(bits):
        return np.zeros(bits.shape[1], dtype=np.int64)
    if int(np.abs(weights).max()) * len(bits) >= 1 << 53:
        return weights @ bits.astype(np.int64)
    total = np.zeros(bits.shape[1], dtype=np.float64)
    as_float = weights.astype(np.float64)
    for a in range(0, len(bits), WEIGHT_SLICE):
        total += as_float[a : a + WEIGHT_SLICE] @ bits[a : a + WEIGHT_SLICE].view(np.uint8).astype(np.float64)
    return np.rint(total).astype(np.int64)


def or_segments(masks: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The OR of each segment of consecutive rows; segment k is ``starts[k]:starts[k+1]`` (last to the end).

    ``starts`` must be increasing and begin at 0 (when there are rows): replay uses it to turn
    per-message masks into per-packet masks, the rows of one packet being consecutive.
    """
    if len(masks) == 0:
        return masks[:0].copy()
    return np.bitwise_or.reduceat(masks, starts, axis=0)
