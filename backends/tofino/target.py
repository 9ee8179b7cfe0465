"""What the Tofino Native Architecture is, as data: the one place that knows TNA's names and limits.

Everything else in :mod:`backends.tofino` reads these facts instead of testing which chip it is
(the sqlglot-dialect pattern of STYLE.md): the renderer takes intrinsic-metadata names from here,
the layout takes the widest range key, the estimate takes the memory geometry.

Where each number comes from (p4c ``34b86e9b``, ``backends/tofino/bf-p4c``):

* ``p4include/tofino1_specs.p4``: ``PortId_t`` is 9 bits, ``MulticastGroupId_t`` 16 bits,
  ``PORT_METADATA_SIZE`` 64 bits; ``tofino1_base.p4`` the intrinsic metadata struct and field names;
  ``tofino1_arch.p4`` the ``Pipeline``/``Switch`` packages and the ``range`` match kind.
* ``specs/device.h``: 12 MAU stages on Tofino 1; ``specs/mau_spec.h`` (``StageUse``): per stage 80
  SRAMs, 24 TCAMs, 16 logical tables, 128 exact-crossbar bytes, 12 ternary-crossbar groups of 5 bytes.
* ``mau/resource_estimate.cpp`` (``RangeEntries``): a range key must fit in 5 PHV nibbles
  (``TERNARY_BYTES_PER_GROUP``), one range entry costs up to ``min(2 * nibbles - 1, 8)`` TCAM rows.
* ``mau/table_format.h``: 4 version bits per exact entry, at most 5 entries per 128-bit RAM word,
  ``RAM_GHOST_BITS`` = 10 key bits implied by the RAM row a hash selects.
* SRAM 1024 x 128 bits and TCAM 512 x 44 bits are the commonly quoted Tofino 1 geometries (the same
  numbers p4c's ``options_to_ternary_entries`` uses: 512 entries deep, 11 bytes per 2 TCAMs).
* 65,536 multicast group ids (16-bit MGID); MGID 0 means "no multicast", so p4sub uses 1..65535.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.common.target import TargetFacts


@dataclass(frozen=True)
class Target:
    """One TNA device: its architecture names, key limits and memory geometry."""

    name: str
    include: str = "tna.p4"
    target_define: str = "__TARGET_TOFINO__=1"
    match_kinds: tuple[str, ...] = ("exact", "ternary", "lpm", "range")
    port_width: int = 9
    group_width: int = 16
    rid_width: int = 16
    # Range keys: the key's PHV nibbles (4-bit units) must fit one ternary ixbar group.
    nibble_bits: int = 4
    max_range_nibbles: int = 5
    multirange_row_limit: int = 8
    # Pipeline and memory.
    stages: int = 12
    sram_blocks_per_stage: int = 80
    sram_rows: int = 1024
    sram_width: int = 128
    tcam_blocks_per_stage: int = 24
    tcam_rows: int = 512
    tcam_width: int = 44
    logical_tables_per_stage: int = 16
    ternary_groups_per_stage: int = 12
    exact_ixbar_bytes_per_stage: int = 128
    version_bits: int = 4
    ghost_bits: int = 10
    max_entries_per_word: int = 5
    max_immediate_bits: int = 32
    # Packet replication engine.
    multicast_groups: int = 65536
    first_group_id: int = 1
    # Recirculation: the port that loops a packet back into ingress of the same pipe.
    recirculation_port: int = 68
    passes_with_recirculation: int = 2
    # Spelling of the architecture in P4 (names of tofino1_base.p4 / tofino1_arch.p4).
    ingress_md: str = "ig_intr_md"
    ingress_md_type: str = "ingress_intrinsic_metadata_t"
    ingress_prsr_md: str = "ig_intr_md_from_prsr"
    ingress_prsr_md_type: str = "ingress_intrinsic_metadata_from_parser_t"
    ingress_dprsr_md: str = "ig_intr_md_for_dprsr"
    ingress_dprsr_md_type: str = "ingress_intrinsic_metadata_for_deparser_t"
    ingress_tm_md: str = "ig_intr_md_for_tm"
    ingress_tm_md_type: str = "ingress_intrinsic_metadata_for_tm_t"
    egress_md: str = "eg_intr_md"
    egress_md_type: str = "egress_intrinsic_metadata_t"
    egress_prsr_md: str = "eg_intr_md_from_prsr"
    egress_prsr_md_type: str = "egress_intrinsic_metadata_from_parser_t"
    egress_dprsr_md: str = "eg_intr_md_for_dprsr"
    egress_dprsr_md_type: str = "egress_intrinsic_metadata_for_deparser_t"
    egress_oport_md: str = "eg_intr_md_for_oport"
    egress_oport_md_type: str = "egress_intrinsic_metadata_for_output_port_t"
    port_metadata_size: str = "PORT_METADATA_SIZE"
    unicast_port_field: str = "ucast_egress_port"
    multicast_group_field: str = "mcast_grp_a"
    rid_field: str = "rid"
    drop_field: str = "drop_ctl"
    egress_port_field: str = "egress_port"
    egress_rid_field: str = "egress_rid"
    ingress_port_field: str = "ingress_port"
    # BF Runtime names.
    pipe_prefix: str = "pipe"
    ingress_control: str = "SwitchIngress"
    egress_control: str = "SwitchEgress"
    match_priority: str = "$MATCH_PRIORITY"
    max_match_priority: int = (1 << 24) - 1

    @property
    def entry_budget(self) -> int:
        """Entries past which a pipeline cannot fit whatever its keys: every SRAM word of every
        stage holding two entries (small exact entries pack up to five a word, most fewer). Below
        it the resource estimate judges; it only bounds how large a compile is worth trying."""
        return self.stages * self.sram_blocks_per_stage * self.sram_rows * 2

    @property
    def widest_range_key(self) -> int:
        """Bits a range key may have when it starts on a nibble boundary (5 nibbles = 20 bits)."""
        return self.max_range_nibbles * self.nibble_bits

    @property
    def sram_total(self) -> int:
        return self.stages * self.sram_blocks_per_stage

    @property
    def tcam_total(self) -> int:
        return self.stages * self.tcam_blocks_per_stage

    @property
    def usable_groups(self) -> int:
        return self.multicast_groups - self.first_group_id


TOFINO1 = Target(name="tofino")


def facts(target: Target = TOFINO1) -> TargetFacts:
    """The facts :mod:`backends.common` renders with: TNA's spelling of forwarding, multicast and drop.

    A multicast also sets ``rid`` to the group id, so that egress copies carry it (``egress_rid``).
    """
    tm, dprsr = target.ingress_tm_md, target.ingress_dprsr_md
    return TargetFacts(
        name=target.name,
        architecture="TNA",
        includes=("core.p4", target.include),
        match_kinds=frozenset(target.match_kinds),
        port_width=target.port_width,
        group_width=target.group_width,
        drop_port=None,
        ingress_control=target.ingress_control,
        egress_control=target.egress_control,
        primitives={
            # Forwarding undoes an earlier drop, as on v1model and in the IR (the default path's L3
            # hit after an L2 miss): drop_ctl is cleared with it.
            "set_egress_port": f"{tm}.{target.unicast_port_field} = {{0}}; {dprsr}.{target.drop_field} = 3w0;",
            "set_mcast_group": (f"{tm}.{target.multicast_group_field} = {{0}}; {tm}.{target.rid_field} = {{0}}; "
                                f"{dprsr}.{target.drop_field} = 3w0;"),
            "drop": f"{dprsr}.{target.drop_field} = 3w1;",
        },
        multicast=f"{tm}.{target.multicast_group_field}",
        intrinsic_metadata={
            "ingress_port": f"{target.ingress_md}.{target.ingress_port_field}",
            "egress_spec": f"{tm}.{target.unicast_port_field}",
            "egress_port": f"{target.egress_md}.{target.egress_port_field}",
            "mcast_grp": f"{tm}.{target.multicast_group_field}",
            "egress_rid": f"{target.egress_md}.{target.egress_rid_field}",
        },
        recirculation="recirculation port",
        max_range_key_width=None,  # wider range keys are re-encoded (backends.tofino.layout), not refused
        max_table_size=None,
        # tna.p4's ingress_intrinsic_metadata_t; v1model's ingress port is the same port. v1model's
        # packet_length and ingress_global_timestamp have no TNA ingress counterpart (the MAC
        # timestamp counts nanoseconds at the MAC, BMv2's global timestamp microseconds): refused.
        query_metadata={
            f"{target.ingress_md}.{target.ingress_port_field}": f"{target.ingress_md}.{target.ingress_port_field}",
            f"{target.ingress_md}.ingress_mac_tstamp": f"{target.ingress_md}.ingress_mac_tstamp",
            "standard_metadata.ingress_port": f"{target.ingress_md}.{target.ingress_port_field}",
        },
    )
