"""Hitless updates on BMv2 (issue 16 item 2): the plan of compiler/incremental/hitless.py as P4Runtime
steps (backends/bmv2/hitless.py), written by update_plan.apply_steps; and on simple_switch_grpc, a
sender that keeps sending while the update lands loses no packet: each one comes out exactly where
the old rules or the new rules send it.

The property that every intermediate state forwards as old or new is proved on the IR plan
(tests/compiler/incremental/test_hitless.py); here the rendering must start from exactly the old
``entries.p4rt.json``, end on exactly the new one, and write every IR write as its entity.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from backends.bmv2 import update_plan as up
from backends.bmv2.hitless import hitless_request, options_of
from compiler import ir
from p4sub import main
from runtime.model import Model
from tests.backends.bmv2 import packets as pk
from tests.backends.bmv2.switch import Bmv2Switch

ROOT = Path(__file__).resolve().parents[3]
ITCH_SPEC = ROOT / "apps" / "itch" / "itch.p4"
STOCKS = ["GOOGL", "AAPL", "MSFT", "IBM", "AMZN", "NFLX"]


def rules_text(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [f'add_order.stock == "{rng.choice(STOCKS)}" and add_order.price > {rng.randint(1, 400)} : '
            f"fwd({rng.randint(1, 3)});" for _ in range(n)]


def compile_pair(tmp: Path, old: list[str], new: list[str], *extra: str) -> tuple[Path, Path]:
    (tmp / "old.sub").write_text("\n".join(old) + "\n")
    (tmp / "new.sub").write_text("\n".join(new) + "\n")
    v1, v2 = tmp / "v1", tmp / "v2"
    assert main(["compile", str(ITCH_SPEC), str(tmp / "old.sub"), "-o", str(v1), "--target", "bmv2",
                 "--state-bits", "8", *extra]) == 0
    assert main(["compile", "--update", str(v1), str(tmp / "new.sub"), "-o", str(v2), "--target", "bmv2"]) == 0
    return v1, v2


def identity(e: dict) -> str:
    """This test's own identity of an entity (not update_plan's)."""
    if "table_entry" in e:
        te = e["table_entry"]
        return json.dumps([te["table_name"], sorted(json.dumps(m, sort_keys=True) for m in te["match"]),
                           te.get("priority", 0)])
    return f"group {e['packet_replication_engine_entry']['multicast_group_entry']['multicast_group_id']}"


def holds(entities) -> dict[str, str]:
    return {identity(e): json.dumps(e, sort_keys=True) for e in entities}


class Switch:
    """A P4Runtime target in miniature: applies a batch's updates in a random order, refuses on demand."""

    def __init__(self, entities, refuse=lambda op: None, seed: int = 0) -> None:
        self.state = {identity(e): e for e in entities}
        self.refuse = refuse
        self.rng = random.Random(seed)
        self.batches = 0

    def write(self, ops: list[up.Op]) -> list[str | None]:
        self.batches += 1
        out: list[str | None] = [None] * len(ops)
        order = list(range(len(ops)))
        self.rng.shuffle(order)
        for i in order:
            op, k = ops[i], identity(ops[i].entity)
            if self.refuse(op):
                out[i] = "INVALID_ARGUMENT: injected"
            elif (op.type == "INSERT") == (k in self.state):
                out[i] = "ALREADY_EXISTS" if k in self.state else "NOT_FOUND"
            elif op.type == "DELETE":
                del self.state[k]
            else:
                self.state[k] = op.entity
        return out


def test_the_steps_start_on_the_old_entries_and_end_on_the_new(tmp_path) -> None:
    old = rules_text(1, 30)
    new = old[8:] + rules_text(2, 8) + ['add_order.stock == "IBM" : fwd(4);']  # a new port: the union group grows
    v1, v2 = compile_pair(tmp_path, old, new)
    request = hitless_request(ir.load(v1), ir.load(v2), options_of(v2))
    entries = lambda out: [u["entity"] for u in json.loads((out / "entries.p4rt.json").read_text())["updates"]]  # noqa: E731
    assert holds(request["before"]) == holds(entries(v1))
    assert holds(request["after"]) == holds(entries(v2))
    phases = [s["phase"] for s in request["steps"]]
    assert "root" in phases and phases.index("union") < phases.index("root")
    switch = Switch(request["before"], seed=1)
    result = up.apply_steps(up.hitless_steps(request), switch.write, batch_size=3)
    assert result.ok, result.summary()
    assert holds(switch.state.values()) == holds(entries(v2))
    # in a batched (prune) program every group has its p4sub_group_ports entry, written with it
    groups = [u for s in request["steps"] for u in s["updates"] if "packet_replication_engine_entry" in u["entity"]]
    ports = [u for s in request["steps"] for u in s["updates"]
             if u["entity"].get("table_entry", {}).get("table_name") == "MyIngress.p4sub_group_ports"]
    assert len(ports) == len([g for g in groups if g["entity"]["packet_replication_engine_entry"]
                              ["multicast_group_entry"]["multicast_group_id"] != 32767])


