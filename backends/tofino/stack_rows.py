"""The const entries of the TNA header-stack program (``templates/stack.p4.j2``): the same on every switch.

Tofino has no variable shift and no run-time header-stack index, so what the v1model program computes
(``1 << (value - 1)``, "the lowest own label", the predictive pruning's range) is a lookup in const
tables; this module lists their rows, and :mod:`backends.tofino.stack_edge` reads them to decide, at
compile time, what the program decides for a stack its edge pushes.
"""

from __future__ import annotations

import itertools
from typing import Any

from backends.common.literals import literal
from compiler.delivery import MIXED_TAGS, CombinedPlan


def first_own_rows(n: int) -> list[dict[str, Any]]:
    """``p4sub_first_own``'s const entries: own bit ``i`` set and every lower one clear -> position ``i``."""
    return [{"index": i, "match": ["1w0"] * i + ["1w1"] + ["_"] * (n - i - 1)} for i in range(n)]


def keep_after(k: int, end: int) -> int:
    """Bits ``k+1 .. end-1``: the labels strictly between position ``k`` and ``end``."""
    return sum(1 << j for j in range(k + 1, end))


def prune_rows(n: int, keep_bits: int) -> list[dict[str, Any]]:
    """``p4sub_prune``'s const entries (keys: own_0..own_{n-1}, at_0..at_{n-1}).

    For the first own label ``k`` naming the egress port (``at_k``; no ``at_j`` below it) and the next
    own label ``nxt`` after it (none: the subtree runs to the stack's end), keep labels ``k+1 .. nxt-1``.
    The tail's pop is given as its 16-bit two's complement and added: bf-p4c takes no action data as
    the second operand of a subtraction.
    """
    rows = []
    for k in range(n):
        at = ["1w0"] * k + ["1w1"] + ["_"] * (n - k - 1)
        for nxt in range(k + 1, n + 1):
            own = ["_"] * (k + 1) + ["1w0"] * (nxt - k - 1) + (["1w1"] + ["_"] * (n - nxt - 1) if nxt < n else [])
            keep = literal(keep_after(k, nxt), keep_bits)
            action = (f"p4sub_keep_span({keep}, 16w{nxt - k - 1})" if nxt < n
                      else f"p4sub_keep_tail({keep}, 16w{-(k + 1) & 0xFFFF})")
            rows.append({"match": own + at, "action": action})
    return rows


def port_rows(value_bits: int, mask_width: int = 16) -> list[tuple[int, int]]:
    """``p4sub_port_i``'s const entries: label value ``p`` -> bit ``p - 1`` of the bitmap.

    Values 1 .. 16 (the v1model program's ``16w1 << (value - 1)`` for every value that leaves a bit
    in 16 bits; ports above :data:`~compiler.delivery.combined.MAX_PORT` select no group the plan
    installs, on both targets); any other value misses and adds no port."""
    return [(p, 1 << (p - 1)) for p in range(1, min(mask_width, (1 << value_bits) - 1) + 1)]


#: Label positions one port table reads: its const entries cover every combination of their ports
#: (17^k - 1 rows: 288 for a pair), and the OR tree then folds ceil(n / k) bitmaps instead of n.
PORT_GROUP = 2


def port_groups(n: int, size: int = PORT_GROUP) -> list[list[int]]:
    """The label positions of each port table: ``[[0, 1], [2, 3], ...]`` (the last may be shorter)."""
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


def port_group_rows(size: int, value_bits: int, mask_width: int = 16) -> list[dict[str, Any]]:
    """The const entries of a port table over ``size`` label positions (keys: their own bits, then their
    values), in priority order: the bitmap is the OR of :func:`port_rows`'s bit of every own label whose
    value has one. Each row names the subset of positions it requires (own and a port value); rows of
    larger subsets come first, so a lower row matches only when no larger subset contributes (a position
    outside the row's subset is a wildcard). A position that is not own, or whose value is no port,
    adds nothing, as the v1model program's shift and the reference interpreter do.

    Why a table per group of positions instead of one per label: the OR tree over 16 per-label bitmaps
    put 16 fields, the result and ``mcast_grp_a`` in one ALU cluster, which bf-p4c must place in one
    MAU group of 16 containers ("PHV allocation was not successful"); a group's bitmap is action data,
    no ALU operand, and the tree folds 8."""
    ports = port_rows(value_bits, mask_width)
    rows: list[dict[str, Any]] = []
    for subset_size in range(size, 0, -1):
        for subset in itertools.combinations(range(size), subset_size):
            for choice in itertools.product(ports, repeat=subset_size):
                own = ["_"] * size
                values = ["_"] * size
                bitmap = 0
                for pos, (value, bit) in zip(subset, choice):
                    own[pos] = "1w1"
                    values[pos] = f"{value_bits}w{value}"
                    bitmap |= bit
                rows.append({"match": own + values, "bitmap": bitmap})
    return rows


def cut_front_rows(n: int) -> list[dict[str, int]]:
    """``p4sub_cut_front``'s const entries (ternary on the keep mask, in priority order): the lowest kept
    label ``a`` -> drop labels ``0 .. a-1``; nothing kept -> drop all ``n``. Every keep mask the program
    writes is one range (:func:`keep_after`), so this and :func:`cut_back_rows` drop exactly the labels
    whose keep bit is clear."""
    rows = [{"value": 1 << a, "mask": (2 << a) - 1, "cut": a} for a in range(n)]
    return rows + [{"value": 0, "mask": (1 << n) - 1, "cut": n}]


def cut_back_rows(n: int) -> list[dict[str, int]]:
    """``p4sub_cut_back``'s const entries: the highest kept label ``b - 1`` (``b < n``) -> drop labels
    ``b .. n-1``; a range reaching label ``n - 1``, or none, misses (nothing to drop)."""
    full = (1 << n) - 1
    return [{"value": 1 << (b - 1), "mask": full & ~((1 << (b - 1)) - 1), "cut": b} for b in range(1, n)]


#: Label positions compared against one copy of a value (the own id in the ingress, the egress port in
#: the egress). bf-p4c joins the two sides of a gateway's comparison in one rotational cluster, which
#: must sit in one MAU group of 16 containers: the own id compared with all 16 labels' ids was a
#: cluster of 17 ("PHV allocation was not successful"). Each group compares with its own copy, set
#: from action data (own id) or in the parser (egress port), neither of which joins clusters.
COMPARE_GROUP = 8


def compare_copies(n: int) -> int:
    return -(-n // COMPARE_GROUP)


def mixed_rows(plan: CombinedPlan) -> list[dict[str, Any]]:
    """``p4sub_mixed``'s const entries (key: the first own label's value, ternary).

    The v1model program's dispatch as entries: a port-tag value ``p`` in 1 .. 16 sets bit ``p - 1``
    (:func:`port_rows` on the bits below the tag), a bitmask- or group-tag value takes the bits below
    the tag as the bitmap (action ``p4sub_mixed_bitmap``); the unused tag and out-of-range ports miss.
    """
    shift, value_bits = plan.tag_shift, 8 * plan.value_bytes
    full, tag_mask = (1 << value_bits) - 1, ((1 << plan.tag_bits) - 1) << shift
    port = MIXED_TAGS["port"] << shift
    rows = [{"value": port | p, "mask": full, "action": f"p4sub_mixed_port(16w{b})"}
            for p, b in port_rows(shift, plan.mask_width)]
    rows += [{"value": MIXED_TAGS[t] << shift, "mask": tag_mask, "action": "p4sub_mixed_bitmap()"}
             for t in ("bitmask", "group")]
    return rows
