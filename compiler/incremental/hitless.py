"""A hitless update plan: the writes that take a switch from one pipeline's entries to another's
so that, after every single write, each packet is forwarded exactly as by the old pipeline or
exactly as by the new one (issue 16 item 2; Balogh's thesis, Alg. 7: new states beside the old
ones, then the root, then the old ones removed).

Why it is needed: an update (``delta.json``, or a diff) reuses freed state ids and modifies
entries in place, so a switch that applies it entry by entry is seen half-done: a packet can take
an old edge into a state whose entries are already the new ones, and land nowhere.

The plan, per walk (each lane, and each message slot of a Tofino batched program, is its own walk
from state 0 over its own state field, ``meta.p4sub_state...``):

1. *groups*: the new multicast groups, at ids the old entries never name;
2. *shadow*: every state whose meaning changes (its entries differ, or a state or group below it
   changed) is written afresh at an id the old pipeline does not use (a *shadow* id when its own id
   is taken in the old pipeline), pointing at shadow copies below it: unreachable until the root
   points at it, so these writes may land in any order;
3. *root*: the root (state 0) is the one state whose id cannot move: the walk starts there. Its
   entries in every table of the chain act as one priority list (an earlier table's hit wins over
   a later one; within a table the higher priority, the longer prefix), so the new root entries are
   written from the highest slot down (inserts and modifies), then the old ones deleted from the
   lowest slot up. After each write a packet's winning root entry is either its old winner
   (leading into old states, all still present) or its new winner (leading into complete new
   states): old or new, never a mix;
4. *retire*: the old states nothing reaches any more, then the old groups;
5. *restore* (only when shadow ids were used): the shadowed states and groups are written again at
   the ids the new pipeline gives them (free now), every entry that names a shadow is pointed at
   its final copy (the same behaviour either way), and the shadows deleted. The switch then holds
   exactly the new pipeline's entries, so that the next update (``compile --update``) starts from
   what the switch holds.

Writes within a :class:`Step` may be applied in any order (one P4Runtime or BF Runtime batch);
steps must be applied one after the other. Tables must have room for both versions of what
changes: the plan says when one does not (:class:`HitlessError`). With several lanes, each lane
flips on its own: a packet is old or new in each lane, and a rule that stays in its lane loses no
packet; the whole packet is old or new when one lane changes (an incremental update changes one
lane per added or removed rule). An update that changes several lanes is planned through the
pipeline of the old rules plus the added ones (:func:`plan_through`): then no packet misses a port
that both versions want, whichever lane flips first. A pipeline of message stacks judges each
message on its pass.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable

from compiler import ir
from compiler.base import P4subError
from compiler.incremental.delta import entry_key, same_program

INSERT, MODIFY, DELETE = "insert", "modify", "delete"
#: In a ``compile --update`` output: the pipeline of the old rules plus the added ones, for plan_through.
MID = "mid.pipeline.json"
GROUP_ID_LIMIT = 1 << 16
TAIL_ROLES = ("leaf", "call", "keep")


class HitlessError(P4subError):
    """The update cannot be installed hitlessly (the install may still be made atomic, not hitless)."""


@dataclass(frozen=True)
class Write:
    """One write: an entry or a multicast group inserted, modified (``previous``: what it was) or deleted."""

    op: str
    item: ir.Entry | ir.MulticastGroup
    previous: ir.Entry | ir.MulticastGroup | None = None

    @property
    def is_group(self) -> bool:
        return isinstance(self.item, ir.MulticastGroup)


@dataclass(frozen=True)
class Step:
    """Writes that may land in any order; ``phase`` names the plan's part (module docstring)."""

    phase: str
    writes: tuple[Write, ...]


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    shadow_states: int = 0
    shadow_groups: int = 0
    peak: dict[str, int] = field(default_factory=dict)  # table -> most entries it holds during the update

    @property
    def writes(self) -> int:
        return sum(len(s.writes) for s in self.steps)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for s in self.steps:
            out[s.phase] += len(s.writes)
        return {"steps": len(self.steps), "writes": self.writes, "shadow_states": self.shadow_states,
                "shadow_groups": self.shadow_groups, **out}

    def to_json(self) -> dict:
        return {"steps": [{"phase": s.phase, "writes": [
            {"op": w.op, "group" if w.is_group else "entry": ir.to_json(w.item),
             **({"previous": ir.to_json(w.previous)} if w.previous is not None else {})} for w in s.writes]}
            for s in self.steps], "counts": self.counts()}


