"""Ground truth for replay: the ports each message should reach, computed from the rules alone.

Replay judges a compiled pipeline by comparing what it delivers with what the subscriptions ask
for. :func:`compiler.oracle.evaluate` answers that for one message, in Python, rule by rule; on a
trace of ten million messages and a hundred thousand rules that is out of reach. This module
answers the same question for a whole batch with numpy, and shares no code with the compiler's
normalisation (no DNF, no interval sets, no diagram): it reads the rule AST directly and uses only
:mod:`compiler.rules.values` for constants, the one encoding every part of p4sub must agree on.

How a batch is evaluated without testing every rule on every message:

* A rule's filter is split at a top-level ``or`` into *terms*; a message is wanted by the rule's
  ports when any term holds (the union semantics of the rules makes the split exact).
* A term's top-level ``and`` items are sorted into *equality keys* (``f == c``, and string or IP
  prefixes, which are equalities on the top bits ``f >> shift``), at most one *threshold*
  (``f < c``, ``<=``, ``>``, ``>=``) and a *residual* (everything else, kept as a tree).
* Terms with the same key fields, threshold operator and residual shape form a *family*. In a
  family, a message is looked up by its key values (ranked against the constants the rules use):
  - no threshold, no residual: one table lookup gives the OR of the ports of every matching term;
  - a threshold: the family's thresholds are sorted per key with running ORs of the ports, so one
    binary search per message (a table lookup when key groups x thresholds are few) gives the OR of
    every term whose threshold the value passes;
  - a residual: each message is paired with the terms of its key (a join) and the residual is
    evaluated on the pairs, constants gathered per term. Without key fields every term pairs with
    every message, so rule sets made of such filters cost rules x messages (in bounded blocks).

Header validity: a rule applies to a message only when the scalar headers it reads are valid in its
packet (an order rule never applies to a DNS packet, even where the order fields read as 0). Terms
are grouped by those headers too, and a family runs only on the rows whose ``h.$valid`` columns
say they carry them (a column left out means valid, as in :meth:`runtime.model.Model.with_validity`).
A stack's rows are its elements, so a stacked header is valid in every row.

State variables and aggregates have no value in a trace: a plain loop over the messages computes
them from the spec's counters (:mod:`runtime.groundtruth_state`, no code shared with the model's),
and the rules are then judged on them like fields. User-action calls are not port deliveries and
are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np

from compiler import rules as ast
from compiler.base import P4subError
from compiler.rules import TypedRules, encode_string, scale_decimal
from compiler.spec import QueryField, Spec
from runtime.batch import batch_rows
from runtime.groundtruth_state import StateLoop
from runtime.replay_ports import PortSpace

ORDER_OPS = ("<", "<=", ">", ">=")
PAIR_BUDGET = 1 << 21  # (message, term) pairs evaluated at once in a residual family
DENSE_PAIRS = 1 << 22  # (key group, threshold rank) pairs a threshold family tabulates (8 bytes each)


# ------------------------------------------------------------------------------------------------
# Leaves: a comparison as (shape, constants)
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    """A comparison with its constant taken out.

    ``kind`` "value": ``field op c`` with one constant. ``kind`` "prefix": ``(field >> shift) == top``
    (``op`` "in") or its negation (``op`` "out"); the constants are ``(shift, top)``.
    """

    field: str
    kind: str
    op: str
    consts: tuple[int, ...]

    @property
    def shape(self) -> tuple:
        return ("leaf", self.field, self.kind, self.op)


def _leaf(cmp: ast.Comparison, info: QueryField) -> _Leaf | bool:
    """The leaf for a comparison, or a constant truth value when the comparison is trivially decided."""
    const, name, width = cmp.value, info.name, info.width
    if isinstance(const, ast.String):
        if cmp.op == "prefix":
            raw = const.value.encode("ascii")
            shift = width - 8 * len(raw)
            return True if shift >= width else _Leaf(name, "prefix", "in", (shift, int.from_bytes(raw, "big")))
        return _Leaf(name, "value", cmp.op, (encode_string(const.value, width),))
    if isinstance(const, ast.IPAddress) and const.prefix_len < const.width:
        shift = const.width - const.prefix_len
        if shift >= width:  # /0 holds for every address
            return cmp.op == "=="
        return _Leaf(name, "prefix", "in" if cmp.op == "==" else "out", (shift, const.value >> shift))
    if isinstance(const, ast.Number):
        c = scale_decimal(const.value, info.scale) if info.scale else int(const.value)
    else:
        c = const.value
    return _Leaf(name, "value", cmp.op, (c,))


# ------------------------------------------------------------------------------------------------
# Residual trees: shape (hashable, constants abstracted) and the constants in leaf order
# ------------------------------------------------------------------------------------------------


def _tree(f: ast.Filter, fields: Mapping[str, QueryField]) -> tuple[tuple, list[tuple[int, ...]]]:
    if isinstance(f, ast.Comparison):
        leaf = _leaf(f, fields[f.attribute.name])
        if isinstance(leaf, bool):
            return ("const", leaf), []
        return leaf.shape, [leaf.consts]
    if isinstance(f, ast.Const):
        return ("const", f.value), []
    if isinstance(f, ast.Not):
        shape, consts = _tree(f.item, fields)
        return ("not", shape), consts
    shapes, consts = [], []
    for item in f.items:
        s, c = _tree(item, fields)
        shapes.append(s)
        consts.extend(c)
    return ("and" if isinstance(f, ast.And) else "or", tuple(shapes)), consts


def _eval_shape(shape: tuple, values: Mapping[str, np.ndarray], consts: Iterator[list[np.ndarray]], n: int) -> np.ndarray:
    """Evaluate a residual shape on ``n`` pairs; ``consts`` yields each leaf's constant arrays in order."""
    tag = shape[0]
    if tag == "const":
        return np.full(n, shape[1], dtype=bool)
    if tag == "not":
        return ~_eval_shape(shape[1], values, consts, n)
    if tag in ("and", "or"):
        parts = [_eval_shape(s, values, consts, n) for s in shape[1]]  # consume every leaf's constants
        out = np.ones(n, dtype=bool) if tag == "and" else np.zeros(n, dtype=bool)
        for p in parts:
            out = (out & p) if tag == "and" else (out | p)
        return out
    _, name, kind, op = shape
    v = values[name]
    c = next(consts)
    if kind == "prefix":
        inside = _shift(v, c[0]) == c[1]
        return inside if op == "in" else ~inside
    return _compare(v, op, c[0])


