"""Read one lane of a compiled pipeline back into the decision diagram it was sliced from.

The incremental path must start from what is installed, not from a fresh build that might number
states differently: a later delta names the old pipeline's state ids. The entries hold the whole
diagram (Camus Algorithm 2 is invertible): a state with entries in field table ``l`` is a node of
level ``l`` whose edges are its entries' intervals (longest prefix first for lpm and ternary) and
whose other values go to its miss entry's target, or, with no miss entry, to the empty leaf (the
state keeps its value, matches nothing further and gets nothing, as the empty leaf does). A state
with leaf or call entries, or that is a target without entries of its own, is a leaf.

Header validity bits folded into one table (:meth:`compiler.tables._Slicer.validity_stage`: keys
the state and every bit, one entry per assignment) are the first levels, and only the root has
entries there: they are unfolded into the root at level 0 and reduced inner nodes below it, which
have fresh ids and no states (the table passes through them; :class:`~compiler.incremental.lane.Lane`
never gives them entries), leading to the states the entries name.

Node ids are the state ids (the empty leaf, when no entry names it, gets a fresh id past them);
emitted port sets come back from the ``set_state_ports`` bitmaps. What cannot be read back with
certainty raises :class:`~compiler.incremental.fallback.Fallback`: compressed domains (their code
tables are shared by all nodes of a level), a state in two levels, two states with one structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler import ir
from compiler.bdd import Diagram, Node
from compiler.dnf import ActionSet
from compiler.incremental.fallback import Fallback
from compiler.spec import QueryField

NO_ENTRY = -1  # a value no entry matches: the empty leaf, nothing emitted


@dataclass
class Level:
    """One field stage of a lane: its field, match kind and the two tables."""

    field: QueryField
    kind: str
    table: str
    miss: str


@dataclass
class LaneImage:
    levels: list[Level]
    diagram: Diagram  # node ids = state ids
    state_of: dict[int, int]  # reachable node -> state id
    entries: dict[int, list[ir.Entry]]  # state id -> its entries (field and miss, or leaf and call)
    empty_leaf: int  # node id of the empty leaf (it may have no state: nothing names it)
    next_id: int  # node ids from here on are free
    fold_end: int = 0  # levels 0..fold_end-1: header validity folded into one table (0: none)
    tables: dict[str, ir.Table] = field(default_factory=dict)  # the lane's tables by name


def _interval(match: ir.Match, width: int) -> tuple[int, int, int]:
    """(lo, hi, prefix length or -1) of a field key's match."""
    top = (1 << width) - 1
    if isinstance(match, ir.Exact):
        return match.value, match.value, -1
    if isinstance(match, ir.Range):
        return match.lo, match.hi, -1
    if isinstance(match, ir.Lpm):
        free = (1 << (width - match.prefix_len)) - 1
        lo = match.value & ~free & top
        return lo, lo | free, match.prefix_len
    plen = bin(match.mask).count("1")
    lo = match.value & match.mask
    if match.mask != top ^ ((1 << (width - plen)) - 1):
        raise Fallback("a ternary entry that is not a prefix")
    return lo, lo | (top ^ match.mask), plen


def _partition(intervals: list[tuple[int, int, int, object]], default: object, top: int,
               prefixes: bool) -> list[tuple[int, int, object]]:
    """The value partition entries make: disjoint intervals (exact, range) or nested prefixes (the
    longest wins), every other value going to ``default``. Adjacent equal targets are merged."""
    out: list[list] = []

    def emit(lo: int, hi: int, target: object) -> None:
        if lo > hi:
            return
        if out and out[-1][2] == target and out[-1][1] + 1 == lo:
            out[-1][1] = hi
        else:
            out.append([lo, hi, target])

    if not prefixes:
        pos = 0
        for lo, hi, _, target in sorted(intervals, key=lambda t: t[0]):
            if lo < pos:
                raise Fallback("overlapping entries of one state")
            emit(pos, lo - 1, default)
            emit(lo, hi, target)
            pos = hi + 1
        emit(pos, top, default)
        return [tuple(e) for e in out]
    # Nested prefixes: sweep the boundaries with a stack of the open prefixes (innermost on top).
    ordered = sorted(intervals, key=lambda t: (t[0], -(t[1] - t[0])))
    bounds = sorted({0} | {lo for lo, _, _, _ in ordered} | {hi + 1 for _, hi, _, _ in ordered if hi < top})
    stack: list[tuple[int, int, int, object]] = []
    i = 0
    for j, b in enumerate(bounds):
        while stack and stack[-1][1] < b:
            stack.pop()
        while i < len(ordered) and ordered[i][0] == b:
            stack.append(ordered[i])
            i += 1
        end = bounds[j + 1] - 1 if j + 1 < len(bounds) else top
        emit(b, end, stack[-1][3] if stack else default)
    return [tuple(e) for e in out]


