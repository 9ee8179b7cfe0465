"""Install a BMv2 build on a running switch over P4Runtime (run with p4runtime-shell's Python).

``p4sub install`` runs this file as a script with the interpreter of the virtualenv that holds
``p4runtime-shell`` (it pins protobuf 3.20 and IPython 7, which the main environment must not get),
so it imports nothing from p4sub but :mod:`update_plan`, loaded from beside this file. It prints
one JSON report on stdout and exits 0 on success, 1 when the switch refused something (after
rolling back), 3 when it could not talk to the switch.

Steps: connect as primary; compare the device's pipeline cookie with a hash of p4info + program
JSON and push the pipeline only when it differs (pushing wipes every entry); read the current
table entries and multicast groups; write the minimal plan (:func:`update_plan.diff`) in batches
with rollback on refusal (:func:`update_plan.apply_plan`); read everything back and report any
difference from what was wanted.

With ``--plan hitless.p4rt.json`` (:mod:`backends.bmv2.hitless`, ``p4sub install --hitless``) the
switch must already run the program and hold exactly the plan's ``before`` entities (or already its
``after``: nothing to do); the plan's steps are written in order (:func:`update_plan.apply_steps`),
so that no packet is forwarded other than as the old or the new entries would.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import update_plan  # noqa: E402  (beside this file; see the module docstring)

import grpc  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from google.rpc import code_pb2, status_pb2  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2  # noqa: E402
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeException  # noqa: E402

UPDATE_TYPES = {"INSERT": p4runtime_pb2.Update.INSERT, "MODIFY": p4runtime_pb2.Update.MODIFY,
                "DELETE": p4runtime_pb2.Update.DELETE}


class Names:
    """P4Info names <-> ids for the tables, match fields, actions and parameters."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.table_id = {t.preamble.name: t.preamble.id for t in p4info.tables}
        self.table_name = {v: k for k, v in self.table_id.items()}
        self.field_id = {t.preamble.name: {m.name: m.id for m in t.match_fields} for t in p4info.tables}
        self.field_name = {t.preamble.id: {m.id: m.name for m in t.match_fields} for t in p4info.tables}
        self.action_id = {a.preamble.name: a.preamble.id for a in p4info.actions}
        self.action_name = {v: k for k, v in self.action_id.items()}
        self.param_id = {a.preamble.name: {p.name: p.id for p in a.params} for a in p4info.actions}
        self.param_name = {a.preamble.id: {p.id: p.name for p in a.params} for a in p4info.actions}

    def lookup(self, mapping: dict, name: str, what: str):
        if name not in mapping:
            raise KeyError(f"{what} {name!r} is not in the P4Info (was program.p4 rebuilt after compiling?)")
        return mapping[name]


def _bytes(text: str) -> bytes:
    value = int(text, 16)
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _hex(data: bytes) -> str:
    value = int.from_bytes(data, "big")
    return "0x" + value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big").hex()


def to_proto(entity: dict, names: Names) -> p4runtime_pb2.Entity:
    out = p4runtime_pb2.Entity()
    if "packet_replication_engine_entry" in entity:
        g = entity["packet_replication_engine_entry"]["multicast_group_entry"]
        mg = out.packet_replication_engine_entry.multicast_group_entry
        mg.multicast_group_id = int(g["multicast_group_id"])
        for r in g.get("replicas", []):
            rep = mg.replicas.add()
            rep.egress_port = int(r["egress_port"])
            rep.instance = int(r.get("instance", 0))
        return out
    te_json = entity["table_entry"]
    te = out.table_entry
    table = te_json["table_name"]
    te.table_id = names.lookup(names.table_id, table, "table")
    for m in te_json.get("match", []):
        fm = te.match.add()
        fm.field_id = names.lookup(names.field_id[table], m["field_name"], f"match field of {table}")
        if "exact" in m:
            fm.exact.value = _bytes(m["exact"]["value"])
        elif "lpm" in m:
            fm.lpm.value = _bytes(m["lpm"]["value"])
            fm.lpm.prefix_len = int(m["lpm"]["prefix_len"])
        elif "ternary" in m:
            fm.ternary.value = _bytes(m["ternary"]["value"])
            fm.ternary.mask = _bytes(m["ternary"]["mask"])
        elif "range" in m:
            fm.range.low = _bytes(m["range"]["low"])
            fm.range.high = _bytes(m["range"]["high"])
    act = te_json.get("action", {}).get("action")
    if act:
        name = act["action_name"]
        te.action.action.action_id = names.lookup(names.action_id, name, "action")
        for p in act.get("params", []):
            pp = te.action.action.params.add()
            pp.param_id = names.lookup(names.param_id[name], p["param_name"], f"parameter of {name}")
            pp.value = _bytes(p["value"])
    if te_json.get("priority"):
        te.priority = int(te_json["priority"])
    return out


