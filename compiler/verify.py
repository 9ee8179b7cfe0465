"""Formal equivalence of a compiled pipeline and its rules, with binary decision diagrams (``dd``).

Property tests and replay compare the pipeline with the rules on sampled packets; this module
compares them on *every* packet. Both sides become, per output (a port, or a user-action call with
its arguments), the Boolean function "this packet gets that output", as a BDD over the packet's
fields, and the two BDDs of each output must be the same node.

* **Encoding.** Each field's domain ``[0, 2^w)`` is cut at every bound that the rules or the
  table entries mention; a packet's field value is represented by the index of its *elementary
  interval*, in ``ceil(log2 K)`` Boolean variables (most significant first, fields in pipeline
  order). A comparison or a table match is a union of elementary intervals, so it is an exact
  index range. One variable per predicate instead would blow up exponentially on mutually
  exclusive predicates (``stock == A``, ``stock == B``: ecosystem notes, §0.5).
* **Rules side.** Each comparison is turned into intervals (:mod:`compiler.intervals`), from the
  operator and the constant as :mod:`compiler.oracle` reads them, sharing nothing with the compiler's
  :mod:`compiler.predicates`; ``and``/``or``/``not`` are BDD operations.
* **Pipeline side.** The tables run symbolically: the metadata valuation (state ids, codes) stays
  concrete, and each valuation carries the BDD of the packets that reach it. An entry takes what
  matches it and no higher-priority entry of the same table and valuation (P4Runtime order:
  highest priority for ternary and range, longest prefix for LPM); what no entry takes goes to the
  table's miss table or default action. Leaves give ports (a multicast group's ports), drops and
  calls. With port-bitmap delivery the ports are the bits ORed into the bitmap, and each lane runs
  on its own: lanes are checked to be independent (a lane's tables read and write only its own
  metadata and OR into the bitmap), so a packet's ports are the union of what each lane gives it,
  and the valuations never multiply across lanes.

A difference comes back as a counterexample: field values of a packet on which the two sides
disagree, which ``p4sub explain`` can walk through the tables.
"""

from __future__ import annotations

import bisect
import functools
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from compiler import ir
from compiler import rules as ast
from compiler.base import P4subError
from compiler.default_path import default_of
from compiler.dnf import rule_actions
from compiler.oracle import headers_read
from compiler.intervals import Interval, comparison_intervals, complement, union
from compiler.rules import TypedRules
from compiler.spec import QueryField

try:
    from dd import cudd as _bdd_module
except ImportError:  # the pure-Python implementation: slower, same API
    from dd import autoref as _bdd_module

Output = tuple  # ("port", p) or ("call", name, args)
#: The domain of the output index in the relation both sides become (:func:`verify`).
_OUTPUT = "$output"
#: Up to this many index ranges a set is built range by range; above, bottom-up over the index space.
_FEW_RANGES = 32
#: Index spaces up to this size are built bottom-up in plain Python rather than numpy.
_SMALL_DOMAIN = 4096


# ------------------------------------------------------------------------------------------------
# Comparisons and matches as intervals
# ------------------------------------------------------------------------------------------------


def match_intervals(match: ir.Match, width: int, table: str) -> list[Interval]:
    """The values a table entry's key matches, as intervals (a ternary mask must be a prefix)."""
    top = (1 << width) - 1
    if isinstance(match, ir.Exact):
        return [(match.value, match.value)]
    if isinstance(match, ir.Range):
        return [(match.lo, match.hi)]
    if isinstance(match, ir.Lpm):
        rest = width - match.prefix_len
        lo = match.value >> rest << rest
        return [(lo, lo + (1 << rest) - 1)]
    ones = bin(match.mask).count("1")
    if match.mask != (top >> (width - ones) << (width - ones)) & top:
        raise P4subError(f"verify: table {table} has a ternary mask {match.mask:#x} that is not a prefix")
    rest = width - ones
    lo = match.value & match.mask
    return [(lo, lo + (1 << rest) - 1)]


# ------------------------------------------------------------------------------------------------
# Field domains as BDD variables
# ------------------------------------------------------------------------------------------------