def _shift(v: np.ndarray, shift: np.ndarray) -> np.ndarray:
    if v.dtype == object:
        return v >> shift
    return v >> shift.astype(np.uint64)


def _compare(v: np.ndarray, op: str, c: np.ndarray) -> np.ndarray:
    if op == "==":
        return v == c
    if op == "!=":
        return v != c
    if op == "<":
        return v < c
    if op == "<=":
        return v <= c
    if op == ">":
        return v > c
    return v >= c


# ------------------------------------------------------------------------------------------------
# Terms and families
# ------------------------------------------------------------------------------------------------


@dataclass
class _Term:
    keys: dict[tuple[str, int], int]  # (field, shift) -> value of field >> shift
    threshold: _Leaf | None
    threshold_item: ast.Comparison | None
    residual: list[ast.Filter]
    port_mask: np.ndarray


def _disjuncts(f: ast.Filter) -> Iterator[ast.Filter]:
    if isinstance(f, ast.Or):
        for item in f.items:
            yield from _disjuncts(item)
    else:
        yield f


def _conjuncts(f: ast.Filter) -> Iterator[ast.Filter]:
    if isinstance(f, ast.And):
        for item in f.items:
            yield from _conjuncts(item)
    else:
        yield f


def _term(f: ast.Filter, fields: Mapping[str, QueryField], port_mask: np.ndarray) -> _Term | None:
    """Sort a conjunction's items into keys, a threshold and a residual; None when it cannot hold."""
    term = _Term({}, None, None, [], port_mask)
    for item in _conjuncts(f):
        if isinstance(item, ast.Const):
            if not item.value:
                return None
            continue
        if not isinstance(item, ast.Comparison):
            term.residual.append(item)
            continue
        info = fields[item.attribute.name]
        leaf = _leaf(item, info)
        if isinstance(leaf, bool):
            if not leaf:
                return None
            continue
        if info.width > 64:
            term.residual.append(item)
        elif leaf.kind == "value" and leaf.op == "==" and (leaf.field, 0) not in term.keys:
            term.keys[(leaf.field, 0)] = leaf.consts[0]
        elif leaf.kind == "prefix" and leaf.op == "in" and (leaf.field, leaf.consts[0]) not in term.keys:
            term.keys[(leaf.field, leaf.consts[0])] = leaf.consts[1]
        elif leaf.kind == "value" and leaf.op in ORDER_OPS and term.threshold is None:
            term.threshold, term.threshold_item = leaf, item
        else:
            term.residual.append(item)
    if term.residual and term.threshold is not None:
        # A residual is evaluated per (message, term) pair anyway; the threshold joins it there.
        term.residual.insert(0, term.threshold_item)
        term.threshold = term.threshold_item = None
    return term


