"""``p4sub install OUT --target tofino --grpc HOST:50052``: write entries.bfrt.json to a Tofino switch.

The switch must already run the program (``bf_switchd`` with ``program.p4`` compiled by bf-p4c); this
writes its table entries and PRE configuration through BF Runtime gRPC (``bfrt_grpc.client``, which
ships with the SDE, not with PyPI). Steps: read what the switch holds in our tables, plan the update
(:mod:`backends.tofino.updates`), write it in batches, undo the batches already written when one
fails, and read every table back to check that the switch holds exactly what the file says.

The BMv2 installer's planner (``backends/bmv2/update_plan.py``) is not reused: it identifies
P4Runtime entities (``table_entry`` matches and priority, ``multicast_group_entry`` replicas) and
reports refusals per update, while BF Runtime records name key fields with ``$MATCH_PRIORITY``
inside the key, configure multicast in two tables (``$pre.node``, ``$pre.mgid``), and a bfrt_grpc
write is one batch. Tested against an in-memory stand-in for the bfrt_grpc module, and through the
SDE's own client (open-p4studio's, its stubs generated here) against a BF Runtime gRPC server
stand-in holding bf-p4c's bf-rt.json (tests/backends/tofino/test_install_bfrt_grpc.py); not against a
switch.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path
from typing import Any

from backends.tofino import updates
from backends.tofino.bfrt import FORMAT, PRE_MGID, PRE_NODE
from compiler.base import P4subError, TargetError

ENTRIES_FILE = "entries.bfrt.json"
DEFAULT_GRPC = "127.0.0.1:50052"  # bf_switchd's BF Runtime gRPC port
SDE_HINT = ("bfrt_grpc is not importable. It ships with the Barefoot/Intel SDE (open-p4studio), not with "
            "PyPI: add $SDE_INSTALL/lib/python3.*/site-packages/tofino (the directory that holds bfrt_grpc/) "
            "to PYTHONPATH, or set SDE_INSTALL; it also needs grpcio, protobuf and googleapis-common-protos")


def load_entries(out_dir: str | Path) -> dict[str, Any]:
    path = Path(out_dir) / ENTRIES_FILE if Path(out_dir).is_dir() else Path(out_dir)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise P4subError(f"{path}: no such file (run `p4sub compile ... --target tofino -o OUT` first)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise P4subError(f"{path}: not a BF Runtime entries file: {exc}") from None
    if doc.get("format") != FORMAT:
        raise P4subError(f"{path}: format {doc.get('format')!r}; this p4sub reads {FORMAT}")
    return doc


def refuse_include_mode(out_dir: str | Path) -> None:
    """Refuse an include-mode directory (``--emit control``), like the BMv2 installer: this one makes the
    switch hold exactly the file's entries in the tables it names and exactly its PRE records, so it
    would delete the multicast groups of the user's own program; and the program on the switch is the
    user's, compiled under a name the file does not know (``p4_name`` is null)."""
    out = Path(out_dir)
    if not out.is_dir():
        return
    include = not (out / "program.p4").is_file() and (out / "p4sub_control.p4").is_file()
    if not include and (out / ENTRIES_FILE).is_file():
        try:
            include = json.loads((out / ENTRIES_FILE).read_text(encoding="utf-8")).get("mode") == "include"
        except (OSError, json.JSONDecodeError, AttributeError):
            include = False
    if include:
        raise P4subError(f"{out} holds the include-mode control (p4sub_control.p4): p4sub install makes the switch hold "
                         "exactly the file's PRE configuration, so it would delete your program's own multicast "
                         "nodes and groups, and the program on the switch is yours, under its own name; write "
                         "entries.bfrt.json's records with your controller (bfrt_grpc: table_name, key, action, "
                         "data; $pre.node records before $pre.mgid) (docs/tofino.md, \"Include mode\")")


