"""Packets for a user's own protocol, generated from its spec: ``p4sub gen --spec SPEC``.

Replay and netsim read any protocol a spec describes; this writes traces for one, so a user can
measure what p4sub built without a capture of their own. Each packet is a random walk through the
spec's parse graph from the start state to ``accept``:

* ``extract`` appends the header with random field values; the queried fields (``@query_field``)
  get values a subscriber might test: strings as space-padded words, numbers uniform over their
  width, or, with ``constants`` (the rules' own), one of those constants or a neighbour half the time;
* ``select`` picks a case (preferring cases from which a queried header can still be reached, and
  ``default`` only for values no earlier case matches) and writes the key fields, or the lookahead
  bits, so that they match it;
* ``advance`` appends random bits; when its amount is computed from fields, those fields are
  redrawn small until the amount fits a frame.

Parse graphs may loop (a state that extracts and goes back to itself, states in a cycle). Every
walk ends: a spec whose start state has no path to ``accept`` is refused before any walk, at the
start state's line; after :data:`STEER_AFTER` states a walk takes only the cases nearest to
``accept``; a walk is abandoned at :data:`MAX_STATES` states, at :data:`MAX_PACKET_BYTES` bytes, or
when it enters a state again without having consumed a bit (the parser would stop there with
``parser_loop``).

Every packet is then parsed with :class:`runtime.parse_graph.ParseGraph` and kept only if the
parser takes exactly the walk's path to ``accept`` (a walk that a later constraint broke, or that
overflowed a stack, is drawn again), so the headers are valid per the parse graph by construction.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from compiler.base import P4subError
from compiler.spec import Advance, Extract, Spec, parse_expression
from compiler.spec import expr as ex
from runtime.parse_graph import ACCEPT, REJECT, ParseGraph

MAX_STATES = 256  # a walk longer than this is abandoned (a loop the dice keep taking)
STEER_AFTER = 16  # past this many states a walk takes the cases nearest to accept: loops end
MAX_ADVANCE_BITS = 1400 * 8
MAX_PACKET_BYTES = 9216  # a jumbo frame: a walk whose headers grow past it is abandoned
TRIES = 200
_WORDS = string.ascii_uppercase


@dataclass
class _Header:
    name: str  # instance
    index: int | None
    layout: tuple[tuple[str, int, int], ...]  # (field, offset, width)
    values: dict[str, int]


@dataclass
class _Walk:
    """A packet under construction: segments are headers or raw bits, in wire order."""

    segments: list = field(default_factory=list)  # _Header or (value, width)
    headers: dict[str, _Header] = field(default_factory=dict)
    stacks: dict[str, list[_Header]] = field(default_factory=dict)
    pending: list[tuple[int, int, int, int]] = field(default_factory=list)  # (bit, width, value, mask)
    bits: int = 0
    path: list[str] = field(default_factory=list)
    live: list[tuple[int, int, int, int]] = field(default_factory=list)  # pending entries not yet passed


class SpecPacketGenerator:
    """Random packets that ``spec``'s parser accepts along the path they were built for."""

    def __init__(self, spec: Spec, seed: int = 0, constants: Mapping[str, Sequence[int]] | None = None) -> None:
        if not spec.parser_states:
            raise P4subError(f"{spec.path}: the spec has no parser to generate packets for")
        self.spec = spec
        self.graph = ParseGraph(spec)
        self.rng = random.Random(seed)
        self.constants = {k: sorted(set(v)) for k, v in (constants or {}).items() if v}
        self.instances = {h.name: h for h in spec.headers}
        self.query_headers = {q.header for q in spec.query_fields.values()}
        self.reaches = self._reaches()
        self.distance = self._distance()
        if spec.start_state not in self.distance:
            start = spec.parser_states.get(spec.start_state)
            raise P4subError(f"gen --spec: no path of the parser from state {spec.start_state!r} reaches accept "
                             f"(its states loop or reject), so no packet can be generated",
                             start.location if start is not None else None)
        self.advances = {}
        for st in spec.parser_states.values():
            for i, stmt in enumerate(st.statements):
                if isinstance(stmt, Advance) and stmt.bits is None:
                    self.advances[(st.name, i)] = parse_expression(stmt.expression)

    def _reaches(self) -> dict[str, set[str]]:
        """Per state: the queried headers some path from it extracts (a fixpoint over the graph)."""
        own = {n: {s.header for s in st.statements if isinstance(s, Extract)} & self.query_headers
               for n, st in self.spec.parser_states.items()}
        reach = {n: set(v) for n, v in own.items()}
        changed = True
        while changed:
            changed = False
            for n, st in self.spec.parser_states.items():
                for case in st.cases:
                    extra = reach.get(case.next_state, set()) - reach[n]
                    if extra:
                        reach[n] |= extra
                        changed = True
        return reach

    def _distance(self) -> dict[str, int]:
        """Per state, the fewest transitions from it to ``accept`` (states with no path are left out)."""
        into: dict[str, set[str]] = {}
        for n, st in self.spec.parser_states.items():
            for case in st.cases:
                into.setdefault(case.next_state, set()).add(n)
        distance, frontier = {ACCEPT: 0}, [ACCEPT]
        while frontier:
            nxt = []
            for target in frontier:
                for n in into.get(target, ()):
                    if n not in distance:
                        distance[n] = distance[target] + 1
                        nxt.append(n)
            frontier = nxt
        return distance

    # -- values --------------------------------------------------------------------------------------
    def _value(self, ref: str, width: int) -> int:
        q = self.spec.query_fields.get(ref)
        consts = self.constants.get(ref)
        if consts and self.rng.random() < 0.5:
            return min(max(self.rng.choice(consts) + self.rng.choice((-1, 0, 0, 1)), 0), (1 << width) - 1)
        if q is not None and q.is_string and width % 8 == 0:
            word = "".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(1, width // 8)))
            return int.from_bytes(word.ljust(width // 8).encode("ascii"), "big")
        return self.rng.getrandbits(width) if width else 0

    def _extract(self, walk: _Walk, name: str, stack: bool) -> bool:
        inst = self.instances[name]
        htype = self.spec.header_types[inst.type_name]
        layout, off = [], 0
        for fdef in htype.fields:
            layout.append((fdef.name, off, fdef.width))
            off += fdef.width
        elements = walk.stacks.setdefault(name, []) if stack else None
        if elements is not None and len(elements) >= (inst.stack_size or 0):
            return False
        header = _Header(name, len(elements) if elements is not None else None, tuple(layout),
                         {f: self._value(f"{name}.{f}", w) for f, _, w in layout})
        header_start = walk.bits
        # A lookahead constraint on these bits fixes the fields it covers; those that end before
        # them are done with (the list would otherwise grow with every state of a looping walk).
        walk.live = [p for p in walk.live if p[0] + p[1] > header_start]
        for at, width, value, mask in walk.live:
            for f, foff, fw in layout:
                lo, hi = header_start + foff, header_start + foff + fw
                a, b = max(lo, at), min(hi, at + width)
                if a < b:
                    part_mask = ((mask >> (at + width - b)) & ((1 << (b - a)) - 1)) << (hi - b)
                    part_val = ((value >> (at + width - b)) & ((1 << (b - a)) - 1)) << (hi - b)
                    header.values[f] = (header.values[f] & ~part_mask) | (part_val & part_mask)
        walk.segments.append(header)
        walk.bits += off
        if elements is not None:
            elements.append(header)
        else:
            walk.headers[name] = header
        return True

    def _field(self, walk: _Walk, ref: str) -> tuple[_Header, str, int] | None:
        name, _, rest = ref.partition(".")
        if rest.startswith("last."):
            elements = walk.stacks.get(name, [])
            header, fname = (elements[-1] if elements else None), rest[5:]
        elif "[" in name:
            base, index = name[:-1].split("[")
            elements = walk.stacks.get(base, [])
            header, fname = (elements[int(index)] if int(index) < len(elements) else None), rest
        else:
            header, fname = walk.headers.get(name), rest
        if header is None:
            return None
        width = next(w for f, _, w in header.layout if f == fname)
        return header, fname, width

    def _lookup(self, walk: _Walk):
        def lookup(ref: str) -> tuple[int, int]:
            found = self._field(walk, ref)
            if found is None:
                raise P4subError(f"{ref} is not extracted yet")
            header, fname, width = found
            return header.values[fname], width
        return lookup

    def _advance(self, walk: _Walk, state: str, i: int, stmt: Advance) -> bool:
        if stmt.bits is not None:
            bits = stmt.bits
        else:
            expr = self.advances[(state, i)]
            bits = -1
            for attempt in range(32):
                try:
                    bits = ex.evaluate(expr, self._lookup(walk))
                except P4subError:
                    return False
                if 0 <= bits <= MAX_ADVANCE_BITS:
                    break
                for ref in ex.refs(expr):  # redraw the fields the amount is computed from, small
                    found = self._field(walk, ref.name)
                    if found:
                        header, fname, width = found
                        header.values[fname] = self.rng.randint(0, min((1 << width) - 1, 64 if attempt < 16 else 8))
            if not 0 <= bits <= MAX_ADVANCE_BITS:
                return False
        walk.segments.append((self.rng.getrandbits(bits) if bits else 0, bits))
        walk.bits += bits
        return True

    def _select(self, walk: _Walk, state) -> str | None:
        if not state.select_keys:
            return state.cases[0].next_state if state.cases else REJECT
        cases = list(state.cases)
        wanted = self.query_headers - {h for h in self.query_headers if h in walk.headers or walk.stacks.get(h)}
        useful = [c for c in cases if c.next_state == ACCEPT and not wanted
                  or wanted & self.reaches.get(c.next_state, set())]
        pool = useful if useful and self.rng.random() < 0.85 else cases
        pool = [c for c in pool if c.next_state != REJECT] or pool
        if len(walk.path) > STEER_AFTER:  # a long walk heads for accept
            nearest = min(self.distance.get(c.next_state, MAX_STATES) for c in cases)
            pool = [c for c in cases if self.distance.get(c.next_state, MAX_STATES) == nearest]
        for _ in range(8):
            case = self.rng.choice(pool)
            if self._set_keys(walk, state, case, cases[: cases.index(case)]):
                return case.next_state
        return None

    def _set_keys(self, walk: _Walk, state, case, earlier) -> bool:
        """Write the select key values so that ``case`` is the first case that matches."""
        for _ in range(16):
            chosen = []
            for k, key in enumerate(state.select_keys):
                entry = case.values[k] if not case.is_default else None
                width = int(key.split(":")[1]) if key.startswith("lookahead:") else self._field(walk, key)[2] \
                    if self._field(walk, key) else None
                if width is None:
                    return False
                value = self.rng.getrandbits(width)
                if entry is not None:
                    v, mask = entry
                    value = (value & ~mask) | (v & mask)
                chosen.append((key, width, value & ((1 << width) - 1)))
            if any(all(e is None or (val & e[1]) == (e[0] & e[1]) for e, (_, _, val) in zip(c.values, chosen))
                   for c in earlier if not c.is_default):
                continue
            for key, width, value in chosen:
                if key.startswith("lookahead:"):
                    walk.pending.append((walk.bits, width, value, (1 << width) - 1))
                    walk.live.append(walk.pending[-1])
                else:
                    header, fname, _ = self._field(walk, key)
                    header.values[fname] = value
            return True
        return False

    # -- packets ---------------------------------------------------------------------------------------
    def _walk(self) -> _Walk | None:
        walk = _Walk()
        name = self.spec.start_state
        still: set[str] = set()  # states entered since the walk last consumed a bit
        at = 0
        while name not in (ACCEPT, REJECT):
            if len(walk.path) >= MAX_STATES or walk.bits > MAX_PACKET_BYTES * 8:
                return None
            if walk.bits != at:
                still.clear()
                at = walk.bits
            if name in still:
                return None
            still.add(name)
            walk.path.append(name)
            state = self.spec.parser_states[name]
            for i, stmt in enumerate(state.statements):
                ok = self._extract(walk, stmt.header, stmt.next) if isinstance(stmt, Extract) else \
                    self._advance(walk, name, i, stmt)
                if not ok:
                    return None
            nxt = self._select(walk, state)
            if nxt is None:
                return None
            name = nxt
        return walk if name == ACCEPT else None

    @staticmethod
    def _bytes(walk: _Walk, rng: random.Random) -> bytes:
        value, bits = 0, 0
        for seg in walk.segments:
            if isinstance(seg, _Header):
                for f, _, w in seg.layout:
                    value = (value << w) | seg.values[f]
                    bits += w
            else:
                v, w = seg
                value = (value << w) | v
                bits += w
        for at, width, v, mask in walk.pending:  # lookahead bits past the last header
            if at + width > bits:
                value = (value << (at + width - bits)) | rng.getrandbits(at + width - bits)
                bits = at + width
                shift = bits - at - width
                value = (value & ~(mask << shift)) | ((v & mask) << shift)
        pad = -bits % 8
        value = (value << pad) | (rng.getrandbits(pad) if pad else 0)
        return value.to_bytes((bits + pad) // 8, "big")

    def packet(self) -> bytes:
        """One packet the parser accepts along the walk it was built on."""
        for _ in range(TRIES):
            walk = self._walk()
            if walk is None:
                continue
            data = self._bytes(walk, self.rng)
            parsed = self.graph.parse(data)
            if parsed.ok and list(parsed.states) == walk.path:
                return data
        raise P4subError(f"{self.spec.path}: no packet reached accept in {TRIES} random walks of the parse graph "
                         "(is accept reachable with the stacks' sizes?)")

    def packets(self, n: int) -> Iterator[bytes]:
        for _ in range(n):
            yield self.packet()


def rule_constants(typed) -> dict[str, list[int]]:
    """Per field, the raw constants the rules compare it with (what a packet must hit to match)."""
    from compiler import rules as ast
    from compiler.rules import encode_string, scale_decimal

    out: dict[str, list[int]] = {}
    for rule in typed.rules:
        for cmp in ast.comparisons(rule.filter):
            if not isinstance(cmp.attribute, ast.Field):
                continue
            info = typed.fields.get(cmp.attribute.name)
            if info is None:
                continue
            const = cmp.value
            if isinstance(const, ast.String):
                value = encode_string(const.value, info.width) if cmp.op != "prefix" else \
                    int.from_bytes(const.value.encode("ascii").ljust(info.width // 8), "big")
            elif isinstance(const, ast.Number):
                value = scale_decimal(const.value, info.scale) if info.scale else int(const.value)
            else:
                value = getattr(const, "value", None)
            if isinstance(value, int) and 0 <= value < 1 << info.width:
                out.setdefault(cmp.attribute.name, []).append(value)
    return out
