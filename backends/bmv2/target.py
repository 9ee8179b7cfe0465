"""BMv2 ``simple_switch`` / v1model: the architecture's facts as data.

Sources: p4c ``p4include/v1model.p4`` (block signatures, ``mark_to_drop``,
``resubmit_preserving_field_list``, ``standard_metadata_t``) and behavioral-model
``docs/simple_switch.md`` (drop port 511 for 9-bit ports, multicast through
``standard_metadata.mcast_grp``, replicas carry ``egress_rid``, match kinds incl. ``range``).
"""

from __future__ import annotations

from backends.common.target import TargetFacts

STANDARD_METADATA = "standard_metadata"

V1MODEL = TargetFacts(
    name="bmv2",
    architecture="v1model",
    includes=("core.p4", "v1model.p4"),
    match_kinds=frozenset({"exact", "lpm", "ternary", "range", "optional"}),
    port_width=9,
    group_width=16,
    drop_port=511,
    ingress_control="MyIngress",
    egress_control="MyEgress",
    primitives={
        "set_egress_port": "standard_metadata.egress_spec = {0};",
        "set_mcast_group": "standard_metadata.mcast_grp = {0};",
        "drop": "mark_to_drop(standard_metadata);",
    },
    multicast="standard_metadata.mcast_grp",
    intrinsic_metadata={
        "ingress_port": "standard_metadata.ingress_port",
        "egress_spec": "standard_metadata.egress_spec",
        "egress_port": "standard_metadata.egress_port",
        "mcast_grp": "standard_metadata.mcast_grp",
        "egress_rid": "standard_metadata.egress_rid",
        "instance_type": "standard_metadata.instance_type",
    },
    # Batched messages are evaluated one per pass: the ingress resubmits the original packet with
    # the metadata members annotated @field_list(RESUBMIT_FIELD_LIST) preserved.
    recirculation="resubmit_preserving_field_list",
    max_range_key_width=None,
    max_table_size=None,
    # v1model.p4's standard_metadata_t fields valid when the ingress starts; TNA's ingress port is
    # the same port (compiler.spec.metadata).
    query_metadata={
        "standard_metadata.ingress_port": "standard_metadata.ingress_port",
        "standard_metadata.packet_length": "standard_metadata.packet_length",
        "standard_metadata.ingress_global_timestamp": "standard_metadata.ingress_global_timestamp",
        "ig_intr_md.ingress_port": "standard_metadata.ingress_port",
    },
)

RESUBMIT_FIELD_LIST = 1
# The multicast group the batched path uses to reach every port any rule forwards to; the egress
# then keeps, per port, the messages that port subscribed to. A fixed id, so that the program does
# not change when the rules (and hence the number of the IR's groups) do.
# P4Runtime on BMv2 (PI's PreMcMgr) accepts multicast group ids 1..32767 and reserves the ids from
# 32768 for clone sessions, so the union group takes the highest id it accepts and the IR's groups
# must stay below it.
MAX_GROUP_ID = 0x7FFF
UNION_GROUP = MAX_GROUP_ID
# The replication id BMv2 gives every copy (P4Runtime Replica.instance, CLI mc_node_create rid).
REPLICA_INSTANCE = 1