def read_lane(pipeline: ir.Pipeline, lane: int, fields: dict[str, QueryField],
              no_match_call: str | None) -> LaneImage:
    """Lane ``lane`` of ``pipeline`` as a diagram (see the module docstring). ``fields``: the
    diagram fields by name (the typed rules' match fields)."""
    prefix = ir.lane_prefix(lane)
    roles = ("field", "miss", "leaf", "call", "code")
    tables = {t.name: t for t in pipeline.tables if t.lane == lane and t.role in roles}
    if any(t.role == "code" for t in tables.values()):
        raise Fallback("a compressed field domain (its code table is shared by every node of the level)")
    by_table: dict[str, list[ir.Entry]] = {name: [] for name in tables}
    for e in pipeline.entries:
        if e.table in by_table:
            by_table[e.table].append(e)
    levels: list[Level] = []
    fold_end = 0
    for name in pipeline.control:
        t = tables.get(name)
        if t is not None and t.role == "field":
            names = t.attribute.split(",")
            for f in names:
                if f not in fields:
                    raise Fallback(f"the pipeline matches {f}, which the rules do not test")
            if len(names) > 1:  # compiler.tables.validity_stage: several levels in one table, no miss table
                if levels:
                    raise Fallback(f"header validity folded into one table ({t.attribute}) below the first stage")
                fold_end = len(names)
                levels += [Level(fields[f], "exact", t.name, "") for f in names]
            else:
                levels.append(Level(fields[t.attribute], t.keys[1].match_kind, t.name, t.on_miss or ""))
    set_state, set_ports = prefix + "set_state", prefix + "set_state_ports"
    delivery = pipeline.delivery
    emissions: list[frozenset[int]] = [frozenset()]
    emission_of: dict[frozenset[int], int] = {frozenset(): 0}

    emission_of_bitmap: dict[int, int] = {}

    def target(e: ir.Entry) -> tuple[int, int]:
        if e.action == set_state:
            return e.args[0], 0
        if e.action == set_ports:
            found = emission_of_bitmap.get(e.args[1])
            if found is None:
                ports = delivery.ports_of(e.args[1])
                if ports not in emission_of:
                    emission_of[ports] = len(emissions)
                    emissions.append(ports)
                found = emission_of_bitmap[e.args[1]] = emission_of[ports]
            return e.args[0], found
        raise Fallback(f"entry action {e.action} in a field table")

    entries: dict[int, list[ir.Entry]] = {}
    level_of: dict[int, int] = {}
    edges_of: dict[int, list] = {}
    default_of: dict[int, tuple[int, int]] = {}
    folded: dict[int, dict[tuple[int, ...], tuple[int, int]]] = {}  # state -> validity bits -> target
    for e in by_table.get(levels[0].table, ()) if fold_end else ():
        s = e.matches[0].value
        level_of[s] = 0
        entries.setdefault(s, []).append(e)
        folded.setdefault(s, {})[tuple(m.value for m in e.matches[1:])] = target(e)
    for l, lv in enumerate(levels):
        if l < fold_end:
            continue
        for table in (lv.table, lv.miss):
            for e in by_table.get(table, ()):
                s = e.matches[0].value
                if level_of.setdefault(s, l) != l:
                    raise Fallback(f"state {s} has entries in two field stages")
                entries.setdefault(s, []).append(e)
                if table == lv.table:
                    lo, hi, plen = _interval(e.matches[1], lv.field.width)
                    edges_of.setdefault(s, []).append((lo, hi, plen, target(e)))
                else:
                    default_of[s] = target(e)
    # Leaves: what the leaf and call tables give each state.
    leaf_ports: dict[int, frozenset[int]] = {}
    leaf_calls: dict[int, set[tuple[str, tuple[int, ...]]]] = {}
    groups = {g.id: frozenset(g.ports) for g in pipeline.multicast_groups}
    for name, t in tables.items():
        if t.role not in ("leaf", "call"):
            continue
        user = None
        if t.role == "call":
            body = pipeline.action(t.actions[0]).body
            user = body[0].args[0]
        for e in by_table[name]:
            s = e.matches[0].value
            if s in level_of:
                raise Fallback(f"state {s} is both a node and a leaf")
            entries.setdefault(s, []).append(e)
            if user is not None:
                leaf_calls.setdefault(s, set()).add((user, tuple(e.args)))
            elif e.action == "forward":
                leaf_ports[s] = frozenset(e.args)
            elif e.action == "multicast":
                leaf_ports[s] = groups[e.args[0]]
            else:  # or_ports
                leaf_ports[s] = delivery.ports_of(e.args[0])
    targets = {t[0] for s in edges_of for *_, t in edges_of[s]} | {t[0] for t in default_of.values()}
    targets |= {t[0] for bits in folded.values() for t in bits.values()}
    leaf_states = (set(leaf_ports) | set(leaf_calls) | targets) - set(level_of)
    d = Diagram([lv.field for lv in levels], emit=delivery.is_bitmap)
    d.emissions = emissions
    empty: int | None = None
    for s in leaf_states:
        calls = frozenset(leaf_calls.get(s, ()))
        if no_match_call and calls == {(no_match_call, ())} and not leaf_ports.get(s):
            calls = frozenset()  # the spec's @query_default_action: the empty leaf's call
        actions = ActionSet(leaf_ports.get(s, frozenset()), calls)
        if actions.is_empty:
            if empty is not None:
                raise Fallback("two leaf states without actions")
            empty = s
        d.leaves[s] = actions
    next_id = max([0, *level_of, *leaf_states]) + 1
    if empty is None:
        empty, next_id = next_id, next_id + 1
        d.leaves[empty] = ActionSet()
    seen: set = set()
    for s, assignment in folded.items():
        next_id = _unfold(d, s, assignment, fold_end, None if no_match_call else (empty, 0), next_id)
    for s, l in level_of.items():
        if s in folded:
            continue
        width = levels[l].field.width
        default = default_of.get(s, (empty, 0) if not no_match_call else None)
        if default is None:
            raise Fallback(f"state {s} has no miss entry under @query_default_action")
        part = _partition(edges_of.get(s, []), default, (1 << width) - 1, levels[l].kind in ("lpm", "ternary"))
        node = Node(l, tuple((lo, hi, t[0]) for lo, hi, t in part), tuple(t[1] for _, _, t in part) if d.emit else ())
        if len(node.edges) < 2 and not any(node.emits):
            raise Fallback(f"state {s} has a single transition")
        key = (node.level, node.edges, node.emits)
        if key in seen:
            raise Fallback("two states with the same transitions")
        seen.add(key)
        d.nodes[s] = node
    if 0 not in d.nodes or d.nodes[0].level != 0:
        raise Fallback("the root state is not a node of the first field stage")
    d.root = 0
    missing = [s for s in targets if s not in d.nodes and s not in d.leaves]
    if missing:
        raise Fallback(f"entries lead to state {missing[0]}, which has nothing")
    real = set(level_of) | leaf_states
    reachable = d.reachable()
    state_of = {n: n for n in reachable if n in real}
    if len(state_of) != len(real):
        raise Fallback("entries of states that the root does not reach")
    return LaneImage(levels, d, state_of, {s: entries.get(s, []) for s in state_of.values()}, empty, next_id,
                     fold_end, tables)


