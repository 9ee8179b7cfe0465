"""A BF Runtime gRPC server stand-in: the real ``bfrt_grpc.client`` talks to it over a socket.

``bf_switchd`` (the SDE's BF Runtime server) is not obtainable here, but its client is: the SDE
installs ``bfrt_grpc/{client,info_parse}.py`` with ``bfruntime_pb2*`` generated from
``bfruntime.proto`` (tests/backends/tofino/bfrt_grpc_env.py says where the tests look for them).
This servicer of the generated ``BfRuntimeServicer`` answers the RPCs the installer's client uses,
holding tables as bf-p4c's ``bf-rt.json`` (and the SDE's ``bf_rt_pre_tf1.json`` for ``$pre.*``)
describes them, so that every id, byte width and message shape the real client writes is checked
as the real server checks it. What it refuses, after ``bf_rt_server_impl.cpp``,
``bf_rt_table_field_utils.hpp`` and ``bf_rt_pre_table_impl.cpp`` of open-p4studio's bf-drivers:

* an unknown table, key field, action or data field id; a key field of another match type;
* a value of the wrong byte length (``(width + 7) / 8``) or with bits set above its width; an LPM
  prefix longer than the field; a scalar value for a repeated field or the reverse;
* a write before the client bound to the program (``SetForwardingPipelineConfig`` BIND), a bind
  to a program the device does not run;
* insert of an existing entry (ALREADY_EXISTS), modify or delete of a missing one (NOT_FOUND),
  an insert into a full table (RESOURCE_EXHAUSTED: the size bf-rt.json gives), an insert without
  a mandatory data field;
* a ``$pre.mgid`` naming a node that does not exist, or whose node and L1 exclusion id lists
  differ in length.

A Write batch fails as the real one does: every update is tried and the failures come back as
one UNKNOWN status whose details hold a ``bfrt_proto.Error`` per update (CONTINUE_ON_ERROR, the
client's default, and the installer's); with ROLLBACK_ON_ERROR the first failure undoes the whole
batch (the real server opens a pipe_mgr transaction; whether it covers PRE writes, which go through
mc_mgr's own session, is not modelled: the stand-in rolls them back too). A read
returns each entry with every data field of its action (or of a keyless-action table such as
``$pre.mgid``), as the real server's ``formResponseData`` does, filled with zeros or empty lists
where the write left them out.

Not modelled: the program's own initial default actions (a default entry reads back only once
set), counters, registers, idle time, selectors, packet-level behaviour.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Iterator

import grpc
from bfrt_grpc import bfruntime_pb2 as pb, bfruntime_pb2_grpc as pb_grpc
from google.rpc import code_pb2, status_pb2

_INT_TYPES = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "int32": 32}


class Refused(Exception):
    """One update refused, with the gRPC code the real server maps its bf_status to."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Field:
    """A key or data field of bf-rt.json: its name, type, width in bits (None for bool/string)."""

    id: int
    name: str
    type: str
    bits: int | None
    repeated: bool = False
    mandatory: bool = False
    match_type: str | None = None
    default: Any = None

    @property
    def nbytes(self) -> int:
        return ((self.bits or 0) + 7) // 8

    @classmethod
    def of(cls, j: dict, match_type: str | None = None, mandatory: bool | None = None) -> "Field":
        t = j["type"]
        bits = t.get("width") if t["type"] == "bytes" else _INT_TYPES.get(t["type"])
        return cls(j["id"], j["name"], t["type"], bits, bool(j.get("repeated")),
                   bool(j.get("mandatory") if mandatory is None else mandatory), match_type, t.get("default_value"))


@dataclass
class Table:
    id: int
    name: str
    size: int
    keys: dict[int, Field]
    actions: dict[int, tuple[str, dict[int, Field]]]
    data: dict[int, Field]  # fields of the table itself (PRE tables, common fields)
    entries: dict[tuple, tuple[int, dict[int, Any]]] = field(default_factory=dict)
    default: tuple[int, dict[int, Any]] | None = None

    @classmethod
    def of(cls, j: dict) -> "Table":
        def data_fields(items: list[dict]) -> dict[int, Field]:
            out = {}
            for d in items:
                for s in d.get("oneof", [d.get("singleton", d)]):
                    if "type" not in s:  # a container (snapshot and TM tables): never written here
                        continue
                    f = Field.of(s, mandatory=d.get("mandatory", s.get("mandatory")))
                    out[f.id] = f
            return out
        keys = {k["id"]: Field.of(k, k["match_type"]) for k in j["key"]}
        actions = {a["id"]: (a["name"], data_fields(a.get("data", []))) for a in j.get("action_specs", [])}
        return cls(j["id"], j["name"], j["size"], keys, actions, data_fields(j.get("data", [])))