def import_client() -> Any:
    """``bfrt_grpc.client``, looked for on sys.path and then under ``$SDE_INSTALL``."""
    try:
        import bfrt_grpc.client as gc  # type: ignore[import-not-found]
        return gc
    except ImportError:
        pass
    sde = os.environ.get("SDE_INSTALL") or (os.environ.get("SDE") and os.path.join(os.environ["SDE"], "install"))
    if sde:
        for site in sorted(glob.glob(os.path.join(sde, "lib", "python3*", "site-packages", "tofino"))):
            if site not in sys.path:
                sys.path.append(site)
        try:
            import bfrt_grpc.client as gc  # type: ignore[import-not-found]
            return gc
        except ImportError as exc:
            raise P4subError(f"{SDE_HINT} (looked under {sde}: {exc})") from None
    raise P4subError(SDE_HINT)


def install(out_dir: str | Path, args: argparse.Namespace) -> int:
    """Install ``OUT/entries.bfrt.json``; ``args`` carries grpc, device_id, program_name, dry_run, batch_size."""
    refuse_include_mode(out_dir)
    doc = load_entries(out_dir)
    batch_size = int(getattr(args, "batch_size", None) or 1000)
    records = doc["pre"] + doc["entries"]
    order = [t["table_name"] for t in doc["tables"]]
    if getattr(args, "dry_run", False):
        ops = updates.plan([], records, order)
        groups = updates.batches(ops, batch_size)
        print(f"dry run: {len(ops)} writes in {len(groups)} batches to {len(order)} tables and the PRE "
              f"({sum(1 for r in doc['pre'] if r['table_name'] == PRE_MGID)} multicast groups) of "
              f"program {getattr(args, 'program_name', None) or doc['p4_name']}")
        return 0
    gc = import_client()
    address = getattr(args, "grpc", None) or DEFAULT_GRPC
    switch = _Switch(gc, address, int(getattr(args, "device_id", 0) or 0),
                     getattr(args, "program_name", None) or doc["p4_name"])
    try:
        names = order + [PRE_NODE, PRE_MGID]
        defaults = {r["table_name"] for r in records if r.get("default_entry")}
        old = [r for name in names for r in switch.read(name, name in defaults)]
        ops = updates.plan(old, records, order)
        done: list[list[updates.Op]] = []
        for batch in updates.batches(ops, batch_size):
            try:
                switch.write(batch)
            except Exception as exc:  # the switch refused: undo what was written, newest first
                # A refused batch may be half applied: undo its updates one by one, ignoring the
                # refusals of those that never took effect, then the batches before it.
                for op in reversed(batch):
                    try:
                        switch.write([updates.inverse(op)])
                    except Exception:
                        pass
                for written in reversed(done):
                    switch.write([updates.inverse(op) for op in reversed(written)])
                raise TargetError(f"the switch refused a {batch[0].kind} of {len(batch)} entries in "
                                  f"{batch[0].record['table_name']}: {_refusal(exc)}; the {len(done)} batches written "
                                  "before it were undone") from None
            done.append(batch)
        now = [r for name in names for r in switch.read(name, name in defaults)]
        wrong = updates.differences(records, now)
        if wrong:
            raise TargetError("read-back differs from entries.bfrt.json:\n  " + "\n  ".join(wrong[:20])
                              + (f"\n  ... and {len(wrong) - 20} more" if len(wrong) > 20 else ""))
        print(f"installed {len(ops)} changes ({len(records)} records) on {address}, read back and checked")
        return 0
    finally:
        switch.close()