# -- how the tables name states and groups ------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """Where each table keeps the state (key index) and where each action names a state or a group."""

    state_key: dict[str, int]  # table -> index of its walk's state key
    lane_of: dict[str, str]  # table -> the state field of its walk (a lane's, a message slot's)
    state_arg: dict[str, int]  # action -> index of the argument it sets the state to
    group_arg: dict[str, int]  # action -> index of the multicast group argument
    chain: dict[str, int]  # table -> its position in the walk (a table before its on_miss table)
    rank_kind: dict[str, str]  # table -> "priority", "lpm" or "exact"
    width: dict[str, int]  # state field -> width
    tail: frozenset[str]  # the tables after the field stages (leaf, calls): all applied, none first-hit-wins


def _layout(p: ir.Pipeline) -> _Layout:
    state_key, lane_of, width = {}, {}, {}
    for t in p.tables:
        for i, k in enumerate(t.keys):
            if k.field.startswith(ir.STATE) and k.match_kind == "exact":
                state_key[t.name], lane_of[t.name], width[k.field] = i, k.field, k.width
    state_fields = set(width)
    state_arg, group_arg = {}, {}
    for a in p.actions:
        params = [q.name for q in a.params]
        for prim in a.body:
            if prim.op == "set_meta" and prim.args[0] in state_fields:
                state_arg[a.name] = params.index(prim.args[1])
            elif prim.op == "set_mcast_group":
                group_arg[a.name] = params.index(prim.args[0])
    tables = {t.name: t for t in p.tables}
    chain: dict[str, int] = {}
    for name in p.control:
        while name and name not in chain:
            chain[name] = len(chain)
            name = tables[name].on_miss
    rank_kind = {t.name: "priority" if t.needs_priority else "lpm" if any(k.match_kind == "lpm" for k in t.keys)
                 else "exact" for t in p.tables}
    tail = frozenset(t.name for t in p.tables if t.role in TAIL_ROLES)
    return _Layout(state_key, lane_of, state_arg, group_arg, chain, rank_kind, width, tail)


class _Side:
    """One pipeline's entries by (lane, state), and the states and groups it uses."""

    def __init__(self, p: ir.Pipeline, lay: _Layout) -> None:
        self.by_state: dict[tuple[str, int], list[ir.Entry]] = defaultdict(list)
        self.stateless: set[ir.Entry] = set()
        self.ids: dict[str, set[int]] = defaultdict(lambda: {0})
        for e in p.entries:
            i = lay.state_key.get(e.table)
            if i is None:
                self.stateless.add(e)
                continue
            lane = lay.lane_of[e.table]
            s = e.matches[i].value
            self.by_state[lane, s].append(e)
            self.ids[lane].add(s)
            if e.action in lay.state_arg:
                self.ids[lane].add(e.args[lay.state_arg[e.action]])
        self.groups = {g.id: tuple(g.ports) for g in p.multicast_groups}

    def content(self, lane: str, s: int) -> frozenset:
        return frozenset(self.by_state.get((lane, s), ()))