def from_proto(entity: p4runtime_pb2.Entity, names: Names) -> dict:
    if entity.HasField("packet_replication_engine_entry"):
        mg = entity.packet_replication_engine_entry.multicast_group_entry
        replicas = []
        for r in mg.replicas:
            port = r.egress_port
            if not port and "port" in r.DESCRIPTOR.fields_by_name and r.port:
                port = int.from_bytes(r.port, "big")
            replicas.append({"egress_port": port, "instance": r.instance})
        return {"packet_replication_engine_entry": {"multicast_group_entry": {
            "multicast_group_id": mg.multicast_group_id,
            "replicas": sorted(replicas, key=lambda r: (r["egress_port"], r["instance"]))}}}
    te = entity.table_entry
    fields = names.field_name.get(te.table_id, {})
    match = []
    for fm in te.match:
        m: dict = {"field_name": fields.get(fm.field_id, str(fm.field_id))}
        which = fm.WhichOneof("field_match_type")
        if which == "exact":
            m["exact"] = {"value": _hex(fm.exact.value)}
        elif which == "lpm":
            m["lpm"] = {"value": _hex(fm.lpm.value), "prefix_len": fm.lpm.prefix_len}
        elif which == "ternary":
            m["ternary"] = {"value": _hex(fm.ternary.value), "mask": _hex(fm.ternary.mask)}
        elif which == "range":
            m["range"] = {"low": _hex(fm.range.low), "high": _hex(fm.range.high)}
        match.append(m)
    out: dict = {"table_name": names.table_name.get(te.table_id, str(te.table_id)), "match": match}
    if te.action.HasField("action"):
        a = te.action.action
        pnames = names.param_name.get(a.action_id, {})
        out["action"] = {"action": {
            "action_name": names.action_name.get(a.action_id, str(a.action_id)),
            "params": [{"param_name": pnames.get(p.param_id, str(p.param_id)), "value": _hex(p.value)} for p in a.params],
        }}
    if te.priority:
        out["priority"] = te.priority
    return {"table_entry": out}


def pipeline_cookie(p4info_text: bytes, device_config: bytes) -> int:
    """A hash of what the switch runs: P4Info and the BMv2 JSON without its ``source_info``.

    p4c writes the source file's path (top-level ``program``) and positions into the JSON, so the same
    program compiled in another directory would otherwise look like a new pipeline (and a reload
    would drop every entry).
    """
    try:
        config = json.loads(device_config)
    except ValueError:
        canonical = device_config
    else:
        config = _without_source_info(config)
        if isinstance(config, dict):
            config.pop("program", None)
        canonical = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return int.from_bytes(hashlib.sha256(p4info_text + b"\0" + canonical).digest()[:8], "big")


def _without_source_info(value):
    if isinstance(value, dict):
        return {k: _without_source_info(v) for k, v in value.items() if k != "source_info"}
    if isinstance(value, list):
        return [_without_source_info(v) for v in value]
    return value


class Switch:
    """The few P4Runtime calls the installer needs, on p4runtime-shell's client."""

    def __init__(self, grpc_addr: str, device_id: int, election_id: tuple[int, int]) -> None:
        try:
            self.client = P4RuntimeClient(device_id, grpc_addr, election_id)
        except SystemExit:
            raise ConnectionError(f"no P4Runtime session with device {device_id} at {grpc_addr} "
                                  "(is simple_switch_grpc running there?)") from None
        self.device_id = device_id
        self.election_id = election_id

    def close(self) -> None:
        self.client.tear_down()

    def cookie(self) -> int | None:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            rep = self.client.stub.GetForwardingPipelineConfig(req)
        except grpc.RpcError:
            return None
        return rep.config.cookie.cookie if rep.config.HasField("cookie") else None

    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.election_id.high, req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self.client.stub.SetForwardingPipelineConfig(req)

    def read(self, names: Names) -> list[dict]:
        out = []
        tables = p4runtime_pb2.Entity()
        tables.table_entry.table_id = 0
        groups = p4runtime_pb2.Entity()
        groups.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        for wildcard in (tables, groups):
            for rep in self.client.read_one(wildcard):
                out.extend(from_proto(e, names) for e in rep.entities
                           if not (e.HasField("table_entry") and e.table_entry.is_default_action))
        return out

    def write(self, ops: list, names: Names) -> list[str | None]:
        """Write one batch; per update, None or the switch's reason for refusing it."""
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.high, req.election_id.low = self.election_id
        for op in ops:
            u = req.updates.add()
            u.type = UPDATE_TYPES[op.type]
            u.entity.CopyFrom(to_proto(op.entity, names))
        try:
            # Not p4runtime-shell's client.write: its error iterator loops forever on the OK
            # statuses a CONTINUE_ON_ERROR batch reports for the updates that succeeded.
            self.client.stub.Write(req)
        except grpc.RpcError as exc:
            return batch_errors(exc, len(ops))
        return [None] * len(ops)