class _Switch:
    """The few BF Runtime calls the installer makes, in terms of entries.bfrt.json records."""

    def __init__(self, gc: Any, address: str, device_id: int, program: str) -> None:
        self.gc = gc
        try:
            self.iface = gc.ClientInterface(address, client_id=0, device_id=device_id)
            self.info = self.iface.bfrt_info_get(program)
            self.iface.bind_pipeline_config(program)
        except Exception as exc:
            raise TargetError(f"cannot reach BF Runtime at {address} (program {program}): {exc}") from None
        self.target = gc.Target(device_id=device_id, pipe_id=0xFFFF)
        self.program = program

    def close(self) -> None:
        tear_down = getattr(self.iface, "tear_down_stream", None)
        if tear_down:
            tear_down()

    def _table(self, name: str) -> Any:
        """The client's table object; a table the program on the switch lacks is the user's error
        (another build or program runs there), not a traceback: the client raises KeyError."""
        try:
            return self.info.table_get(name)
        except KeyError:
            raise TargetError(f"the program {self.program} on the switch has no table {name}: it runs another "
                              "build than OUT's (compare its bf-rt.json with OUT/program.tofino/bf-rt.json)") from None

    def _key(self, table: Any, key: dict[str, dict[str, int]]) -> Any:
        return table.make_key([self.gc.KeyTuple(name, **fields) for name, fields in key.items()])

    def _data(self, table: Any, record: dict[str, Any]) -> Any:
        """The record's data as ``DataTuple``s of the kind the table's schema gives each field: the
        value alone cannot tell an empty list of bools (``$MULTICAST_ECMP_L1_XID_VALID: []``) from an
        empty list of ints, and the server refuses an ``int_arr_val`` for a bool field."""
        action = record.get("action")
        tuples = []
        for name, value in record.get("data", {}).items():
            kind = _field_type(table, name, action)
            if isinstance(value, list):
                is_bool = kind == "bool" if kind is not None else bool(value) and isinstance(value[0], bool)
                tuples.append(self.gc.DataTuple(name, bool_arr_val=value) if is_bool
                              else self.gc.DataTuple(name, int_arr_val=value))
            elif isinstance(value, bool) or kind == "bool":
                tuples.append(self.gc.DataTuple(name, bool_val=bool(value)))
            else:
                tuples.append(self.gc.DataTuple(name, value))
        return table.make_data(tuples, action) if action else table.make_data(tuples)

    def write(self, ops: list[updates.Op]) -> None:
        table = self._table(ops[0].record["table_name"])
        # A default entry (a keyless table's action, such as a switch's own id) is set and reset,
        # never added or deleted.
        for op in (op for op in ops if op.record.get("default_entry")):
            if op.kind == "delete":
                table.default_entry_reset(self.target)
            else:
                table.default_entry_set(self.target, self._data(table, op.record))
        ops = [op for op in ops if not op.record.get("default_entry")]
        if not ops:
            return
        keys = [self._key(table, op.record["key"]) for op in ops]
        if ops[0].kind == "delete":
            table.entry_del(self.target, keys)
            return
        data = [self._data(table, op.record) for op in ops]
        (table.entry_add if ops[0].kind == "add" else table.entry_mod)(self.target, keys, data)

    def read(self, name: str, default: bool = False) -> list[dict[str, Any]]:
        """The table's entries as records; with ``default``, its default entry too (as a
        ``"default_entry": true`` record with an empty key)."""
        table = self._table(name)
        out = []
        for data, key in table.entry_get(self.target, None, {"from_hw": False}):
            d = data.to_dict()
            if d.pop("is_default_entry", False):
                continue
            out.append(_record(name, d, {n: _key_fields(v) for n, v in key.to_dict().items()}))
        if default:
            for data, _ in table.default_entry_get(self.target, {"from_hw": False}):
                d = data.to_dict()
                d.pop("is_default_entry", None)
                out.append(_record(name, d, {}, default_entry=True))
        return out


def _field_type(table: Any, name: str, action: str | None) -> str | None:
    """A data field's type in the switch's schema (``bool``, ``uint32``, ``bytes``...), as the SDE's
    client reads it from bf-rt.json; None when the client does not say."""
    info = getattr(table, "info", None)
    try:
        return info.data_field_type_get(name, action) if info is not None else None
    except (KeyError, AttributeError, TypeError):
        return None


def _refusal(exc: Exception, limit: int = 5) -> str:
    """A client error in a few lines: bfrt_grpc lists one line per refused update of a batch."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) <= limit + 1:
        return " ".join(lines) or type(exc).__name__
    return " ".join(lines[:limit + 1]) + f" ... and {len(lines) - limit - 1} more"


def _record(name: str, data: dict[str, Any], key: dict[str, Any], default_entry: bool = False) -> dict[str, Any]:
    action = data.pop("action_name", None)
    record: dict[str, Any] = {"table_name": name, "key": key, "data": data}
    if default_entry:
        record["default_entry"] = True
    if action is not None:
        record["action"] = action
    return record


def _key_fields(value: Any) -> dict[str, int]:
    """A key field from ``Key.to_dict()`` in the shape of entries.bfrt.json."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k in ("value", "mask", "low", "high", "prefix_len")}
    return {"value": value}
