"""An OR (or a sum) of many fields as a tree of one-operation tables: what a Tofino action can do in
one stage.

A Tofino action runs in one MAU stage, and one stage's ALU writes a container once, with one
operation on two sources (``dst = a | b``). ``x = a | b | c | ...`` is a chain of operations on one
destination, which bf-p4c refuses ("action spanning multiple stages"); written as consecutive
statements it merges them back into that one action. So the fold is rendered as a tree: each level
combines pairs in place (``a = a | b``) in keyless tables of their own, which are independent within
a level (bf-p4c puts them in one stage) and depend on the level before: ``ceil(log2(n))`` stages for
n fields, the result in the first field. The fields are scratch: the tree overwrites all but the last.

When the fields become final at different stages (the port bitmaps of lanes of different lengths),
a balanced tree waits for the slowest pair at every level; :func:`timed_tree` combines the two
earliest ones first instead (each result is ready a stage after the later of its two), which
finishes one stage after the last field when the others are done early. A chain of in-place ORs,
one statement per lane, took a stage per lane after the first: bf-p4c placed Siena's 8 lanes'
chain in stages 4 to 12, and refused the program at 13 stages.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """``dst = dst <op> src`` in a keyless table named ``name``_t."""

    name: str
    dst: str
    op: str
    src: str


def op_tree(prefix: str, fields: list[str], op: str = "|") -> list[list[Step]]:
    """The levels of the tree over ``fields`` (the result lands in ``fields[0]``); an odd field out
    waits for the next level. Tables are named ``{prefix}_{level}_{k}``; ``op`` is ``|`` or ``+``."""
    levels: list[list[Step]] = []
    alive = list(fields)
    while len(alive) > 1:
        level = [Step(f"{prefix}_{len(levels)}_{k}", alive[2 * k], op, alive[2 * k + 1])
                 for k in range(len(alive) // 2)]
        levels.append(level)
        alive = alive[::2]
    return levels


def merged(*trees: list[list[Step]]) -> list[list[Step]]:
    """Several trees level by level (their tables are independent: the levels share stages)."""
    depth = max((len(t) for t in trees), default=0)
    return [[step for t in trees if i < len(t) for step in t[i]] for i in range(depth)]


def timed_tree(prefix: str, fields: list[str], ready: list[int], op: str = "|") -> tuple[list[list[Step]], int]:
    """The tree over ``fields`` that combines the two earliest-ready values first (``ready[i]``: the
    first stage at which ``fields[i]`` is final), with the result in ``fields[0]``; one step per level,
    in the order they can run. Returns the levels and the first stage at which the result is final."""
    heap = [(r, i != 0, i, f) for i, (r, f) in enumerate(zip(ready, fields))]
    heapq.heapify(heap)
    levels: list[list[Step]] = []
    while len(heap) > 1:
        ra, a_later, ia, a = heapq.heappop(heap)
        rb, b_later, ib, b = heapq.heappop(heap)
        # the result stays in fields[0] once fields[0] is part of it
        (dst, d_later, d_i), src = ((b, b_later, ib), a) if not b_later else ((a, a_later, ia), b)
        levels.append([Step(f"{prefix}_{len(levels)}", dst, op, src)])
        heapq.heappush(heap, (max(ra, rb) + 1, d_later, d_i, dst))
    return levels, (heap[0][0] if heap else 0)