class _KeyIndex:
    """Ranks key tuples (one value per key field) against the tuples the terms use.

    Each field's values are ranked among the constants of that field; the ranks are combined one
    field at a time and re-ranked among the combinations that occur, so ids stay below the number
    of terms whatever the number of fields. Unknown tuples get id -1.
    """

    def __init__(self, keys: tuple[tuple[str, int], ...], rows: np.ndarray) -> None:
        self.keys = keys
        self.values: list[np.ndarray] = []
        self.combos: list[np.ndarray] = []
        ids = np.zeros(len(rows), dtype=np.int64)
        for i, _ in enumerate(keys):
            known = np.unique(rows[:, i])
            self.values.append(known)
            rank = np.searchsorted(known, rows[:, i]).astype(np.int64)
            if i == 0:
                ids = rank
                self.combos.append(np.arange(len(known), dtype=np.int64))
            else:
                pair = ids * len(known) + rank
                combos = np.unique(pair)
                self.combos.append(combos)
                ids = np.searchsorted(combos, pair).astype(np.int64)
        self.term_ids = ids
        self.groups = len(self.combos[-1]) if keys else 1

    def lookup(self, columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        if not self.keys:
            return np.zeros(n, dtype=np.int64)
        ids = np.zeros(n, dtype=np.int64)
        ok = np.ones(n, dtype=bool)
        for i, (name, shift) in enumerate(self.keys):
            col = columns[name]
            col = col >> np.uint64(shift) if shift else col
            known = self.values[i]
            rank = np.minimum(np.searchsorted(known, col), len(known) - 1).astype(np.int64)
            ok &= known[rank] == col
            if i == 0:
                ids = rank
            else:
                pair = ids * len(known) + rank
                combos = self.combos[i]
                pos = np.minimum(np.searchsorted(combos, pair), len(combos) - 1)
                ok &= combos[pos] == pair
                ids = pos.astype(np.int64)
        return np.where(ok, ids, -1)


def _segmented_or(masks: np.ndarray, groups: np.ndarray, reverse: bool) -> np.ndarray:
    """Running OR of ``masks`` within runs of equal ``groups`` (from the end when ``reverse``)."""
    acc = masks[::-1].copy() if reverse else masks.copy()
    g = groups[::-1] if reverse else groups
    step = 1
    while step < len(acc):
        same = g[step:] == g[:-step]
        if not same.any():
            break
        acc[step:][same] |= acc[:-step][same]
        step *= 2
    return acc[::-1].copy() if reverse else acc


class _Family:
    """Terms sharing key fields, threshold operator and residual shape (see the module docstring)."""

    def __init__(self, keys: tuple[tuple[str, int], ...], threshold: tuple[str, str] | None, shape: tuple,
                 terms: list[_Term], fields: Mapping[str, QueryField], words: int, needs: tuple[str, ...] = ()) -> None:
        self.keys, self.threshold, self.shape = keys, threshold, shape
        self.needs = needs  # validity columns (h.$valid) a row must have set for these terms to apply
        self.size = len(terms)
        rows = np.array([[t.keys[k] for k in keys] for t in terms], dtype=np.uint64).reshape(len(terms), len(keys))
        self.index = _KeyIndex(keys, rows)
        gid = self.index.term_ids
        masks = np.array([t.port_mask for t in terms], dtype=np.uint64).reshape(len(terms), words)
        if shape:
            self._init_residual(terms, gid, masks, fields)
        elif threshold is not None:
            self._init_threshold(terms, gid, masks)
        else:
            self.group_mask = np.zeros((self.index.groups, words), dtype=np.uint64)
            np.bitwise_or.at(self.group_mask, gid, masks)

    # -- thresholds ---------------------------------------------------------------------------
    def _init_threshold(self, terms: list[_Term], gid: np.ndarray, masks: np.ndarray) -> None:
        c = np.array([t.threshold.consts[0] for t in terms], dtype=np.uint64)  # type: ignore[union-attr]
        self.thresholds = np.unique(c)
        span = len(self.thresholds) + 1
        key = gid * span + np.searchsorted(self.thresholds, c).astype(np.int64)
        order = np.argsort(key, kind="stable")
        self.sorted_key = key[order]
        sorted_gid = gid[order]
        self.group_start = np.searchsorted(sorted_gid, np.arange(self.index.groups), side="left")
        self.group_end = np.searchsorted(sorted_gid, np.arange(self.index.groups), side="right")
        self.span = span
        below = self.threshold[1] in (">", ">=")  # type: ignore[index]
        self.acc = _segmented_or(masks[order], sorted_gid, reverse=not below)
        # Where every (key group, threshold rank) pair lands in sorted_key, when there are few
        # enough pairs: a row then costs a gather instead of a binary search over all the terms.
        self.landing = None
        if self.index.groups * span <= DENSE_PAIRS:
            pairs = np.arange(self.index.groups * span, dtype=np.int64)
            self.landing = np.searchsorted(self.sorted_key, pairs, side="left")

    def _apply_threshold(self, columns: Mapping[str, np.ndarray], ids: np.ndarray, out: np.ndarray) -> None:
        name, op = self.threshold  # type: ignore[misc]
        found = np.flatnonzero(ids >= 0)
        if not len(found):
            return
        g = ids[found]
        v = columns[name][found]
        side = "left" if op in (">", "<=") else "right"
        pos = np.searchsorted(self.thresholds, v, side=side).astype(np.int64)
        pair = g * self.span + pos
        idx = self.landing[pair] if self.landing is not None else np.searchsorted(self.sorted_key, pair, side="left")
        if op in (">", ">="):  # terms whose threshold ranks below pos: [group_start, idx)
            has = idx > self.group_start[g]
            out[found[has]] |= self.acc[idx[has] - 1]
        else:  # terms whose threshold ranks at or above pos: [idx, group_end)
            has = idx < self.group_end[g]
            out[found[has]] |= self.acc[idx[has]]

    # -- residuals ----------------------------------------------------------------------------
    def _init_residual(self, terms: list[_Term], gid: np.ndarray, masks: np.ndarray, fields: Mapping[str, QueryField]) -> None:
        per_term = [_tree(ast.And(tuple(t.residual)), fields)[1] for t in terms]
        self.leaf_consts: list[list[np.ndarray]] = []
        leaf_fields = [s[1] for s in _leaves(self.shape)]
        for j, name in enumerate(leaf_fields):
            wide = fields[name].width > 64
            arity = len(per_term[0][j])
            self.leaf_consts.append([
                np.array([pt[j][a] for pt in per_term], dtype=object if wide else np.uint64) for a in range(arity)
            ])
        self.leaf_fields = sorted(set(leaf_fields))
        order = np.argsort(gid, kind="stable")
        self.term_order = order
        self.masks = masks
        counts = np.bincount(gid, minlength=self.index.groups)
        self.group_count = counts
        self.group_start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)

    def _apply_residual(self, columns: Mapping[str, np.ndarray], ids: np.ndarray, out: np.ndarray) -> None:
        found = np.flatnonzero(ids >= 0)
        counts = self.group_count[ids[found]]
        # Blocks of messages whose pairs fit the budget (a single message may exceed it alone).
        ends = np.cumsum(counts)
        start = 0
        while start < len(found):
            base = ends[start - 1] if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, base + PAIR_BUDGET, side="right")))
            self._pairs(columns, found[start:stop], ids[found[start:stop]], counts[start:stop], out)
            start = stop

    def _pairs(self, columns: Mapping[str, np.ndarray], msgs: np.ndarray, g: np.ndarray, counts: np.ndarray,
               out: np.ndarray) -> None:
        total = int(counts.sum())
        if total == 0:
            return
        msg = np.repeat(msgs, counts)
        first = np.cumsum(counts) - counts
        within = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
        term = self.term_order[np.repeat(self.group_start[g], counts) + within]
        values = {name: columns[name][msg] for name in self.leaf_fields}
        consts = iter([[arr[term] for arr in leaf] for leaf in self.leaf_consts])
        ok = _eval_shape(self.shape, values, consts, total)
        np.bitwise_or.at(out, msg[ok], self.masks[term[ok]])

    # -- the batch ----------------------------------------------------------------------------
    def apply(self, columns: Mapping[str, np.ndarray], n: int, out: np.ndarray) -> None:
        ids = self.index.lookup(columns, n)
        if self.shape:
            self._apply_residual(columns, ids, out)
        elif self.threshold is not None:
            self._apply_threshold(columns, ids, out)
        else:
            hit = np.flatnonzero(ids >= 0)
            out[hit] |= self.group_mask[ids[hit]]