def plan(old: ir.Pipeline, new: ir.Pipeline, reserved_groups: Iterable[int] = ()) -> Plan:
    """The hitless plan from ``old``'s entries and groups to ``new``'s (see the module docstring).

    ``reserved_groups``: group ids the target uses itself (never taken for a shadow group).
    Raises :class:`HitlessError` when the programs differ, a table without a state key changes, the
    state width or a table's size leaves no room for both versions, or the root changes in two
    tables at its end of the walk (leaf and calls) at once."""
    if not same_program(old, new):
        raise HitlessError("the new pipeline needs another program (tables, widths or sizes differ): a new program "
                           "cannot be installed hitlessly on a running one")
    lay = _layout(new)
    c, d = _side(old, lay), _side(new, lay)
    if c.stateless != d.stateless:
        changed = sorted({e.table for e in c.stateless ^ d.stateless})
        raise HitlessError(f"entries of {', '.join(changed)} change, and those tables are not keyed by a state: "
                           "no shadow copy can stand beside them")
    lanes = sorted(set(lay.lane_of.values()))
    group_dirty = {g: c.groups.get(g) != ports for g, ports in d.groups.items()}

    dirty: dict[tuple[str, int], bool] = {}

    def is_dirty(lane: str, s: int) -> bool:
        key = (lane, s)
        if key not in dirty:
            mine = d.by_state.get(key, [])
            theirs = c.by_state.get(key, [])
            # Equal lists are equal contents (an incremental update hands unchanged entries over as the
            # very objects, so this is a pass of identity checks); else compared as sets, as before.
            changed = mine != theirs and frozenset(mine) != frozenset(theirs)
            dirty[key] = (s not in c.ids[lane] or changed
                          or any(is_dirty(lane, t) for t in _children(mine, lay))
                          or any(group_dirty.get(g, True) for g in _groups(mine, lay)))
        return dirty[key]

    sigma: dict[tuple[str, int], int] = {}
    for lane in lanes:
        taken = c.ids[lane] | d.ids[lane]
        free = (i for i in range(1, 1 << lay.width[lane]) if i not in taken)
        for s in sorted(d.ids[lane]):
            if s == 0 or not is_dirty(lane, s):
                continue
            if s not in c.ids[lane]:
                sigma[lane, s] = s
                continue
            shadow = next(free, None)
            if shadow is None:
                need = sum(1 for t in d.ids[lane] if t and is_dirty(lane, t) and t in c.ids[lane])
                raise HitlessError(f"{lane}: its {lay.width[lane]}-bit state holds {1 << lay.width[lane]} ids; "
                                   f"the old and new pipelines use {len(taken)} and {need} changed states need a "
                                   "shadow id: compile with a wider state (p4sub compile --state-bits N)")
            sigma[lane, s] = shadow
    gsigma: dict[int, int] = {}
    gtaken = set(c.groups) | set(d.groups) | set(reserved_groups) | {0}
    gfree = (i for i in range(1, GROUP_ID_LIMIT) if i not in gtaken)
    for g in sorted(d.groups):
        if group_dirty[g]:
            shadow = g if g not in c.groups else next(gfree, None)
            if shadow is None:
                raise HitlessError("no free multicast group id for a shadow group")
            gsigma[g] = shadow

    def render(e: ir.Entry, lane: str, final: bool = False) -> ir.Entry:
        """``e`` of the new pipeline at shadow ids (its own state's too unless ``final``)."""
        i = lay.state_key[e.table]
        matches = e.matches
        s = matches[i].value
        if not final and s != 0 and (lane, s) in sigma:
            matches = matches[:i] + (ir.Exact(sigma[lane, s]),) + matches[i + 1:]
        args = list(e.args)
        if e.action in lay.state_arg:
            j = lay.state_arg[e.action]
            args[j] = sigma.get((lane, args[j]), args[j])
        if e.action in lay.group_arg:
            j = lay.group_arg[e.action]
            args[j] = gsigma.get(args[j], args[j])
        return replace(e, matches=matches, args=tuple(args))

    steps: list[Step] = []

    def step(phase: str, writes: Iterable[Write]) -> None:
        writes = tuple(writes)
        if writes:
            steps.append(Step(phase, writes))

    step("groups", (Write(INSERT, ir.MulticastGroup(gsigma[g], d.groups[g])) for g in sorted(gsigma)))
    step("shadow", (Write(INSERT, render(e, lane)) for (lane, s), es in sorted(d.by_state.items())
                    if s != 0 and is_dirty(lane, s) for e in es))
    for lane in lanes:
        steps.extend(_root_steps(c.by_state.get((lane, 0), []), [render(e, lane) for e in d.by_state.get((lane, 0), [])],
                                 lay, lane))
    retired = [(lane, s) for (lane, s) in sorted(c.by_state) if s != 0 and (s not in d.ids[lane] or is_dirty(lane, s))]
    step("retire", (Write(DELETE, e, e) for key in retired for e in c.by_state[key]))
    step("retire", (Write(DELETE, ir.MulticastGroup(g, ports), ir.MulticastGroup(g, ports))
                    for g, ports in sorted(c.groups.items()) if g not in d.groups or group_dirty[g]))
    moved = {k: v for k, v in sigma.items() if k[1] != v}
    gmoved = {g: v for g, v in gsigma.items() if g != v}
    if moved or gmoved:
        step("restore", (Write(INSERT, ir.MulticastGroup(g, d.groups[g])) for g in sorted(gmoved)))
        step("restore", (Write(INSERT, e) for (lane, s) in sorted(moved) for e in d.by_state[lane, s]))
        step("restore", (Write(MODIFY, e, render(e, lane)) for (lane, s), es in sorted(d.by_state.items())
                         if (s == 0 or (lane, s) in sigma) and (lane, s) not in moved
                         for e in es if render(e, lane) != e))
        step("restore", (Write(DELETE, render(e, lane), render(e, lane)) for (lane, s) in sorted(moved)
                         for e in d.by_state[lane, s]))
        step("restore", (Write(DELETE, ir.MulticastGroup(v, d.groups[g]), ir.MulticastGroup(v, d.groups[g]))
                         for g, v in sorted(gmoved.items())))
    out = Plan(steps, len(moved), len(gmoved))
    out.peak = _peak(old, steps)
    sizes = {t.name: t.size for t in new.tables}
    full = {t: n for t, n in out.peak.items() if n > sizes.get(t, n)}
    if full:
        raise HitlessError("no room for the old and new entries side by side: " + ", ".join(
            f"{t} would hold {n} entries (size {sizes[t]})" for t, n in sorted(full.items()))
            + "; compile with room to spare (TableOptions.headroom) or install atomically")
    return out


