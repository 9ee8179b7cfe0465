"""The network simulator: a trace published at one host, every copy followed hop by hop.

Each switch runs its compiled pipeline (``OUT/<switch>/pipeline.json`` from ``p4sub route``) in the
vectorised reference model, once per wave for all the messages that reach it (never a Python call
per message per hop). Its port set then goes through the network stage that Camus specifies and
the pipeline cannot express (docs/topology.md):

* the ingress port is removed (a switch never sends a packet back where it came from);
* the logical up port (port 0 in the pipeline) is dropped for packets that came in on an up port,
  and otherwise replaced by one physical up port, chosen per packet by a hash of the packet's
  identity and the switch id (a stand-in for the header-field hash a target computes).

Messages and packets. One row is one message; rows of one packet share ``packet``. In ``prune``
mode (ITCH: the BMv2 backend keeps, per port, only the messages that port subscribed to) each
message travels on its own and a link carries a packet when it carries at least one of its
messages. In ``union`` mode (INT) a packet goes to the union of its messages' ports and carries all
of them.

PLEROMA networks run the same walk with switches of another kind (:mod:`runtime.netsim_pleroma`):
the publisher writes each event's dz, switches forward by longest prefix of it, and a copy is judged
by the hosts beyond its link in the publisher's tree (:class:`Network`'s ``prepare`` and ``behind``).

What is reported: per host, the units (messages in prune mode, packets in union mode) delivered and
wanted, false positives, false negatives and duplicates; ground truth comes from the host
subscriptions themselves (:class:`runtime.groundtruth.GroundTruth`, which shares no code with the
compiler). Per directed link and per tier (host-edge, edge-aggregation, aggregation-core): packets,
messages, bytes, and the *extra* traffic: copies on a link behind which no host wanted them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

import numpy as np

from apps.pcap import require_packets
from compiler import ir
from compiler.base import InputError, P4subError, SourceLocation, open_input, read_text, text_lines
from compiler.network import HOST_ID_BITS, UP_PORT, Topology, layer_name, orientation, read_topology
from compiler.packet_json import PacketField, fields_from_query, read_lines
from compiler.rules import TypedRules, check_rules, read_rules
from compiler.spec import QueryField, Spec
from runtime.groundtruth import GroundTruth
from runtime.model import Model
from runtime.replay_ports import PortSpace

MODES = ("prune", "union")
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


# ------------------------------------------------------------------------------------------------
# The network, loaded from a `p4sub route` directory
# ------------------------------------------------------------------------------------------------


@dataclass
class SwitchSim:
    """One switch ready to run: its model and its port layout as matrix columns.

    Columns ``0..len(ports)-1`` are the physical ports in order; the last column is the logical up
    port. ``group_cols[g]`` is the boolean row of multicast group ``g``.
    """

    name: str
    id: int
    layer: int
    model: Model
    ports: tuple[int, ...]
    up_ports: tuple[int, ...]
    peers: list[tuple[str, int]]
    col_of_port: np.ndarray  # port number -> column, -1 when the switch has no such port
    group_cols: np.ndarray  # (max group id + 1, columns) bool
    is_up_col: np.ndarray  # (columns,) bool
    bit_cols: np.ndarray | None = None  # port-bitmap delivery: the column of each bit, else None

    @property
    def marker(self) -> int:
        return len(self.ports)

    def egress(self, batch: "Batch", rows: np.ndarray, ingress: np.ndarray, mode: str,
               sim: "Simulation") -> np.ndarray:
        return _switch_ports(self, batch, rows, ingress, mode, sim)


class Switch(Protocol):
    """What the walk needs of a switch, whatever decides its forwarding (a compiled pipeline here,
    PLEROMA's prefix flows in :mod:`runtime.netsim_pleroma`): its ports, what lies beyond each, and
    where a wave of copies leaves it."""

    name: str
    ports: tuple[int, ...]
    peers: list[tuple[str, int]]

    def egress(self, batch: "Batch", rows: np.ndarray, ingress: np.ndarray, mode: str,
               sim: "Simulation") -> np.ndarray:
        """``(rows, physical ports)`` bool: where the copy of each row (arrived on ``ingress``) leaves;
        never the ingress port."""
        ...


#: Per directed link (switch, port): the hosts a copy sent there can still reach, as a port-space mask.
BehindMasks = dict[tuple[str, int], np.ndarray]


@dataclass
class Network:
    """A network ready to simulate. ``kind`` says what forwards: ``p4sub`` (compiled pipelines) or
    ``pleroma`` (prefix flows on the dz the publisher writes). The walk, the ground truth and the link
    accounting are the same for every kind; two hooks carry what differs:

    * ``prepare(batch, mode)``: what the publisher writes into each packet before the first switch
      (PLEROMA: each event's dz), once per batch, never per hop;
    * ``behind(publisher, space)``: the hosts beyond each link, which decide whether a copy is
      extra; by default the up/down orientation p4sub routes by (:func:`_behind_masks`), for PLEROMA
      the publisher's dissemination tree, along which its copies travel.
    """

    topology: Topology
    switches: dict[str, Switch]
    typed: TypedRules
    spec: Any
    inputs: list[str]  # every field some switch or some rule reads
    info: dict[str, Any] = field(default_factory=dict)
    kind: str = "p4sub"
    prepare: Callable[["Batch", str], "Batch"] | None = None
    behind: Callable[[str, PortSpace], BehindMasks] | None = None


def load_network(out_dir: str | Path) -> Network:
    """Read ``network.json``, the topology, the host rules and every switch's pipeline."""
    out = Path(out_dir)
    try:
        info = json.loads(read_text(out / "network.json", "network file"))
    except InputError as exc:
        if exc.reason == "no such file":
            raise P4subError(f"{out}: no network.json (run `p4sub route ... -o {out}` first)") from None
        raise
    except (ValueError, RecursionError) as exc:
        raise P4subError(f"{out / 'network.json'}: unreadable: {exc}") from None
    entries = info.get("switches") if isinstance(info, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                for e in entries):
        raise P4subError(f"{out / 'network.json'}: not a p4sub network (expected a \"switches\" list of "
                         "objects with a \"name\"; rerun `p4sub route`)")
    topology = read_topology(out / info.get("topology_file", "topology.topo"))
    listed = [e["name"] for e in entries]
    if sorted(listed) != sorted(topology.switches()):
        odd = sorted(set(listed) ^ set(topology.switches())) or sorted(n for n in listed if listed.count(n) > 1)
        raise P4subError(f"{out / 'network.json'}: its switches do not match {info.get('topology_file', 'topology.topo')} "
                         f"(e.g. {', '.join(odd[:3])}); rerun `p4sub route`")
    switches: dict[str, Switch] = {}
    spec = None
    inputs: set[str] = set()
    for entry in entries:
        name = entry["name"]
        pipeline = ir.load(out / entry.get("dir", name) / "pipeline.json")
        spec = spec or pipeline.spec
        switches[name] = _switch_sim(topology, name, pipeline)
        inputs.update(switches[name].model.inputs)
    if spec is None:
        raise P4subError(f"{out}: the network has no switches")
    rules = read_rules(out / info.get("rules_file", "hosts.rules"))
    typed = check_rules(rules, spec, port_bits=HOST_ID_BITS)
    inputs.update(name for name in typed.fields)
    return Network(topology, switches, typed, spec, sorted(inputs), info)


def network_of(topology: Topology, pipelines: Mapping[str, ir.Pipeline], typed: TypedRules,
               info: dict[str, Any] | None = None) -> Network:
    """A network held in memory (``compile_network(..., keep_pipelines=True)``), as :func:`load_network`
    reads one from disk: for evaluations that compile and simulate without writing a directory."""
    switches = {name: _switch_sim(topology, name, pipelines[name]) for name in topology.switches()}
    spec = next(iter(pipelines.values())).spec if pipelines else typed.spec
    inputs = set(typed.fields)
    for sw in switches.values():
        inputs.update(sw.model.inputs)
    return Network(topology, dict(switches), typed, spec, sorted(inputs), dict(info or {}))


def _switch_sim(topology: Topology, name: str, pipeline: ir.Pipeline) -> SwitchSim:
    ports = topology.ports(name)
    up = topology.up_ports(name)
    cols = len(ports) + 1
    top_port = max([UP_PORT, *ports, *(p for g in pipeline.multicast_groups for p in g.ports)]) + 1
    col_of_port = np.full(max(top_port, 1 << 9), -1, dtype=np.int64)
    for i, p in enumerate(ports):
        col_of_port[p] = i
    col_of_port[UP_PORT] = len(ports)
    max_gid = max((g.id for g in pipeline.multicast_groups), default=0)
    group_cols = np.zeros((max_gid + 1, cols), dtype=bool)
    for g in pipeline.multicast_groups:
        for p in g.ports:
            c = col_of_port[p] if p < len(col_of_port) else -1
            if c < 0:
                raise P4subError(f"switch {name}: multicast group {g.id} names port {p}, which the switch lacks")
            group_cols[g.id, c] = True
    bit_cols = None
    if pipeline.delivery.is_bitmap:
        bit_cols = np.array([col_of_port[p] if p < len(col_of_port) else -1 for p in pipeline.delivery.ports],
                            dtype=np.int64)
        if (bit_cols < 0).any():
            missing = [p for p, c in zip(pipeline.delivery.ports, bit_cols) if c < 0]
            raise P4subError(f"switch {name}: its port bitmap names port {missing[0]}, which the switch lacks")
    is_up = np.zeros(cols, dtype=bool)
    for p in up:
        is_up[col_of_port[p]] = True
    if pipeline.updates:
        # Copies travel hop by hop in waves, not in time order per switch, so a switch's counters
        # would see its messages out of order; replay one switch's trace instead (docs/replay.md).
        raise P4subError(f"switch {name}: netsim does not keep counters (stateful rules need each switch's "
                         "messages in time order); replay the last hop's traffic with p4sub replay")
    return SwitchSim(name, topology.node_id(name), topology.layer(name), Model(pipeline), ports, up,
                     [topology.peer(name, p) for p in ports], col_of_port, group_cols, is_up, bit_cols)


# ------------------------------------------------------------------------------------------------
# Traces
# ------------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """Rows of messages: field columns, the packet of each row (non-decreasing), bytes.

    ``message_bytes`` is what a message adds to a packet that carries it (prune mode);
    ``packet_bytes`` is a packet's size without its query messages (prune mode) or whole (union
    mode), given on the packet's first row and zero on the others.
    """

    columns: dict[str, np.ndarray]
    packet: np.ndarray
    message_bytes: np.ndarray
    packet_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.packet)


def pcap_batches(path: str | Path, spec: Spec, fields: Iterable[str], mode: str,
                 batch_packets: int = 65536) -> Iterator[Batch]:
    """Message rows of a pcap as ``spec``'s parser reads it (:mod:`runtime.spec_trace`).

    ``prune`` mode: a message costs its size on the wire (one element of each stack of its group,
    ITCH's 38-byte block; a packet without a stack is one message of its own length) and a packet
    the rest of its length. ``union`` mode: a packet costs its length, carried whole.
    """
    from runtime.spec_trace import SpecTraceReader

    for b in SpecTraceReader(path, spec, fields, batch_packets):
        packet = b["packet_index"].astype(np.int64)
        first = _first_of_runs(packet)
        cols = {k: v for k, v in b.items() if "." in k}
        length = b["packet_len"].astype(np.int64)
        if mode == "union":
            yield Batch(cols, packet, np.zeros(len(packet), dtype=np.int64), np.where(first, length, 0))
            continue
        message = b["message_bytes"].astype(np.int64)
        per_packet = np.add.reduceat(message, np.flatnonzero(first)) if len(packet) else message
        base = np.zeros(len(packet), dtype=np.int64)
        base[first] = length[first] - per_packet
        yield Batch(cols, packet, message, np.maximum(base, 0))


def pcap_mode(network: Network, spec: Spec) -> str:
    """``prune`` when the switches' program keeps per port only the messages it wants, else ``union``.

    That is the BMv2 backend's choice (:func:`backends.common.messages.message_layout`): pruning
    needs a stack of messages and a count field before it (ITCH), a stack without one travels whole
    (INT). A packet that is one message (no stack queried) is the same either way.
    """
    from backends.common.messages import message_layout
    from compiler.base import TargetError

    if network.kind == "pleroma":  # one dz per message, each message sent as its own packet
        return "prune"
    for sw in network.switches.values():
        pipeline = sw.model.pipeline  # type: ignore[attr-defined]
        try:
            layout = message_layout(dataclasses.replace(pipeline, spec=spec))
        except TargetError:
            return "union"
        if layout.stack is not None:
            return "prune" if layout.can_prune else "union"
    return "prune"


def json_batches(path: str | Path, fields: Mapping[str, PacketField], batch_rows: int = 262144,
                 default_bytes: int = 64) -> Iterator[Batch]:
    """JSON lines, one message each: field values (read by :mod:`compiler.packet_json`, docs/packets.md),
    optional ``"packet"`` (rows of one packet must be consecutive) and ``"bytes"`` (the message's
    size, default 64)."""
    names = list(fields)
    cols: dict[str, list[int]] = {f: [] for f in names}
    packets: list[int] = []
    sizes: list[int] = []
    last_packet = None
    lines = text_lines(path, "trace")
    for lineno, obj, row in read_lines(lines, str(path), fields, why="which the switches or the rules read",
                                       unit="message"):
        where = SourceLocation(str(path), lineno, 1)
        for f in names:
            cols[f].append(row[f])
        pkt = obj.get("packet", 0 if last_packet is None else last_packet + 1)
        if type(pkt) is not int or (last_packet is not None and pkt < last_packet):
            raise P4subError("\"packet\" must be a non-decreasing integer", where)
        size = obj.get("bytes", default_bytes)
        if type(size) is not int or not 0 <= size < 1 << 32:
            raise P4subError("\"bytes\" must be a non-negative integer below 2**32", where)
        if packets and pkt != packets[-1] and len(packets) >= batch_rows:
            yield _json_batch(cols, packets, sizes, fields)
            cols, packets, sizes = {f: [] for f in names}, [], []
        packets.append(pkt)
        sizes.append(size)
        last_packet = pkt
    if packets:
        yield _json_batch(cols, packets, sizes, fields)


def _json_batch(cols: dict[str, list[int]], packets: list[int], sizes: list[int],
                fields: Mapping[str, PacketField]) -> Batch:
    arrays = {f: np.array(v, dtype=np.uint64 if fields[f].width <= 64 else object) for f, v in cols.items()}
    return Batch(arrays, np.array(packets, dtype=np.int64), np.array(sizes, dtype=np.int64),
                 np.zeros(len(packets), dtype=np.int64))


def _first_of_runs(packet: np.ndarray) -> np.ndarray:
    first = np.ones(len(packet), dtype=bool)
    if len(packet) > 1:
        first[1:] = packet[1:] != packet[:-1]
    return first


def trace_batches(path: str | Path, network: Network, spec: Spec | None = None) -> tuple[Iterator[Batch], str]:
    """Batches of a trace and the mode that fits it: a pcap read by the spec's parse graph (``spec``,
    default the network's) in the mode its program uses (:func:`pcap_mode`), or JSON lines (prune)."""
    p = Path(path)
    with open_input(p, "trace", limit=False) as f:  # streamed: a regular file of any size
        magic = f.read(4)
    pcap = magic in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")
    if not pcap and p.suffix.lower() in (".pcap", ".pcapng", ".cap"):
        require_packets(p)  # named as a capture but not one: the pcap reader says what its magic is
    if pcap:
        spec = spec or network.spec
        from runtime.columnar import SpecReader

        SpecReader(spec, network.inputs)  # every field must be one the parser can give, before any packet
        mode = pcap_mode(network, spec)
        require_packets(p)
        return pcap_batches(p, spec, network.inputs, mode), mode
    fields = {}
    for f in network.inputs:
        info = network.typed.fields.get(f)
        width = info.width if info else network.spec.field_width(f)
        if width is None:
            raise P4subError(f"{p}: JSON traces give packet fields; the switches read {f}, which is none")
        fields.update(fields_from_query({f: info or QueryField(f, width)}))
    return _not_empty(json_batches(p, fields), p), "prune"


def _not_empty(batches: Iterator[Batch], path: Path) -> Iterator[Batch]:
    """``batches``, refusing a trace that has none: "0 messages" would read as a trace in which
    nothing mattered (:func:`apps.pcap.require_packets` says the same of a pcap)."""
    first = next(batches, None)
    if first is None:
        raise P4subError(f"{path}: holds no messages; an empty trace is not a trace")
    yield first
    yield from batches


# ------------------------------------------------------------------------------------------------
# Simulation
# ------------------------------------------------------------------------------------------------


@dataclass
class LinkStats:
    packets: int = 0
    messages: int = 0
    bytes: int = 0
    extra_packets: int = 0
    extra_messages: int = 0
    extra_bytes: int = 0

    def add(self, other: "LinkStats") -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass
class HostStats:
    delivered: int = 0
    wanted: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    duplicates: int = 0


@dataclass
class Simulation:
    """Accumulated results over the batches of a trace."""

    network: Network
    publisher: str
    mode: str
    hosts: dict[str, HostStats]
    links: dict[tuple[str, int], LinkStats]
    messages: int = 0
    packets: int = 0
    lost_copies: int = 0
    seconds: float = 0.0
    switch_rows: int = 0
    #: With ``record=True``: host -> trace rows delivered (one entry per arrival), and
    #: (switch, port) -> trace rows sent out of that port. Rows count from the start of the trace.
    deliveries: dict[str, list[np.ndarray]] | None = None
    link_rows: dict[tuple[str, int], list[np.ndarray]] | None = None

    def report(self) -> dict[str, Any]:
        topo = self.network.topology
        top = max(topo.layer(s) for s in topo.switches())
        unit = "messages" if self.mode == "prune" else "packets"
        hosts = {h: vars(s) | {"unit": unit} for h, s in self.hosts.items()}
        links = []
        tiers: dict[str, LinkStats] = {}
        for (node, port), st in sorted(self.links.items(), key=lambda kv: (topo.node_id(kv[0][0]), kv[0][1])):
            peer, peer_port = topo.peer(node, port)
            tier = _tier(topo, node, peer, top)
            direction = "up" if topo.direction(node, port) == "up" else "down"
            links.append({"from": node, "port": port, "to": peer, "to_port": peer_port, "tier": tier,
                          "direction": direction, **vars(st)})
            tiers.setdefault(tier, LinkStats()).add(st)
        tier_out = {}
        for name, st in sorted(tiers.items(), key=lambda kv: _TIER_ORDER.get(kv[0].split("-")[0], 9)):
            row = vars(st).copy()
            row["extra_share_packets"] = round(st.extra_packets / st.packets, 6) if st.packets else 0.0
            row["extra_share_bytes"] = round(st.extra_bytes / st.bytes, 6) if st.bytes else 0.0
            tier_out[name] = row
        totals = {k: sum(getattr(s, k) for s in self.hosts.values()) for k in vars(HostStats())}
        return {
            "publisher": self.publisher, "kind": self.network.kind, "mode": self.mode, "unit": unit, "policy": self.network.info.get("policy"),
            "alpha": self.network.info.get("alpha"), "messages": self.messages, "packets": self.packets,
            "seconds": round(self.seconds, 3),
            "messages_per_second": round(self.messages / self.seconds) if self.seconds else None,
            "switch_rows": self.switch_rows, "lost_copies": self.lost_copies,
            "hosts": hosts, "host_totals": totals, "tiers": tier_out, "links": links,
        }


_TIER_ORDER = {"host": 0, "edge": 1, "leaf": 1, "aggregation": 2, "spine": 2}


def _tier(topo: Topology, a: str, b: str, top: int) -> str:
    if not topo.is_switch(a) or not topo.is_switch(b):
        return f"host-{layer_name(1, top)}" if top >= 1 else "host"
    la, lb = sorted((topo.layer(a), topo.layer(b)))
    return f"{layer_name(la, top)}-{layer_name(lb, top)}"


def simulate(network: Network, batches: Iterable[Batch], publisher: str, mode: str = "prune",
             limit: int | None = None, record: bool = False) -> Simulation:
    """Publish every batch at ``publisher`` and follow all copies; see the module docstring.

    ``record`` keeps every delivery and every link crossing by row (for tests and small traces).
    """
    topo = network.topology
    if publisher not in topo.graph or topo.is_switch(publisher):
        raise P4subError(f"publisher {publisher!r} is not a host of {topo.name or 'the topology'}")
    if mode not in MODES:
        raise P4subError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    space = PortSpace.of(topo.node_id(h) for h in topo.hosts())
    truth = GroundTruth.build(network.typed, space)
    behind = network.behind(publisher, space) if network.behind is not None else _behind_masks(topo, space)
    sim = Simulation(network, publisher, mode, {h: HostStats() for h in topo.hosts()}, {})
    if record:
        sim.deliveries, sim.link_rows = {}, {}
    start = time.perf_counter()
    for batch in batches:
        if limit is not None:
            if sim.messages >= limit:
                break
            if sim.messages + len(batch) > limit:
                batch = _head(batch, limit - sim.messages)
        if network.prepare is not None:
            batch = network.prepare(batch, mode)
        _simulate_batch(network, batch, publisher, mode, truth, space, behind, sim)
    sim.seconds = time.perf_counter() - start
    return sim


def _head(batch: Batch, n: int) -> Batch:
    return Batch({k: v[:n] for k, v in batch.columns.items()}, batch.packet[:n], batch.message_bytes[:n],
                 batch.packet_bytes[:n])


def _behind_masks(topo: Topology, space: PortSpace) -> dict[tuple[str, int], np.ndarray]:
    """Per directed link (switch, port): the hosts a copy sent there can still reach, as a mask."""
    orient = orientation(topo)
    out = {}
    for s in topo.switches():
        for p in topo.ports(s):
            peer, _ = topo.peer(s, p)
            if not topo.is_switch(peer):
                mask = 1 << orient.hosts.index(peer)
            elif topo.direction(s, p) == "up":
                mask = orient.up_reach[s]
            elif topo.direction(s, p) == "down":
                mask = orient.port_below[s][p]
            else:
                mask = 0
            out[(s, p)] = space.mask(topo.node_id(h) for h in orient.names(mask))
    return out


def _up_choice(packet: np.ndarray, switch_id: int, n: int) -> np.ndarray:
    """splitmix64 of (packet, switch): the physical up port index per row (same for a packet's rows)."""
    with np.errstate(over="ignore"):
        z = packet.astype(np.uint64) * _GOLDEN + np.uint64(switch_id) * _MIX2
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(n)).astype(np.int64)


def _simulate_batch(network: Network, batch: Batch, publisher: str, mode: str, truth: GroundTruth,
                    space: PortSpace, behind: dict[tuple[str, int], np.ndarray], sim: Simulation) -> None:
    topo = network.topology
    n = len(batch)
    if n == 0:
        return
    packet = batch.packet
    first = _first_of_runs(packet)
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1  # row -> packet segment index within the batch
    offset = sim.messages
    sim.messages += n
    sim.packets += len(starts)
    wanted = truth.wanted({f: batch.columns[f] for f in truth.columns_needed() + truth.validity
                           if f in batch.columns}, rows=n)
    if mode == "union":  # a packet is wanted where any of its messages is
        wanted = np.bitwise_or.reduceat(wanted, starts, axis=0)[seg]
    words = wanted.shape[1]
    switch, port = topo.host_attachment(publisher)
    frontier: dict[str, list[tuple[np.ndarray, int]]] = {switch: [(np.arange(n), port)]}
    delivered: dict[str, list[np.ndarray]] = {}
    for _ in range(len(network.switches) + 2):
        if not frontier:
            break
        nxt: dict[str, list[tuple[np.ndarray, int]]] = {}
        for name, arrivals in frontier.items():
            sw = network.switches[name]
            rows = np.concatenate([r for r, _ in arrivals])
            ingress = np.concatenate([np.full(len(r), p, dtype=np.int64) for r, p in arrivals])
            order = np.argsort(rows, kind="stable")
            rows, ingress = rows[order], ingress[order]
            sim.switch_rows += len(rows)
            out = sw.egress(batch, rows, ingress, mode, sim)
            for c in np.flatnonzero(out.any(axis=0)):
                sel = rows[out[:, c]]
                p = sw.ports[c]
                _count_link(sim, (name, p), sel, batch, first, wanted, behind[(name, p)], words)
                if sim.link_rows is not None:
                    sim.link_rows.setdefault((name, p), []).append(sel + offset)
                peer, peer_port = sw.peers[c]
                if topo.is_switch(peer):
                    nxt.setdefault(peer, []).append((sel, peer_port))
                else:
                    delivered.setdefault(peer, []).append(sel)
        frontier = nxt
    if frontier:
        raise P4subError(f"copies still travelling after {len(network.switches) + 2} hops: a forwarding loop "
                         f"at {', '.join(sorted(frontier)[:3])}")
    for h in topo.hosts():
        i = space.bit(topo.node_id(h))
        want = (wanted[:, i // 64] >> np.uint64(i % 64)) & np.uint64(1)
        got = np.concatenate(delivered[h]) if h in delivered else np.zeros(0, dtype=np.int64)
        if sim.deliveries is not None:
            sim.deliveries.setdefault(h, []).append(got + offset)
        if mode == "union":  # every row of a packet travels with it: count each arrival once, by its first row
            want = want[starts]
            got = seg[got[first[got]]]
        unique = np.unique(got)
        want = want.astype(bool)
        tp = int(np.count_nonzero(want[unique]))
        st = sim.hosts[h]
        st.delivered += len(unique)
        st.wanted += int(np.count_nonzero(want))
        st.false_positives += len(unique) - tp
        st.false_negatives += int(np.count_nonzero(want)) - tp
        st.duplicates += len(got) - len(unique)


def _switch_ports(sw: SwitchSim, batch: Batch, rows: np.ndarray, ingress: np.ndarray, mode: str,
                  sim: Simulation) -> np.ndarray:
    """(rows, physical ports) bool: where each row's copy leaves the switch."""
    res = sw.model.run({f: batch.columns[f][rows] for f in sw.model.inputs + sw.model.validity if f in batch.columns},
                       rows=len(rows))
    k = len(rows)
    out = np.zeros((k, len(sw.ports) + 1), dtype=bool)
    if sw.bit_cols is not None:
        _bitmap_ports(sw, res, out)
    grouped = (res.group > 0) if sw.bit_cols is None else np.zeros(k, dtype=bool)
    if grouped.any():
        out[grouped] = sw.group_cols[res.group[grouped]]
    uni = ~grouped & (res.port >= 0) & ~res.dropped
    if uni.any():
        ports = res.port[uni]
        cols = np.where(ports < len(sw.col_of_port), sw.col_of_port[np.minimum(ports, len(sw.col_of_port) - 1)], -1)
        ok = cols >= 0
        sim.lost_copies += int(np.count_nonzero(~ok))
        idx = np.flatnonzero(uni)
        out[idx[ok], cols[ok]] = True
    if mode == "union":
        pkt = batch.packet[rows]
        first = _first_of_runs(pkt)
        starts = np.flatnonzero(first)
        out = np.logical_or.reduceat(out, starts, axis=0)[np.cumsum(first) - 1]
    in_cols = sw.col_of_port[ingress]
    out[np.arange(k), in_cols] = False
    marker = out[:, sw.marker]
    if marker.any():
        from_up = sw.is_up_col[in_cols]
        go_up = marker & ~from_up
        if go_up.any():
            if not sw.up_ports:
                sim.lost_copies += int(np.count_nonzero(go_up))
            else:
                idx = np.flatnonzero(go_up)
                choice = _up_choice(batch.packet[rows[idx]], sw.id, len(sw.up_ports))
                up_cols = sw.col_of_port[np.array(sw.up_ports, dtype=np.int64)]
                out[idx, up_cols[choice]] = True
    return out[:, : sw.marker]


def _bitmap_ports(sw: SwitchSim, res: Any, out: np.ndarray) -> None:
    """Set ``out``'s columns from a port-bitmap pipeline's bitmap, bit by bit (no group per bitmap)."""
    bitmap = res.metadata[sw.model.pipeline.delivery.fields[0]]
    live = ~res.dropped
    wide = bitmap.dtype == object  # wider than 64 bits: Python ints
    for i, c in enumerate(sw.bit_cols.tolist()):
        bit = (np.array([v >> i & 1 for v in bitmap.tolist()], dtype=bool) if wide
               else ((bitmap >> np.uint64(i)) & np.uint64(1)).astype(bool))
        out[:, c] |= live & bit


def _count_link(sim: Simulation, link: tuple[str, int], rows: np.ndarray, batch: Batch, first: np.ndarray,
                wanted: np.ndarray, behind: np.ndarray, words: int) -> None:
    st = sim.links.setdefault(link, LinkStats())
    pkt = batch.packet[rows]
    new = _first_of_runs(pkt)  # rows are sorted, so a packet's rows are consecutive
    useful = np.zeros(len(rows), dtype=bool)
    for w in range(words):
        useful |= (wanted[rows, w] & behind[w]) != 0
    if sim.mode == "prune":
        # a packet's own bytes (first row of the packet in the batch) + each message carried
        base = _packet_base(batch, rows, new)
        st.messages += len(rows)
        st.packets += int(np.count_nonzero(new))
        st.bytes += int(base.sum() + batch.message_bytes[rows].sum())
        extra = ~useful
        st.extra_messages += int(np.count_nonzero(extra))
        # a packet copy is extra when none of its messages on this link is useful
        pkt_useful = np.logical_or.reduceat(useful, np.flatnonzero(new)) if len(rows) else useful
        st.extra_packets += int(np.count_nonzero(~pkt_useful))
        st.extra_bytes += int(base[new][~pkt_useful].sum() + batch.message_bytes[rows][extra].sum())
    else:
        size = _packet_base(batch, rows, new)
        st.messages += len(rows)
        st.packets += int(np.count_nonzero(new))
        st.bytes += int(size.sum())
        extra_rows = ~useful  # union mode: wanted is per packet, so all rows of a packet agree
        st.extra_messages += int(np.count_nonzero(extra_rows))
        st.extra_packets += int(np.count_nonzero(extra_rows & new))
        st.extra_bytes += int(size[extra_rows].sum())


def _packet_base(batch: Batch, rows: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per row: the packet's own bytes on the row that starts the packet on this link, else 0.

    ``batch.packet_bytes`` sits on the packet's first row in the batch; a link may carry only later
    rows of the packet, so the value is looked up by packet instead of by row.
    """
    pkt = batch.packet[rows]
    first_row = np.searchsorted(batch.packet, pkt, side="left")
    return np.where(new, batch.packet_bytes[first_row], 0)


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


def write_report(report: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """``netsim.json`` and ``netsim.png`` (per host deliveries and errors, per tier traffic and extra)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "netsim.json"]
    paths[0].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosts = list(report["hosts"])
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, len(hosts) * 0.35), 8))
    x = np.arange(len(hosts))
    for i, (key, label) in enumerate((("wanted", "wanted"), ("delivered", "delivered"),
                                      ("false_positives", "false positives"), ("false_negatives", "false negatives"))):
        ax1.bar(x + (i - 1.5) * 0.2, [report["hosts"][h][key] for h in hosts], 0.2, label=label)
    ax1.set_xticks(x, hosts, rotation=90, fontsize=7)
    ax1.set_ylabel(report["unit"])
    ax1.set_title(f"per host, published at {report['publisher']} ({report['policy'] or '?'} policy)")
    ax1.legend(fontsize=8)
    tiers = list(report["tiers"])
    t = np.arange(len(tiers))
    useful = [report["tiers"][k]["bytes"] - report["tiers"][k]["extra_bytes"] for k in tiers]
    extra = [report["tiers"][k]["extra_bytes"] for k in tiers]
    ax2.bar(t, useful, 0.5, label="bytes some host behind the link wanted")
    ax2.bar(t, extra, 0.5, bottom=useful, label="extra bytes")
    ax2.set_xticks(t, tiers)
    ax2.set_ylabel("bytes")
    ax2.set_title("traffic per tier (both directions)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    png = out / "netsim.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    paths.append(png)
    return paths