def _leaves(shape: tuple) -> Iterator[tuple]:
    if shape[0] == "leaf":
        yield shape
    elif shape[0] == "not":
        yield from _leaves(shape[1])
    elif shape[0] in ("and", "or"):
        for s in shape[1]:
            yield from _leaves(s)


# ------------------------------------------------------------------------------------------------
# The public evaluator
# ------------------------------------------------------------------------------------------------


def valid_column(header: str) -> str:
    """The column that says whether a packet carries ``header`` (the model's ``h.$valid``)."""
    return f"{header}.$valid"


def _scalar_headers(rule: ast.Rule, spec: Spec | None, known: dict[str, str | None]) -> tuple[str, ...]:
    """The scalar headers whose fields ``rule`` compares (without a spec: none, every row applies).
    ``known``: attribute name -> its scalar header or None, filled as rules are seen."""
    if spec is None:
        return ()
    out = set()
    for cmp in ast.comparisons(rule.filter):
        name = cmp.attribute.name
        if name not in known:
            header = name.split(".", 1)[0]
            inst = spec.header(header)
            known[name] = header if inst is not None and inst.stack_size is None else None
        if known[name] is not None:
            out.add(known[name])
    return tuple(sorted(out))


def rule_ports(typed: TypedRules) -> set[int]:
    return {p for rule in typed.rules for p in rule.ports}