@dataclass
class _Domain:
    """One field: the cuts of its elementary intervals and its index variables (MSB first)."""

    name: str
    width: int
    cuts: list[int]  # starts of the elementary intervals; cuts[0] == 0
    variables: list[str] = field(default_factory=list)


class Encoder:
    """BDDs over the elementary-interval indices of the fields."""

    def __init__(self, bounds: dict[str, tuple[int, set[int]]],
                 spans: dict[int, list[Interval]] | None = None) -> None:
        """``bounds``: field -> (width, cut points: every interval's ``lo`` and ``hi + 1``); ``spans``:
        the intervals of comparisons already computed, by ``id`` (each is computed once)."""
        self.spans = spans if spans is not None else {}
        self.bdd = _bdd_module.BDD()
        self.bdd.configure(reordering=False)
        # An index range is a pair of comparators; tables and rules ask for the same ones many times
        # (100k ITCH filters: 440k comparators, 110 us each, for a few thousand distinct bounds).
        self._ranges: dict[tuple[str, int, int], Any] = {}
        self._comparators: dict[tuple[str, int, bool], Any] = {}
        self.domains: dict[str, _Domain] = {}
        for name, (width, points) in bounds.items():
            self._declare(name, width, points)
        self.valid = self.bdd.true
        for d in self.domains.values():
            self.valid &= self._index_range(d, 0, len(d.cuts) - 1)

    def _declare(self, name: str, width: int, points: Iterable[int]) -> _Domain:
        cuts = sorted({0} | {p for p in points if 0 < p <= (1 << width) - 1})
        bits = max(1, (len(cuts) - 1).bit_length())
        variables = [f"{name}#{i}" for i in range(bits)]
        self.bdd.declare(*variables)
        self.domains[name] = _Domain(name, width, cuts, variables)
        return self.domains[name]

    def add_choice(self, name: str, n: int) -> _Domain:
        """A domain of ``n`` values ``0 .. n-1`` after the fields (in the variable order too): the
        output a relation between packets and outputs holds for (:func:`verify`)."""
        return self._declare(name, max(1, (n - 1).bit_length()), range(n))

    def intervals(self, name: str, intervals: Iterable[Interval]) -> Any:
        """The BDD of ``field in union(intervals)``; every bound must be a cut of the field."""
        return self.index_set(name, self.indexes(name, intervals))

    def indexes(self, name: str, intervals: Iterable[Interval]) -> list[Interval]:
        """``intervals`` of field values as ranges of elementary-interval indices (sorted, merged)."""
        d = self.domains[name]
        out = []
        for lo, hi in intervals:
            first = bisect.bisect_left(d.cuts, lo)
            last = bisect.bisect_right(d.cuts, hi) - 1
            after = bisect.bisect_left(d.cuts, hi + 1)  # the cut at hi + 1, unless hi is the field's top
            if first >= len(d.cuts) or d.cuts[first] != lo or (
                    hi + 1 < (1 << d.width) and (after >= len(d.cuts) or d.cuts[after] != hi + 1)):
                raise AssertionError(f"{name}: [{lo}, {hi}] is not on the field's cuts")
            out.append((first, last))
        return union([out])

    def comparison(self, cmp: ast.Comparison, info: QueryField) -> list[Interval]:
        """:func:`comparison_intervals`, once per comparison."""
        found = self.spans.get(id(cmp))
        if found is None:
            found = self.spans[id(cmp)] = comparison_intervals(cmp, info)
        return found

    def index_set(self, name: str, ranges: list[Interval]) -> Any:
        """The BDD of ``index(field) in ranges`` (sorted, disjoint index ranges).

        A few ranges are ORed one comparator pair each; many are built bottom-up over the whole index
        space at once, one ``ite`` per node of the reduced result, so the cost is the index space
        (at most twice the field's constants) plus the result's size, whatever the number of ranges."""
        d = self.domains[name]
        if len(ranges) <= _FEW_RANGES:
            u = self.bdd.false
            for lo, hi in ranges:
                u |= self._index_range(d, lo, hi)
            return u
        size = 1 << len(d.variables)
        if size <= _SMALL_DOMAIN:
            return self._small_index_set(d, ranges)
        edges = np.zeros(size + 1, dtype=np.int64)
        bounds = np.array(ranges, dtype=np.int64)
        np.add.at(edges, bounds[:, 0], 1)
        np.add.at(edges, np.minimum(bounds[:, 1] + 1, size), -1)
        ids = (np.cumsum(edges[:-1]) > 0).astype(np.int64)  # per index: node id, 0 false and 1 true
        nodes = [self.bdd.false, self.bdd.true]
        for var in reversed(d.variables):  # least significant first: pairs of blocks that differ in var
            low, high = ids[0::2], ids[1::2]
            pairs, inverse = np.unique(np.stack([low, high], axis=1), axis=0, return_inverse=True)
            x = self.bdd.var(var)
            made = []
            for lo_id, hi_id in pairs.tolist():
                if lo_id == hi_id:
                    made.append(lo_id)
                else:
                    nodes.append(self.bdd.ite(x, nodes[hi_id], nodes[lo_id]))
                    made.append(len(nodes) - 1)
            ids = np.asarray(made, dtype=np.int64)[inverse.reshape(-1)]
        return nodes[int(ids[0])]

    def _small_index_set(self, d: _Domain, ranges: list[Interval]) -> Any:
        """:meth:`index_set` bottom-up in plain Python, for a small index space (numpy's per-level
        overhead is most of the cost there: the output sets of :func:`verify`, 256 values)."""
        ids = [0] * (1 << len(d.variables))
        for lo, hi in ranges:
            ids[lo:hi + 1] = [1] * (hi + 1 - lo)
        nodes = [self.bdd.false, self.bdd.true]
        for var in reversed(d.variables):
            x = self.bdd.var(var)
            made: dict[tuple[int, int], int] = {}
            level = []
            for lo_id, hi_id in zip(ids[0::2], ids[1::2]):
                if lo_id == hi_id:
                    level.append(lo_id)
                    continue
                node = made.get((lo_id, hi_id))
                if node is None:
                    nodes.append(self.bdd.ite(x, nodes[hi_id], nodes[lo_id]))
                    node = made[(lo_id, hi_id)] = len(nodes) - 1
                level.append(node)
            ids = level
        return nodes[ids[0]]

    def example(self, u: Any) -> dict[str, int]:
        """Field values of one packet in ``u`` (each field at the low end of its elementary interval)."""
        model = self.bdd.pick(u & self.valid)
        if model is None:
            raise ValueError("empty set")
        values = {}
        for d in self.domains.values():
            if d.name == _OUTPUT:
                continue
            index = 0
            for var in d.variables:
                index = index << 1 | int(bool(model.get(var, False)))
            values[d.name] = d.cuts[index]
        return values

    def _index_range(self, d: _Domain, lo: int, hi: int) -> Any:
        key = (d.name, lo, hi)
        found = self._ranges.get(key)
        if found is None:
            found = self._ranges[key] = self._compare(d, lo, ge=True) & self._compare(d, hi, ge=False)
        return found

    def _compare(self, d: _Domain, c: int, ge: bool) -> Any:
        """``index >= c`` (or ``<= c``), built from the least significant bit up."""
        key = (d.name, c, ge)
        found = self._comparators.get(key)
        if found is None:
            found = self._comparators[key] = self._build_compare(d, c, ge)
        return found

    def _build_compare(self, d: _Domain, c: int, ge: bool) -> Any:
        r = self.bdd.true
        for i, var in enumerate(reversed(d.variables)):
            x = self.bdd.var(var)
            bit = c >> i & 1
            if ge:
                r = (x | r) if bit == 0 else (x & r)
            else:
                r = (~x | r) if bit == 1 else (~x & r)
        if c >> len(d.variables):
            return self.bdd.false if ge else self.bdd.true
        return r


