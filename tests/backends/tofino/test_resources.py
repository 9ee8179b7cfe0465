"""Resource estimates on small hand-made pipelines, checked against figures worked out by hand.

Geometry (Tofino 1): SRAM blocks 1024 x 128 bits, TCAM blocks 512 x 44 bits, 12 stages of 80 SRAM
and 24 TCAM blocks, 16 logical tables per stage, 65,536 multicast groups.
"""

from __future__ import annotations

import pytest

from backends.tofino.layout import TofinoOptions, plan
from backends.tofino.resources import estimate
from backends.tofino.target import TOFINO1, Target
from compiler import ir
from compiler.base.errors import ResourceError
from tests.backends.tofino.helpers import scalar_spec

SET_STATE = ir.Action("set_state", (ir.Param("state", 4),), (ir.Primitive("set_meta", (ir.STATE, "state")),))
BASE_ACTIONS = (ir.Action("NoAction"), SET_STATE,
                ir.Action("forward", (ir.Param("port", 9),), (ir.Primitive("set_egress_port", ("port",)),)),
                ir.Action("multicast", (ir.Param("group", 16),), (ir.Primitive("set_mcast_group", ("group",)),)),
                ir.Action("drop_packet", (), (ir.Primitive("drop"),)))


def state_key(width: int = 4) -> ir.Key:
    return ir.Key(ir.STATE, width, "exact")


def field_table(name: str, key: ir.Key, size: int, on_miss: str | None = None) -> ir.Table:
    return ir.Table(name, (state_key(), key), ("set_state", "NoAction"), "NoAction", size=size, on_miss=on_miss,
                    role="field")


def pipeline(tables, control, groups=(), entries=()) -> ir.Pipeline:
    return ir.Pipeline(spec=scalar_spec(), metadata=(ir.Metadata(ir.STATE, 4),), actions=BASE_ACTIONS,
                       tables=tuple(tables), control=tuple(control), entries=tuple(entries),
                       multicast_groups=tuple(groups))


def uses(p: ir.Pipeline, options: TofinoOptions = TofinoOptions()):
    est = estimate(plan(p, options))
    return est, {u.name: u for u in est.tables}


def test_exact_table_sram_blocks_by_hand():
    # Key 4 + 64 = 68 bits, 10 ghost bits: 58 stored bits (packed bit by bit, as bf-p4c's table format
    # does); + 4 version + 1 instruction (2 actions) + 4 immediate = 67 bits: one entry per 128-bit word.
    # 64 entries -> 1 RAM deep, raised to bf-p4c's minimum of 4 hash ways = 4 blocks.
    # 5000 entries -> ceil(5000 / 1024) = 5 RAMs.
    for size, blocks in ((64, 4), (5000, 5)):
        t = field_table("f", ir.Key("order.stock", 64, "exact"), size)
        _, u = uses(pipeline([t], ["f"]))
        assert (u["f"].entry_bits, u["f"].entries_per_word, u["f"].sram_blocks, u["f"].tcam_blocks) == (67, 1, blocks, 0)


def test_narrow_exact_table_packs_five_entries_per_word():
    # Key 4 + 16 = 20 bits, 10 ghost bits (20 RAMs: ways of fewer than 8), 10 stored; 10 + 4 + 1 + 4 = 19 bits:
    # 6 would fit a word, 5 is the most bf-p4c packs. ceil(100000 / 5120) = 20 RAMs.
    t = field_table("f", ir.Key("order.qty", 16, "exact"), 100_000)
    _, u = uses(pipeline([t], ["f"]))
    assert (u["f"].entry_bits, u["f"].entries_per_word, u["f"].sram_blocks) == (19, 5, 20)


def test_a_large_exact_table_stores_fewer_key_bits_per_entry():
    # hICN-like: 1.25M entries of (8-bit state, 32-bit id): ways 8 RAMs deep, 13 ghost bits, 27 stored;
    # 27 + 4 + 1 + 8 (the next state, immediate) = 40 bits, 3 per word: ceil(1250000 / 3072) = 407 RAMs
    # (bf-p4c: 429 with the state in an action-data table; byte-rounded 32 stored bits gave 611).
    t = ir.Table("f", (ir.Key(ir.STATE, 8, "exact"), ir.Key("order.id", 32, "exact")), ("set_big", "NoAction"),
                 "NoAction", size=1_250_000, role="field")
    big = ir.Action("set_big", (ir.Param("state", 8),), (ir.Primitive("set_meta", (ir.STATE, "state")),))
    p = ir.Pipeline(spec=scalar_spec(), metadata=(ir.Metadata(ir.STATE, 8),), actions=BASE_ACTIONS + (big,),
                    tables=(t,), control=("f",), entries=())
    est = estimate(plan(p), check=False)
    u = est.tables[0]
    assert (u.entry_bits, u.entries_per_word, u.sram_blocks) == (40, 3, 407)


