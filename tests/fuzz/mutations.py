"""Hypothesis strategies for hostile inputs: valid files damaged a little (most bugs live one edit
away from a valid input), hostile tokens spliced in, and JSON trees with one node replaced."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

#: Text that has broken readers before (issue 19) or that sits on a boundary.
HOSTILE_TOKENS = [
    "\uff11\uff12", "\u0663", "9" * 300, "1" * 5000, "0x" + "f" * 300, "\ufeff", "\x00", "\xff",
    "not " * 200, "(" * 200, ")" * 200, "! ", '"', '"\\', "/*", "*/", "#", "//", "\n", "\r\n", "\t", "{", "}",
    ";", ":", ",", "fwd(511)", "fwd(-1)", "fwd()", "drop", "1e400", "NaN", "-1", "0", "4294967296",
    "18446744073709551616", "::1", "10.0.0.0/33", "999.1.1.1", "ff:ff:ff:ff:ff:ff", "prefix", "==", "<", ">=",
    "add_order.price", "add_order.stock", "h.$valid", "and", "or", "\u00e9", "\U0001f600", " " * 50,
    "@query_field(", "@pragma query_field_exact(", "header", "struct", "parser", "state", "transition",
    "select(", "packet.extract(", "packet.advance(", "bit<", "bit<0>", "bit<99999999>", "[1000000000]",
    "#include \"x.p4\"", "#include \"/dev/zero\"", "#define", "// -*- P4_14 -*-", "header_type", "fields {",
]

_TEXT_PIECES = st.one_of(st.sampled_from(HOSTILE_TOKENS), st.text(max_size=12))


@st.composite
def mutated_text(draw, base: str, max_edits: int = 4) -> str:
    """``base`` with 1..max_edits edits: a slice deleted, duplicated or moved, a hostile piece inserted,
    the text cut short."""
    text = base
    for _ in range(draw(st.integers(1, max_edits))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 200)))
        op = draw(st.sampled_from(["delete", "duplicate", "insert", "insert", "replace", "truncate", "move"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(_TEXT_PIECES) + text[i:]
        elif op == "replace":
            text = text[:i] + draw(_TEXT_PIECES) + text[j:]
        elif op == "truncate":
            text = text[:i]
        else:
            piece = text[i:j]
            rest = text[:i] + text[j:]
            k = draw(st.integers(0, len(rest)))
            text = rest[:k] + piece + rest[k:]
    return text


@st.composite
def mutated_bytes(draw, base: bytes, max_edits: int = 4) -> bytes:
    """``base`` with byte-level edits: flips, extreme 32-bit words, cuts, insertions."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, max_edits))):
        n = len(data)
        i = draw(st.integers(0, n))
        op = draw(st.sampled_from(["flip", "word", "word", "truncate", "insert", "delete"]))
        if op == "flip" and n:
            i = min(i, n - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "word" and n >= 4:
            i = min(i, n - 4)
            word = draw(st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFF, 65536, 12, 24]))
            data[i:i + 4] = word.to_bytes(4, draw(st.sampled_from(["little", "big"])))
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(max_size=32))
        else:
            del data[i:i + draw(st.integers(1, 64))]
    return bytes(data)


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, -1, 2**64]),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10),
                         st.sampled_from(["", "0", "1.5", "meta.p4sub_state", "NoAction", "exact", "Range"]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                  st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=6)


def json_paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) to a node of a JSON tree."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out.extend(json_paths(v, prefix + (k,)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.extend(json_paths(v, prefix + (i,)))
    return out


@st.composite
def mutated_json(draw, base: Any, paths: list[tuple], max_edits: int = 2) -> Any:
    """A deep copy of ``base`` with 1..max_edits nodes replaced, deleted or duplicated."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_edits))):
        path = draw(st.sampled_from(paths))
        if not path:
            continue
        parent = data
        try:
            for step in path[:-1]:
                parent = parent[step]
            last = path[-1]
            parent[last]  # noqa: B018 - the path may be gone after an earlier edit
        except (KeyError, IndexError, TypeError):
            continue
        op = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "number"]))
        if op == "replace":
            parent[last] = draw(JSON_VALUES)
        elif op == "delete":
            del parent[last]
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        elif op == "number" and type(parent[last]) is int:
            parent[last] = draw(st.sampled_from([parent[last] + 1, parent[last] - 1, 0, -1, 2**32, 2**70]))
    return data


LOOP_HEAD = """
header a_t { bit<8> x; bit<8> y; }
header b_t { bit<16> z; }
@query_field(a.y)
struct headers { a_t a; b_t b; a_t[4] s; }
parser P(packet_in packet, out headers hdr) {
"""


@st.composite
def looping_parser(draw) -> str:
    """A P4_16 parser of 1-4 states with self-loops, cycles, stacks, lookahead and computed advances
    (issue 27: a parser whose states loop made ``gen --spec`` run forever)."""
    n = draw(st.integers(1, 4))
    names = ["start"] + [f"s{i}" for i in range(1, n)]
    targets = names + ["accept", "reject"]
    states = []
    for name in names:
        body = draw(st.lists(st.sampled_from(["packet.extract(hdr.a);", "packet.extract(hdr.b);",
                                              "packet.extract(hdr.s.next);", "packet.advance(0);",
                                              "packet.advance(8);", "packet.advance((bit<32>)hdr.b.z * 8);"]),
                             max_size=2))
        if draw(st.booleans()):
            transition = f"transition {draw(st.sampled_from(targets))};"
        else:
            key = draw(st.sampled_from(["hdr.a.x", "packet.lookahead<bit<8>>()", "hdr.s.last.x", "hdr.b.z"]))
            cases = [f"{draw(st.integers(0, 3))}: {draw(st.sampled_from(targets))};"
                     for _ in range(draw(st.integers(1, 4)))]
            if draw(st.booleans()):
                cases.append(f"default: {draw(st.sampled_from(targets))};")
            transition = f"transition select({key}) {{ {' '.join(cases)} }}"
        states.append(f"    state {name} {{ {' '.join(body)} {transition} }}")
    return LOOP_HEAD + "\n".join(states) + "\n}\n"
