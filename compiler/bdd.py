"""The multi-terminal decision diagram of a rule set (Camus §5.2), ordered by field.

Camus orders BDD variables by field, then by threshold. All the threshold tests of one field that
follow each other on a path form a chain that splits the field's domain into intervals; we store
that chain as one multi-way node whose out-edges are disjoint intervals ``(lo, hi, child)``
covering the domain. This is the same diagram with the chains collapsed, and each node becomes one
state of the field's table (Algorithm 2) directly. The three reductions of §5.2 hold by construction:
(i) isomorphic nodes are shared through a unique table; (ii) a node whose edges all lead to the same
child is not created; (iii) a test implied or contradicted by the path cannot occur, because a field
is split at most once per path and each edge's interval already carries the path's constraint.
Leaves are :class:`~compiler.dnf.ActionSet` s (multi-terminal).

**Outputs on edges** (``emit=True``). A leaf that is a *set* of actions multiplies the outcomes of
independent attributes: ``a > 5: fwd(1)`` and ``b > 7: fwd(2)`` in one diagram need a node per
combination of what has already matched. When the ports a packet gets are a union that can be
built up along the way (a port bitmap ORed by each table), a rule whose constraints are all decided
does not need to be carried to a leaf: its ports are *emitted* on the edge that decides it, and the
nodes below only remember the rules still undecided. Thirty one-constraint rules over ten attributes
then need one node per attribute instead of one per combination. Calls of user actions still go to
leaves (their conflicts are decided per leaf).

Construction sweeps each field's interval endpoints once per node and memoises children on the
*set* of rule residuals still alive, identified by an order-independent 128-bit sum of random keys
that is updated as the sweep enters and leaves intervals, so a set is only built when it is new.
Cost is O(sum over nodes of their edges x log) plus the size of the distinct sets; never a walk of
the diagram as a tree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from compiler.base import CompileError, limits
from compiler.dnf import DEFAULT_LIMIT, ActionSet, Cube, rule_actions, to_dnf
from compiler.predicates import IntervalSet
from compiler.rules import TypedRules, validity
from compiler.rules import memo as filter_memo
from compiler.spec import QueryField

Edge = tuple[int, int, int]  # lo, hi, child node id


@dataclass(frozen=True)
class Node:
    """An inner node: the field at ``level`` is split into ``edges`` (sorted, covering the domain)."""

    level: int
    edges: tuple[Edge, ...]
    emits: tuple[int, ...] = ()  # with outputs on edges: per edge, an index into Diagram.emissions


def edge_count(diagram: "Diagram") -> int:
    """Edges of the reachable diagram: about the entries its tables need (the search's cost)."""
    return sum(len(diagram.nodes[n].edges) for n in diagram.reachable() if n in diagram.nodes)


@dataclass
class Diagram:
    """A reduced, ordered decision diagram. Node ids are indexes; ``leaves`` map leaf ids to action sets."""

    fields: list[QueryField]
    nodes: dict[int, Node] = field(default_factory=dict)
    leaves: dict[int, ActionSet] = field(default_factory=dict)
    root: int = -1
    # Outputs on edges: port sets emitted on edges (index 0 is the empty set).
    emit: bool = False
    emissions: list[frozenset[int]] = field(default_factory=lambda: [frozenset()])
    work: int = field(default=0, compare=False)  # rule visits its build took (a search bounds candidates by it)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def is_leaf(self, node: int) -> bool:
        return node in self.leaves

    def child(self, node: int, value: int) -> int:
        return self.nodes[node].edges[self.edge_index(node, value)][2]

    def edge_index(self, node: int, value: int) -> int:
        edges = self.nodes[node].edges
        lo, hi = 0, len(edges) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if edges[mid][0] <= value:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def evaluate(self, values: dict[str, int]) -> ActionSet:
        """Follow one packet (attribute name -> integer value) to its leaf; the union of what it
        gets there and on the way (outputs on edges). A header validity field left out of
        ``values`` is 1 (the packet carries the header), as in the reference model."""
        node = self.root
        ports: set[int] = set()
        while node not in self.leaves:
            n = self.nodes[node]
            name = self.fields[n.level].name
            i = self.edge_index(node, values[name] if name in values or not validity.is_validity(name) else 1)
            if n.emits:
                ports |= self.emissions[n.emits[i]]
            node = n.edges[i][2]
        return self.leaves[node] | ActionSet(frozenset(ports)) if ports else self.leaves[node]

    def reachable(self) -> list[int]:
        """Node and leaf ids reachable from the root, in breadth-first order by level (root first)."""
        seen = {self.root}
        order = [self.root]
        i = 0
        while i < len(order):
            node = order[i]
            i += 1
            if node in self.nodes:
                for _, _, child in self.nodes[node].edges:
                    if child not in seen:
                        seen.add(child)
                        order.append(child)
        position = {n: i for i, n in enumerate(order)}
        inner = sorted((n for n in order if n in self.nodes), key=lambda n: (self.nodes[n].level, position[n]))
        return inner + [n for n in order if n in self.leaves]

    def path_count(self) -> int:
        """Root-to-leaf paths that give the packet something: the size of the one-big-table baseline (Fig. 12)."""
        useful: dict[int, int] = {}
        total: dict[int, int] = {}
        for node in reversed(self.reachable()):
            if node in self.leaves:
                useful[node], total[node] = (0 if self.leaves[node].is_empty else 1), 1
            else:
                n = self.nodes[node]
                emits = n.emits or (0,) * len(n.edges)
                useful[node] = sum(total[c] if e else useful[c] for (_, _, c), e in zip(n.edges, emits))
                total[node] = sum(total[c] for _, _, c in n.edges)
        return useful[self.root]


def default_field_order(cubes: Sequence[Cube], fields: dict[str, QueryField]) -> list[str]:
    """Fewest distinct predicates first, exact-only fields before the others, then spec order.

    Few distinct predicates near the root keep the upper levels narrow; exact fields early let the
    widest tables be the cheap exact ones (Camus §5.2 "field ordering").
    """
    distinct: dict[str, set[IntervalSet]] = {name: set() for name in fields}
    for cube in cubes:
        for name, s in cube:
            distinct[name].add(s)
    spec_order = {name: i for i, name in enumerate(fields)}

    def exact_only(name: str) -> bool:
        return all(len(s.intervals) == 1 and s.intervals[0][0] == s.intervals[0][1] for s in distinct[name])

    used = [n for n in fields if distinct[n] and not validity.is_validity(n)]
    order = sorted(used, key=lambda n: (not exact_only(n), fields[n].match_kind == "lpm", len(distinct[n]), spec_order[n]))
    # Header validity first: the tables fold those 1-bit levels into one table, one stage
    # (compiler.tables), and the fields below see only the protocols the packet carries.
    return [v for v in fields if validity.is_validity(v) and distinct[v]] + order


def build(typed: TypedRules, *, field_order: Sequence[str] | None = None, dnf_limit: int = DEFAULT_LIMIT,
          seed: int = 0, emit: bool = False, rules: Sequence[int] | None = None, max_edges: int | None = None,
          extra_work: int = 0) -> Diagram:
    """Compile checked rules into a reduced ordered diagram.

    ``emit``: ports on edges (see the module docstring). ``rules``: indexes of the rules to compile
    (a lane), all by default.
    """
    return build_cubes(rule_cubes(typed, dnf_limit, rules), typed.match_fields, field_order=field_order, seed=seed,
                       emit=emit, max_edges=max_edges, extra_work=extra_work)


def rule_cubes(typed: TypedRules, dnf_limit: int = DEFAULT_LIMIT,
               rules: Sequence[int] | None = None) -> list[tuple[Cube, tuple]]:
    """Each rule's DNF cubes with its atomic actions (the input of :func:`build_cubes`).

    A cube also requires the validity fields of the headers its rule reads (:mod:`compiler.rules.validity`).
    """
    cubes: list[tuple[Cube, tuple]] = []
    all_rules = typed.rules.rules
    valid = IntervalSet.of(1, 1, 1)
    shared = filter_memo.memo(typed.spec)
    # A filter's cubes depend on the infos of the fields it tests: kept per set of infos.
    infos = shared.intern(tuple(typed.fields.items())) if shared is not None else None
    for i in (range(len(all_rules)) if rules is None else rules):
        if not i % 1024:
            limits.checkpoint()
        rule = all_rules[i]
        actions = _atomic_actions(rule)
        required = typed.rule_validity[i] if typed.rule_validity else ()
        dnf = (to_dnf(rule, typed.fields, dnf_limit) if shared is None else
               shared.get("dnf", rule.filter, lambda: to_dnf(rule, typed.fields, dnf_limit), dnf_limit, infos))
        for cube in dnf:
            if required:
                cube = tuple(sorted(cube + tuple((name, valid) for name in required)))
            cubes.append((cube, actions))
    return cubes


WORK_PER_EDGE = 64  # with an edge limit, rule visits allowed per edge of that limit
#: With an edge limit, rule visits allowed per input cube on top (a diagram is at least a sweep of
#: its cubes: a tight limit, such as the best candidate's few edges, still lets a candidate that
#: would be as small finish).
WORK_PER_CUBE = 2


class DiagramTooLarge(CompileError):
    """Raised when a diagram passes ``max_edges`` edges (a search abandons that candidate)."""


def build_cubes(cubes: list[tuple[Cube, tuple]], fields: dict[str, QueryField], *,
                field_order: Sequence[str] | None = None, seed: int = 0, emit: bool = False,
                max_edges: int | None = None, extra_work: int = 0, max_work: int | None = None) -> Diagram:
    """The diagram of ``cubes``. With ``max_edges``, :class:`DiagramTooLarge` past that many edges,
    or past ``WORK_PER_EDGE`` rule visits per edge of it plus ``WORK_PER_CUBE`` per cube plus
    ``extra_work`` (a search lets a candidate spend about what the best one so far spent), or past
    ``max_work`` visits when that is less (a probe that is worth only a cheap try)."""
    order = _resolve_order(field_order, [c for c, _ in cubes], fields)
    return _Builder([fields[n] for n in order], seed, emit, max_edges, extra_work, max_work).run(cubes)


def _atomic_actions(rule) -> tuple:
    """A rule's actions as atoms, ("port", p) and ("call", (name, args)), which leaves take unions of."""
    out = []
    for a in rule.actions:
        kind = type(a).__name__
        if kind == "Forward":
            out.extend(("port", p) for p in a.ports)
        elif kind == "Call":
            out.extend(("call", c) for c in rule_actions(rule).calls)
    return tuple(dict.fromkeys(out))


def _resolve_order(field_order: Sequence[str] | None, cubes: list[Cube], fields: dict[str, QueryField]) -> list[str]:
    """The order to build in: ``field_order`` first (the rest in the default order), header validity
    fields always ahead of the others (the tables fold them into one stage: compiler.tables)."""
    auto = default_field_order(cubes, fields)
    if not field_order:
        return auto
    unknown = [f for f in field_order if f not in fields]
    if unknown:
        raise CompileError(f"--field-order names {', '.join(unknown)}, which no rule tests "
                           f"(fields tested: {', '.join(fields) or 'none'})")
    used = set(auto)  # a lane tests only some fields: the order keeps those
    order = [f for f in field_order if f in used] + [f for f in auto if f not in field_order]
    return [f for f in order if validity.is_validity(f)] + [f for f in order if not validity.is_validity(f)]


class _Builder:
    def __init__(self, fields: list[QueryField], seed: int, emit: bool = False, max_edges: int | None = None,
                 extra_work: int = 0, max_work: int | None = None) -> None:
        self.max_edges = max_edges
        self.edge_count = 0
        self.work = 0
        # Rule visits allowed with max_edges (run() adds the cubes' share).
        self.work_limit = WORK_PER_EDGE * max_edges + extra_work if max_edges is not None else 0
        self.max_work = max_work
        self.fields = fields
        self.levels = len(fields)
        self.emit = emit
        self.diagram = Diagram(fields, emit=emit)
        self._emission_ids: dict[int, int] = {0: 0}  # emitted ports as a bitmap over _bit_of -> id
        self._bit_of: dict[int, int] = {}  # port -> its bit in the builder's emission bitmaps
        self._port_of: list[int] = []
        self._unique: dict[object, int] = {}
        self._rng = random.Random(seed)
        # Per level: residual (constraint at this level, ids of next-level objects) and its random key.
        self._residuals: list[dict[tuple, int]] = [dict() for _ in range(self.levels)]
        self._names = [f.name for f in fields]
        self._level_of = {name: i for i, name in enumerate(self._names)}
        self._tails: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}  # see _tail
        self._res_cons: list[list[IntervalSet | None]] = [[] for _ in range(self.levels)]
        self._res_next: list[list[tuple[int, ...]]] = [[] for _ in range(self.levels)]
        # With outputs on edges: per level, the ports of each object that is decided (no constraint
        # left below it, port actions only), else None. Level ``levels`` holds the action items.
        self._pure: list[list[tuple[int, ...] | None]] = [[] for _ in range(self.levels + 1)]
        # With outputs on edges: per level, the ports each object could still give, as a bitmap over
        # _bit_of, complemented (negative) when it could also call a user action (see _sweep, "given").
        self._reach: list[list[int]] = [[] for _ in range(self.levels + 1)]
        self._keys: list[list[int]] = []
        self._memo: list[dict[tuple[int, int], int]] = [dict() for _ in range(self.levels + 1)]
        self._items: dict[object, int] = {}
        self._item_values: list[tuple] = []
        self._arrays: tuple[np.ndarray, ...] | None = None  # see _last_level_arrays
        self._item_sets: dict[int, tuple[frozenset[int], int]] = {}  # see _item_set_leaf
        self._must: dict[int, int] = {}  # node -> the ports every path through it gives (see _sweep)

    # -- interning ---------------------------------------------------------------------------
    def _item(self, item: tuple) -> int:
        """An atomic action, ("port", p) or ("call", (name, args)), as an object id past the last level."""
        idx = self._items.get(item)
        if idx is None:
            idx = self._items[item] = len(self._item_values)
            self._item_values.append(item)
            self._pure[self.levels].append((item[1],) if item[0] == "port" else None)
            self._reach[self.levels].append(1 << self._port_bit(item[1]) if item[0] == "port" else ~0)
        return idx

    def _residual(self, level: int, cube: dict[str, IntervalSet], items: tuple[int, ...]) -> tuple[int, ...]:
        """Ids of the level-``level`` objects a cube stands for (a residual, or action items past the end).

        Interned bottom up, as a walk from the last level would (so ids come in the same order); the
        levels below the cube's last constraint are the same for every cube with these items and
        are looked up at once (:meth:`_tail`)."""
        if level == self.levels:
            return items
        level_of = self._level_of
        deepest = level - 1
        for name in cube:
            lv = level_of.get(name)
            if lv is not None and lv > deepest:
                deepest = lv
        nxt = self._tail(items, deepest + 1)
        names = self._names
        intern = self._intern
        for lv in range(deepest, level - 1, -1):
            nxt = intern(lv, cube.get(names[lv]), nxt)
        return nxt

    def _tail(self, items: tuple[int, ...], level: int) -> tuple[int, ...]:
        """The level-``level`` objects of an unconstrained residual chain down to ``items``."""
        if level >= self.levels:
            return items
        key = (level, items)
        found = self._tails.get(key)
        if found is None:
            found = self._tails[key] = self._intern(level, None, self._tail(items, level + 1))
        return found

    def _intern(self, level: int, cons: IntervalSet | None, nxt: tuple[int, ...]) -> tuple[int, ...]:
        """The level-``level`` residual (``cons``, then the objects ``nxt``), as a one-id tuple."""
        key = (cons, nxt)
        idx = self._residuals[level].get(key)
        if idx is None:
            idx = self._residuals[level][key] = len(self._res_cons[level])
            self._res_cons[level].append(cons)
            self._res_next[level].append(nxt)
            if self.emit and len(nxt) == 1:  # the usual case above the last level: one object below
                o = nxt[0]
                self._pure[level].append(self._pure[level + 1][o] if cons is None or cons.is_full else None)
                self._reach[level].append(self._reach[level + 1][o])
            elif self.emit:
                below = [self._pure[level + 1][o] for o in nxt]
                decided = (cons is None or cons.is_full) and all(b is not None for b in below)
                self._pure[level].append(tuple(sorted({p for b in below for p in b})) if decided else None)
                reach, calls = 0, False
                for o in nxt:
                    r = self._reach[level + 1][o]
                    calls |= r < 0
                    reach |= ~r if r < 0 else r
                self._reach[level].append(~reach if calls else reach)
        return (idx,)

    def _port_bit(self, port: int) -> int:
        """``port``'s bit in emission and reach bitmaps."""
        b = self._bit_of.get(port)
        if b is None:
            b = self._bit_of[port] = len(self._bit_of)
        return b

    def _draw_keys(self) -> None:
        """One random 128-bit key per object of every level, drawn in a fixed order (deterministic)."""
        sizes = [len(c) for c in self._res_cons] + [len(self._item_values)]
        self._keys = []
        for n in sizes:
            blob = self._rng.randbytes(16 * n)
            self._keys.append([int.from_bytes(blob[i:i + 16], "little") for i in range(0, 16 * n, 16)])

    def _leaf(self, actions: ActionSet) -> int:
        key = ("leaf", actions)
        node = self._unique.get(key)
        if node is None:
            node = self._unique[key] = len(self._unique)
            self.diagram.leaves[node] = actions
        return node

    def _node(self, level: int, edges: list[Edge], emits: list[int] | None = None) -> int:
        node_edges, emitted = merge_edges(edges, emits)
        if len(node_edges) == 1 and emitted[0] == 0:
            return node_edges[0][2]  # reduction (ii); a node that emits is kept, or its outputs would be lost
        node_emits = emitted if self.emit else ()
        key = (level, node_edges, node_emits)
        node = self._unique.get(key)
        if node is None:  # reduction (i)
            node = self._unique[key] = len(self._unique)
            self.diagram.nodes[node] = Node(level, node_edges, node_emits)
            self.edge_count += len(node_edges)
            if self.max_edges is not None and self.edge_count > self.max_edges:
                raise DiagramTooLarge(f"the diagram passed {self.max_edges} edges")
        return node

    def _emission(self, bitmap: int) -> int:
        """The id of the port set whose bit indexes (:attr:`_bit_of`) are set in ``bitmap``."""
        found = self._emission_ids.get(bitmap)
        if found is None:
            port_of = self._port_of
            if len(port_of) < len(self._bit_of):
                port_of.extend(sorted(self._bit_of, key=self._bit_of.get)[len(port_of):])
            ports = frozenset(port_of[i] for i in range(bitmap.bit_length()) if bitmap >> i & 1)
            found = self._emission_ids[bitmap] = len(self.diagram.emissions)
            self.diagram.emissions.append(ports)
        return found

    # -- construction ------------------------------------------------------------------------
    def run(self, cubes: list[tuple[Cube, tuple]]) -> Diagram:
        roots: set[int] = set()
        item = self._item
        self.work_limit += WORK_PER_CUBE * len(cubes)
        if self.max_edges is not None and self.max_work is not None:
            self.work_limit = min(self.work_limit, self.max_work)
        for cube, actions in cubes:
            items = tuple(item(a) for a in actions)
            if not items:
                continue  # a rule that only drops changes no leaf
            roots.update(self._residual(0, dict(cube), items))
        self._draw_keys()
        self.diagram.root = self._build(0, frozenset(roots))
        self.diagram.work = self.work
        return self.diagram

    def _build(self, level: int, objs: frozenset[int], hsum: int | None = None, given: int = 0) -> int:
        """The node over ``objs``; ``given``: ports the path to it has already emitted, among those
        ``objs`` could give (the node may leave them out: see :meth:`_sweep`)."""
        if hsum is None:
            keys = self._keys[level]
            hsum = sum(keys[o] for o in objs)
        memo_key = (len(objs), hsum, given)
        hit = self._memo[level].get(memo_key)
        if hit is not None:
            return hit
        result = self._compute(level, objs, given)
        self._memo[level][memo_key] = result
        return result

    def _compute(self, level: int, objs: frozenset[int], given: int = 0) -> int:
        if level == self.levels:
            values = [self._item_values[o] for o in objs]
            return self._leaf(ActionSet(frozenset(v for k, v in values if k == "port"),
                                        frozenset(v for k, v in values if k == "call")))
        if not objs:
            return self._build(self.levels, objs, 0)
        edges, emits = self._sweep(level, objs, 0, (1 << self.fields[level].width) - 1, given)
        return self._node(level, edges, emits)

    def _sweep(self, level: int, objs: frozenset[int] | set[int], start: int,
               stop: int, given: int = 0) -> tuple[list[Edge], list[int] | None]:
        """The edges a node over ``objs`` has on ``[start, stop]`` of its field, children built
        (and with outputs on edges, the emission of each edge; else None). A full node sweeps the
        whole domain; an incremental update (:mod:`compiler.incremental`) sweeps only the span of
        the root whose rules changed, with intervals clipped to it.

        **Given ports** (outputs on edges). A packet's ports are the union of what its path emits,
        so a port the path has already emitted need not be emitted again, and a rule that could give
        only such ports need not be carried below. ``given`` holds the ports emitted above this node
        (among those its objects could give); each edge leaves them out of its emission and drops
        from its child the objects whose ports are all given above or on the edge. Without it, rules
        that share ports (the few ports of a routed switch) made nodes for every combination of
        redundant rules still open: the diagram of a fat tree's core switch at 300 Siena filters
        was built through 148k nodes for 2.7k states. The child's memo key holds what is given of
        its objects' ports, so a node is always built for the same given ports."""
        cons, nxt = self._res_cons[level], self._res_next[level]
        top = stop
        clip = start > 0 or stop < (1 << self.fields[level].width) - 1
        # Work per node grows with the rules it carries: bound that too, not only the edges made.
        self.work += len(objs)
        limits.checkpoint()  # the compile's time and memory budget (compiler.base.limits)
        if self.max_edges is not None and self.work > self.work_limit:
            raise DiagramTooLarge(f"the diagram passed {self.work_limit} rule visits "
                                  f"before {self.max_edges} edges")
        if (level == self.levels - 1 and not self.emit and not clip and len(objs) >= _VECTOR_MIN
                and self.fields[level].width <= _VECTOR_WIDTH):
            edges = self._last_level_edges(objs, top)
            if edges is not None:
                return edges, None
        pure = self._pure[level + 1] if self.emit else None
        reach = self._reach[level + 1]
        # Per reach bitmap of the undecided objects: [how many, their hash sum] (see "given ports").
        by_reach: dict[int, list[int]] | None = {} if self.emit else None
        counts: dict[int, int] = {}  # undecided objects of the next level (they make the child)
        hsum = 0  # their hash sum
        decided: dict[int, int] = {}  # with outputs on edges: decided objects (emitted on the edge)
        port_count: dict[int, int] = {}  # how many decided objects give each port (by bit index)
        emitted = [0]  # the ports the decided objects give, as a bitmap over _bit_of
        events: list[tuple[int, int, int]] = []
        keys = self._keys[level + 1]
        bit_of = self._bit_of

        def decide(o: int, delta: int) -> None:
            n = decided.get(o, 0) + delta
            if n:
                decided[o] = n
                if not (n == 1 and delta == 1):
                    return
            else:
                del decided[o]
            for p in pure[o]:  # the object starts or stops giving its ports
                b = bit_of.get(p)
                if b is None:
                    b = bit_of[p] = len(bit_of)
                c = port_count.get(b, 0) + delta
                port_count[b] = c
                if c == 0:
                    emitted[0] &= ~(1 << b)
                elif c == 1 and delta == 1:
                    emitted[0] |= 1 << b

        for r in objs:
            c = cons[r]
            if c is None or c.is_full:
                for o in nxt[r]:
                    if pure is not None and pure[o] is not None:
                        decide(o, 1)
                        continue
                    n = counts.get(o, 0)
                    if n == 0:
                        hsum += keys[o]
                        if by_reach is not None:
                            _count_in(by_reach, reach[o], keys[o], 1)
                    counts[o] = n + 1
            else:
                for lo, hi in c.intervals:
                    if clip:
                        if hi < start or lo > stop:
                            continue
                        lo, hi = max(lo, start), min(hi, stop)
                    events.append((lo, 1, r))
                    if hi < top:
                        events.append((hi + 1, -1, r))
        if not events and not decided:
            return [(start, stop, self._child(level + 1, counts, hsum, given, by_reach))], [0] if self.emit else None
        events.sort()
        edges: list[Edge] = []
        emits: list[int] = []
        pos, i, n_events = start, 0, len(events)
        memo = self._memo[level + 1]
        while pos <= top:
            while i < n_events and events[i][0] == pos:
                _, delta, r = events[i]
                i += 1
                for o in nxt[r]:
                    if pure is not None and pure[o] is not None:
                        decide(o, delta)
                        continue
                    n = counts.get(o, 0) + delta
                    if n == 0:
                        del counts[o]
                        hsum -= keys[o]
                        if by_reach is not None:
                            _count_in(by_reach, reach[o], keys[o], -1)
                    else:
                        if n == 1 and delta == 1:
                            hsum += keys[o]
                            if by_reach is not None:
                                _count_in(by_reach, reach[o], keys[o], 1)
                        counts[o] = n
            end = events[i][0] - 1 if i < n_events else top
            gives = emitted[0]
            if given or gives:
                child = self._child(level + 1, counts, hsum, given | gives, by_reach)
            else:
                child = memo.get((len(counts), hsum, 0))
                if child is None:
                    child = self._build(level + 1, frozenset(counts), hsum)
            if pure is not None:
                hoisted = self._must_of(child) & ~(given | gives)
                if hoisted:  # every path below gives these: the edge gives them, the child need not
                    gives |= hoisted
                    child = self._child(level + 1, counts, hsum, given | gives, by_reach)
                fresh = gives & ~given
                emits.append(self._emission(fresh) if fresh else 0)
            edges.append((pos, end, child))
            pos = end + 1
        return edges, emits if self.emit else None

    def _must_of(self, node: int) -> int:
        """The ports (a bitmap over :attr:`_bit_of`) that every path from ``node`` gives, emitted on
        its edges or at its leaves. An edge above that gives them itself makes the child smaller,
        and siblings that differed only in where those ports were emitted become one edge."""
        found = self._must.get(node)
        if found is not None:
            return found
        d = self.diagram
        if node in d.leaves:
            found = 0
            for p in d.leaves[node].ports:
                found |= 1 << self._port_bit(p)
        else:
            n = d.nodes[node]
            found = -1
            for i, (_, _, child) in enumerate(n.edges):
                edge = self._must_of(child)
                if n.emits and n.emits[i]:
                    for p in d.emissions[n.emits[i]]:
                        edge |= 1 << self._port_bit(p)
                found &= edge
                if not found:
                    break
        self._must[node] = found
        return found

    def _child(self, level: int, counts: dict[int, int], hsum: int, given: int,
               by_reach: dict[int, list[int]] | None) -> int:
        """The node over the undecided objects ``counts`` (hash sum ``hsum``) below an edge whose
        path has emitted ``given``: without the objects that could give only given ports, and with
        what is given of the others' ports (:meth:`_sweep`, "given ports")."""
        if not given or by_reach is None or len(by_reach) > MAX_REACH_GROUPS:
            given = 0  # nothing to leave out (or too many port sets to check per edge: built whole)
        size, kept, full = len(counts), 0, given
        if given:
            for r, (n, h) in by_reach.items():
                if r >= 0 and not r & ~full:
                    size -= n
                    hsum -= h
                else:
                    kept |= ~r if r < 0 else r
            given = full & kept
        child = self._memo[level].get((size, hsum, given))
        if child is not None:
            return child
        if size == len(counts):
            return self._build(level, frozenset(counts), hsum, given)
        reach = self._reach[level]
        objs = frozenset(o for o in counts if reach[o] < 0 or reach[o] & ~full)
        return self._build(level, objs, hsum, given)


    def _last_level_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per residual of the last level: its interval (the whole domain when unconstrained), the
        bitmask of its action items, and whether it fits that form (one interval, items below 63).
        The field is at most _VECTOR_WIDTH bits wide, so positions fit numpy's int64."""
        level = self.levels - 1
        cons, nxt = self._res_cons[level], self._res_next[level]
        cached = self._arrays
        if cached is not None and len(cached[0]) == len(cons):
            return cached
        top = (1 << self.fields[level].width) - 1
        n = len(cons)
        lo, hi = np.zeros(n, dtype=np.int64), np.full(n, top, dtype=np.int64)
        mask, simple = np.zeros(n, dtype=np.uint64), np.ones(n, dtype=bool)
        for r in range(n):
            c = cons[r]
            if c is not None and not c.is_full:
                if len(c.intervals) != 1:
                    simple[r] = False
                    continue
                lo[r], hi[r] = c.intervals[0]
            if any(o >= 63 for o in nxt[r]):
                simple[r] = False
                continue
            mask[r] = sum(1 << o for o in set(nxt[r]))
        self._arrays = (lo, hi, mask, simple)
        return self._arrays

    def _last_level_edges(self, objs: frozenset[int] | set[int], top: int) -> list[Edge] | None:
        """:meth:`_sweep` of a last-level node over the whole domain, with numpy: the same edges
        and the same leaves, built in the same order. A last-level node over m residuals costs
        O(m log m) either way, but this node is built for every interval of the level above (a
        core switch's 95k rules make 9,825 of them over 3.4M residuals in all), and in numpy the
        constant is several times smaller. None when a residual does not fit (several intervals,
        or more than 62 action items): the caller sweeps in Python."""
        lo_all, hi_all, mask_all, simple_all = self._last_level_arrays()
        idx = np.fromiter(objs, dtype=np.int64, count=len(objs))
        if not simple_all[idx].all():
            return None
        lo, hi, mask = lo_all[idx], hi_all[idx], mask_all[idx]
        nbits = int(mask.max()).bit_length() if len(mask) else 0
        bits = ((mask[:, None] >> np.arange(nbits, dtype=np.uint64)) & np.uint64(1)).astype(np.int64)
        leaving = hi < top
        positions = np.concatenate((lo, hi[leaving] + 1))
        deltas = np.concatenate((bits, -bits[leaving]))
        order = np.argsort(positions, kind="stable")
        positions, deltas = positions[order], deltas[order]
        starts, first = np.unique(positions, return_index=True)
        active = np.cumsum(np.add.reduceat(deltas, first, axis=0), axis=0) > 0
        sets = active @ (1 << np.arange(nbits, dtype=np.uint64)) if nbits else np.zeros(len(starts), dtype=np.uint64)
        if starts[0] > 0:  # below every interval: no item
            starts, sets = np.concatenate(([0], starts)), np.concatenate((np.zeros(1, dtype=sets.dtype), sets))
        # Neighbours with the same items lead to the same leaf, and _node merges them anyway.
        change = np.ones(len(sets), dtype=bool)
        change[1:] = sets[1:] != sets[:-1]
        bounds = starts[change].tolist() + [top + 1]
        return [(bounds[i], bounds[i + 1] - 1, self._item_set_leaf(bitmap))
                for i, bitmap in enumerate(sets[change].tolist())]

    def _item_set_leaf(self, bitmap: int) -> int:
        """The leaf of the action items whose ids are set in ``bitmap`` (through the memo, as the sweep)."""
        found = self._item_sets.get(bitmap)
        if found is None:
            items = frozenset(o for o in range(bitmap.bit_length()) if bitmap >> o & 1)
            keys = self._keys[self.levels]
            found = self._item_sets[bitmap] = (items, sum(keys[o] for o in items))
        items, hsum = found
        child = self._memo[self.levels].get((len(items), hsum, 0))
        return child if child is not None else self._build(self.levels, items, hsum)


