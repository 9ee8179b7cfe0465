"""What both P4 targets share about a stateful pipeline's counters (compiler.ir.StateUpdate).

The tables match state values like fields: a key on rule attribute ``count(rate)`` reads the
metadata the update wrote (``meta.p4sub_st_rate_count``) and keeps the attribute as its ``@name``,
so control-plane names do not depend on how the value is computed. Each target renders the update
itself (:mod:`backends.bmv2.state`, :mod:`backends.tofino.state`); both refuse what they cannot
evaluate once per packet, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.common.names import field_expression, meta_member, split_field
from compiler import ir
from compiler.base import TargetError
from compiler.stateful import field_width


def state_keys(pipeline: ir.Pipeline, meta: str = "meta") -> dict[str, str]:
    """Rule attribute -> the P4 expression its key matches (the metadata its update wrote)."""
    return {attr: f"{meta}.{meta_member(read.field)}" for attr, read in pipeline.state_reads().items()}


def check_state(pipeline: ir.Pipeline, target: str, *, batched: bool) -> None:
    """Refuse what a target does not render: state over header stacks (a message per pass would
    update once per pass but read per packet), and a key or field wider than 64 bits' sums."""
    if not pipeline.updates:
        return
    if batched:
        raise TargetError(f"{target}: stateful rules are rendered for one message per packet; the tables query a "
                          "header stack (compile the counters over a spec with scalar headers)")
    for u in pipeline.updates:
        for ref in (u.index, u.value):
            inst = pipeline.spec.header(split_field(ref)[0]) if ref else None
            if inst is not None and inst.stack_size:
                raise TargetError(f"{target}: counter {u.counter} reads {ref} of header stack {inst.name}: the "
                                  "backends count one message per packet")


@dataclass(frozen=True)
class Inputs:
    """The P4 expressions an update reads: its key and summed field, and the validity condition."""

    key: str
    key_width: int
    value: str
    valid: str


def inputs(pipeline: ir.Pipeline, u: ir.StateUpdate, intrinsic: dict[str, str]) -> Inputs:
    spec = pipeline.spec
    key = field_expression(u.index, intrinsic=intrinsic) if u.index else ""
    value = field_expression(u.value, intrinsic=intrinsic) if u.value else ""
    valid = " && ".join(f"hdr.{h}.isValid()" for h in u.when) or "true"
    return Inputs(key, field_width(spec, u.index) if u.index else 0, value, valid)
