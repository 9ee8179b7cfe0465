"""A diagram builder that lives across updates: the full compile's construction, with every table kept.

:class:`compiler.bdd._Builder` builds a diagram once: it interns the rules' residuals, draws one
random key per residual, then sweeps. Here the same builder stays alive, so that a later update
builds only what changed and finds everything else where it was:

* residuals interned later get their random key when they are made (the memo of sets of residuals
  stays valid, its keys never change);
* nodes, leaves and emitted port sets are hash-consed on their structure in tables that were
  seeded with the old pipeline's diagram (:mod:`compiler.incremental.reconstruct`), so a subtree
  that an update builds again comes out as the node id it already had;
* node ids come from a counter that starts past the seeded ids, and nothing is ever renumbered.

Nodes no longer reachable stay in the tables (an update that brings them back finds them) until
:meth:`IncrementalBuilder.forget` drops them and the memo with them.
"""

from __future__ import annotations

import random

from compiler.bdd import _VECTOR_WIDTH, Diagram, Edge, Node, _Builder, merge_edges
from compiler.dnf import ActionSet
from compiler.spec import QueryField


class IncrementalBuilder(_Builder):
    def __init__(self, fields: list[QueryField], emit: bool, seed: int = 0) -> None:
        super().__init__(fields, seed, emit, None)
        self._keys = [[] for _ in range(self.levels + 1)]
        self._key_rng = random.Random(seed ^ 0x1CE)
        self._next_id = 0
        self._emission_of: dict[frozenset[int], int] = {frozenset(): 0}

    # -- seeding from a reconstructed diagram -----------------------------------------------
    def adopt(self, diagram: Diagram, next_id: int) -> None:
        """Take ``diagram``'s nodes, leaves and emissions as already built (their ids kept)."""
        self.diagram = diagram
        self._emission_of = {ports: i for i, ports in enumerate(diagram.emissions)}
        for node, actions in diagram.leaves.items():
            self._unique[("leaf", actions)] = node
        for node, n in diagram.nodes.items():
            self._unique[(n.level, n.edges, n.emits)] = node
        self._next_id = next_id

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    # -- keys drawn as residuals appear ---------------------------------------------------------
    def _key(self) -> int:
        return int.from_bytes(self._key_rng.randbytes(16), "little")

    def _item(self, item: tuple) -> int:
        n = len(self._item_values)
        idx = super()._item(item)
        if len(self._item_values) > n:
            self._keys[self.levels].append(self._key())
        return idx

    def _intern(self, level: int, cons, nxt: tuple[int, ...]) -> tuple[int, ...]:
        n = len(self._res_cons[level])
        out = super()._intern(level, cons, nxt)
        if len(self._res_cons[level]) > n:
            self._keys[level].append(self._key())
        return out

    def residual(self, cube: dict, items: tuple[int, ...]) -> int:
        """The root-level residual of one cube with its action items."""
        return self._residual(0, cube, items)[0]

    def items(self, actions: tuple) -> tuple[int, ...]:
        return tuple(self._item(a) for a in actions)

    def warm(self) -> None:
        """Build now what the first sweep of the last level would (its residuals' arrays): a session
        kept for updates pays it once, before it is saved, not on its first update."""
        if self.levels and not self.emit and self.fields[-1].width <= _VECTOR_WIDTH and self._res_cons[self.levels - 1]:
            self._last_level_arrays()

    def _last_level_arrays(self):
        """:meth:`compiler.bdd._Builder._last_level_arrays`, extended by the residuals interned since
        the last call rather than made again: residuals are only ever appended, and an update that adds
        one rule would otherwise pay a pass over every residual of the level (0.5 s on 100k rules)."""
        import numpy as np

        cached = self._arrays
        n = len(self._res_cons[self.levels - 1])
        if cached is None or len(cached[0]) == n:
            return super()._last_level_arrays()
        old = len(cached[0])
        if old > n:
            self._arrays = None
            return super()._last_level_arrays()
        cons, nxt = self._res_cons[self.levels - 1], self._res_next[self.levels - 1]
        self._res_cons[self.levels - 1], self._res_next[self.levels - 1] = cons[old:], nxt[old:]
        self._arrays = None
        try:
            tail = super()._last_level_arrays()
        finally:
            self._res_cons[self.levels - 1], self._res_next[self.levels - 1] = cons, nxt
        self._arrays = tuple(np.concatenate((a, b)) for a, b in zip(cached, tail))
        return self._arrays

    # -- hash-consing into the shared tables ------------------------------------------------------
    def _leaf(self, actions: ActionSet) -> int:
        key = ("leaf", actions)
        node = self._unique.get(key)
        if node is None:
            node = self._unique[key] = self.new_id()
            self.diagram.leaves[node] = actions
        return node

    def empty_leaf(self) -> int:
        return self._leaf(ActionSet())

    def node(self, level: int, edges: list[Edge], emits: list[int] | None) -> int:
        """The node with these edges (adjacent equal edges merged), or its only child (reduction ii)."""
        return self._node(level, edges, emits)

    def _node(self, level: int, edges: list[Edge], emits: list[int] | None = None) -> int:
        node_edges, emitted = merge_edges(edges, emits)
        if len(node_edges) == 1 and emitted[0] == 0:
            return node_edges[0][2]
        node_emits = emitted if self.emit else ()
        key = (level, node_edges, node_emits)
        node = self._unique.get(key)
        if node is None:
            node = self._unique[key] = self.new_id()
            self.diagram.nodes[node] = Node(level, node_edges, node_emits)
        return node

    def _emission(self, bitmap: int) -> int:
        found = self._emission_ids.get(bitmap)
        if found is None:
            port_of = self._port_of
            if len(port_of) < len(self._bit_of):
                port_of.extend(sorted(self._bit_of, key=self._bit_of.get)[len(port_of):])
            ports = frozenset(port_of[i] for i in range(bitmap.bit_length()) if bitmap >> i & 1)
            found = self._emission_of.get(ports)
            if found is None:
                found = self._emission_of[ports] = len(self.diagram.emissions)
                self.diagram.emissions.append(ports)
            self._emission_ids[bitmap] = found
        return found

    def sweep(self, level: int, objs: set[int], start: int, stop: int) -> tuple[list[Edge], list[int] | None]:
        return self._sweep(level, objs, start, stop)

    # -- forgetting dead nodes --------------------------------------------------------------------
    def forget(self, live: set[int]) -> None:
        """Drop every node and leaf not in ``live`` from the tables, and the memo that may name them."""
        d = self.diagram
        for node in [n for n in d.nodes if n not in live]:
            n = d.nodes.pop(node)
            self._unique.pop((n.level, n.edges, n.emits), None)  # roots are not hash-consed
        for node in [n for n in d.leaves if n not in live]:
            del self._unique[("leaf", d.leaves.pop(node))]
        for memo in self._memo:
            memo.clear()
