"""Hitless updates as BF Runtime batches (backends/tofino/hitless.py; no SDE here: the plan and the
rendered records only).

The records are applied one at a time, each step's in a random order, to a dict of records; after
every write the records are read back into table entries (this file's own reading of the BF Runtime
shapes: value/mask, low/high, ``$MATCH_PRIORITY`` lower wins, PRE nodes and groups) and every packet
is walked through them by tests/compiler/incremental/test_hitless.py's independent model: its ports must be what
the oracle gives for the old rules or for the new ones. A 32-bit price key is wider than Tofino's
range match, so its ranges are rendered as a ternary high slice and a range low slice
(backends/tofino/slices.py): one IR write is up to three records, read back here slice by slice.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
import types
from pathlib import Path

import pytest

import backends.tofino as tofino
from backends.tofino import updates
from backends.tofino.bfrt import PRE_MGID, PRE_NODE
from backends.tofino.hitless import batches, hitless_steps, install
from backends.tofino.layout import TofinoOptions
from backends.tofino.target import TOFINO1
from compiler import ir, oracle
from compiler.compile import CompileOptions
from compiler.incremental import Incremental
from compiler.incremental.hitless import HitlessError
from compiler.rules.parser import parse_rules
from compiler.rules.typecheck import check_rules
from compiler.rules.values import encode_string
from compiler.tables import TableOptions
from tests.backends.tofino.helpers import scalar_spec
from tests.backends.tofino.test_install import FakeSwitch, args, fake_client
from tests.compiler.incremental.test_hitless import outcomes

SPEC = scalar_spec()
STOCKS = ["GOOG", "AAPL", "MSFT", "IBM"]


def rules(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            out.append(f'order.stock == "{rng.choice(STOCKS)}" and order.price > {rng.randint(1, 300)} : '
                       f"fwd({rng.randint(1, 4)});")
        else:
            out.append(f"order.qty <= {rng.randint(1, 500)} : fwd({rng.randint(1, 4)});")
    return out


def two_versions(spec, tmp_path: Path):
    """An incremental compile of 20 random rules (room for updates) and the same with the first 5
    removed, both emitted for Tofino in ``tmp_path/v1`` and ``v2``: (old, new, v1, v2)."""
    old_text = rules(random.Random(9), 20)
    options = CompileOptions(delivery="groups", tables=TableOptions(min_state_bits=8, min_size=1024))  # room
    inc = Incremental.compile(spec, parse_rules("\n".join(old_text)), options)
    old = inc.pipeline()
    inc.update(remove=list(parse_rules("\n".join(old_text[:5])).rules))
    new = inc.pipeline()
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    tofino.emit(old, v1)
    tofino.emit(new, v2)
    return old, new, v1, v2


def entry_of(r: dict, pipeline: ir.Pipeline) -> ir.Entry:
    """The table entry a BF Runtime record stands for, read the way bf_switchd would match it."""
    t = pipeline.table(r["table_name"].rsplit(".", 1)[1])
    a = pipeline.action(r["action"].rsplit(".", 1)[1])
    matches = []
    for key in t.keys:
        f = r["key"][key.field]
        matches.append(ir.Range(f["low"], f["high"]) if "low" in f else ir.Ternary(f["value"], f["mask"])
                       if "mask" in f else ir.Lpm(f["value"], f["prefix_len"]) if "prefix_len" in f
                       else ir.Exact(f["value"]))
    prio = r["key"].get("$MATCH_PRIORITY")
    args = tuple(r["data"]["state_" if p.name == "state" else p.name] for p in a.params)
    return ir.Entry(t.name, tuple(matches), a.name, args, TOFINO1.max_match_priority - prio["value"] if prio else 0)


def sliced(pipeline: ir.Pipeline, layout) -> ir.Pipeline:
    """``pipeline`` with each table's keys as the Tofino program declares them (a sliced key as its
    ``field[msb:lsb]`` slices), so records are read back key by key and packets walked slice by slice."""
    keys = {t.name: tuple(ir.Key(k.name, k.width, k.match_kind) for k in t.keys) for t in layout.tables}
    return dataclasses.replace(pipeline, tables=tuple(dataclasses.replace(t, keys=keys.get(t.name, t.keys))
                                                      for t in pipeline.tables))


def with_slices(pkt: dict[str, int], pipeline: ir.Pipeline) -> dict[str, int]:
    """The packet with the value of every ``field[msb:lsb]`` key of ``pipeline``."""
    out = dict(pkt)
    for t in pipeline.tables:
        for k in t.keys:
            m = re.fullmatch(r"(.+)\[(\d+):(\d+)\]", k.field)
            if m:
                msb, lsb = int(m[2]), int(m[3])
                out[k.field] = (pkt.get(m[1], 0) >> lsb) & ((1 << (msb - lsb + 1)) - 1)
    return out


def groups_of(records: dict) -> dict[int, tuple[int, ...]]:
    """Multicast group -> ports, through the PRE: a group names nodes, a node holds ports."""
    nodes = {r["key"]["$MULTICAST_NODE_ID"]["value"]: r["data"]["$DEV_PORT"] for r in records.values()
             if r["table_name"] == PRE_NODE}
    return {r["key"]["$MGID"]["value"]: tuple(p for n in r["data"]["$MULTICAST_NODE_ID"] for p in nodes.get(n, ()))
            for r in records.values() if r["table_name"] == PRE_MGID}


def packets(rng: random.Random, n: int) -> list[dict[str, int]]:
    return [{"order.stock": encode_string(rng.choice(STOCKS + ["NONE"]), 64), "order.price": rng.randint(0, 3_200_000),
             "order.qty": rng.randint(0, 600)} for _ in range(n)]


@pytest.mark.parametrize("seed", range(3))
def test_every_bfrt_write_of_a_hitless_update_leaves_each_packet_old_or_new(seed) -> None:
    rng = random.Random(seed)
    old_text = rules(rng, 12)
    new_text = old_text[4:] + rules(rng, 4)
    options = CompileOptions(delivery="groups", tables=TableOptions(min_state_bits=8))
    inc = Incremental.compile(SPEC, parse_rules("\n".join(old_text)), options)
    old = inc.pipeline()
    update = inc.update(add=list(parse_rules("\n".join(new_text[-4:])).rules),
                        remove=list(parse_rules("\n".join(old_text[:4])).rules))
    assert update.incremental, update.reason
    new = inc.pipeline()
    # Room for old and new side by side; slices asked for (auto now prefers the price table's prefix cover, one
    # TCAM block wide with the state key beside it) since the slice encoding is what this test takes through updates.
    room = TofinoOptions(headroom=2.5, wide_ranges="slices")
    with pytest.raises(HitlessError, match="at its peak, old and new side by side"):
        hitless_steps(old, new)
    steps, plan = hitless_steps(old, new, room)
    assert plan.counts()["root"] and [p for p, _ in steps].count("root") >= 1
    r_old, r_new = tofino.build(old, room), tofino.build(new, room)
    pipeline = sliced(r_new.batched.pipeline, r_new.layout)
    assert any(k.encoding == "slices" for t in r_new.layout.tables for k in t.keys)
    pkts = packets(rng, 30)
    want_old = [oracle.evaluate(check_rules(parse_rules("\n".join(old_text)), SPEC), p).ports for p in pkts]
    want_new = [oracle.evaluate(check_rules(parse_rules("\n".join(new_text)), SPEC), p).ports for p in pkts]
    state = {updates.identity(r): r for r in r_old.entries["pre"] + r_old.entries["entries"]}
    pre = {k: r for k, r in state.items() if r["table_name"].startswith("$pre.")}
    entries = {k: entry_of(r, pipeline) for k, r in state.items() if k not in pre}

    def check(where: str) -> None:
        groups = groups_of(pre)
        for pkt, a, b in zip(pkts, want_old, want_new):
            for got in outcomes(pipeline, entries, groups, with_slices(pkt, pipeline)):
                assert got in (a, b), (where, pkt, got, a, b)

    check("before")
    for i, (phase, ops) in enumerate(steps):
        ops = list(ops)
        rng.shuffle(ops)
        if any(op.record["table_name"] == PRE_MGID for op in ops):  # nodes and groups are separate steps
            assert all(op.record["table_name"] == PRE_MGID for op in ops)
        for op in ops:
            k = updates.identity(op.record)
            table = pre if op.record["table_name"].startswith("$pre.") else entries
            if op.kind == "delete":
                del state[k], table[k]
            else:
                assert (k in state) == (op.kind == "modify")
                state[k] = op.record
                table[k] = op.record if table is pre else entry_of(op.record, pipeline)
            check(f"step {i} {phase}: {op.kind} {op.record['table_name']}")
    assert updates.differences(r_new.entries["pre"] + r_new.entries["entries"], list(state.values())) == []
    for step in batches(steps, 4):
        for batch in step:
            assert len(batch) <= 4 and len({(op.kind, op.record["table_name"]) for op in batch}) == 1


def test_install_writes_the_steps_and_reads_back_the_new_entries(tmp_path, monkeypatch, capsys) -> None:
    sw = FakeSwitch()
    package, client = types.ModuleType("bfrt_grpc"), fake_client(sw)
    package.client = client
    monkeypatch.setitem(sys.modules, "bfrt_grpc", package)
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", client)
    old, new, v1, v2 = two_versions(SPEC, tmp_path)
    from backends.tofino.install import install as install_all

    assert install_all(v1, args()) == 0
    assert install(old, new, v2, args(dry_run=True)) == 0
    assert "dry run: hitless plan" in capsys.readouterr().out
    assert install(old, new, v2, args()) == 0
    assert "read back and checked" in capsys.readouterr().out
    doc = json.loads((v2 / "entries.bfrt.json").read_text())
    assert sum(len(t) for t in sw.tables.values()) == len(doc["entries"]) + len(doc["pre"])


def test_a_program_that_evaluates_each_message_of_a_stack_in_its_own_slot_flips_each_slot() -> None:
    """ITCH with several Add Orders per packet: the batched program keeps one state per message slot
    (``meta.p4sub_state_m3``); each slot is a walk of its own, flipped on its own, and the records
    still go from the old document to exactly the new one (hitless_steps checks it)."""
    from compiler.spec.reader import read_spec
    from tests.backends.tofino.helpers import ITCH_SPEC

    spec = read_spec(ITCH_SPEC)
    old_text = ['add_order.stock == "GOOGL" and add_order.price > 50 : fwd(3);', 'add_order.stock == "AAPL" : fwd(2);',
                'add_order.stock == "MSFT" and add_order.price < 10 : fwd(1);']
    options = CompileOptions(delivery="groups", tables=TableOptions(min_state_bits=8, min_size=2048))
    inc = Incremental.compile(spec, parse_rules("\n".join(old_text)), options)
    old = inc.pipeline()
    inc.update(remove=list(parse_rules(old_text[2]).rules),
               add=list(parse_rules('add_order.stock == "MSFT" and add_order.price < 20 : fwd(1, 2);').rules))
    room = TofinoOptions(batch="union", headroom=3.0)
    steps, plan = hitless_steps(old, inc.pipeline(), room)
    slots = {op.record["key"].get("meta.p4sub_state_m3") is not None for _, ops in steps for op in ops}
    assert True in slots  # writes in slot 3's walk
    assert tofino.build(old, room).resources["notes"]["batch_mode"] == "union"
