"""What a P4 architecture is, as data: the facts a backend needs to spell the IR in its terms.

One :class:`TargetFacts` per architecture (``backends/bmv2/target.py`` holds v1model's,
``backends/tofino/target.py`` TNA's). Rendering code reads these facts instead of testing which
target it renders for; anything a target cannot express is refused through :func:`unsupported`.

``primitives`` maps the IR's action primitives to P4 statement templates, formatted with the
primitive's arguments (``{0}``) and the names of the architecture's intrinsic metadata, e.g. v1model
``{"set_egress_port": "standard_metadata.egress_spec = {0};"}``. ``set_meta`` and ``user`` are
spelled the same on every target and are not looked up here.

``query_metadata`` maps the intrinsic metadata fields a spec may query
(:mod:`compiler.spec.metadata`, by their IR reference) to the P4 expression a table key matches on
this target. The ingress port is the one field both architectures have with the same meaning (the
9-bit port the packet came in on, the numbering ``fwd(N)`` uses), so each target maps the other's
name for it too; a field the target lacks is absent and refused by
:func:`backends.common.names.check_key_fields`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler import ir
from compiler.base import TargetError


@dataclass(frozen=True)
class TargetFacts:
    """An architecture's facts. Widths are bits; limits of ``None`` mean "no fixed limit"."""

    name: str
    architecture: str
    includes: tuple[str, ...]
    match_kinds: frozenset[str]
    port_width: int
    group_width: int
    drop_port: int | None
    ingress_control: str
    egress_control: str
    primitives: dict[str, str] = field(default_factory=dict)
    multicast: str = ""
    intrinsic_metadata: dict[str, str] = field(default_factory=dict)
    recirculation: str = ""
    max_range_key_width: int | None = None
    max_table_size: int | None = None
    query_metadata: dict[str, str] = field(default_factory=dict)

    def spell(self, primitive: ir.Primitive) -> str:
        """The P4 statement for a target-specific primitive (``set_egress_port``, ``set_mcast_group``, ``drop``)."""
        template = self.primitives.get(primitive.op)
        if template is None:
            unsupported(self, f"action primitive {primitive.op!r}")
        return template.format(*primitive.args)


def unsupported(target: TargetFacts | str, what: str) -> None:
    """The one channel for "this target cannot express that": raises :class:`TargetError`."""
    name = target.name if isinstance(target, TargetFacts) else target
    raise TargetError(f"{name}: cannot render {what}")


def check_match_kinds(pipeline: ir.Pipeline, target: TargetFacts) -> None:
    """Refuse a pipeline whose tables use a match kind, or a range key width, the target lacks."""
    for table in pipeline.tables:
        for key in table.keys:
            if key.match_kind not in target.match_kinds:
                unsupported(target, f"table {table.name}: {key.match_kind} match on {key.field} "
                                    f"(supported: {', '.join(sorted(target.match_kinds))})")
            if (key.match_kind == "range" and target.max_range_key_width is not None
                    and key.width > target.max_range_key_width):
                unsupported(target, f"table {table.name}: a {key.width}-bit range key on {key.field} "
                                    f"(at most {target.max_range_key_width} bits)")