def test_state_only_table_uses_one_ram_through_an_identity_hash():
    # A 4-bit key (< 10 bits) in a single RAM: bf-p4c's identity-hash case, 1 block.
    miss = ir.Table("m", (state_key(),), ("set_state", "NoAction"), "NoAction", size=64, role="miss")
    _, u = uses(pipeline([miss], ["m"]))
    assert u["m"].sram_blocks == 1


def test_ternary_table_tcam_and_ternary_indirect_by_hand():
    # Match bytes: state 1 + price 4 = 5 -> 1 TCAM wide; 600 rows -> 2 TCAM blocks deep.
    # Ternary indirect: 1 instruction + 4 data = 5 bits -> 8-bit words, 16 per 128-bit word:
    # ceil(600 / 16384) = 1 SRAM block.
    t = field_table("f", ir.Key("order.price", 32, "ternary"), 600)
    _, u = uses(pipeline([t], ["f"]))
    assert (u["f"].memory, u["f"].tcam_rows, u["f"].tcam_blocks, u["f"].sram_blocks) == ("tcam", 600, 2, 1)


def test_wide_ternary_key_takes_tcam_blocks_side_by_side():
    # Match bytes 1 + 8 = 9: 18 nibbles + the version's = 19, over 11 -> 2 TCAMs wide; 512 rows -> 1 deep = 2 blocks.
    t = field_table("f", ir.Key("order.stock", 64, "ternary"), 512)
    _, u = uses(pipeline([t], ["f"]))
    assert u["f"].tcam_blocks == 2


@pytest.mark.parametrize("match_bytes, ranges, wide, groups", [
    # Shapes bf-p4c 9.13 placed (program.bfa of the ITCH union and the routed switches, docs/tofino.md):
    (2, 0, 1, 1),  # 8-bit state + 3-bit range code (1 byte): one TCAM
    (6, 1, 2, 2),  # shares[31:16] ternary + shares[15:0] range (2 + 4 bytes): two TCAMs, groups 6 and 9
    (10, 1, 2, 2),  # state + stock[63:8] + stock[7:0] range (1 + 7 + 2): two TCAMs, groups 4 and 5
    (11, 1, 3, 2),  # state + stock[63:16] + stock[15:0] range (1 + 6 + 4): three, one byte in the mid byte
    (5, 0, 1, 1),  # 5 bytes and the version nibble: 11 nibbles, one TCAM
    (0, 0, 1, 1),
])
def test_tcam_width_follows_bf_p4cs_table_format(match_bytes, ranges, wide, groups):
    from backends.tofino.ranges import tcam_blocks_wide, ternary_groups

    assert (tcam_blocks_wide(match_bytes, ranges), ternary_groups(match_bytes, ranges)) == (wide, groups)


def test_a_key_a_few_bits_over_the_ram_index_takes_the_rams_of_an_identity_hash():
    # bf-p4c's can_be_identity_hash: a 12-bit key (egress port 9 + state 2 + valid 1; 2 bits over the 10 a RAM
    # row index takes) has 4 values, 5 per word: 1 RAM, not 4 ways (routed switches' keep tables: 1 RAM each).
    # An 18-bit key has 256 values: 64 RAMs, more than 4 ways, so 4 ways.
    for width, blocks in ((8, 1), (14, 4)):  # + the 4-bit state key: 12 and 18 bits
        t = ir.Table("k", (state_key(), ir.Key("order.side", width, "exact")), ("set_state", "NoAction"), "NoAction",
                     size=64, role="field")
        _, u = uses(pipeline([t], ["k"]))
        assert u["k"].sram_blocks == blocks, width


def test_a_stage_holds_twelve_ternary_crossbar_groups():
    # 13 independent one-group TCAM tables (one TCAM block each, 13 of the stage's 24): the 13th goes to stage 1.
    tables = [ir.Table(f"t{i}", (ir.Key(f"order.f{i}", 8, "ternary"),), ("NoAction",), "NoAction",
                       size=64, role="code") for i in range(13)]  # writing nothing: independent of each other
    _, u = uses(pipeline(tables, [t.name for t in tables]))
    assert sorted(x.first_stage for x in u.values()) == [0] * 12 + [1]
    assert all(x.tcam_blocks == 1 and x.ixbar == 1 for x in u.values())


def test_range_table_reserves_rows_for_its_nibble_encoded_entries():
    # 16-bit range key: 4 nibbles, an entry takes at most 2*4-1 = 7 rows. Entry [1, 0xFFFE] takes 7.
    # Size 64, 1 entry of 7 rows: scaled to the size 448 rows are needed, i.e. N entries with ranges
    # where N*7 + (64 - N) >= 448 -> N = ceil(384 / 6) = 64 -> 448 rows -> 1 TCAM block.
    t = field_table("f", ir.Key("order.qty", 16, "range"), 64)
    e = ir.Entry("f", (ir.Exact(0), ir.Range(1, 0xFFFE)), "set_state", (1,), 1)
    _, u = uses(pipeline([t], ["f"], entries=[e]))
    assert (u["f"].tcam_rows, u["f"].tcam_blocks) == (448, 1)


