"""What the TNA header-stack program decides for a stack its edge pushes, computed when it is rendered.

An ingress (edge) switch pushes a receiver set's labels, then reads its own labels among them as a
transit switch reads a stack that arrives: the port bitmap, the own-label bits, the first own label's
pop and keep mask, a stored tree's bitmap, or a drop. In one pipeline that is a dependency chain: the
subscription tables, the push, then the label processing, which bf-p4c placed in 19 to 25 stages. The
labels of a push are constants of its entry, so everything the label processing decides for them is
too: :func:`edge_args` computes it from the same const rows the program's tables hold
(:mod:`backends.tofino.stack_rows`) and the switch's installed stored trees, and the push entry carries
it as action data. The program then runs the label processing only for stacks that arrive, and the two
paths, exclusive per packet, share stages.

What the push entry carries after the labels (the parameter names of ``p4sub_push_stack``):
``mask`` (the port bitmap = multicast group), ``own`` (bit i: label i is this switch's), ``stored``,
``pop``, ``keep`` (what the bridged header carries to the egress), ``drop`` and ``reason`` (the index in
``DROP_REASONS``: a push whose labels name no own label, an unknown stored tree, or no port). The push
action sets the multicast group too, so a pushed packet's last table is the drop counter.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, replace

from backends.tofino.stack_rows import keep_after, mixed_rows, port_rows
from compiler.delivery import DROP_REASONS, STORED_ID, CombinedPlan, Push, SwitchPlan, push_args

#: The parameters :func:`edge_args` appends to the push action's, in order.
EDGE_PARAMS = ("mask", "own", "stored", "pop", "keep", "drop", "reason")


@dataclass(frozen=True)
class EdgeDecision:
    """The label processing's outcome for one pushed stack (see the module docstring)."""

    mask: int = 0
    own: int = 0
    stored: int = 0
    pop: int = 0
    keep: int = 0
    drop: int = 0
    reason: int = 0


def _dropped(reason: str, **fields: int) -> EdgeDecision:
    return EdgeDecision(drop=1, reason=DROP_REASONS.index(reason), **fields)


def _ported(decision: EdgeDecision) -> EdgeDecision:
    """The program's last test: a bitmap without a port drops the stack (``no-port``)."""
    if decision.mask:
        return decision
    return replace(decision, drop=1, reason=DROP_REASONS.index("no-port"))


def _mixed_mask(plan: CombinedPlan, value: int) -> int:
    """``p4sub_mixed``'s first matching row: a port's bit, or the value below the tag; no row: 0."""
    for row in mixed_rows(plan):
        if value & row["mask"] == row["value"] & row["mask"]:
            if row["action"].startswith("p4sub_mixed_port("):
                return int(row["action"].split("16w")[1].rstrip(")"))
            return value & ((1 << plan.tag_shift) - 1) & 0xFFFF
    return 0


def decide(plan: CombinedPlan, sp: SwitchPlan, push: Push) -> EdgeDecision:
    """What the program's label processing (the ``else`` branch of its ingress) decides for the stack
    ``push`` writes on switch ``sp``."""
    count, *packed = push_args(plan, push)
    value_bits = 8 * plan.value_bytes
    ids = [x >> value_bits for x in packed[:count]]
    values = [x & ((1 << value_bits) - 1) for x in packed[:count]]
    if count and ids[0] == STORED_ID:
        mask = dict(sp.stored).get(values[0])
        return _dropped("unknown-tree", stored=1) if mask is None else _ported(EdgeDecision(mask=mask, stored=1))
    own = [i for i in range(count) if ids[i] == sp.switch_id]
    own_bits = sum(1 << i for i in own)
    if not own:
        return _dropped("no-own-label")
    first = own[0]
    if plan.encoding == "port":
        bits = dict(port_rows(value_bits, plan.mask_width))
        mask = 0
        for i in own:
            mask |= bits.get(values[i], 0)
    elif plan.encoding == "mixed":
        mask = _mixed_mask(plan, values[first])
    else:  # bitmask, mcgroup: (bit<16>) of the first own label's value
        mask = values[first] & 0xFFFF
    return _ported(EdgeDecision(mask=mask, own=own_bits, pop=first + 1, keep=keep_after(first, plan.max_labels)))


def edge_args(plan: CombinedPlan, sp: SwitchPlan, push: Push) -> tuple[int, ...]:
    """The push action's arguments after the labels, in :data:`EDGE_PARAMS` order."""
    return astuple(decide(plan, sp, push))
