"""The installer against an in-memory stand-in for ``bfrt_grpc.client`` (no SDE needed).

Given bf-p4c's ``bf-rt.json`` (the schema the switch's BF Runtime server loads), the stand-in knows
only its tables, key fields, actions and data fields, and refuses others as the server would.
"""

from __future__ import annotations

import argparse
import json
import sys
import types

import pytest

import backends.tofino as tofino
from backends.tofino.install import install
from compiler.base.errors import P4subError, TargetError
from tests.backends.tofino.helpers import SCALAR_RULES, compile_text, scalar_spec


class FakeSwitch:
    """Tables as dicts from a canonical key to (action, data); can refuse writes to one table."""

    def __init__(self, schema: dict | None = None) -> None:
        self.schema = {t["name"]: t for t in schema["tables"]} if schema else None
        self.tables: dict[str, dict[str, tuple]] = {}
        self.defaults: dict[str, tuple] = {}  # table -> (action, data) set by default_entry_set
        self.refuse: str | None = None
        self.writes = 0


def fake_client(switch: FakeSwitch) -> types.ModuleType:
    gc = types.ModuleType("bfrt_grpc.client")

    class KeyTuple:
        def __init__(self, name, value=None, mask=None, low=None, high=None, prefix_len=None):
            f = {"value": value, "mask": mask, "low": low, "high": high, "prefix_len": prefix_len}
            self.name, self.fields = name, {k: v for k, v in f.items() if v is not None}

    class DataTuple:
        def __init__(self, name, val=None, int_arr_val=None, bool_arr_val=None):
            self.name = name
            self.value = val if val is not None else int_arr_val if int_arr_val is not None else bool_arr_val

    class Obj:
        def __init__(self, d):
            self.d = d

        def to_dict(self):
            return dict(self.d)

    class Table:
        def __init__(self, name):
            if switch.schema is not None and name not in switch.schema and not name.startswith("$pre."):
                raise KeyError(f"Table {name} not found")  # as BfRtInfo.table_get on an unknown name
            self.name = name
            switch.tables.setdefault(name, {})

        def make_key(self, tuples):
            if switch.schema is not None and self.name in switch.schema:
                known = {k["name"] for k in switch.schema[self.name]["key"]} | {"$MATCH_PRIORITY"}
                for t in tuples:
                    if t.name not in known:
                        raise KeyError(f"{self.name}: key field {t.name} not found")
            return json.dumps({t.name: t.fields for t in tuples}, sort_keys=True)

        def make_data(self, tuples, action=None):
            if switch.schema is not None and self.name in switch.schema and action is not None:
                specs = {a["name"]: {d["name"] for d in a["data"]} for a in switch.schema[self.name]["action_specs"]}
                if action not in specs:
                    raise KeyError(f"{self.name}: action {action} not found")
                for t in tuples:
                    if t.name not in specs[action]:
                        raise KeyError(f"{self.name}: data field {t.name} not found for {action}")
            return (action, {t.name: t.value for t in tuples})

        def _check(self):
            switch.writes += 1
            if switch.refuse == self.name:
                raise RuntimeError("table full")

        def entry_add(self, target, keys, datas):
            self._check()
            for k, d in zip(keys, datas):
                assert k not in switch.tables[self.name]
                switch.tables[self.name][k] = d

        def entry_mod(self, target, keys, datas):
            self._check()
            for k, d in zip(keys, datas):
                switch.tables[self.name][k] = d

        def entry_del(self, target, keys):
            self._check()
            for k in keys:
                del switch.tables[self.name][k]

        def default_entry_set(self, target, data):
            self._check()
            switch.defaults[self.name] = data

        def default_entry_reset(self, target):
            self._check()
            switch.defaults.pop(self.name, None)

        def default_entry_get(self, target, flags):
            if self.name in switch.defaults:
                action, data = switch.defaults[self.name]
                yield Obj({**data, "action_name": action, "is_default_entry": True}), Obj({})

        def entry_get(self, target, keys, flags):
            for k, (action, data) in switch.tables[self.name].items():
                d = dict(data)
                if action:
                    d["action_name"] = action
                d["is_default_entry"] = False
                yield Obj(d), Obj(json.loads(k))

    class Info:
        def table_get(self, name):
            return Table(name)

    class ClientInterface:
        def __init__(self, address, client_id, device_id):
            self.address = address

        def bfrt_info_get(self, name):
            return Info()

        def bind_pipeline_config(self, name):
            pass

        def tear_down_stream(self):
            pass

    gc.KeyTuple, gc.DataTuple, gc.ClientInterface = KeyTuple, DataTuple, ClientInterface
    gc.Target = lambda device_id, pipe_id: (device_id, pipe_id)
    return gc


def args(**kw) -> argparse.Namespace:
    base = dict(grpc="localhost:50052", device_id=0, program_name=None, dry_run=False, batch_size=3)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture()
def out(tmp_path):
    tofino.emit(compile_text(scalar_spec(), SCALAR_RULES), tmp_path)
    return tmp_path


@pytest.fixture()
def switch(monkeypatch):
    sw = FakeSwitch()
    package = types.ModuleType("bfrt_grpc")
    client = fake_client(sw)
    package.client = client
    monkeypatch.setitem(sys.modules, "bfrt_grpc", package)
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", client)
    return sw