def test_dependent_tables_take_one_stage_each_and_miss_tables_share_their_stage():
    tables = [field_table("a", ir.Key("order.stock", 64, "exact"), 64, on_miss="a_miss"),
              ir.Table("a_miss", (state_key(),), ("set_state", "NoAction"), "NoAction", size=64, role="miss"),
              field_table("b", ir.Key("order.qty", 16, "exact"), 64),
              ir.Table("leaf", (state_key(),), ("forward", "multicast", "drop_packet"), "drop_packet", size=64,
                       role="leaf")]
    est, u = uses(pipeline(tables, ["a", "b", "leaf"]))
    assert (u["a"].first_stage, u["a_miss"].first_stage, u["b"].first_stage, u["leaf"].first_stage) == (0, 0, 1, 2)
    assert est.stages == 3 and est.passes == 1


def test_a_table_bigger_than_a_stage_spills_into_the_next_and_delays_its_dependents():
    # 500,000 entries: ways of 8 RAMs, 13 ghost bits: 55 stored + 4 + 1 + 4 = 64 bits, 2 per word: 245 RAMs;
    # 80 per stage -> stages 0..3; the next table starts at 4.
    big = field_table("a", ir.Key("order.stock", 64, "exact"), 500_000)
    leaf = ir.Table("leaf", (state_key(),), ("forward", "multicast", "drop_packet"), "drop_packet", size=64, role="leaf")
    est, u = uses(pipeline([big, leaf], ["a", "leaf"]))
    assert u["a"].sram_blocks == 245
    assert (u["a"].first_stage, u["a"].last_stage, u["leaf"].first_stage) == (0, 3, 4)


def chain(n: int) -> ir.Pipeline:
    tables = [field_table(f"t{i}", ir.Key("order.qty", 16, "exact"), 64) for i in range(n)]
    return pipeline(tables, [t.name for t in tables])


def test_more_dependent_tables_than_stages_is_a_resource_error_naming_the_table():
    est, _ = uses(chain(12))
    assert est.stages == 12
    with pytest.raises(ResourceError, match=r"table t12 does not fit.*12 stages.*allow-recirculation"):
        uses(chain(13))


def test_recirculation_gives_a_second_pass_on_the_same_physical_stages():
    est, u = uses(chain(20), TofinoOptions(allow_recirculation=True))
    assert est.passes == 2
    assert u["t11"].passes == (0,) and u["t12"].passes == (1,) and u["t12"].first_stage == 0
    assert u["t19"].last_stage == 7
    with pytest.raises(ResourceError):
        uses(chain(25), TofinoOptions(allow_recirculation=True))


def test_more_memory_than_the_chip_is_a_resource_error_with_the_shortfall():
    big = field_table("a", ir.Key("order.stock", 64, "exact"), 2_000_000)  # 2 per word: 977 RAMs > 960
    with pytest.raises(ResourceError, match=r"977 SRAM blocks and tofino has 960 \(17 short\).*largest is a"):
        uses(pipeline([big], ["a"]))
    est = estimate(plan(pipeline([big], ["a"])), check=False)
    assert est.sram_blocks == 977 and est.sram_percent == pytest.approx(100 * 977 / 960)


def test_multicast_groups_against_the_pre_limit():
    groups = [ir.MulticastGroup(i, (1, 2)) for i in range(1, 656)]
    est, _ = uses(pipeline([chain(1).tables[0]], ["t0"], groups=groups))
    assert est.multicast_groups == 655 and est.multicast_percent == pytest.approx(100 * 655 / 65536)
    tiny = Target(name="tiny", multicast_groups=100)
    with pytest.raises(ResourceError, match="multicast groups"):
        uses(pipeline([chain(1).tables[0]], ["t0"], groups=groups), TofinoOptions(target=tiny))


def test_percentages_are_of_the_whole_chip():
    est, u = uses(chain(3))
    assert est.sram_blocks == sum(x.sram_blocks for x in u.values())
    assert est.sram_percent == pytest.approx(100 * est.sram_blocks / (12 * 80))
    assert est.tcam_percent == 0 and TOFINO1.tcam_total == 288


def test_independent_tables_share_a_stage_up_to_sixteen_logical_tables():
    # Twenty tables that read only packet fields and write nothing another reads: no dependencies,
    # but a stage holds 16 logical tables, so the last four go to stage 1.
    tables = [ir.Table(f"c{i}", (ir.Key("order.qty", 16, "exact"),), ("NoAction",), "NoAction", size=64)
              for i in range(20)]
    est, u = uses(pipeline(tables, [t.name for t in tables]))
    assert [u[f"c{i}"].first_stage for i in range(20)] == [0] * 16 + [1] * 4
    assert est.stages == 2
