"""The spec's parse graph, run on a whole batch of packets at once with numpy.

Replay and netsim judge a switch, so they must read packets the way the switch's parser does: the
spec's parse graph, exactly (:mod:`runtime.parse_graph` interprets it packet by packet and is the
reference). Interpreting ten million messages one packet at a time in Python is out of reach, so
this module compiles the graph once and runs it over a batch of records in lockstep:

* every packet has a cursor (in bits), a current state and a status; the states are visited in a
  topological order of the graph (reverse post-order), and each visit processes *all* packets that
  are in that state at once, so a chain of states (ITCH's ``msgs_12`` .. ``msgs_1``, INT's
  ``hops_8`` .. ``hops_1``) costs one pass per state and depth, not one per packet;
* ``extract`` is a gather of the fields someone needs at ``cursor + offset`` (any bit offset,
  big-endian), then ``cursor += width``; ``extract(s.next)`` checks the stack bound per packet;
* ``advance`` is offset arithmetic (constant, or an expression evaluated on the batch);
* ``select`` evaluates its keys on the batch (fields, ``.last``/``[i]`` of stacks, lookahead,
  expressions with P4 width semantics) and tries the cases in order as masks;
* errors (packet too short, no match, stack out of bounds, a loop without progress, an
  expression error, reject) stop a packet where P4 stops it, keeping the headers extracted before.

What cannot be vectorised in general falls back to one packet at a time, but only for the packets
in the state that needs it: an expression whose values or intermediate results exceed 64 bits
(P4 allows any width) and fields wider than 64 bits that are read (stored as Python ints).

Output (:class:`ParsedBatch`): one row per *message*, i.e. per extracted element of the row stack
(the header stack the caller's fields query; with none, one row per packet), the requested fields
as columns (a scalar header's field repeated on its packet's rows, 0 where the header is invalid),
``h.$valid`` for every scalar header, the packet of each row, and packets counted per parse
status. Rows of a packet are consecutive and in element order.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from compiler.base import P4subError, SpecError
from compiler.rules import field_name as valid_name
from compiler.rules import header_of_validity, is_validity
from compiler.spec import Advance, Extract, Spec, parse_expression
from compiler.spec import expr as ex
from runtime.parse_graph import (
    ACCEPT,
    EXPRESSION_ERROR,
    NO_MATCH,
    PACKET_TOO_SHORT,
    PARSER_LOOP,
    REJECT,
    STACK_OUT_OF_BOUNDS,
    STATUSES,
    ParseGraph,
)

_FIELD_REF = re.compile(r"(\w+)(?:\[(\d+)\]|\.(last))?\.(\w+)")
#: Status codes per packet: 0 still running; 1.. index into STATUSES plus one.
_CODE = {name: i + 1 for i, name in enumerate(STATUSES)}
_RUNNING = 0
_PAD = 16  # zero bytes after the buffer, so that 9-byte windows near its end stay inside
_M64 = (1 << 64) - 1
_U = np.uint64


def _mask(width: int) -> np.uint64:
    return _U(_M64 if width >= 64 else (1 << width) - 1)


# ------------------------------------------------------------------------------------------------
# Bits out of a byte buffer, vectorised
# ------------------------------------------------------------------------------------------------


def read_bits(buf: np.ndarray, bitpos: np.ndarray, width: int, raw: bytes | None = None) -> np.ndarray:
    """The ``width`` bits at each bit position of ``buf`` (bit 0 = MSB of byte 0), big-endian.

    ``buf`` must have at least 9 readable bytes past every position (callers pad it); bits after
    the field are shifted out, so reading a neighbour's bytes is harmless. ``width`` <= 64 gives
    uint64; wider fields give Python ints (object array), one packet at a time (``raw``: ``buf``
    as bytes, when the caller has it).
    """
    n = len(bitpos)
    if width == 0 or n == 0:
        return np.zeros(n, dtype=np.uint64)
    byte = bitpos >> 3
    shift = (bitpos & 7).astype(np.uint64)
    if width > 64:
        out = np.empty(n, dtype=object)
        raw = raw if raw is not None else buf.tobytes()
        for i, (b, s) in enumerate(zip(byte.tolist(), shift.tolist())):
            last = (s + width + 7) >> 3
            chunk = int.from_bytes(raw[b : b + last], "big")
            out[i] = (chunk >> (last * 8 - s - width)) & ((1 << width) - 1)
        return out
    aligned = not shift.any()
    if aligned and width == 8:
        return buf[byte].astype(np.uint64)
    span = (width + 7) // 8 if aligned else (width + 14) // 8  # bytes covering the field at any shift
    if span <= 2:
        # One or two bytes: OR-ing byte gathers is the cheapest read.
        word = buf[byte].astype(np.uint64)
        if span == 2:
            word <<= _U(8)
            word |= buf[byte + 1]
    elif span <= 4:
        word = _words(buf, 4)[byte].astype(np.uint64)
        span = 4
    else:
        word = None
    if word is not None:
        if aligned:
            return word >> _U(span * 8 - width) if span * 8 != width else word
        return (word >> (_U(span * 8 - width) - shift)) & _mask(width)
    hi = _words(buf, 8)[byte].astype(np.uint64)
    if aligned:
        return hi >> _U(64 - width)
    top = hi << shift
    if width > 57:  # the field may reach into a ninth byte
        lo = buf[byte + 8].astype(np.uint64)
        top |= lo >> (_U(8) - shift)
    return top >> _U(64 - width)


def _words(buf: np.ndarray, k: int) -> np.ndarray:
    """``buf`` seen as a big-endian ``k``-byte word starting at *every* byte (a stride-1 view, no
    copy): a gather from it reads one unaligned word per position, which is several times cheaper
    than gathering rows of ``k`` bytes and byte-swapping them."""
    return np.ndarray((len(buf) - k + 1,), dtype=np.dtype(f">u{k}"), buffer=buf, strides=(1,))


# ------------------------------------------------------------------------------------------------
# The compiled graph
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    instance: str
    selector: str  # "", "last" or "index"
    index: int
    field_name: str
    width: int

    @property
    def key(self) -> tuple[str, str]:
        return self.instance, self.field_name


@dataclass(frozen=True)
class _Extract:
    instance: str
    stack_size: int | None
    width: int
    fields: tuple[tuple[str, int, int], ...]  # (name, bit offset, width) of the fields kept


@dataclass(frozen=True)
class _Advance:
    bits: int | None
    expr: ex.Expr | None


@dataclass(frozen=True)
class _State:
    name: str
    steps: tuple[_Extract | _Advance, ...]
    keys: tuple[ex.Expr, ...]
    cases: tuple[tuple[tuple[tuple[int, int] | None, ...], int], ...]  # target: state id, -1 accept, -2 reject
    progresses: bool  # some step always consumes bits or fills a header


_ACCEPT_ID, _REJECT_ID, _STOPPED = -1, -2, -3


@dataclass
class ParsedBatch:
    """Rows of one batch: see the module docstring.

    ``columns``: requested fields and ``h.$valid`` of every scalar header; ``packet``: per row,
    the packet's index in the batch; ``statuses``: packets per parse status; ``messages``: per
    packet, the messages it holds (elements of the row stack's group, see :class:`SpecReader`).
    """

    columns: dict[str, np.ndarray]
    packet: np.ndarray
    element: np.ndarray
    packets: int
    statuses: dict[str, int]
    messages: np.ndarray

    def __len__(self) -> int:
        return len(self.packet)


class SpecReader:
    """A spec's parse graph compiled for batches, producing the columns ``fields`` asks for.

    ``fields`` are ``header.field`` names (scalar headers or the row stack) and optionally
    ``h.$valid``. The row stack is the one stack among the fields' headers (``row_stack`` may name
    it; at most one stack may be queried, as messages are its elements). A *message* is one element
    of the row stack's group: the row stack and the stacks of the same size declared next to it
    (ITCH's ``mold_msg`` block headers and ``add_order`` bodies), the convention of
    :func:`backends.common.parser.emit_groups`; ``message_bytes`` is one element of each.
    """

    def __init__(self, spec: Spec, fields: Iterable[str], row_stack: str | None = None) -> None:
        self.spec = ParseGraph(spec).spec  # checks the graph as the reference does
        self.instances = {h.name: h for h in spec.headers}
        self.scalars = tuple(h.name for h in spec.headers if h.stack_size is None)
        fields = list(dict.fromkeys(fields))
        wanted: list[str] = []
        stacks_seen = set()
        for f in fields:
            if is_validity(f):
                h = header_of_validity(f)
                if h not in self.instances:
                    raise P4subError(f"{f}: the spec has no header {h!r}")
                continue
            h, _, name = f.partition(".")
            inst = self.instances.get(h)
            if inst is None or spec.field_width(f) is None:
                raise P4subError(f"{f}: not a field of the spec's headers ({spec.path})")
            if inst.stack_size is not None:
                stacks_seen.add(h)
            wanted.append(f)
        if row_stack is not None:
            stacks_seen.add(row_stack)
        if len(stacks_seen) > 1:
            raise P4subError(f"the fields read header stacks {', '.join(sorted(stacks_seen))}; rows are the "
                             "messages of one stack, so at most one may be read")
        self.row_stack = next(iter(stacks_seen), None)
        if self.row_stack is not None and self.instances[self.row_stack].stack_size is None:
            raise P4subError(f"{self.row_stack} is not a header stack")
        self.fields = tuple(wanted)
        self.validity = tuple(valid_name(h) for h in self.scalars)
        self.group = self._group()
        self.message_bytes = (sum(self._type_width(h) for h in self.group) + 7) // 8 if self.group else 0
        # What must be kept per packet: requested fields, and fields the graph itself reads.
        self._refs: dict[str, _Ref] = {}
        self.names = list(spec.parser_states)
        self.ids = {name: i for i, name in enumerate(self.names)}
        raw_states = [spec.parser_states[n] for n in self.names]
        keys_exprs = []
        for st in raw_states:
            keys = []
            for key in st.select_keys:
                if key.startswith("lookahead:"):
                    keys.append(ex.Lookahead(int(key.split(":", 1)[1])))
                else:
                    keys.append(ex.Ref(key) if _FIELD_REF.fullmatch(key) else parse_expression(key))
            keys_exprs.append(tuple(_fold(k) for k in keys))
        advances = {}
        for st in raw_states:
            for i, stmt in enumerate(st.statements):
                if isinstance(stmt, Advance) and stmt.bits is None:
                    advances[(st.name, i)] = _fold(parse_expression(stmt.expression))
        for exprs in keys_exprs:
            for e in exprs:
                for r in ex.refs(e):
                    self._ref(r.name)
        for e in advances.values():
            for r in ex.refs(e):
                self._ref(r.name)
        self.scalar_keep: dict[str, set[str]] = {}
        self.last_keep: dict[str, set[str]] = {}
        self.index_keep: dict[str, set[str]] = {}
        for ref in self._refs.values():
            target = {"": self.scalar_keep, "last": self.last_keep, "index": self.index_keep}[ref.selector]
            target.setdefault(ref.instance, set()).add(ref.field_name)
        for f in self.fields:
            h, name = f.split(".", 1)
            if h == self.row_stack:
                self.index_keep.setdefault(h, set()).add(name)
            else:
                self.scalar_keep.setdefault(h, set()).add(name)
        self.states = []
        for st, keys in zip(raw_states, keys_exprs):
            steps: list[_Extract | _Advance] = []
            progresses = False
            for i, stmt in enumerate(st.statements):
                if isinstance(stmt, Extract):
                    inst = self.instances[stmt.header]
                    htype = spec.header_types[inst.type_name]
                    keep = (self.scalar_keep.get(inst.name, set()) | self.last_keep.get(inst.name, set())
                            | self.index_keep.get(inst.name, set()))
                    layout, off = [], 0
                    for fdef in htype.fields:
                        if fdef.name in keep:
                            layout.append((fdef.name, off, fdef.width))
                        off += fdef.width
                    steps.append(_Extract(inst.name, inst.stack_size, htype.width, tuple(layout)))
                    progresses = True
                elif stmt.bits is not None:
                    steps.append(_Advance(stmt.bits, None))
                    progresses = progresses or stmt.bits > 0
                else:
                    steps.append(_Advance(None, advances[(st.name, i)]))
            cases = []
            for case in st.cases:
                values = (None,) * len(keys) if case.is_default else tuple(case.values)
                target = {ACCEPT: _ACCEPT_ID, REJECT: _REJECT_ID}.get(case.next_state)
                cases.append((values, self.ids[case.next_state] if target is None else target))
            self.states.append(_State(st.name, tuple(steps), keys, tuple(cases), progresses))
        self.start = self.ids.get(spec.start_state, _ACCEPT_ID) if self.names else _ACCEPT_ID
        self.order = self._order()
        self.cyclic = self._cyclic()
        self.key_widths = [[self._width(k) for k in st.keys] for st in self.states]

    # -- preparation --------------------------------------------------------------------------------
    def _type_width(self, header: str) -> int:
        return self.spec.header_types[self.instances[header].type_name].width

    def _group(self) -> tuple[str, ...]:
        """The row stack and the adjacent stacks of its size (backends.common.parser.emit_groups)."""
        if self.row_stack is None:
            return ()
        groups: list[list[str]] = []
        prev = None
        for h in self.spec.headers:
            if h.stack_size and h.stack_size == prev:
                groups[-1].append(h.name)
            else:
                groups.append([h.name])
            prev = h.stack_size
        return tuple(next(g for g in groups if self.row_stack in g))

    def _ref(self, name: str) -> _Ref:
        ref = self._refs.get(name)
        if ref is None:
            inst, index, last, fname = _FIELD_REF.fullmatch(name).groups()
            selector = "last" if last else "index" if index is not None else ""
            width = self.spec.header_types[self.instances[inst].type_name].field(fname).width
            ref = self._refs[name] = _Ref(inst, selector, int(index or 0), fname, width)
        return ref

    def _width(self, expr: ex.Expr) -> int | None:
        try:
            return ex.width_of(expr, lambda name: self._ref(name).width)
        except SpecError:
            return None

    def _order(self) -> list[int]:
        """States in reverse post-order from the start (a topological order when the graph is acyclic)."""
        seen: set[int] = set()
        post: list[int] = []
        if self.start < 0:
            return []
        stack = [(self.start, iter(t for _, t in self.states[self.start].cases))]
        seen.add(self.start)
        while stack:
            node, it = stack[-1]
            nxt = next((t for t in it if t >= 0 and t not in seen), None)
            if nxt is None:
                post.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(t for _, t in self.states[nxt].cases)))
        order = post[::-1]
        return order + [i for i in range(len(self.states)) if i not in seen]

    def _cyclic(self) -> bool:
        rank = {s: i for i, s in enumerate(self.order)}
        return any(t >= 0 and rank[t] <= rank[i] for i, st in enumerate(self.states) for _, t in st.cases)

    # -- running ---------------------------------------------------------------------------------------
    def parse_packets(self, packets: Sequence[bytes]) -> ParsedBatch:
        """Parse a list of packets (tests, small inputs): the same as :meth:`parse_buffer`."""
        lengths = np.array([len(p) for p in packets], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(packets) else lengths
        return self.parse_buffer(b"".join(packets), offsets, lengths)

    def parse_buffer(self, buffer: bytes, offsets: np.ndarray, lengths: np.ndarray) -> ParsedBatch:
        """Parse the packets ``buffer[offsets[i]:offsets[i] + lengths[i]]``."""
        buf = np.zeros(len(buffer) + _PAD, dtype=np.uint8)
        buf[: len(buffer)] = np.frombuffer(buffer, dtype=np.uint8)
        run = _Run(self, buf, np.asarray(offsets, dtype=np.int64) * 8, np.asarray(lengths, dtype=np.int64) * 8)
        run.go()
        return run.rows()


def _fold(expr: ex.Expr) -> ex.Expr:
    """Constant subtrees as literals (errors in them are left in place, to be raised per packet)."""
    if isinstance(expr, (ex.Num, ex.Ref, ex.Lookahead)):
        return expr
    if ex.is_constant(expr):
        try:
            return ex.Num(ex.evaluate(expr), ex.width_of(expr, lambda name: 0))
        except SpecError:
            return expr
    if isinstance(expr, ex.Cast):
        return ex.Cast(expr.width, _fold(expr.operand))
    if isinstance(expr, ex.Unary):
        return ex.Unary(expr.op, _fold(expr.operand))
    return ex.Binary(expr.op, _fold(expr.left), _fold(expr.right))


class _Fallback(Exception):
    """An expression this module does not vectorise; evaluate it one packet at a time."""


@dataclass
class _Run:
    """The mutable state of one batch through the graph."""

    reader: SpecReader
    buf: np.ndarray
    start: np.ndarray  # bit offset of each packet in buf
    total: np.ndarray  # bits in each packet
    cursor: np.ndarray = field(init=False)
    state: np.ndarray = field(init=False)
    status: np.ndarray = field(init=False)
    valid: dict[str, np.ndarray] = field(init=False)
    scalar: dict[tuple[str, str], np.ndarray] = field(init=False)
    count: dict[str, np.ndarray] = field(init=False)
    last: dict[tuple[str, str], np.ndarray] = field(init=False)
    dense: dict[tuple[str, str], np.ndarray] = field(init=False)
    no_progress: np.ndarray | None = field(init=False)

    def __post_init__(self) -> None:
        r, n = self.reader, len(self.start)
        self.cursor = np.zeros(n, dtype=np.int64)
        self.state = np.full(n, r.start, dtype=np.int64)
        self.status = np.zeros(n, dtype=np.int8)
        self.valid = {h: np.zeros(n, dtype=bool) for h in r.scalars}
        self.count = {h.name: np.zeros(n, dtype=np.int64) for h in r.spec.headers if h.stack_size is not None}

        def column(inst: str, name: str, shape) -> np.ndarray:
            width = r.spec.header_types[r.instances[inst].type_name].field(name).width
            return np.zeros(shape, dtype=np.uint64) if width <= 64 else np.full(shape, 0, dtype=object)

        self.scalar = {(h, f): column(h, f, n) for h, fs in r.scalar_keep.items() for f in fs}
        self.last = {(h, f): column(h, f, n) for h, fs in r.last_keep.items() for f in fs}
        self.dense = {(h, f): column(h, f, (n, r.instances[h].stack_size)) for h, fs in r.index_keep.items() for f in fs}
        self.no_progress = np.zeros((n, len(r.states)), dtype=bool) if r.cyclic else None

    @functools.cached_property
    def raw(self) -> bytes:
        """The buffer as bytes, for the rare reads of wide values."""
        return self.buf.tobytes()

    def stop(self, idx: np.ndarray, status: str) -> None:
        if len(idx):
            self.status[idx] = _CODE[status]
            self.state[idx] = _STOPPED

    def go(self) -> None:
        r = self.reader
        if r.start == _ACCEPT_ID:
            self.state[:] = _ACCEPT_ID
        if not r.cyclic:
            # A topological order: once a state is visited no packet can enter it again, so one
            # visit per state, with every packet that goes through it, is the whole parse.
            for s in r.order:
                idx = np.flatnonzero(self.state == s)
                if len(idx):
                    self.visit(s, idx)
        else:
            rank = np.full(len(r.states), len(r.states), dtype=np.int64)
            for i, s in enumerate(r.order):
                rank[s] = i
            while True:
                live = self.state[self.state >= 0]
                if not len(live):
                    break
                present = np.flatnonzero(np.bincount(live, minlength=len(r.states)))
                s = int(present[np.argmin(rank[present])])
                self.visit(s, np.flatnonzero(self.state == s))
        self.status[self.state == _ACCEPT_ID] = _CODE[ACCEPT]
        self.status[self.state == _REJECT_ID] = _CODE[REJECT]

    def visit(self, s: int, idx: np.ndarray) -> None:
        st = self.reader.states[s]
        if self.no_progress is not None:
            looped = self.no_progress[idx, s]
            self.stop(idx[looped], PARSER_LOOP)
            idx = idx[~looped]
            self.no_progress[idx, s] = True
        progressed = np.zeros(len(idx), dtype=bool)
        for step in st.steps:
            if isinstance(step, _Extract):
                keep = self.extract(step, idx)
                progressed = np.ones(int(keep.sum()), dtype=bool)
            else:
                keep, moved = self.advance(step, idx)
                progressed = progressed[keep] | moved
            idx = idx[keep]
            if not len(idx):
                return
        if self.no_progress is not None and progressed.any():
            self.no_progress[idx[progressed]] = False
        self.select(st, s, idx)

    # -- statements -------------------------------------------------------------------------------
    def extract(self, step: _Extract, idx: np.ndarray) -> np.ndarray:
        # Each per-packet column is gathered once, and the usual case (every packet has room and
        # bytes left) skips the masking: these run once per state and depth over whole batches.
        cursor = self.cursor[idx]
        keep = cursor + step.width <= self.total[idx]
        stack = step.stack_size is not None
        if stack:
            pos = self.count[step.instance][idx]
            room = pos < step.stack_size
            if not room.all():
                self.stop(idx[~room], STACK_OUT_OF_BOUNDS)  # said before "too short", as P4 checks it first
                keep &= room
                short = room & ~keep
            else:
                short = ~keep
        else:
            short = ~keep
        if short.any():
            self.stop(idx[short], PACKET_TOO_SHORT)
        if keep.all():
            go = idx
        else:
            go, cursor = idx[keep], cursor[keep]
            if stack:
                pos = pos[keep]
        at = self.start[go] + cursor
        r = self.reader
        if not stack:
            self.valid[step.instance][go] = True
            for name, off, width in step.fields:
                self.scalar[(step.instance, name)][go] = read_bits(self.buf, at + off, width, self.raw if width > 64 else None)
        else:
            for name, off, width in step.fields:
                values = read_bits(self.buf, at + off, width, self.raw if width > 64 else None)
                if name in r.last_keep.get(step.instance, ()):
                    self.last[(step.instance, name)][go] = values
                if name in r.index_keep.get(step.instance, ()):
                    self.dense[(step.instance, name)][go, pos] = values
            self.count[step.instance][go] = pos + 1
        self.cursor[go] = cursor + step.width
        return keep

    def advance(self, step: _Advance, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if step.bits is not None:
            bits = np.full(len(idx), step.bits, dtype=np.int64)
            err = np.zeros(len(idx), dtype=np.int8)
        else:
            values, err = self.evaluate(step.expr, idx)
            if values.dtype == object:  # wide or untyped values: a negative amount is an error, as in P4
                ints = [int(v) for v in values]
                err = np.where((err == 0) & np.array([v < 0 for v in ints], dtype=bool),
                               _CODE[EXPRESSION_ERROR], err).astype(np.int8)
                bits = np.array([min(max(v, 0), 1 << 62) for v in ints], dtype=np.int64)
            else:
                bits = np.minimum(values, _U(1 << 62)).astype(np.int64)
        keep = err == 0
        if not keep.all():
            for code in np.unique(err[~keep]):
                self.stop(idx[err == code], STATUSES[code - 1])
        moved = self.cursor[idx] + bits
        short = keep & (moved > self.total[idx])
        if short.any():
            self.stop(idx[short], PACKET_TOO_SHORT)
            keep &= ~short
        if keep.all():
            self.cursor[idx] = moved
            return keep, bits > 0
        self.cursor[idx[keep]] = moved[keep]
        return keep, bits[keep] > 0

    def select(self, st: _State, s: int, idx: np.ndarray) -> None:
        if not st.keys:
            self.state[idx] = st.cases[0][1] if st.cases else _REJECT_ID
            return
        values = []
        err = np.zeros(len(idx), dtype=np.int8)
        for key in st.keys:
            v, e = self.evaluate(key, idx)
            err = np.where(err == 0, e, err)
            values.append(v)
        target = np.full(len(idx), -10, dtype=np.int64)
        undecided = err == 0
        for case_values, goto in st.cases:
            hit = undecided.copy()
            for v, cv in zip(values, case_values):
                if cv is None:
                    continue
                value, mask = cv
                want = value & mask
                if v.dtype == object:
                    hit &= np.array([(int(x) & mask) == want for x in v], dtype=bool)
                elif want > _M64:
                    hit &= False
                else:
                    hit &= (v & _U(mask & _M64)) == _U(want)
            target[hit] = goto
            undecided &= ~hit
        if err.any():
            for code in np.unique(err[err != 0]):
                self.stop(idx[err == code], STATUSES[code - 1])
        if undecided.any():
            self.stop(idx[undecided], NO_MATCH)
        decided = target != -10
        self.state[idx[decided]] = target[decided]

    # -- expressions ----------------------------------------------------------------------------------
    def evaluate(self, expr: ex.Expr, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values (uint64, or object for wide results) and error codes (0: none) of ``expr`` per packet."""
        try:
            value, width, err = self._vec(expr, idx)
            if width is None:
                raise _Fallback
            return value, err
        except _Fallback:
            return self._per_packet(expr, idx)

    def _vec(self, expr: ex.Expr, idx: np.ndarray) -> tuple[np.ndarray, int | None, np.ndarray]:
        n = len(idx)
        no_err = np.zeros(n, dtype=np.int8)
        if isinstance(expr, ex.Num):
            if expr.value < 0 or expr.value > _M64 or (expr.width or 0) > 64:
                raise _Fallback
            return np.full(n, expr.value, dtype=np.uint64), expr.width, no_err
        if isinstance(expr, ex.Ref):
            ref = self.reader._ref(expr.name)
            if ref.width > 64:
                raise _Fallback
            if ref.selector == "":
                return self.scalar[ref.key][idx], ref.width, no_err
            if ref.selector == "last":
                empty = self.count[ref.instance][idx] == 0
                return self.last[ref.key][idx], ref.width, np.where(empty, _CODE[STACK_OUT_OF_BOUNDS], 0).astype(np.int8)
            return self.dense[ref.key][idx, ref.index], ref.width, no_err
        if isinstance(expr, ex.Lookahead):
            if expr.width > 64:
                raise _Fallback
            short = self.cursor[idx] + expr.width > self.total[idx]
            at = self.start[idx] + np.where(short, 0, self.cursor[idx])
            return read_bits(self.buf, at, expr.width), expr.width, np.where(short, _CODE[PACKET_TOO_SHORT], 0).astype(np.int8)
        if isinstance(expr, ex.Cast):
            v, w, e = self._vec(expr.operand, idx)
            if expr.width > 64 or w is None:
                raise _Fallback
            return v & _mask(expr.width), expr.width, e
        if isinstance(expr, ex.Unary):
            v, w, e = self._vec(expr.operand, idx)
            if w is None:
                raise _Fallback
            if expr.op == "-":
                return (_U(0) - v) & _mask(w), w, e
            return v ^ _mask(w), w, e
        lv, lw, le = self._vec(expr.left, idx)
        rv, rw, re_ = self._vec(expr.right, idx)
        err = np.where(le != 0, le, re_)
        if expr.op in ("<<", ">>"):
            if lw is None:
                raise _Fallback
            big = rv >= _U(64)
            safe = np.where(big, _U(0), rv)
            if expr.op == ">>":
                return np.where(big, _U(0), lv >> safe), lw, err
            return np.where(rv >= _U(lw), _U(0), (lv << safe) & _mask(lw)), lw, err
        width = lw if lw is not None else rw
        if width is None or (lw is not None and rw is not None and lw != rw):
            raise _Fallback
        op = expr.op
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if op in ("/", "%"):
                zero = rv == _U(0)
                err = np.where((err == 0) & zero, _CODE[EXPRESSION_ERROR], err).astype(np.int8)
                d = np.where(zero, _U(1), rv)
                v = lv // d if op == "/" else lv % d
            elif op == "*":
                v = lv * rv
            elif op == "+":
                v = lv + rv
            elif op == "-":
                v = lv - rv
            elif op == "&":
                v = lv & rv
            elif op == "^":
                v = lv ^ rv
            else:
                v = lv | rv
        return v & _mask(width), width, err

    def _per_packet(self, expr: ex.Expr, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The reference semantics one packet at a time (wide or untyped intermediate values)."""
        out = np.empty(len(idx), dtype=object)
        err = np.zeros(len(idx), dtype=np.int8)
        raw = self.raw
        for j, p in enumerate(idx.tolist()):
            def lookup(name: str, p: int = p) -> tuple[int, int]:
                ref = self.reader._ref(name)
                if ref.selector == "":
                    return int(self.scalar[ref.key][p]), ref.width
                if ref.selector == "last":
                    if self.count[ref.instance][p] == 0:
                        raise _PacketStop(STACK_OUT_OF_BOUNDS)
                    return int(self.last[ref.key][p]), ref.width
                return int(self.dense[ref.key][p, ref.index]), ref.width

            def peek(width: int, p: int = p) -> int:
                if self.cursor[p] + width > self.total[p]:
                    raise _PacketStop(PACKET_TOO_SHORT)
                at = int(self.start[p] + self.cursor[p])
                first, last = at >> 3, (at + width + 7) >> 3
                chunk = int.from_bytes(raw[first:last], "big")
                return (chunk >> (last * 8 - at - width)) & ((1 << width) - 1)

            try:
                out[j] = ex.evaluate(expr, lookup, peek)
            except _PacketStop as stop:
                err[j], out[j] = _CODE[stop.status], 0
            except SpecError:
                err[j], out[j] = _CODE[EXPRESSION_ERROR], 0
        if all(0 <= v <= _M64 for v in out):
            return out.astype(np.uint64), err
        return out, err

    # -- output ----------------------------------------------------------------------------------------
    def rows(self) -> ParsedBatch:
        r, n = self.reader, len(self.start)
        statuses = {STATUSES[c - 1]: int(k) for c, k in zip(*np.unique(self.status, return_counts=True)) if c}
        if r.row_stack is None:
            packet = np.arange(n, dtype=np.int64)
            element = np.zeros(n, dtype=np.int64)
            messages = np.ones(n, dtype=np.int64)
        else:
            counts = self.count[r.row_stack]
            packet = np.repeat(np.arange(n, dtype=np.int64), counts)
            first = np.cumsum(counts) - counts
            element = np.arange(len(packet), dtype=np.int64) - first[packet]
            messages = np.max(np.stack([self.count[h] for h in r.group]), axis=0)
        cols: dict[str, np.ndarray] = {}
        for f in r.fields:
            h, name = f.split(".", 1)
            if h == r.row_stack:
                cols[f] = self.dense[(h, name)][packet, element]
            else:
                cols[f] = self.scalar[(h, name)][packet]
        for h in r.scalars:
            cols[valid_name(h)] = self.valid[h][packet].astype(np.uint64)
        return ParsedBatch(cols, packet, element, n, statuses, messages)


class _PacketStop(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status
