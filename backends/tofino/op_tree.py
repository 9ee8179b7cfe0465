"""An OR (or a sum) of many fields as a tree of one-operation tables: what a Tofino action can do in
one stage.

A Tofino action runs in one MAU stage, and one stage's ALU writes a container once, with one
operation on two sources (``dst = a | b``). ``x = a | b | c | ...`` is a chain of operations on one
destination, which bf-p4c refuses ("action spanning multiple stages"); written as consecutive
statements it merges them back into that one action. So the fold is rendered as a tree: each level
combines pairs in place (``a = a | b``) in keyless tables of their own, which are independent within
a level (bf-p4c puts them in one stage) and depend on the level before: ``ceil(log2(n))`` stages for
n fields, the result in the first field. The fields are scratch: the tree overwrites all but the last.
"""

from __future__ import annotations

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