def _unfold(d: Diagram, s: int, assignment: dict[tuple[int, ...], tuple[int, int]], k: int,
            default: tuple[int, int] | None, next_id: int) -> int:
    """State ``s``'s folded validity entries (bits -> (node below the run, emitted set)) back into
    nodes of levels 0..k-1: ``s`` at level 0, and below it reduced nodes with fresh ids from
    ``next_id`` (returned past them). These inner nodes have no state: the table never names them.
    The ports a path emits go on its last edge that differs (any placement merges to the same
    entries, :meth:`compiler.tables._Slicer.validity_entries`)."""
    made: dict[tuple, int] = {}

    def below(level: int, bits: tuple[int, ...]) -> tuple[int, int]:
        nonlocal next_id
        if level == k:
            found = assignment.get(bits, default)
            if found is None:
                raise Fallback(f"state {s} has no entry for validity bits {bits} under @query_default_action")
            return found
        a, b = below(level + 1, bits + (0,)), below(level + 1, bits + (1,))
        if a == b:
            return a  # the bit does not matter here: the path skips the level
        key = (level, ((0, 0, a[0]), (1, 1, b[0])), (a[1], b[1]) if d.emit else ())
        node = made.get(key)
        if node is None:
            node = made[key] = next_id
            next_id += 1
            d.nodes[node] = Node(*key)
        return node, 0

    a, b = below(1, (0,)), below(1, (1,))
    # The root stays at level 0 even when its first bit does not matter (a root below it is entered
    # all the same; its entries walk the run either way): one edge then.
    edges, emits = (((0, 1, a[0]),), (a[1],)) if a == b else (((0, 0, a[0]), (1, 1, b[0])), (a[1], b[1]))
    d.nodes[s] = Node(0, edges, emits if d.emit else ())
    return next_id