def batch_errors(exc: grpc.RpcError, n: int) -> list[str | None]:
    """Per-update outcome of a failed Write: P4Runtime puts one p4.Error per update in the status
    details (OK for those applied); without them, the whole request was refused."""
    details = None
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            details = status.details
    if details is None or len(details) != n:
        return [f"{exc.code().name}: {exc.details()}"] * n
    out: list[str | None] = []
    for any_ in details:
        err = p4runtime_pb2.Error()
        any_.Unpack(err)
        out.append(None if err.canonical_code == code_pb2.OK
                   else f"{code_pb2.Code.Name(err.canonical_code)}: {err.message}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpc", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--election-id", type=int, default=1)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--config", required=True, help="program.json from p4c-bm2-ss")
    ap.add_argument("--entries", help="entries.p4rt.json")
    ap.add_argument("--plan", help="hitless.p4rt.json: write its steps instead of the difference to --entries")
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)

    p4info_text = Path(args.p4info).read_bytes()
    device_config = Path(args.config).read_bytes()
    p4info = text_format.Parse(p4info_text.decode(), p4info_pb2.P4Info(), allow_unknown_field=True)
    names = Names(p4info)
    if args.plan:
        hitless = json.loads(Path(args.plan).read_text())
        wanted = hitless["after"]
        steps = update_plan.hitless_steps(hitless)
    elif args.entries:
        wanted, hitless, steps = [u["entity"] for u in json.loads(Path(args.entries).read_text())["updates"]], None, []
    else:
        ap.error("--entries or --plan is required")
    report: dict = {"grpc": args.grpc, "device_id": args.device_id, "dry_run": args.dry_run}
    try:
        for e in wanted + [op.entity for s in steps for op in s]:  # every name must resolve before anything is written
            to_proto(e, names)
    except KeyError as exc:
        report.update(ok=False, error=str(exc.args[0]))
        print(json.dumps(report))
        return 1
    try:
        switch = Switch(args.grpc, args.device_id, (0, args.election_id))
    except ConnectionError as exc:
        report.update(ok=False, error=str(exc))
        print(json.dumps(report))
        return 3
    try:
        cookie = pipeline_cookie(p4info_text, device_config)
        same = switch.cookie() == cookie
        if hitless is not None:
            return apply_hitless(switch, names, hitless, steps, same, args, report)
        report["pipeline"] = "unchanged" if same else ("would be set" if args.dry_run else "set")
        if not same and not args.dry_run:
            switch.set_pipeline(p4info, device_config, cookie)
        current = switch.read(names) if same else []
        plan = update_plan.diff(current, wanted)
        report["plan"] = {t: sum(1 for op in plan if op.type == t) for t in ("INSERT", "MODIFY", "DELETE")}
        if args.dry_run:
            report["ok"] = True
            report["updates"] = [update_plan.describe(op) for op in plan]
            print(json.dumps(report))
            return 0
        result = update_plan.apply_plan(plan, lambda ops: switch.write(ops, names), args.batch_size)
        return finish(switch, names, result, wanted, current, report)
    except (P4RuntimeException, grpc.RpcError) as exc:
        report.update(ok=False, error=str(exc))
        print(json.dumps(report))
        return 3
    finally:
        switch.close()


def apply_hitless(switch: Switch, names: Names, request: dict, steps: list, same: bool, args, report: dict) -> int:
    """Write a hitless plan's steps (see the module docstring); prints the report, returns the exit status."""
    report["hitless"] = request.get("counts", {})
    report["pipeline"] = "unchanged" if same else "different"
    if not same:
        report.update(ok=False, error="the switch does not run this program: a hitless update changes entries of "
                                      "the running program only (install the old output first)")
        print(json.dumps(report))
        return 1
    current = switch.read(names)
    if not update_plan.differences(current, request["after"]):
        steps = []
    elif update_plan.differences(current, request["before"]):
        diffs = update_plan.differences(current, request["before"])
        report.update(ok=False, error=f"the switch does not hold the old entries the plan starts from "
                                      f"({len(diffs)} differences, first: {diffs[0]})")
        print(json.dumps(report))
        return 1
    ops = [op for s in steps for op in s]
    report["plan"] = {t: sum(1 for op in ops if op.type == t) for t in ("INSERT", "MODIFY", "DELETE")}
    report["steps"] = len(steps)
    if args.dry_run:
        report["ok"] = True
        report["updates"] = [f"step {i}: {update_plan.describe(op)}" for i, s in enumerate(steps) for op in s]
        print(json.dumps(report))
        return 0
    result = update_plan.apply_steps(steps, lambda batch: switch.write(batch, names), args.batch_size)
    return finish(switch, names, result, request["after"], current, report)


def finish(switch: Switch, names: Names, result, wanted: list, before: list, report: dict) -> int:
    """Report what was written and what a read-back shows (``wanted``, or ``before`` after a rollback);
    prints the report, returns the exit status."""
    report.update(ok=result.ok, applied=result.applied, summary=result.summary())
    if not result.ok:
        report.update(refused=update_plan.describe(result.refused), reason=result.reason,
                      rolled_back=result.rolled_back, rollback_errors=result.rollback_errors)
    diffs = update_plan.differences(switch.read(names), wanted if result.ok else before)
    report["differences"] = diffs
    if diffs:
        report["ok"] = False
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