def _bounds(f: Field, value: bytes, what: str) -> None:
    """``BfRtTableFieldUtils::boundsCheck``: the byte length of the field, nothing above its width."""
    if f.bits is None:
        return
    if len(value) != f.nbytes:
        raise Refused(code_pb2.INVALID_ARGUMENT, f"{what} {f.name}: {len(value)} bytes, the field has {f.nbytes}")
    shift = f.bits % 8
    if shift and value[0] >> shift:
        raise Refused(code_pb2.INVALID_ARGUMENT, f"{what} {f.name}: value wider than {f.bits} bits")


class Device:
    """The tables of one program and the PRE, as bf-rt.json and the PRE's schema describe them."""

    def __init__(self, p4_name: str, bfrt_json: bytes, non_p4_json: bytes) -> None:
        self.p4_name, self.bfrt_json, self.non_p4_json = p4_name, bfrt_json, non_p4_json
        self.tables: dict[int, Table] = {}
        for doc in (json.loads(bfrt_json), json.loads(non_p4_json)):
            for t in doc["tables"]:
                self.tables[t["id"]] = Table.of(t)
        self.by_name = {t.name: t for t in self.tables.values()}
        self.lock = threading.Lock()
        self.writes = 0  # updates applied (for tests that a second install changes nothing)
        self.kinds: Counter[str] = Counter()  # updates applied by type: INSERT, MODIFY, DELETE

    # -- keys and data from protobuf ------------------------------------------------------------------

    def table(self, table_id: int) -> Table:
        t = self.tables.get(table_id)
        if t is None:
            raise Refused(code_pb2.NOT_FOUND, f"table id {table_id} not found")
        return t

    def key(self, t: Table, key: pb.TableKey) -> tuple:
        """The entry's identity: every key field as (id, kind, bytes...), unset ones as zero
        (``keyAllocate`` starts from a zeroed key)."""
        given: dict[int, tuple] = {}
        for kf in key.fields:
            f = t.keys.get(kf.field_id)
            if f is None:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: key field id {kf.field_id} not found")
            if kf.field_id in given:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: key field {f.name} given twice")
            kind = kf.WhichOneof("match_type")
            want = {"Exact": "exact", "Ternary": "ternary", "LPM": "lpm", "Range": "range", "Optional": "optional"}
            if want.get(f.match_type) != kind:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: key {f.name} is {f.match_type}, got {kind}")
            m = getattr(kf, kind)
            if kind == "exact":
                _bounds(f, m.value, "key"); given[f.id] = (kind, m.value)
            elif kind == "ternary":
                _bounds(f, m.value, "key"); _bounds(f, m.mask, "key mask")
                given[f.id] = (kind, bytes(a & b for a, b in zip(m.value, m.mask)), m.mask)
            elif kind == "lpm":
                _bounds(f, m.value, "key")
                if not 0 <= m.prefix_len <= (f.bits or 0):
                    raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: prefix {m.prefix_len} of {f.name} "
                                                            f"longer than its {f.bits} bits")
                given[f.id] = (kind, m.value, m.prefix_len)
            elif kind == "range":
                _bounds(f, m.low, "key low"); _bounds(f, m.high, "key high")
                given[f.id] = (kind, m.low, m.high)
            else:
                _bounds(f, m.value, "key"); given[f.id] = (kind, m.value, m.is_valid)
        out = []
        for fid, f in sorted(t.keys.items()):
            if fid in given:
                out.append((fid,) + given[fid])
                continue
            zero = bytes(f.nbytes)
            kind = {"Exact": "exact", "Ternary": "ternary", "LPM": "lpm", "Range": "range"}.get(f.match_type, "exact")
            out.append((fid, kind, zero) + {"exact": (), "ternary": (zero,), "lpm": (0,), "range": (zero,)}[kind])
        return tuple(out)

    def data(self, t: Table, data: pb.TableData, insert: bool) -> tuple[int, dict[int, Any]]:
        """(action id, {field id: value}) with every field of the action, unset ones defaulted."""
        if t.actions:
            if data.action_id not in t.actions:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: action id {data.action_id} not found")
            name, fields = t.actions[data.action_id]
            fields = {**fields, **t.data}
        else:
            if data.action_id:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name} has no actions (action id {data.action_id})")
            fields = t.data
        values: dict[int, Any] = {}
        for df in data.fields:
            f = fields.get(df.field_id)
            if f is None:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: data field id {df.field_id} not found")
            kind = df.WhichOneof("value")
            expect = ({"bool": "bool_arr_val", "string": "str_arr_val"}.get(f.type, "int_arr_val") if f.repeated
                      else {"bool": "bool_val", "string": "str_val", "float": "float_val"}.get(f.type, "stream"))
            if kind != expect:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: data field {f.name} wants {expect}, got {kind}")
            if kind == "stream":
                _bounds(f, df.stream, "data")
                values[f.id] = df.stream
            elif kind in ("int_arr_val", "bool_arr_val", "str_arr_val"):
                vals = list(getattr(df, kind).val)
                if kind == "int_arr_val" and f.bits is not None and any(v >= 1 << f.bits for v in vals):
                    raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: a value of {f.name} is wider than {f.bits} bits")
                values[f.id] = vals
            else:
                values[f.id] = getattr(df, kind)
        missing = [f.name for fid, f in fields.items() if f.mandatory and fid not in values]
        if insert and missing:
            raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: mandatory data fields missing: {', '.join(missing)}")
        for fid, f in fields.items():
            if fid not in values:
                values[fid] = ([] if f.repeated else False if f.type == "bool" else
                               "" if f.type == "string" else bytes(f.nbytes) if f.bits else 0)
        return data.action_id, values

    # -- writes ---------------------------------------------------------------------------------------

    def write_one(self, update: pb.Update) -> None:
        entity = update.entity
        if entity.WhichOneof("entity") != "table_entry":
            raise Refused(code_pb2.UNIMPLEMENTED, "the stand-in writes table entries only")
        te = entity.table_entry
        t = self.table(te.table_id)
        kind = update.type
        if te.is_default_entry:
            if kind == pb.Update.MODIFY:
                t.default = self.data(t, te.data, insert=False)
            elif kind in (pb.Update.DELETE, pb.Update.RESET):
                t.default = None
            else:
                raise Refused(code_pb2.INVALID_ARGUMENT, f"{t.name}: a default entry is modified or reset")
            self.writes += 1
            return
        key = self.key(t, te.key)
        if kind == pb.Update.INSERT:
            if key in t.entries:
                raise Refused(code_pb2.ALREADY_EXISTS, f"{t.name}: entry exists")
            if len(t.entries) >= t.size:
                raise Refused(code_pb2.RESOURCE_EXHAUSTED, f"{t.name}: table full ({t.size} entries)")
            value = self.data(t, te.data, insert=True)
            self._pre_check(t, value)
            t.entries[key] = value
        elif kind == pb.Update.MODIFY:
            if key not in t.entries:
                raise Refused(code_pb2.NOT_FOUND, f"{t.name}: no such entry to modify")
            value = self.data(t, te.data, insert=False)
            self._pre_check(t, value)
            t.entries[key] = value
        elif kind == pb.Update.DELETE:
            if key not in t.entries:
                raise Refused(code_pb2.NOT_FOUND, f"{t.name}: no such entry to delete")
            del t.entries[key]
        else:
            raise Refused(code_pb2.UNIMPLEMENTED, f"update type {kind} is not modelled")
        self.writes += 1
        self.kinds[pb.Update.Type.Name(kind)] += 1

    def _pre_check(self, t: Table, value: tuple[int, dict[int, Any]]) -> None:
        """``$pre.mgid``: its nodes exist, and the node and L1 exclusion id lists agree in length."""
        if t.name != "$pre.mgid":
            return
        names = {f.name: fid for fid, f in t.data.items()}
        data = value[1]
        nodes = data[names["$MULTICAST_NODE_ID"]]
        if not len(nodes) == len(data[names["$MULTICAST_NODE_L1_XID"]]) == len(data[names["$MULTICAST_NODE_L1_XID_VALID"]]):
            raise Refused(code_pb2.INVALID_ARGUMENT, "$pre.mgid: node ids and L1 exclusion ids differ in length")
        if not len(data[names["$MULTICAST_ECMP_ID"]]) == len(data[names["$MULTICAST_ECMP_L1_XID"]]) \
                == len(data[names["$MULTICAST_ECMP_L1_XID_VALID"]]):
            raise Refused(code_pb2.INVALID_ARGUMENT, "$pre.mgid: ECMP ids and L1 exclusion ids differ in length")
        node_table = self.by_name["$pre.node"]
        known = {k[0][2] for k in node_table.entries}
        width = next(iter(node_table.keys.values())).nbytes
        for n in nodes:
            if n.to_bytes(width, "big") not in known:
                raise Refused(code_pb2.NOT_FOUND, f"$pre.mgid: multicast node {n} does not exist")

    def write(self, request: pb.WriteRequest) -> list[tuple[int, Refused]]:
        """Apply a batch; the refusals by update index."""
        errors = []
        with self.lock:
            saved = {tid: (dict(t.entries), t.default) for tid, t in self.tables.items()}
            writes, kinds = self.writes, Counter(self.kinds)
            for i, update in enumerate(request.updates):
                try:
                    self.write_one(update)
                except Refused as exc:
                    errors.append((i, exc))
                    if request.atomicity == pb.WriteRequest.ROLLBACK_ON_ERROR:
                        for tid, (entries, default) in saved.items():
                            self.tables[tid].entries, self.tables[tid].default = entries, default
                        self.writes, self.kinds = writes, kinds
                        break
        return errors

    # -- reads ----------------------------------------------------------------------------------------

    def _entity(self, t: Table, key: tuple | None, value: tuple[int, dict[int, Any]]) -> pb.Entity:
        e = pb.Entity()
        te = e.table_entry
        te.table_id = t.id
        if key is None:
            te.is_default_entry = True
        else:
            for item in key:
                kf = te.key.fields.add()
                kf.field_id = item[0]
                m = getattr(kf, item[1])
                if item[1] == "exact":
                    m.value = item[2]
                elif item[1] == "ternary":
                    m.value, m.mask = item[2], item[3]
                elif item[1] == "lpm":
                    m.value, m.prefix_len = item[2], item[3]
                elif item[1] == "range":
                    m.low, m.high = item[2], item[3]
                else:
                    m.value, m.is_valid = item[2], item[3]
        action_id, values = value
        te.data.action_id = action_id
        fields = {**t.actions[action_id][1], **t.data} if action_id else t.data
        for fid in sorted(values):
            f = fields[fid]
            df = te.data.fields.add()
            df.field_id = fid
            v = values[fid]
            if f.repeated:
                getattr(df, {"bool": "bool_arr_val", "string": "str_arr_val"}.get(f.type, "int_arr_val")).val.extend(v)
            elif f.type == "bool":
                df.bool_val = v
            elif f.type == "string":
                df.str_val = v
            else:
                df.stream = v
        return e

    def read(self, request: pb.ReadRequest) -> list[pb.Entity]:
        out = []
        with self.lock:
            for entity in request.entities:
                if entity.WhichOneof("entity") != "table_entry":
                    raise Refused(code_pb2.UNIMPLEMENTED, "the stand-in reads table entries only")
                te = entity.table_entry
                t = self.table(te.table_id)
                if te.is_default_entry:
                    if t.default is not None:
                        out.append(self._entity(t, None, t.default))
                elif te.HasField("key") and len(te.key.fields):
                    key = self.key(t, te.key)
                    if key not in t.entries:
                        raise Refused(code_pb2.NOT_FOUND, f"{t.name}: no such entry")
                    out.append(self._entity(t, key, t.entries[key]))
                else:
                    out += [self._entity(t, k, v) for k, v in t.entries.items()]
        return out

    def snapshot(self) -> dict[str, dict]:
        """Every table's entries by name (to compare states before and after)."""
        return {t.name: copy.deepcopy((t.entries, t.default)) for t in self.tables.values()}


