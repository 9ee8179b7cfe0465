"""Intrinsic metadata a spec may name as a query field, with widths from the architectures.

Camus specs test the port a packet came in on (``@pragma query_field_exact(ig_intr_md.ingress_port,
9)``). No header holds it: the target's architecture does, under a conventional instance name. The
spec reader records such a field as a :class:`~compiler.spec.QueryField` with ``metadata=True`` and
the width below, so that a backend can render it from the target's metadata.

Only fields valid when the ingress pipeline starts are listed: a subscription is matched there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IntrinsicMetadata:
    """An architecture's intrinsic metadata instance: its conventional name and queryable fields."""

    instance: str
    architecture: str
    type_name: str
    fields: dict[str, int]


#: v1model's ``standard_metadata_t`` (v1model.p4: ``bit<9> ingress_port``, ``bit<32> packet_length``,
#: ``bit<48> ingress_global_timestamp``) and TNA's ``ingress_intrinsic_metadata_t`` (tna.p4:
#: ``PortId_t ingress_port`` with ``typedef bit<9> PortId_t``, ``bit<48> ingress_mac_tstamp``).
#: P4_14 programs use the same instance names (``standard_metadata``; Tofino's ``ig_intr_md``).
INTRINSIC_METADATA: dict[str, IntrinsicMetadata] = {
    md.instance: md for md in (
        IntrinsicMetadata("standard_metadata", "v1model", "standard_metadata_t",
                          {"ingress_port": 9, "packet_length": 32, "ingress_global_timestamp": 48}),
        IntrinsicMetadata("ig_intr_md", "tna", "ingress_intrinsic_metadata_t",
                          {"ingress_port": 9, "ingress_mac_tstamp": 48}),
    )
}


def intrinsic_width(instance: str, field_name: str) -> int | None:
    """Width of ``instance.field_name`` when it is a known intrinsic metadata field, else None."""
    md = INTRINSIC_METADATA.get(instance)
    return md.fields.get(field_name) if md else None