# ------------------------------------------------------------------------------------------------
# The two sides
# ------------------------------------------------------------------------------------------------


def _rule_comparisons(f: ast.Filter) -> Iterable[ast.Comparison]:
    if isinstance(f, ast.Comparison):
        yield f
    elif isinstance(f, ast.Not):
        yield from _rule_comparisons(f.item)
    elif isinstance(f, (ast.And, ast.Or)):
        for item in f.items:
            yield from _rule_comparisons(item)


def _filter_bdd(enc: Encoder, f: ast.Filter, fields: dict[str, QueryField], memo: dict) -> Any:
    """The BDD of the packets ``f`` holds for.

    The terms of an ``and``/``or`` that test one field (comparisons, possibly negated) are combined
    as sets of values first, one sorted merge, and become one BDD per field; the rest, and the
    per-field BDDs, are combined pairwise in a balanced tree. One BDD operation per term, each
    locating its bounds by a linear scan of the cuts, made a rule of 100,000 ``!=`` terms take
    minutes (issue 27); this is the same function, exactly, in time linear in the terms."""
    if isinstance(f, ast.Comparison):
        key = (f.attribute.name, f.op, repr(f.value))
        if key not in memo:
            memo[key] = enc.intervals(f.attribute.name, enc.comparison(f, fields[f.attribute.name]))
        return memo[key]
    if isinstance(f, ast.Const):
        return enc.bdd.true if f.value else enc.bdd.false
    if isinstance(f, ast.Not):
        return ~_filter_bdd(enc, f.item, fields, memo)
    conjunction = isinstance(f, ast.And)
    # per field, the values each term excludes (and) or admits (or); a term's set is read once
    by_field: dict[str, list[list[Interval]]] = {}
    parts = []
    for item in f.items:
        tested = _field_values(enc, item, fields)
        if tested is None:
            parts.append(_filter_bdd(enc, item, fields, memo))
            continue
        name, values, negated = tested
        top = (1 << fields[name].width) - 1
        by_field.setdefault(name, []).append(complement(values, top) if conjunction != negated else values)
    for name, groups in by_field.items():
        values = union(groups)
        if conjunction:
            values = complement(values, (1 << fields[name].width) - 1)
        parts.append(enc.intervals(name, values))
    return _balanced(parts, operator.and_ if conjunction else operator.or_,
                     enc.bdd.true if conjunction else enc.bdd.false)