def _status(errors: list[tuple[int, Refused]]) -> tuple[str, bytes]:
    """The ``grpc-status-details-bin`` trailer of ``BfRtServerErrorReporter::get_status``: one
    ``bfrt_proto.Error`` per update up to the last refused one (OK ones in between)."""
    st = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write Error Status")
    by_index = dict(errors)
    for i in range(max(by_index) + 1):
        err = pb.Error(canonical_code=by_index[i].code, message=by_index[i].message) if i in by_index else pb.Error(code=0)
        st.details.add().Pack(err)
    return "grpc-status-details-bin", st.SerializeToString()


class Servicer(pb_grpc.BfRuntimeServicer):
    """The RPCs the installer's client makes: StreamChannel (subscribe), GetForwardingPipelineConfig,
    SetForwardingPipelineConfig (BIND), Write, Read."""

    def __init__(self, device: Device, device_id: int = 0) -> None:
        self.device, self.device_id = device, device_id
        self.bound: set[int] = set()
        self.subscribed: set[int] = set()

    def StreamChannel(self, request_iterator: Iterator[pb.StreamMessageRequest], context: Any):
        for req in request_iterator:
            if req.WhichOneof("update") == "subscribe":
                ok = req.subscribe.device_id == self.device_id
                if ok:
                    self.subscribed.add(req.client_id)
                msg = pb.StreamMessageResponse()
                msg.subscribe.device_id = req.subscribe.device_id
                msg.subscribe.status.code = code_pb2.OK if ok else code_pb2.NOT_FOUND
                yield msg

    def GetForwardingPipelineConfig(self, request: pb.GetForwardingPipelineConfigRequest, context: Any):
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"device {request.device_id} not found")
        resp = pb.GetForwardingPipelineConfigResponse()
        cfg = resp.config.add()
        cfg.p4_name, cfg.bfruntime_info = self.device.p4_name, self.device.bfrt_json
        resp.non_p4_config.bfruntime_info = self.device.non_p4_json
        return resp

    def SetForwardingPipelineConfig(self, request: pb.SetForwardingPipelineConfigRequest, context: Any):
        if request.action != pb.SetForwardingPipelineConfigRequest.BIND:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the stand-in only binds")
        if [c.p4_name for c in request.config] != [self.device.p4_name]:
            context.abort(grpc.StatusCode.NOT_FOUND, f"program {[c.p4_name for c in request.config]} not on the device "
                                                     f"(it runs {self.device.p4_name})")
        self.bound.add(request.client_id)
        return pb.SetForwardingPipelineConfigResponse()

    def _check_client(self, client_id: int, p4_name: str, context: Any) -> None:
        if p4_name and p4_name != self.device.p4_name:
            context.abort(grpc.StatusCode.NOT_FOUND, f"program {p4_name} not on the device")
        if not p4_name and client_id not in self.bound:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"client {client_id} is not bound to a program")

    def Write(self, request: pb.WriteRequest, context: Any):
        self._check_client(request.client_id, request.p4_name, context)
        if request.target.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"device {request.target.device_id} not found")
        errors = self.device.write(request)
        if errors:
            context.set_trailing_metadata((_status(errors),))
            context.abort(grpc.StatusCode.UNKNOWN, "Write Error Status")
        return pb.WriteResponse()

    def Read(self, request: pb.ReadRequest, context: Any):
        self._check_client(request.client_id, request.p4_name, context)
        try:
            entities = self.device.read(request)
        except Refused as exc:
            st = status_pb2.Status(code=code_pb2.UNKNOWN, message="Read Error Status")
            st.details.add().Pack(pb.Error(canonical_code=exc.code, message=exc.message))
            context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "Read Error Status")
        yield pb.ReadResponse(entities=entities)


def serve(device: Device, device_id: int = 0) -> tuple[grpc.Server, str, Servicer]:
    """Start the stand-in on a free local port: (server, "127.0.0.1:PORT", servicer)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = Servicer(device, device_id)
    pb_grpc.add_BfRuntimeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}", servicer