def test_install_writes_every_record_and_a_second_install_changes_nothing(out, switch, capsys):
    doc = json.loads((out / "entries.bfrt.json").read_text())
    assert install(out, args()) == 0
    assert sum(len(t) for t in switch.tables.values()) == len(doc["entries"]) + len(doc["pre"])
    writes = switch.writes
    assert install(out, args()) == 0
    assert switch.writes == writes  # nothing to change
    assert "read back and checked" in capsys.readouterr().out


def test_a_refused_batch_undoes_the_batches_before_it(out, switch):
    switch.refuse = "pipe.SwitchIngress.field_order_stock"
    with pytest.raises(TargetError, match="refused.*undone"):
        install(out, args())
    assert all(len(t) == 0 for t in switch.tables.values())


def test_install_replaces_old_entries(out, switch, tmp_path):
    assert install(out, args()) == 0
    other = tmp_path / "other"
    changed = SCALAR_RULES.replace('"GOOG"', '"IBM"').replace("fwd(1)", "fwd(6)").replace("< 20", "< 30")
    tofino.emit(compile_text(scalar_spec(), changed), other)
    doc = json.loads((other / "entries.bfrt.json").read_text())
    first = json.loads((out / "entries.bfrt.json").read_text())
    def shape(d):
        return [{k: v for k, v in t.items() if k != "size"} for t in d["tables"]]
    assert shape(doc) == shape(first)  # the same tables (sizes follow the entry counts), new entries
    assert doc["entries"] != first["entries"]
    assert install(other, args()) == 0
    assert sum(len(t) for t in switch.tables.values()) == len(doc["entries"]) + len(doc["pre"])


def test_dry_run_needs_no_sde(out, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "bfrt_grpc", None)
    assert install(out, args(dry_run=True)) == 0
    assert "dry run:" in capsys.readouterr().out


def test_missing_bfrt_grpc_is_a_p4sub_error_naming_the_sde(out, monkeypatch):
    monkeypatch.setitem(sys.modules, "bfrt_grpc", None)
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", None)
    monkeypatch.delenv("SDE_INSTALL", raising=False)
    monkeypatch.delenv("SDE", raising=False)
    with pytest.raises(P4subError, match=r"SDE_INSTALL/lib/python3\.\*/site-packages/tofino"):
        install(out, args())


def test_missing_entries_file_is_a_p4sub_error(tmp_path):
    with pytest.raises(P4subError, match="no such file"):
        install(tmp_path, args())


@pytest.fixture()
def stack_out(tmp_path):
    """One transit switch of a combined compile for Tofino: its own id is a default entry."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-m", "p4sub", "route", str(root / "examples/fat-tree-4.topo"),
                    str(root / "examples/fat-tree-4.rules"), "--spec", str(root / "apps/itch/itch.p4"),
                    "--delivery", "header-stack:port", "--target", "tofino", "-o", str(tmp_path / "net")],
                   check=True, capture_output=True, cwd=root)
    return tmp_path / "net" / "c1"


def test_default_entries_are_set_not_added_and_a_second_install_changes_nothing(stack_out, switch):
    doc = json.loads((stack_out / "entries.bfrt.json").read_text())
    default = next(r for r in doc["entries"] if r.get("default_entry"))
    assert install(stack_out, args()) == 0
    assert switch.defaults[default["table_name"]] == (default["action"], default["data"])
    assert "{}" not in switch.tables[default["table_name"]]  # not an ordinary entry with an empty key
    writes = switch.writes
    assert install(stack_out, args()) == 0
    assert switch.writes == writes


def test_a_refused_update_puts_back_the_default_entry_it_had_changed(stack_out, switch):
    doc = json.loads((stack_out / "entries.bfrt.json").read_text())
    default = next(r for r in doc["entries"] if r.get("default_entry"))
    assert install(stack_out, args()) == 0
    old = (default["action"], {**default["data"], "id": default["data"]["id"] + 1})
    switch.defaults[default["table_name"]] = old  # the switch runs another id, and a stale group:
    switch.tables["$pre.mgid"][json.dumps({"$MGID": {"value": 4000}}, sort_keys=True)] = (None, {})
    switch.refuse = "$pre.mgid"  # deleting it fails after the own id was set
    with pytest.raises(TargetError):
        install(stack_out, args())
    assert switch.defaults[default["table_name"]] == old


@pytest.mark.tofino
def test_install_against_bf_p4c_s_own_schema(tmp_path, monkeypatch, capsys):
    """bf-p4c compiles the program; the stand-in loads its bf-rt.json and takes every record."""
    import shutil

    from p4sub import main

    if shutil.which("bf-p4c") is None:
        pytest.skip("bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON, or the Tofino SDE)")
    out = tmp_path / "out"
    assert main(["compile", "apps/itch/itch.p4", "apps/itch/rules.sub", "--target", "tofino", "--batch", "first",
                 "-o", str(out)]) == 0
    assert main(["build", str(out)]) == 0, capsys.readouterr().err
    sw = FakeSwitch(json.loads((out / "program.tofino" / "bf-rt.json").read_text()))
    package, client = types.ModuleType("bfrt_grpc"), fake_client(sw)
    package.client = client
    monkeypatch.setitem(sys.modules, "bfrt_grpc", package)
    monkeypatch.setitem(sys.modules, "bfrt_grpc.client", client)
    assert install(out, args()) == 0
    written = sum(len(t) for n, t in sw.tables.items() if not n.startswith("$pre."))
    assert written > 0 and set(sw.tables) <= set(sw.schema) | {n for n in sw.tables if n.startswith("$pre.")}
