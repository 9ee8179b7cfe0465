"""The random PLEROMA networks the property tests share: a three-field spec, fat-tree:4, three
publishers, subscriptions drawn by hypothesis, and one scenario built from them (flows, optionally
merged under a limit, and random events with their dz's). Each test keeps its own oracle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from compiler.network import HOST_ID_BITS, fat_tree, parse_network_rules
from compiler.pleroma import Samples, build, enforce, flow_count
from compiler.rules import TypedRules, check_rules
from tests.compiler.specs import make_spec

SPEC = make_spec({"m.a": (6, {"match_kind": "range"}), "m.b": (6, {"match_kind": "range"}),
                  "m.c": (8, {"match_kind": "range"})})
FIELDS = ("m.a", "m.b", "m.c")
TOPO = fat_tree(4)
HOSTS = TOPO.hosts()
PUBS = [HOSTS[0], HOSTS[5], HOSTS[14]]
OPS = ("==", "!=", "<", ">", ">=")
#: Events per scenario; the first SAMPLED are the history sample the merges may look at.
EVENTS, SAMPLED = 120, 40


def subscription():
    """A host rule: 1 to 3 comparisons over the three fields, to 1 to 3 hosts."""
    cmp = st.builds(lambda f, op, c: f"m.{f} {op} {c}", st.sampled_from("abc"), st.sampled_from(OPS),
                    st.integers(1, 62))
    filt = st.lists(cmp, min_size=1, max_size=3).map(" and ".join)
    return st.builds(lambda f, hs: f"{f}: fwd({', '.join(HOSTS[h] for h in sorted(set(hs)))});", filt,
                     st.lists(st.integers(0, len(HOSTS) - 1), min_size=1, max_size=3))


#: hypothesis arguments of :func:`scenario` after the subscriptions.
SCENARIO_ARGS = (st.integers(0, 2**32 - 1), st.sampled_from(["value", "rank"]), st.sampled_from(["single", "publisher"]),
                 st.sampled_from([None, "baseline", "ms", "history", "traffic"]), st.integers(2, 24), st.booleans(),
                 st.booleans())


@dataclass
class Scenario:
    typed: TypedRules
    net: Any  # compiler.pleroma's built network
    tables: Any  # its flows, merged under ``limit`` when a method was drawn
    cols: dict[str, np.ndarray]
    dz: np.ndarray
    pubs: np.ndarray  # each event's publisher, an index into PUBS
    full: bool  # rank indexing at full resolution, no cap, no limit: an exact decomposition
    limit: int | None = None
    fits: bool = True


def scenario(lines: list[str], seed: int, indexing: str, tree: str, merge: str | None, resolution: int,
             exact: bool, on_add: bool) -> Scenario:
    if exact:
        indexing, merge, resolution = "rank", None, 24
    typed = check_rules(parse_network_rules("\n".join(lines), TOPO), SPEC, port_bits=HOST_ID_BITS)
    rng = np.random.default_rng(seed)
    cols = {f: rng.integers(0, 64, EVENTS).astype(np.uint64) for f in FIELDS}
    pubs = rng.integers(0, len(PUBS), EVENTS)
    full = merge is None and indexing == "rank" and resolution == 24
    net = build(TOPO, typed, PUBS, 64 if full else resolution, indexing, tree, max_dz=None if full else 8)
    dz = net.space.event_dz(cols, net.resolution)
    out = Scenario(typed, net, net.tables, cols, dz, pubs, full)
    if merge is not None:
        out.limit = max(2, max(flow_count(net.tables).values()) // 2)
        out.tables, stats = enforce(TOPO, net.tables, out.limit, merge, net.trees, net.resolution,
                                    Samples(dz[:SAMPLED], pubs[:SAMPLED], PUBS), seed=seed,
                                    requests=net.subscriptions if on_add else None)
        out.fits = stats.fits
    return out
