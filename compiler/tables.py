"""Slice a decision diagram into match-action tables (Camus Algorithm 2) and build the Pipeline IR.

Each field gets a stage: a table keyed on (state, field) whose entries move the state from a node
of that field's level to the node's child, and a miss table keyed on the state alone that sends every
value no entry matched to the node's most common child. A state whose path skips the field matches
no entry in either and keeps its value (the tables' default action is ``NoAction``), so pass-through
costs nothing. After the last stage the state is a leaf, and the leaf table maps it to ports or a
multicast group. State ids are dense over the reachable diagram (root 0) and their width is computed.

Match kinds are chosen per field: ``exact`` when every edge but the default is a single value, ``lpm``
for ``@query_field_lpm`` fields, otherwise ``range``, or on request ``ternary`` (the minimal prefix
table of the field's partition, by ORTC) or domain compression (a code table maps the field to the
index of its elementary interval first, and the state table matches the small code: Camus §5.2's
"lower-resolution domain").
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from compiler import ir
from compiler.base import CompileError, limits
from compiler.bdd import Diagram
from compiler.dnf import ActionSet
from compiler.rules import validity
from compiler.spec import QueryField, Spec

RANGE_ENCODINGS = ("range", "ternary", "compress")
PORT_WIDTH = 9
GROUP_WIDTH = 16


@dataclass(frozen=True)
class TableOptions:
    """How to lay out tables. ``range_encoding`` applies to fields that are neither exact nor lpm."""

    range_encoding: str = "range"
    per_field_encoding: dict[str, str] = field(default_factory=dict)
    headroom: float = 1.25
    min_size: int = 64
    exact_expand_limit: int = 64
    # Most entries an exact-matched field may expand its ranges into (``--encode F=exact`` on a
    # price field would need billions): counted before expanding, refused with the count.
    max_exact_entries: int = 1_000_000
    # Floors carried over from a previous compile (``p4sub compile --like``), so that an update with
    # the same tables renders the same program and installs as entry changes only.
    min_state_bits: int = 0
    min_sizes: dict[str, int] = field(default_factory=dict)
    min_ports: tuple[int, ...] = ()  # bitmap ports kept from a previous compile (``--like``)


def sanitize(name: str) -> str:
    """A P4 identifier for an attribute: ``add_order.price`` -> ``add_order_price``, ``avg(x.y)`` -> ``avg_x_y``."""
    out = "".join(c if c.isalnum() else "_" for c in name)
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_")


def build_pipeline(diagram: Diagram, spec: Spec | None, options: TableOptions = TableOptions(),
                   name: str = "p4sub") -> ir.Pipeline:
    """The Pipeline IR for a diagram: tables, entries, multicast groups, metadata."""
    return _Slicer(diagram, spec, options, name).run()


def bitmap_delivery(ports: Sequence[int], lanes: int = 1) -> ir.Delivery:
    """Port-bitmap delivery over ``ports`` (bit ``i`` is the ``i``-th smallest) for ``lanes`` lanes, through group 1."""
    return ir.Delivery("bitmap", tuple(ir.lane_ports(i) for i in range(lanes)), tuple(sorted(set(ports))), 1)


def merged_order(orders: Sequence[Sequence[str]]) -> list[str]:
    """One field order that keeps every lane's order: the lanes are built in one global order
    (each lane's a subsequence of it), which this recovers; ties go to the field seen first."""
    after: dict[str, set[str]] = {}
    seen: list[str] = []
    for order in orders:
        for i, f in enumerate(order):
            if f not in after:
                after[f] = set()
                seen.append(f)
            if i:
                after[f].add(order[i - 1])
    out: list[str] = []
    while len(out) < len(seen):
        ready = next((f for f in seen if f not in out and after[f] <= set(out)), None)
        ready = ready or next(f for f in seen if f not in out)  # lanes that disagree: first seen wins
        out.append(ready)
    return out


def build_lanes(diagrams: Sequence[Diagram], spec: Spec | None, delivery: ir.Delivery,
                options: TableOptions = TableOptions(), name: str = "p4sub") -> ir.Pipeline:
    """One pipeline from independent lanes (each diagram built with outputs on edges): each lane is its
    own chain of tables over its own state, and every lane ORs the ports it decides into one bitmap."""
    if len(delivery.fields) != len(diagrams):
        raise CompileError(f"{len(diagrams)} lanes but {len(delivery.fields)} port bitmaps")
    parts = [_Slicer(d, spec, options, name, lane=i, delivery=delivery).run() for i, d in enumerate(diagrams)]
    metadata: list[ir.Metadata] = []
    actions: dict[str, ir.Action] = {}
    attributes: dict[str, dict] = {}
    for part in parts:
        metadata += part.metadata
        actions.update((a.name, a) for a in part.actions)
        for attr, info in part.attributes.items():
            attributes.setdefault(attr, {**info, "tables": []})["tables"].append(info["table"])
    order = merged_order([p.field_order for p in parts])
    metadata += [ir.Metadata(f, delivery.width) for f in delivery.fields]
    groups = (ir.MulticastGroup(delivery.group, delivery.ports),) if delivery.ports else ()
    return ir.Pipeline(
        spec=spec or Spec(path="<none>"),
        metadata=tuple(metadata),
        actions=tuple(actions.values()),
        tables=tuple(t for p in parts for t in p.tables),
        control=tuple(c for p in parts for c in p.control),
        entries=tuple(e for p in parts for e in p.entries),
        multicast_groups=groups,
        field_order=tuple(order),
        states=sum(p.states for p in parts),
        attributes=attributes,
        name=name,
        delivery=delivery,
        lanes=len(parts),
    )


class _Slicer:
    def __init__(self, diagram: Diagram, spec: Spec | None, options: TableOptions, name: str,
                 lane: int = 0, delivery: ir.Delivery | None = None, state_of: dict[int, int] | None = None) -> None:
        """``state_of``: node -> state id kept by the caller (an incremental update, whose ids stay
        stable and whose state width is ``options.min_state_bits``); by default dense ids over the
        reachable diagram, root 0, in breadth-first order by level."""
        self.d = diagram
        self.spec = spec
        self.options = options
        self.name = name
        self.lane = lane
        self.prefix = ir.lane_prefix(lane)
        self.state_field = ir.lane_state(lane)
        self.delivery = delivery if delivery is not None and delivery.is_bitmap else None
        if diagram.emit and self.delivery is None:
            raise CompileError("a diagram with outputs on edges needs port-bitmap delivery")
        if state_of is None:
            order = diagram.reachable()
            state_of = {node: i for i, node in enumerate(order)}
            self.state_width = max(1, (len(order) - 1).bit_length(), options.min_state_bits)
        else:
            self.state_width = max(1, options.min_state_bits)
        self.state_of = state_of
        self.entries: list[ir.Entry] = []
        self.tables: list[ir.Table] = []
        self.metadata: list[ir.Metadata] = [ir.Metadata(self.state_field, self.state_width)]
        self.control: list[str] = []
        self.attributes: dict[str, dict] = {}
        self.empty_leaf = next((n for n, a in diagram.leaves.items() if a.is_empty and n in self.state_of), None)
        # The spec's @query_default_action runs for packets no rule gives anything: they must end in
        # the empty leaf's state (no transition left out to save an entry), which calls it.
        self.no_match_call = spec.default_action if spec is not None else None
        if self.no_match_call and self.delivery is not None:
            raise CompileError(f"@query_default_action({self.no_match_call}) needs --delivery groups (one lane: "
                               "whether any rule matched is known only where every rule's outcome meets)",
                               spec.default_action_location)
        # An edge goes to a target: (child node, emitted port set id); targets are numbered so that
        # the miss-default and ORTC logic can treat them as plain labels.
        self.targets: list[tuple[int, int]] = []
        self.target_of: dict[tuple[int, int], int] = {}
        self.no_entry = (self.target(self.empty_leaf, 0) if self.empty_leaf is not None and not self.no_match_call
                         else None)
        self._bitmaps: dict[int, int] = {}
        self._bit_index = {p: i for i, p in enumerate(self.delivery.ports)} if self.delivery else {}

    def state(self, node: int) -> int:
        return self.state_of[node]

    def target(self, child: int, emitted: int) -> int:
        key = (child, emitted)
        t = self.target_of.get(key)
        if t is None:
            t = self.target_of[key] = len(self.targets)
            self.targets.append(key)
        return t

    def labelled(self, node: int) -> list[tuple[int, int, int]]:
        """A node's edges as (lo, hi, target)."""
        n = self.d.nodes[node]
        emits = n.emits or (0,) * len(n.edges)
        return [(lo, hi, self.target(c, e)) for (lo, hi, c), e in zip(n.edges, emits)]

    def bitmap(self, emitted: int) -> int:
        found = self._bitmaps.get(emitted)
        if found is None:
            bit = self._bit_index
            found = self._bitmaps[emitted] = sum(1 << bit[p] for p in self.d.emissions[emitted])
        return found

    def named(self, name: str) -> str:
        return self.prefix + name

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> ir.Pipeline:
        by_level: dict[int, list[int]] = {}
        for node in self.state_of:
            if node in self.d.nodes:
                by_level.setdefault(self.d.nodes[node].level, []).append(node)
        fields = self.d.fields
        level = 0
        while level < len(fields):
            run = level
            while run < len(fields) and validity.is_validity(fields[run].name):
                run += 1
            if run - level >= 2:  # consecutive validity levels: one table, one stage
                inside = {n for lv in range(level, run) for n in by_level.get(lv, [])}
                # A node inside the run is a packet's state only when a node outside it (or the
                # start) leads to it; the others are passed through within the one table.
                entered = {n for n in self.state_of if n in self.d.nodes and n not in inside
                           for _, _, n2 in self.d.nodes[n].edges for n in [n2] if n in inside}
                entered |= {self.d.root} & inside
                self.validity_stage(level, run, sorted(entered, key=self.state))
                level = run
                continue
            nodes = by_level.get(level, [])
            if nodes:
                self.stage(fields[level], nodes)
            level += 1
        groups = self.leaf_tables()
        actions = self.action_defs()
        sized = tuple(self._sized(t) for t in self.tables)
        return ir.Pipeline(
            spec=self.spec or Spec(path="<none>"),
            metadata=tuple(self.metadata),
            actions=actions,
            tables=sized,
            control=tuple(self.control),
            entries=tuple(self.entries),
            multicast_groups=groups,
            field_order=tuple(self.d.field_names),
            states=len(self.state_of),
            attributes=self.attributes,
            name=self.name,
        )

    def _sized(self, table: ir.Table) -> ir.Table:
        n = sum(1 for e in self.entries if e.table == table.name)
        size = max(self.options.min_size, math.ceil(n * self.options.headroom), self.options.min_sizes.get(table.name, 0))
        return ir.Table(**{**table.__dict__, "size": size, "lane": self.lane})

    # -- field stages -----------------------------------------------------------------------
    def stage(self, info: QueryField, nodes: list[int]) -> None:
        limits.checkpoint()  # the compile's time and memory budget (compiler.base.limits)
        kind = self.choose_kind(info, nodes)
        base = self.named(f"field_{sanitize(info.name)}")
        state_key = ir.Key(self.state_field, self.state_width, "exact")
        self.attributes[info.name] = {"width": info.width, "match_kind": kind, "scale": info.scale,
                                      "is_string": info.is_string, "table": base}
        miss = f"{base}_miss"
        if kind == "compress":
            self.compressed_stage(info, nodes, base, miss, state_key)
            return
        key = ir.Key(info.name, info.width, kind)
        self.tables.append(ir.Table(base, (state_key, key), self.transition_actions(), "NoAction", on_miss=miss,
                                    role="field", attribute=info.name))
        self.tables.append(ir.Table(miss, (state_key,), self.transition_actions(), "NoAction", role="miss",
                                    attribute=info.name))
        self.control.append(base)
        if kind == "exact":
            self._check_exact_expansion(info, nodes)
        for node in nodes:
            self.node_entries(node, info, kind, base, miss)

    def node_entries(self, node: int, info: QueryField, kind: str, base: str, miss: str) -> int | None:
        """The entries of one node of a field stage (not compressed): its non-default edges in the
        field table ``base``, its default in the ``miss`` table. Appended to :attr:`entries`; the
        default target is returned."""
        edges = self.labelled(node)
        default = self.exact_default(edges) if kind == "exact" else self.default_child(edges, kind)
        s = self.state(node)
        if kind == "exact":
            for lo, hi, child in edges:
                if child != default:
                    for v in range(lo, hi + 1):
                        self.add(base, (ir.Exact(s), ir.Exact(v)), child)
        elif kind == "range":
            for lo, hi, child in edges:
                if child != default:
                    self.add(base, (ir.Exact(s), ir.Range(lo, hi)), child, priority=1)
        else:
            default, prefixes = ortc(edges, info.width, prefer=default)
            for value, plen, child in prefixes:
                if kind == "lpm":
                    match: ir.Match = ir.Lpm(value, plen)
                    self.add(base, (ir.Exact(s), match), child)
                else:
                    mask = ((1 << info.width) - 1) ^ ((1 << (info.width - plen)) - 1)
                    self.add(base, (ir.Exact(s), ir.Ternary(value, mask)), child, priority=plen + 1)
        if default != self.no_entry:
            self.add(miss, (ir.Exact(s),), default)
        return default

    def validity_stage(self, first: int, end: int, nodes: list[int]) -> None:
        """Levels ``first``..``end - 1``, all header validity bits, as one exact table keyed by the
        state and every bit: per node, each assignment of the bits leads through the levels to the
        node below them (a bit above the node's own level, or one its path skips, takes both values).
        2^k entries per node for k bits, in one stage instead of k."""
        infos = self.d.fields[first:end]
        name = self.named("valid_" + "_".join(sanitize(validity.header_of_validity(i.name)) for i in infos))
        state_key = ir.Key(self.state_field, self.state_width, "exact")
        keys = (state_key,) + tuple(ir.Key(i.name, 1, "exact") for i in infos)
        self.tables.append(ir.Table(name, keys, self.transition_actions(), "NoAction", role="field",
                                    attribute=",".join(i.name for i in infos)))
        self.control.append(name)
        for info in infos:
            self.attributes[info.name] = {"width": 1, "match_kind": "exact", "scale": 0, "is_string": False,
                                          "table": name}
        for node in nodes:
            self.validity_entries(node, first, end, name)

    def validity_entries(self, node: int, first: int, end: int, table: str) -> None:
        """The entries of one node in the folded validity table ``table`` (levels ``first``..``end - 1``):
        one per assignment of the bits, to the node below the run with the ports emitted on the way
        merged; an assignment that ends in the empty leaf and emits nothing needs none (the miss keeps
        the state). Appended to :attr:`entries`. The incremental path makes a root's entries with it."""
        for bits in itertools.product((0, 1), repeat=end - first):
            child, emitted = node, set()
            while child in self.d.nodes and self.d.nodes[child].level < end:
                n = self.d.nodes[child]
                i = self.d.edge_index(child, bits[n.level - first])
                if n.emits and n.emits[i]:
                    emitted |= self.d.emissions[n.emits[i]]
                child = n.edges[i][2]
            if child == node:
                continue
            matches = (ir.Exact(self.state(node)),) + tuple(ir.Exact(b) for b in bits)
            if emitted:
                bitmap = sum(1 << self._bit_index[p] for p in emitted)
                self.entries.append(ir.Entry(table, matches, self.named("set_state_ports"),
                                             (self.state(child), bitmap)))
            elif self.no_entry is None or (child, 0) != self.targets[self.no_entry]:
                self.entries.append(ir.Entry(table, matches, self.named("set_state"), (self.state(child),)))

    def _check_exact_expansion(self, info: QueryField, nodes: list[int]) -> None:
        """Refuse, before expanding anything, an exact stage that would need more than
        ``max_exact_entries`` entries (each value of each non-default range is one entry)."""
        limit = self.options.max_exact_entries
        total = 0
        for node in nodes:
            edges = self.labelled(node)
            default = self.exact_default(edges)
            total += sum(hi - lo + 1 for lo, hi, child in edges if child != default)
        if total > limit:
            how = ("--encode asks for it" if self.options.per_field_encoding.get(info.name) == "exact"
                   else "it is matched exact")
            raise CompileError(f"{info.name}: matching it exact ({how}) needs {total:,} entries, one per value of the "
                               f"rules' ranges: {total / limit:,.0f} times the limit of {limit:,}; match it as a "
                               f"range, ternary or compress instead (--encode {info.name}=range)",
                               None if how.startswith("--encode") else info.location)

    def transition_actions(self) -> tuple[str, ...]:
        if self.delivery is None:
            return ("set_state", "NoAction")
        return (self.named("set_state"), self.named("set_state_ports"), "NoAction")

    def choose_kind(self, info: QueryField, nodes: list[int]) -> str:
        requested = self.options.per_field_encoding.get(info.name)
        if requested:
            return requested
        if info.match_kind == "lpm":
            return "lpm"
        exact_ok = all(self._exact_ok(self.labelled(n)) for n in nodes)
        if info.match_kind == "exact":
            if not exact_ok:
                raise CompileError(f"{info.name} is declared @query_field_exact but the rules split it into ranges "
                                   f"wider than {self.options.exact_expand_limit} values; declare it "
                                   "@query_field_range or @query_field", info.location)
            return "exact"
        if exact_ok and all(self._singletons(self.labelled(n)) for n in nodes):
            return "exact"
        return self.options.range_encoding

    def _exact_ok(self, edges) -> bool:
        return self.default_child(edges, "exact") is not None

    def _singletons(self, edges) -> bool:
        default = self.default_child(edges, "exact")
        return all(lo == hi for lo, hi, c in edges if c != default)

    def exact_default(self, edges) -> int:
        """The miss table's child of an exact stage: :meth:`default_child`'s, or - when several
        children have ranges too wide to expand (``--encode F=exact`` asked for it anyway) - the one
        with the most values, so that only the others are expanded."""
        default = self.default_child(edges, "exact")
        if default is None:
            weight: Counter = Counter()
            for lo, hi, c in edges:
                weight[c] += hi - lo + 1
            default = max(weight, key=lambda c: (weight[c], -c))
        return default

    def default_child(self, edges, kind: str) -> int | None:
        """The child the miss table sends a state to: the one whose edges would cost the most entries."""
        if kind == "exact":
            wide = {c for lo, hi, c in edges if hi - lo + 1 > self.options.exact_expand_limit}
            if len(wide) > 1:
                return None
            if wide:
                return wide.pop()
            weight = Counter()
            for lo, hi, c in edges:
                weight[c] += hi - lo + 1
        else:
            weight = Counter(c for _, _, c in edges)
        if self.no_entry in weight:
            weight[self.no_entry] += 1  # choosing the empty leaf also saves the miss entry
        return max(weight, key=lambda c: (weight[c], -c))

    def compressed_stage(self, info: QueryField, nodes: list[int], base: str, miss: str, state_key: ir.Key) -> None:
        bounds = sorted({lo for n in nodes for lo, _, _ in self.d.nodes[n].edges})
        code_width = max(1, (len(bounds) - 1).bit_length())
        code_name = self.named(sanitize(info.name))
        code_field = f"meta.p4sub_code_{code_name}"
        self.metadata.append(ir.Metadata(code_field, code_width))
        code_table = f"{base}_code"
        top = (1 << info.width) - 1
        self.tables.append(ir.Table(code_table, (ir.Key(info.name, info.width, "range"),), (f"set_code_{code_name}",),
                                    f"set_code_{code_name}", (0,), role="code", attribute=info.name))
        self.control.append(code_table)
        for i, lo in enumerate(bounds):
            hi = bounds[i + 1] - 1 if i + 1 < len(bounds) else top
            if i:  # code 0 is the default action's
                self.entries.append(ir.Entry(code_table, (ir.Range(lo, hi),), f"set_code_{code_name}", (i,), 1))
        self.attributes[info.name].update(code_width=code_width, code_field=code_field, code_table=code_table)
        code_of = {lo: i for i, lo in enumerate(bounds)}
        upper = {lo: (bounds[i + 1] - 1 if i + 1 < len(bounds) else top) for i, lo in enumerate(bounds)}
        key = ir.Key(code_field, code_width, "range")
        self.tables.append(ir.Table(base, (state_key, key), self.transition_actions(), "NoAction", on_miss=miss,
                                    role="field", attribute=info.name))
        self.tables.append(ir.Table(miss, (state_key,), self.transition_actions(), "NoAction", role="miss",
                                    attribute=info.name))
        self.control.append(base)
        for node in nodes:
            edges = self.labelled(node)
            default = self.default_child(edges, "range")
            s = self.state(node)
            for lo, hi, child in edges:
                if child != default:
                    last = max(b for b in bounds if b <= hi)
                    assert upper[last] == hi
                    self.add(base, (ir.Exact(s), ir.Range(code_of[lo], code_of[last])), child, priority=1)
            if default != self.no_entry:
                self.add(miss, (ir.Exact(s),), default)

    def add(self, table: str, matches: tuple, target: int, priority: int = 0) -> None:
        child, emitted = self.targets[target]
        if emitted:
            self.entries.append(ir.Entry(table, matches, self.named("set_state_ports"),
                                         (self.state(child), self.bitmap(emitted)), priority))
        else:
            self.entries.append(ir.Entry(table, matches, self.named("set_state"), (self.state(child),), priority))

    # -- leaves -----------------------------------------------------------------------------
    def leaf_tables(self) -> tuple[ir.MulticastGroup, ...]:
        leaves = [(self.state(n), self.d.leaves[n]) for n in self.state_of if n in self.d.leaves]
        if self.no_match_call:
            leaves = [(s, a if not a.is_empty else ActionSet(calls=frozenset({(self.no_match_call, ())})))
                      for s, a in leaves]
        bitmap = self.delivery is not None
        port_sets = [] if bitmap else sorted({tuple(sorted(a.ports)) for _, a in leaves if len(a.ports) > 1})
        group_of = {ports: i + 1 for i, ports in enumerate(port_sets)}
        state_key = ir.Key(self.state_field, self.state_width, "exact")
        calls = sorted({name for _, a in leaves for name, _ in a.calls})
        if calls and self.lane:
            raise CompileError("user-action calls must all be in lane 0")
        for name in calls:
            table = f"call_{sanitize(name)}"
            self.tables.append(ir.Table(table, (state_key,), (f"user_{sanitize(name)}", "NoAction"), "NoAction", role="call"))
            self.control.append(table)
        leaf = self.named("leaf_actions")
        if bitmap:  # the ports are ORed in on the edges: a leaf keeps only what a rule with calls also forwards to
            if any(a.ports for _, a in leaves):
                self.tables.append(ir.Table(leaf, (state_key,), (self.named("or_ports"), "NoAction"), "NoAction",
                                            role="leaf"))
                self.control.append(leaf)
        else:
            self.tables.append(ir.Table(leaf, (state_key,), ("forward", "multicast", "drop_packet"), "drop_packet",
                                        role="leaf"))
            self.control.append(leaf)
        for state, actions in sorted(leaves):
            self.leaf_entries(state, actions, group_of)
        return tuple(ir.MulticastGroup(group_of[p], p) for p in port_sets)

    def leaf_entries(self, state: int, actions: ActionSet, group_of: dict[tuple[int, ...], int]) -> None:
        """The entries of one leaf state (with the spec's no-match call already in ``actions``):
        its ports (a port, a multicast group from ``group_of``, or port bits) and its calls."""
        leaf = self.named("leaf_actions")
        ports = tuple(sorted(actions.ports))
        if self.delivery is not None:
            if ports:
                self.entries.append(ir.Entry(leaf, (ir.Exact(state),), self.named("or_ports"),
                                             (sum(1 << self._bit_index[p] for p in ports),)))
        elif len(ports) == 1:
            self.entries.append(ir.Entry(leaf, (ir.Exact(state),), "forward", ports))
        elif ports:
            self.entries.append(ir.Entry(leaf, (ir.Exact(state),), "multicast", (group_of[ports],)))
        by_name: dict[str, list[tuple[int, ...]]] = {}
        for name, args in actions.calls:
            by_name.setdefault(name, []).append(args)
        for name, arg_lists in by_name.items():
            if len(arg_lists) > 1:
                raise CompileError(f"rules call {name}() with different arguments {sorted(arg_lists)} and can match "
                                   "the same packet; a switch can run one call of an action per packet")
            self.entries.append(ir.Entry(f"call_{sanitize(name)}", (ir.Exact(state),), f"user_{sanitize(name)}",
                                         arg_lists[0]))

    def action_defs(self) -> tuple[ir.Action, ...]:
        state = ir.Param("state", self.state_width)
        set_state = ir.Primitive("set_meta", (self.state_field, "state"))
        out = [ir.Action("NoAction"), ir.Action(self.named("set_state"), (state,), (set_state,))]
        if self.delivery is None:
            out += [
                ir.Action("forward", (ir.Param("port", PORT_WIDTH),), (ir.Primitive("set_egress_port", ("port",)),)),
                ir.Action("multicast", (ir.Param("group", GROUP_WIDTH),), (ir.Primitive("set_mcast_group", ("group",)),)),
                ir.Action("drop_packet", (), (ir.Primitive("drop"),)),
            ]
        else:
            ports = ir.Param("ports", self.delivery.width)
            or_ports = ir.Primitive("or_meta", (self.delivery.fields[self.lane], "ports"))
            out.append(ir.Action(self.named("set_state_ports"), (state, ports), (set_state, or_ports)))
            if any(t.role == "leaf" for t in self.tables):
                out.append(ir.Action(self.named("or_ports"), (ports,), (or_ports,)))
        for meta in self.metadata[1:]:
            suffix = meta.name.removeprefix("meta.p4sub_code_")
            out.append(ir.Action(f"set_code_{suffix}", (ir.Param("code", meta.width),),
                                 (ir.Primitive("set_meta", (meta.name, "code")),)))
        for table in self.tables:
            if table.role == "call":
                name = table.actions[0].removeprefix("user_")
                decl = self.spec.actions.get(name) if self.spec else None
                widths = decl.arg_widths if decl else ()
                params = tuple(ir.Param(f"arg{i}", w) for i, w in enumerate(widths))
                out.append(ir.Action(table.actions[0], params, (ir.Primitive("user", (name,)),)))
        return tuple(out)


def ortc(edges: Sequence[tuple[int, int, int]], width: int, prefer: int | None = None) -> tuple[int, list[tuple[int, int, int]]]:
    """The fewest longest-prefix-match entries that map every value to its edge's child (ORTC).

    Draves et al.'s Optimal Routing Table Constructor on the binary trie of the partition: bottom-up,
    a block's candidate labels are the intersection of its halves' candidates when that is non-empty,
    else their union; top-down, a block gets an entry only when its parent's label is not among its
    candidates. Returns the root label (the default, ``prefer`` when possible) and the entries
    ``(value, prefix_len, child)``. Cost: O(edges x width).
    """
    starts = [lo for lo, _, _ in edges]

    def uniform(lo: int, hi: int) -> int | None:
        i = bisect.bisect_right(starts, lo) - 1
        return edges[i][2] if edges[i][1] >= hi else None

    # Bottom-up: candidate sets for mixed blocks only (uniform blocks are {child}).
    cand: dict[tuple[int, int], frozenset[int]] = {}

    def up(lo: int, plen: int) -> frozenset[int]:
        hi = lo + (1 << (width - plen)) - 1
        u = uniform(lo, hi)
        if u is not None:
            return frozenset([u])
        half = 1 << (width - plen - 1)
        a, b = up(lo, plen + 1), up(lo + half, plen + 1)
        s = (a & b) or (a | b)
        cand[(lo, plen)] = s
        return s

    root_set = up(0, 0)
    root = prefer if prefer in root_set else min(root_set)
    out: list[tuple[int, int, int]] = []

    def down(lo: int, plen: int, inherited: int) -> None:
        hi = lo + (1 << (width - plen)) - 1
        u = uniform(lo, hi)
        s = frozenset([u]) if u is not None else cand[(lo, plen)]
        label = inherited
        if inherited not in s:
            label = min(s)
            out.append((lo, plen, label))
        if u is None:
            half = 1 << (width - plen - 1)
            down(lo, plen + 1, label)
            down(lo + half, plen + 1, label)

    down(0, 0, root)
    return root, out


def pipeline_stats(pipeline: ir.Pipeline, seconds: float) -> dict:
    """The figures ``stats.json`` reports: entries per table, bits, groups, states, time."""
    per_table = Counter(e.table for e in pipeline.entries)
    params = {a.name: sum(p.width for p in a.params) for a in pipeline.actions}
    key_bits = {t.name: sum(k.width for k in t.keys) for t in pipeline.tables}
    bits = 0
    for e in pipeline.entries:
        bits += key_bits[e.table] + params.get(e.action, 0)
    state_width = next(m.width for m in pipeline.metadata if m.name == ir.STATE)
    lane_entries = Counter()
    lane_depth = Counter()
    coded = set()
    for t in pipeline.tables:
        lane_entries[t.lane] += per_table.get(t.name, 0)
        if t.role == "field":
            lane_depth[t.lane] += 1
        elif t.role == "code":  # code tables read only the packet: they all fit in the first stage
            coded.add(t.lane)
    for lane in coded:
        lane_depth[lane] += 1
    for lane in {t.lane for t in pipeline.tables if t.role in ("leaf", "call")}:
        lane_depth[lane] += 1  # leaf and call tables read the final state, side by side
    return {
        "tables": {t.name: per_table.get(t.name, 0) for t in pipeline.tables},
        "total_entries": len(pipeline.entries),
        "table_bits": bits,
        "multicast_groups": len(pipeline.multicast_groups),
        "states": pipeline.states,
        "state_width": state_width,
        "field_order": list(pipeline.field_order),
        "match_kinds": {name: a["match_kind"] for name, a in pipeline.attributes.items()},
        "delivery": pipeline.delivery.kind,
        "bitmap_ports": len(pipeline.delivery.ports),
        "lanes": pipeline.lanes,
        "lane_entries": [lane_entries[i] for i in range(pipeline.lanes)],
        # Tables that depend on each other's result, in the longest lane: a lower bound on stages.
        "dependent_tables": max(lane_depth.values(), default=0),
        "compile_seconds": round(seconds, 4),
    }


def leaf_action_set(pipeline: ir.Pipeline, entry: ir.Entry) -> ActionSet:
    """The ports a leaf-table entry sends to (for explain and tests)."""
    if entry.action == "forward":
        return ActionSet(frozenset(entry.args))
    if entry.action == "multicast":
        group = next(g for g in pipeline.multicast_groups if g.id == entry.args[0])
        return ActionSet(frozenset(group.ports))
    return ActionSet()


def node_slicer(diagram: Diagram, spec: Spec | None, options: TableOptions, lane: int, delivery: ir.Delivery,
                state_of: dict[int, int]) -> _Slicer:
    """A slicer that makes entries node by node (:meth:`_Slicer.node_entries`, :meth:`_Slicer.leaf_entries`)
    over state ids the caller keeps stable across updates (:mod:`compiler.incremental`): the same
    entries a full compile makes for a node, so that both paths install the same way."""
    return _Slicer(diagram, spec, options, "p4sub", lane, delivery, state_of)