@dataclass
class GroundTruth:
    """The wanted port set of every message of a batch, straight from the rules.

    ``GroundTruth.build(typed, space)`` indexes the rules once; ``wanted(columns)`` returns a
    ``(rows, space.words)`` mask array (see :class:`~runtime.replay_ports.PortSpace`).
    """

    space: PortSpace
    fields: dict[str, int]  # field -> width, for every field a rule reads
    families: list[_Family] = field(default_factory=list)
    # Stateful rules: the values of their state variables and aggregates, message after message
    # (runtime.groundtruth_state); ``fields`` then lists the packet fields the counters read instead.
    state: StateLoop | None = None

    @classmethod
    def build(cls, typed: TypedRules, space: PortSpace) -> "GroundTruth":
        state = None
        for rule in typed.rules:
            for cmp in ast.comparisons(rule.filter):
                if not isinstance(cmp.attribute, ast.Field):
                    if typed.spec is None or not typed.spec.counters:
                        raise P4subError(f"replay evaluates rules on packet fields; {cmp.attribute} is not one and "
                                         "the spec declares no counter to keep it", rule.location)
                    state = state or StateLoop(typed.rules, typed.spec)
        if state is not None:
            truth = cls._build(typed, space)
            stateless = {name: width for name, width in truth.fields.items() if name not in state.attributes}
            return cls(space, {**stateless, **state.fields}, truth.families, state)
        return cls._build(typed, space)

    @classmethod
    def _build(cls, typed: TypedRules, space: PortSpace) -> "GroundTruth":
        groups: dict[tuple, list[_Term]] = {}
        rules = [rule for rule in typed.rules if rule.ports]
        masks = space.masks([rule.ports for rule in rules])
        headers: dict[str, str | None] = {}
        for rule, mask in zip(rules, masks):
            needs = tuple(valid_column(h) for h in _scalar_headers(rule, typed.spec, headers))
            for d in _disjuncts(rule.filter):
                term = _term(d, typed.fields, mask)
                if term is None:
                    continue
                keys = tuple(sorted(term.keys))
                threshold = (term.threshold.field, term.threshold.op) if term.threshold else None
                shape = _tree(ast.And(tuple(term.residual)), typed.fields)[0] if term.residual else ()
                groups.setdefault((keys, threshold, shape, needs), []).append(term)
        fams = [_Family(k, t, s, terms, typed.fields, space.words, v) for (k, t, s, v), terms in groups.items()]
        used = {name for rule in typed.rules for name in (c.attribute.name for c in ast.comparisons(rule.filter))}
        return cls(space, {name: typed.fields[name].width for name in sorted(used)}, fams)

    def columns_needed(self) -> list[str]:
        return list(self.fields)

    @property
    def validity(self) -> list[str]:
        """The ``h.$valid`` columns some rule depends on (optional in :meth:`wanted`)."""
        return sorted({v for fam in self.families for v in fam.needs})

    def reset_state(self) -> None:
        """Forget the counters of stateful rules (the start of a trace)."""
        if self.state is not None:
            self.state.reset()

    def wanted(self, columns: Mapping[str, Any], rows: int | None = None) -> np.ndarray:
        """Per row, the ports whose rules hold, as ``(rows, words)`` uint64 masks (``rows``: as
        :meth:`runtime.model.Model.run`). With stateful rules, the rows also update the counters."""
        missing = [f for f in self.fields if f not in columns]
        if missing:
            raise P4subError(f"the trace has no column for {', '.join(missing)}, which the rules test")
        n = batch_rows({f: columns[f] for f in self.fields} if self.fields else columns, rows)
        cols = {name: _column(columns[name], width) for name, width in self.fields.items()}
        if self.state is not None:
            cols.update(self.state.values(columns, n))
        out = self.space.empty(n)
        for fam in self.families:
            given = [np.asarray(columns[v]).astype(bool) for v in fam.needs if v in columns]
            if not given:
                fam.apply(cols, n, out)
                continue
            carried = np.logical_and.reduce(given)
            if carried.all():
                fam.apply(cols, n, out)
                continue
            rows = np.flatnonzero(carried)
            sub = self.space.empty(len(rows))
            fam.apply({name: col[rows] for name, col in cols.items()}, len(rows), sub)
            out[rows] |= sub
        return out

    def describe(self) -> list[dict[str, Any]]:
        """One line per family: how the terms were indexed (for reports and performance triage)."""
        out = []
        for fam in self.families:
            how = "residual" if fam.shape else ("threshold" if fam.threshold else "lookup")
            out.append({"keys": [f"{f}>>{s}" if s else f for f, s in fam.keys], "threshold": list(fam.threshold or ()),
                        "method": how, "terms": fam.size, "key_groups": fam.index.groups})
        return out


def _column(values: Any, width: int) -> np.ndarray:
    if width > 64:
        return np.array([int(v) for v in values], dtype=object)
    arr = np.asarray(values)
    return arr if arr.dtype == np.uint64 else arr.astype(np.uint64)