@pytest.mark.parametrize("fail_at", [0, 5, 17, 40])
def test_a_refusal_rolls_every_written_step_back(tmp_path, fail_at) -> None:
    v1, v2 = compile_pair(tmp_path, rules_text(3, 30), rules_text(3, 30)[10:] + rules_text(4, 10))
    request = hitless_request(ir.load(v1), ir.load(v2), options_of(v2))
    steps = up.hitless_steps(request)
    victim = [op for s in steps for op in s][fail_at % sum(len(s) for s in steps)]
    switch = Switch(request["before"], refuse=lambda op: op == victim, seed=fail_at)
    result = up.apply_steps(steps, switch.write, batch_size=4)
    assert not result.ok and result.refused == victim and result.rolled_back, result.summary()
    assert holds(switch.state.values()) == holds(request["before"])


def test_cli_hitless_needs_to_know_what_the_switch_holds(tmp_path, capsys) -> None:
    v1, v2 = compile_pair(tmp_path, rules_text(5, 5), rules_text(6, 5))
    assert main(["install", str(v2), "--from", str(v1)]) == 2
    assert "add --hitless" in capsys.readouterr().err
    assert main(["install", str(v1), "--hitless"]) == 2
    assert "name the output the switch holds with --from OLD_OUT" in capsys.readouterr().err


# -- on simple_switch_grpc ---------------------------------------------------------------------------
def _skip_reason() -> str | None:
    from tests.backends.bmv2.test_integration import bmv2_skip_reason

    return bmv2_skip_reason()


def _seq_of(data: bytes) -> int:
    return int.from_bytes(data[52:60], "big")  # Ethernet 14 + IPv4 20 + UDP 8 + MoldUDP session 10


@pytest.mark.bmv2
@pytest.mark.p4c
def test_packets_sent_while_a_hitless_update_lands_go_where_the_old_or_the_new_rules_send_them(tmp_path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    old = rules_text(11, 60)
    new = old[15:] + rules_text(12, 15)  # a quarter of the filters replaced: states reused, the root rewritten
    v1, v2 = compile_pair(tmp_path, old, new)
    for out in (v1, v2):
        assert main(["build", str(out)]) == 0
    assert (v1 / "program.p4").read_text() == (v2 / "program.p4").read_text()
    old_model, new_model = Model(ir.load(v1)), Model(ir.load(v2))
    rng = random.Random(13)
    orders = [pk.AddOrder(rng.choice(STOCKS).encode(), rng.randint(0, 450) * 10000, 100, b"B", i) for i in range(1500)]
    where = [(old_model.run_one(o.values())[0], new_model.run_one(o.values())[0]) for o in orders]
    switch = Bmv2Switch([0, 1, 2, 3], tmp_path)
    try:
        r = switch.p4sub("install", str(v1), "--grpc", switch.grpc)
        assert r.returncode == 0, r.stderr
        received: list = []
        period = 0.008  # about 125 packets a second for 12 s, the update landing in the middle
        sender = threading.Thread(target=lambda: received.extend(switch.exchange(
            [(0, pk.itch_packet([o], i)) for i, o in enumerate(orders)], [1, 2, 3], [pk.ITCH_PORT],
            at=[i * period for i in range(len(orders))])))
        sender.start()
        time.sleep(4.0)
        t0 = time.monotonic()
        r = switch.p4sub("install", str(v2), "--hitless", "--grpc", switch.grpc, "--batch-size", "1")
        took = time.monotonic() - t0
        sender.join()
        assert r.returncode == 0, r.stdout + r.stderr
        assert "holds exactly the wanted entries" in r.stdout
    finally:
        switch.close()
    got: dict[int, set[int]] = {}
    for port, data in received:
        got.setdefault(_seq_of(data), set()).add(port)
    judged = Counter()
    for i, (was, will) in enumerate(where):
        ports = got.get(i, set())
        assert ports in (set(was), set(will)), (i, orders[i], sorted(ports), sorted(was), sorted(will))
        if was != will:
            judged["old" if ports == set(was) else "new"] += 1
    print(f"hitless install took {took:.2f} s; {len(orders)} packets, {sum(1 for w in where if w[0] & w[1])} wanted "
          f"by a subscriber in both rule sets, none lost; packets the update changes: {dict(judged)}")
    assert judged["old"] and judged["new"]  # traffic before and after the flip: the update landed during it


def test_a_group_ports_table_without_room_for_the_shadow_groups_is_refused(tmp_path) -> None:
    from dataclasses import replace

    from backends.bmv2.program import PORTS_TABLE
    from compiler.incremental.hitless import HitlessError

    old = rules_text(1, 30)
    v1, v2 = compile_pair(tmp_path, old, old[8:] + rules_text(2, 8) + ['add_order.stock == "IBM" : fwd(2, 4);'])
    a, b = ir.load(v1), ir.load(v2)
    assert hitless_request(a, b, options_of(v2))["counts"].get("groups")  # groups written beside the old ones
    tight = max(len(a.multicast_groups), len(b.multicast_groups))
    options = options_of(v2)
    with pytest.raises(HitlessError, match="p4sub_group_ports would hold"):
        hitless_request(a, b, replace(options, table_sizes={**options.table_sizes, PORTS_TABLE: tight}))