def plan_through(old: ir.Pipeline, mid: ir.Pipeline, new: ir.Pipeline, reserved_groups: Iterable[int] = ()) -> Plan:
    """The hitless plan from ``old`` to ``new`` by way of ``mid``, the pipeline of the old rules
    plus the added ones (an incremental session's ``update(add=...)`` before its
    ``update(remove=...)``), for an update that changes several lanes.

    Why: the lanes flip one by one, so a rule that moves from one lane to another (a removed rule
    in lane 1, its replacement in lane 2) could see lane 1 flip first and a port both versions want
    go missing. From ``old`` to ``mid`` every lane only gains rules, from ``mid`` to ``new`` it
    only loses them: whatever the order of the flips, a packet goes to at least the ports of one
    version and to none that neither wants."""
    first, second = plan(old, mid, reserved_groups), plan(mid, new, reserved_groups)
    peak = dict(first.peak)
    for table, n in second.peak.items():
        peak[table] = max(n, peak.get(table, 0))
    return Plan(first.steps + second.steps, first.shadow_states + second.shadow_states,
                first.shadow_groups + second.shadow_groups, peak)


#: The sides of the last plan's pipelines: a process that plans update after update (``p4sub serve``)
#: plans from the pipeline it planned to last time. Each is kept with its pipeline (so that its id
#: names it) and its layout (equal layouts index entries alike).
_SIDES: list[tuple[ir.Pipeline, _Layout, _Side]] = []


def _side(p: ir.Pipeline, lay: _Layout) -> _Side:
    for q, l, side in _SIDES:
        if q is p and l == lay:
            return side
    side = _Side(p, lay)
    _SIDES.append((p, lay, side))
    del _SIDES[:-2]
    return side