#: An edge checks the given ports (:meth:`_Builder._sweep`) only while its child's objects have at most
#: this many distinct port sets (a routed switch has a few ports; a lone switch may have hundreds).
MAX_REACH_GROUPS = 64


def _count_in(by_reach: dict[int, list[int]], reach: int, key: int, delta: int) -> None:
    """Add (``delta`` 1) or remove (-1) one object with this reach bitmap and random key."""
    group = by_reach.get(reach)
    if group is None:
        group = by_reach[reach] = [0, 0]
    group[0] += delta
    group[1] += delta * key
    if not group[0]:
        del by_reach[reach]


#: Last-level nodes over fewer residuals are swept in Python (numpy's per-call cost would dominate).
_VECTOR_MIN = 48
_VECTOR_WIDTH = 62


def iter_paths(diagram: Diagram) -> Iterator[tuple[list[tuple[str, int, int]], ActionSet]]:
    """Every root-to-leaf path as (field, lo, hi) constraints and what it gives (its leaf, and the
    outputs emitted on the way); exponential, for small inputs."""
    def walk(node: int, path: list[tuple[str, int, int]], got: ActionSet):
        if node in diagram.leaves:
            yield list(path), diagram.leaves[node] | got
            return
        n = diagram.nodes[node]
        for i, (lo, hi, child) in enumerate(n.edges):
            path.append((diagram.fields[n.level].name, lo, hi))
            emitted = diagram.emissions[n.emits[i]] if n.emits else frozenset()
            yield from walk(child, path, got | ActionSet(emitted) if emitted else got)
            path.pop()
    yield from walk(diagram.root, [], ActionSet())


def merge_edges(edges: list[Edge], emits: list[int] | None) -> tuple[tuple[Edge, ...], tuple[int, ...]]:
    """A node's edges with adjacent edges to the same child (and the same emission) merged, and their
    emissions (0 where none). Shared by the builder and the incremental one, so both reduce a node the
    same way."""
    merged: list[list[int]] = []
    for i, (lo, hi, child) in enumerate(edges):
        e = emits[i] if emits else 0
        if merged and merged[-1][2] == child and merged[-1][3] == e:
            merged[-1][1] = hi
        else:
            merged.append([lo, hi, child, e])
    return tuple((a, b, c) for a, b, c, _ in merged), tuple(e for _, _, _, e in merged)