def _field_values(enc: Encoder, f: ast.Filter,
                  fields: dict[str, QueryField]) -> tuple[str, list[Interval], bool] | None:
    """``f`` as (field, the values its comparison holds for, negated) when it is a comparison of a
    field under any number of ``not``s."""
    negated = False
    while isinstance(f, ast.Not):
        f, negated = f.item, not negated
    if not isinstance(f, ast.Comparison) or not isinstance(f.attribute, ast.Field):
        return None
    return f.attribute.name, enc.comparison(f, fields[f.attribute.name]), negated


def _balanced(parts: list[Any], combine, empty: Any) -> Any:
    """``combine`` over ``parts`` as a balanced tree: many operands cost a logarithmic depth of
    operations on growing BDDs instead of a linear chain on one."""
    if not parts:
        return empty
    while len(parts) > 1:
        parts = [combine(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _valid_var(header: str) -> str:
    return header + ".$valid"


def _parsable(enc: Encoder, pipeline: ir.Pipeline) -> Any:
    """The validity combinations the spec's parser can produce: a header is valid only with the
    headers it always extracts first (``Spec.implied_headers``). The rows of a queried stack are its
    messages, so what a stack element implies is valid in every row."""
    spec = pipeline.spec
    implied = spec.implied_headers()
    rows_of = [g for g in pipeline.queried_headers() if spec.header(g) is not None and spec.header(g).stack_size]
    u = enc.bdd.true
    for g, before in implied.items():
        for h in before:
            if _valid_var(h) not in enc.domains:
                continue
            valid_h = enc.intervals(_valid_var(h), [(1, 1)])
            if g in rows_of:
                u &= valid_h
            elif _valid_var(g) in enc.domains:
                u &= ~enc.intervals(_valid_var(g), [(1, 1)]) | valid_h
    return u


def _rules_look_at(enc: Encoder, typed: TypedRules) -> Any:
    """The packets that carry a header some rule reads (a stack's rows, its messages, always do)."""
    spec = typed.spec
    u = enc.bdd.false
    for rule in typed.rules:
        for c in _rule_comparisons(rule.filter):
            inst = spec.header(c.attribute.name.split(".", 1)[0]) if isinstance(c.attribute, ast.Field) and spec else None
            if inst is not None and inst.stack_size:
                return enc.bdd.true
        for h in headers_read(rule, spec):
            u |= enc.intervals(_valid_var(h), [(1, 1)])
    return u if u != enc.bdd.false else enc.bdd.true


def rules_outputs(enc: Encoder, typed: TypedRules) -> dict[Output, Any]:
    """Per output, the packets some rule gives it to: those its filter holds for and that carry
    every header it reads."""
    parts: dict[Output, list[Any]] = {}
    memo: dict = {}
    for rule in typed.rules:
        actions = rule_actions(rule)
        outputs = [("port", p) for p in actions.ports] + [("call", n, a) for n, a in actions.calls]
        if not outputs:
            continue
        u = _filter_bdd(enc, rule.filter, typed.fields, memo)
        for h in headers_read(rule, typed.spec):
            u &= enc.intervals(_valid_var(h), [(1, 1)])
        for o in outputs:
            parts.setdefault(o, []).append(u)
    # Each output's rules ORed in a balanced tree: a chain ORs every rule into one growing BDD.
    return {o: _balanced(us, operator.or_, enc.bdd.false) for o, us in parts.items()}


class _Run:
    """The pipeline run symbolically: metadata valuations with the packets that reach them."""

    def __init__(self, enc: Encoder, pipeline: ir.Pipeline) -> None:
        self.enc = enc
        self.p = pipeline
        self.tables = {t.name: t for t in pipeline.tables}
        self.actions = {a.name: a for a in pipeline.actions}
        self.params = {a.name: {p.name: i for i, p in enumerate(a.params)} for a in pipeline.actions}
        self.groups = {g.id: g.ports for g in pipeline.multicast_groups}
        self.meta = tuple(m.name for m in pipeline.metadata)
        # table -> values of its exact metadata keys -> the entries with those values (a metadata key
        # matched otherwise, such as a compressed code in a range, is tested per valuation)
        self.by_meta: dict[str, dict[tuple[int, ...], list[ir.Entry]]] = {t.name: {} for t in pipeline.tables}
        for e in pipeline.entries:
            keys = self.tables[e.table].keys
            meta_key = tuple(m.value for k, m in zip(keys, e.matches) if self._exact_meta(k))
            self.by_meta[e.table].setdefault(meta_key, []).append(e)
        self.match_memo: dict = {}
        # per table: metadata keys matched other than exactly (by position), and whether it is LPM
        self.other_meta = {t.name: [(i, k) for i, k in enumerate(t.keys)
                                    if k.field.startswith("meta.") and not self._exact_meta(k)] for t in pipeline.tables}
        self.lpm = {t.name: any(k.match_kind == "lpm" for k in t.keys) for t in pipeline.tables}

    @staticmethod
    def _exact_meta(k: ir.Key) -> bool:
        return k.field.startswith("meta.") and k.match_kind == "exact"

    def _valid(self, headers: Iterable[str], combine) -> Any:
        """Validity of scalar ``headers`` combined (AND or OR); a stack's rows always carry it."""
        spec = self.p.spec
        terms = [self.enc.bdd.true if spec.header(h) and spec.header(h).stack_size
                 else self.enc.intervals(_valid_var(h), [(1, 1)]) for h in headers]
        return functools.reduce(combine, terms) if terms else None

    def outputs(self) -> list[dict[tuple[Output, ...], Any]]:
        """Per run (the default path, the tables, or each lane of a bitmap pipeline), the packets that
        get each set of outputs from it; a packet's outputs are the union over the runs."""
        delivery = self.p.delivery
        true = self.enc.bdd.true
        # Packets that carry a queried header go through the tables if they carry the guard's;
        # the others go through the default path.
        looked = (self._valid(self.p.queried_headers(), operator.or_) or true) if self.p.default_control else true
        start = looked & (self._valid(self.p.guard_headers(), operator.and_) or true)
        out = [self._run(self.p.default_control, self._group_ports, ~looked)] if self.p.default_control else []
        if not delivery.is_bitmap:
            runs = [self._run(self.p.control, self._group_ports, start)]
        else:
            lanes = sorted({self.tables[name].lane for name in self.p.control})
            self._check_independent(lanes)
            where = [self.meta.index(f) for f in delivery.fields]
            runs = [self._run([name for name in self.p.control if self.tables[name].lane == lane],
                              lambda valuation: sorted(delivery.ports_of(
                                  functools.reduce(operator.or_, (valuation[0][i] for i in where), 0))), start)
                    for lane in lanes]
        return out + runs

    def _group_ports(self, valuation: tuple) -> Iterable[int]:
        _, port, group, dropped, _ = valuation
        return self.groups.get(group, ()) if group else ((port,) if port >= 0 and not dropped else ())

    def _run(self, control: Iterable[str], ports_of, reach: Any) -> dict[tuple[Output, ...], Any]:
        # A valuation: metadata values plus what the packet got so far (port, group, dropped, calls).
        start = (tuple(0 for _ in self.meta), -1, 0, False, frozenset())
        states = {start: reach}
        for name in control:
            nxt: dict = {}
            for valuation, u in states.items():
                self._apply(name, valuation, u, nxt)
            states = nxt
        by_outputs: dict[tuple[Output, ...], list[Any]] = {}
        for valuation, u in states.items():
            outputs = tuple([("port", p) for p in ports_of(valuation)] + sorted(("call", n, a) for n, a in valuation[4]))
            by_outputs.setdefault(outputs, []).append(u)
        return {o: _balanced(us, operator.or_, self.enc.bdd.false) for o, us in by_outputs.items()}

    def _check_independent(self, lanes: list[int]) -> None:
        """Refuse a bitmap pipeline whose lanes touch each other's metadata or forward otherwise."""
        bitmaps = set(self.p.delivery.fields)
        owner: dict[str, int] = {}
        tables = [t for t in self.p.tables if t.name not in self.p.default_control]
        for t in tables:
            for name in [k.field for k in t.keys if k.field.startswith("meta.")] + self._writes(t):
                if name in bitmaps:
                    raise P4subError(f"verify: table {t.name} matches or sets the port bitmap {name}")
                if owner.setdefault(name, t.lane) != t.lane:
                    raise P4subError(f"verify: lanes {owner[name]} and {t.lane} share metadata {name}; "
                                     "lanes must be independent")
        for a in self.p.actions:
            for prim in a.body:
                if prim.op in ("set_egress_port", "set_mcast_group", "drop"):
                    used = any(a.name in t.actions for t in tables)
                    if used:
                        raise P4subError(f"verify: action {a.name} forwards or drops directly in a bitmap pipeline")
                if prim.op == "or_meta" and prim.args[0] not in bitmaps:
                    raise P4subError(f"verify: action {a.name} ORs into {prim.args[0]}, not a port bitmap")
        for t in tables:  # a lane ORs into its own bitmap only
            for name in self._writes(t, "or_meta"):
                if owner.setdefault(name, t.lane) != t.lane:
                    raise P4subError(f"verify: lanes {owner[name]} and {t.lane} both OR into {name}")

    def _writes(self, table: ir.Table, op: str = "set_meta") -> list[str]:
        return [prim.args[0] for name in table.actions if name in self.actions
                for prim in self.actions[name].body if prim.op == op]

    def _apply(self, name: str, valuation: tuple, reach: Any, nxt: dict) -> None:
        table = self.tables[name]
        meta_values = dict(zip(self.meta, valuation[0]))
        candidates = self.by_meta[name].get(tuple(meta_values[k.field] for k in table.keys if self._exact_meta(k)), [])
        other_meta = self.other_meta[name]
        if other_meta:
            candidates = [e for e in candidates
                          if all(any(lo <= meta_values[k.field] <= hi for lo, hi in match_intervals(e.matches[i], k.width, name))
                                 for i, k in other_meta)]
        order = sorted(candidates, key=lambda e: -max((m.prefix_len for m in e.matches if isinstance(m, ir.Lpm)),
                                                        default=0)) if self.lpm[name] else sorted(candidates, key=lambda e: -e.priority)
        if self._apply_disjoint(table, order, valuation, reach, nxt):
            return
        remaining = reach
        for e in order:
            if remaining == self.enc.bdd.false:
                return
            m = self._match(table, e)
            hit = remaining & m
            if hit != self.enc.bdd.false:
                self._execute(e.action, e.args, valuation, hit, nxt)
            remaining &= ~m
        if remaining == self.enc.bdd.false:
            return
        if table.on_miss:
            self._apply(table.on_miss, valuation, remaining, nxt)
        else:
            self._execute(table.default_action, table.default_args, valuation, remaining, nxt)

    def _apply_disjoint(self, table: ir.Table, order: list[ir.Entry], valuation: tuple, reach: Any, nxt: dict) -> bool:
        """The table's step when it reads one packet field and this valuation's entries match disjoint
        sets of it (exact tables always, range and prefix tables mostly): then priorities do not
        matter, an entry takes ``reach & its set`` and the miss ``reach`` less their union, one BDD
        operation per entry instead of three. False (nothing done) otherwise."""
        keys = [(i, k) for i, k in enumerate(table.keys) if not k.field.startswith("meta.")]
        if len(keys) != 1:
            return False
        (i, k), = keys
        spans = []
        for e in order:
            ranges = self.enc.indexes(k.field, match_intervals(e.matches[i], k.width, table.name))
            if len(ranges) != 1:
                return False
            spans.append(ranges[0])
        by_start = sorted(spans)
        if any(a[1] >= b[0] for a, b in zip(by_start, by_start[1:])):
            return False
        false = self.enc.bdd.false
        for e, span in zip(order, spans):
            hit = reach & self.enc.index_set(k.field, [span])
            if hit != false:
                self._execute(e.action, e.args, valuation, hit, nxt)
        remaining = reach & ~self.enc.index_set(k.field, union([by_start])) if spans else reach
        if remaining == false:
            return True
        if table.on_miss:
            self._apply(table.on_miss, valuation, remaining, nxt)
        else:
            self._execute(table.default_action, table.default_args, valuation, remaining, nxt)
        return True

    def _match(self, table: ir.Table, e: ir.Entry) -> Any:
        key = (table.name, e.matches)
        if key not in self.match_memo:
            u = self.enc.bdd.true
            for k, m in zip(table.keys, e.matches):
                if not k.field.startswith("meta."):
                    u &= self.enc.intervals(k.field, match_intervals(m, k.width, table.name))
            self.match_memo[key] = u
        return self.match_memo[key]

    def _execute(self, action: str, args: tuple[int, ...], valuation: tuple, u: Any, nxt: dict) -> None:
        meta, port, group, dropped, calls = valuation
        meta = list(meta)
        a = self.actions.get(action)
        params = self.params.get(action, {})
        for prim in a.body if a else ():
            if prim.op == "set_meta":
                meta[self.meta.index(prim.args[0])] = args[params[prim.args[1]]]
            elif prim.op == "or_meta":
                meta[self.meta.index(prim.args[0])] |= args[params[prim.args[1]]]
            elif prim.op == "set_egress_port":
                port, dropped = args[params[prim.args[0]]], False
            elif prim.op == "set_mcast_group":
                group = args[params[prim.args[0]]]
            elif prim.op == "drop":
                dropped = True
            elif prim.op == "user":
                calls = calls | {(prim.args[0], tuple(args))}
        key = (tuple(meta), port, group, dropped, calls)
        nxt[key] = nxt.get(key, self.enc.bdd.false) | u


# ------------------------------------------------------------------------------------------------
# The check
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One output on which the sides differ: packets it misses (false negatives) or adds (false positives)."""

    output: Output
    missing: dict[str, int] | None  # a packet the rules give the output to and the pipeline does not
    extra: dict[str, int] | None  # a packet the pipeline gives the output to and the rules do not


@dataclass(frozen=True)
class Verdict:
    outputs: int
    differences: tuple[Difference, ...]
    variables: int
    nodes: int

    @property
    def equivalent(self) -> bool:
        return not self.differences

    @property
    def sound(self) -> bool:
        """No false negative: the pipeline gives every output at least where the rules do."""
        return all(d.missing is None for d in self.differences)


def verify(pipeline: ir.Pipeline, typed: TypedRules) -> Verdict:
    """Compare ``pipeline`` with ``typed`` on every packet, output by output."""
    # Fields the rules test but no table reads (their rules forward nowhere, or the test is moot)
    # are variables too: the pipeline's outputs simply do not depend on them.
    inputs = {name: info.width for name, info in typed.fields.items()}
    inputs.update({k.field: k.width for t in pipeline.tables for k in t.keys if not k.field.startswith("meta.")})
    for rule in typed.rules:
        inputs.update({_valid_var(h): 1 for h in headers_read(rule, typed.spec)})
    spec = pipeline.spec
    inputs.update({_valid_var(h): 1 for h in pipeline.guard_headers() + pipeline.queried_headers()
                   if not (spec.header(h) and spec.header(h).stack_size)})
    bounds: dict[str, tuple[int, set[int]]] = {f: (w, {1, 2} if f.endswith(".$valid") else set())
                                               for f, w in inputs.items()}
    spans: dict[int, list[Interval]] = {}
    for rule in typed.rules:
        for c in _rule_comparisons(rule.filter):
            spans[id(c)] = found = comparison_intervals(c, typed.fields[c.attribute.name])
            for lo, hi in found:
                bounds[c.attribute.name][1].update((lo, hi + 1))
    for t in pipeline.tables:
        for e in pipeline.entries_of(t.name):
            for k, m in zip(t.keys, e.matches):
                if not k.field.startswith("meta."):
                    for lo, hi in match_intervals(m, k.width, t.name):
                        bounds[k.field][1].update((lo, hi + 1))
    order = [f for f in pipeline.field_order if f in bounds] + sorted(f for f in bounds if f not in pipeline.field_order)
    enc = Encoder({f: bounds[f] for f in order}, spans)
    want = rules_outputs(enc, typed)
    name = typed.spec.default_action if typed.spec is not None else None
    if name:  # @query_default_action: the tables give it to the packets they evaluate and no rule matches
        matched = functools.reduce(operator.or_, want.values(), enc.bdd.false)
        read = [headers_read(rule, typed.spec) for rule in typed.rules]
        evaluated = functools.reduce(operator.and_, (enc.intervals(_valid_var(h), [(1, 1)])
                                                     for h in set.intersection(*read)), enc.bdd.true) if read else enc.bdd.true
        want[("call", name, ())] = want.get(("call", name, ()), enc.bdd.false) | (evaluated & ~matched)
    default = default_of(pipeline)
    if default.kind == "fwd":  # asked for: packets that carry no header any rule reads leave on that port
        u = ~_rules_look_at(enc, typed)
        want[("port", default.port)] = want.get(("port", default.port), enc.bdd.false) | u
    runs = _Run(enc, pipeline).outputs()
    possible = enc.valid & _parsable(enc, pipeline)
    # Both sides as one relation "packet gets output" over the fields and an output index, compared
    # at once: per output, the pipeline's side ORs every leaf set that gives it, which for 100k ITCH
    # filters (20k leaf sets of ~100 ports) was 2M operations; the relation takes two per leaf set.
    universe = sorted(set(want) | {o for run in runs for outs in run for o in outs}, key=repr)
    index = {o: i for i, o in enumerate(universe)}
    enc.add_choice(_OUTPUT, len(universe))
    false = enc.bdd.false

    def chosen(outs: Iterable[Output]) -> Any:
        return enc.index_set(_OUTPUT, union([[(index[o], index[o]) for o in outs]]))

    wanted = _balanced([w & chosen([o]) for o, w in want.items()], operator.or_, false) & possible
    given = _balanced([u & chosen(outs) for run in runs for outs, u in run.items() if outs], operator.or_,
                      false) & possible
    differences = []
    if wanted != given:
        choice = enc.domains[_OUTPUT].variables
        for o in universe:
            w, g = (enc.bdd.exist(choice, side & chosen([o])) for side in (wanted, given))
            if w != g:
                missing, extra = w & ~g, g & ~w
                differences.append(Difference(
                    o, enc.example(missing) if missing != false else None,
                    enc.example(extra) if extra != false else None))
    return Verdict(len(universe), tuple(differences), sum(len(d.variables) for d in enc.domains.values() if d.name != _OUTPUT),
                   len(enc.bdd))