def changed_lanes(old: ir.Pipeline, new: ir.Pipeline) -> set[str]:
    """The walks (lanes, message slots) whose entries differ: more than one, and the direct plan
    keeps only what a rule that stays in its lane wants (see :func:`plan_through`)."""
    lay = _layout(new)
    return {lay.lane_of[e.table] for e in set(old.entries) ^ set(new.entries) if e.table in lay.lane_of}


def _children(entries: Iterable[ir.Entry], lay: _Layout) -> set[int]:
    return {e.args[lay.state_arg[e.action]] for e in entries if e.action in lay.state_arg}


def _groups(entries: Iterable[ir.Entry], lay: _Layout) -> set[int]:
    return {e.args[lay.group_arg[e.action]] for e in entries if e.action in lay.group_arg}


def _slot(e: ir.Entry, lay: _Layout) -> tuple[int, int]:
    """Where ``e`` stands in the root's one priority list: earlier tables first, then higher rank."""
    kind = lay.rank_kind[e.table]
    if kind == "priority":
        rank = e.priority
    elif kind == "lpm":
        rank = next(m.prefix_len for m in e.matches if isinstance(m, ir.Lpm))
    else:
        rank = 0
    return lay.chain.get(e.table, len(lay.chain)), -rank  # tables outside the ingress chain come after it


def _root_steps(old: list[ir.Entry], new: list[ir.Entry], lay: _Layout, lane: str) -> list[Step]:
    """The root's writes: new versions from the highest slot down, then old ones from the lowest up,
    one step per slot (entries of one slot of one state never overlap)."""
    before = {entry_key(e): e for e in old}
    after = {entry_key(e): e for e in new}
    ups: dict[tuple, list[Write]] = defaultdict(list)
    for k, e in after.items():
        prev = before.get(k)
        if prev is None:
            ups[_slot(e, lay)].append(Write(INSERT, e))
        elif (prev.action, prev.args) != (e.action, e.args):
            ups[_slot(e, lay)].append(Write(MODIFY, e, prev))
    downs: dict[tuple, list[Write]] = defaultdict(list)
    for k, e in before.items():
        if k not in after:
            downs[_slot(e, lay)].append(Write(DELETE, e, e))
    tail = {w.item.table for ws in [*ups.values(), *downs.values()] for w in ws} & lay.tail
    if len(tail) > 1:
        raise HitlessError(f"{lane}: the root state's entries change in {', '.join(sorted(tail))} at once, at the "
                           "end of the walk, where no single write flips them together")
    return ([Step("root", tuple(ups[s])) for s in sorted(ups)]
            + [Step("root", tuple(downs[s])) for s in sorted(downs, reverse=True)])


def _peak(old: ir.Pipeline, steps: list[Step]) -> dict[str, int]:
    count: dict[str, int] = defaultdict(int)
    for e in old.entries:
        count[e.table] += 1
    peak = dict(count)
    for s in steps:
        for w in s.writes:
            if not w.is_group and w.op != MODIFY:
                count[w.item.table] += 1 if w.op == INSERT else -1
        for t, n in count.items():
            peak[t] = max(peak.get(t, 0), n)
    return peak


def apply(entries: dict[tuple, ir.Entry], groups: dict[int, tuple[int, ...]], w: Write) -> None:
    """Apply one write to a switch's entries (keyed by :func:`entry_key`) and groups, checking it is valid."""
    if w.is_group:
        g = w.item
        if w.op == INSERT:
            if g.id in groups:
                raise ValueError(f"group {g.id} exists")
            groups[g.id] = tuple(g.ports)
        elif w.op == DELETE:
            if groups.pop(g.id, None) is None:
                raise ValueError(f"group {g.id} missing")
        else:
            if g.id not in groups:
                raise ValueError(f"group {g.id} missing")
            groups[g.id] = tuple(g.ports)
        return
    k = entry_key(w.item)
    if w.op == INSERT:
        if k in entries:
            raise ValueError(f"entry {k} exists")
        entries[k] = w.item
    elif w.op == DELETE:
        if entries.pop(k, None) is None:
            raise ValueError(f"entry {k} missing")
    else:
        if k not in entries:
            raise ValueError(f"entry {k} missing")
        entries[k] = w.item
