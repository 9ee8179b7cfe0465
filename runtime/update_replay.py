"""Replay across an update: messages keep arriving while the writes of an update land.

A switch applies an update write by write; between two writes it forwards with whatever mix of old
and new entries it holds. :func:`replay_across` replays a message stream against that: messages
before ``start`` meet the old pipeline, then each write lands ``gap`` messages after the previous
one (the rate of writes against the rate of traffic), and the messages after the last write meet
the new pipeline. Each message's delivery (the reference model, :mod:`runtime.model`, on the
entries the switch holds at that moment) is judged against the subscriptions themselves
(:mod:`runtime.groundtruth`) of the old rules and of the new rules:

* ``false_negatives``: messages that miss a port both the old and the new rules want (a subscriber
  who was there before and after the update lost the message);
* ``neither``: messages delivered neither exactly as the old rules nor exactly as the new ones say.

The writes are those of a hitless plan (:func:`compiler.incremental.hitless.plan`) or, to compare,
:func:`delta_writes`: the delta in the order an ordinary install writes it (groups first, entries
deleted, modified, added, old groups last), which a packet may meet half applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from compiler import ir
from compiler.incremental import diff_pipelines, entry_key, hitless
from compiler.rules import TypedRules
from runtime.groundtruth import GroundTruth, rule_ports
from runtime.model import Model
from runtime.replay_partition import pipeline_ports
from runtime.replay_ports import PortSpace


@dataclass
class UpdateReplay:
    messages: int
    during: int  # messages that arrived while the writes landed
    writes: int
    false_negatives: int
    neither: int
    judged_old: int  # messages the update changes, delivered as the old rules say
    judged_new: int

    def to_json(self) -> dict:
        return dict(self.__dict__)


def delta_writes(old: ir.Pipeline, new: ir.Pipeline) -> list[hitless.Write]:
    """The delta from ``old`` to ``new`` in an ordinary install's order (see the module docstring)."""
    d = diff_pipelines(old, new)
    return ([hitless.Write(hitless.INSERT, g) for g in d.groups_added]
            + [hitless.Write(hitless.MODIFY, b, a) for a, b in d.groups_modified]
            + [hitless.Write(hitless.DELETE, e, e) for e in d.deleted]
            + [hitless.Write(hitless.MODIFY, b, a) for a, b in d.modified]
            + [hitless.Write(hitless.INSERT, e) for e in d.added]
            + [hitless.Write(hitless.DELETE, g, g) for g in d.groups_deleted])


def replay_across(old: ir.Pipeline, new: ir.Pipeline, old_rules: TypedRules, new_rules: TypedRules,
                  columns: Mapping[str, np.ndarray], writes: Sequence[hitless.Write], start: int,
                  gap: float) -> UpdateReplay:
    """Replay ``columns`` (one row per message) across ``writes`` landing from message ``start``,
    one every ``gap`` messages (a fraction: several writes between two messages; see the module docstring)."""
    n = len(next(iter(columns.values())))
    space = PortSpace.of(rule_ports(old_rules) | rule_ports(new_rules) | pipeline_ports(old) | pipeline_ports(new))
    wanted = []
    for rules in (old_rules, new_rules):
        truth = GroundTruth.build(rules, space)
        # a validity column left out is 1, as for the model (Model.with_validity)
        given = {**{v: np.ones(n, dtype=np.uint64) for v in truth.validity}, **columns}
        wanted.append(truth.wanted(given, n))
    wanted_old, wanted_new = wanted
    delivered = space.empty(n)
    tables: dict[str, dict] = {t.name: {} for t in old.tables}
    for e in old.entries:
        tables[e.table][entry_key(e)] = e
    groups = {g.id: tuple(g.ports) for g in old.multicast_groups}
    model = Model(old)
    at = [start + k * gap for k in range(len(writes))]  # message index each write lands before
    bounds = [0] + [min(n, max(0, int(a))) for a in at] + [n]
    stale: set[str] = set()  # tables written since the model last saw them (recompiled when a message comes)
    for k in range(len(writes) + 1):  # before the first write, then after each write
        if k:
            w = writes[k - 1]
            hitless.apply({} if w.is_group else tables[w.item.table], groups, w)
            stale.add("" if w.is_group else w.item.table)
        lo, hi = bounds[k], bounds[k + 1]
        if hi > lo:
            for table in stale:
                if table:
                    model.set_entries(table, list(tables[table].values()))
                else:
                    model.set_groups(ir.MulticastGroup(g, p) for g, p in groups.items())
            stale.clear()
            result = model.run({f: c[lo:hi] for f, c in columns.items()}, hi - lo)
            delivered[lo:hi] = np.stack([space.mask(s) for s in result.port_sets()])
    both = wanted_old & wanted_new
    missed = (both & ~delivered).any(axis=1)
    as_old = (delivered == wanted_old).all(axis=1)
    as_new = (delivered == wanted_new).all(axis=1)
    changed = ~(wanted_old == wanted_new).all(axis=1)
    return UpdateReplay(n, bounds[-2] - bounds[1] if writes else 0, len(writes), int(missed.sum()),
                        int((~as_old & ~as_new).sum()), int((changed & as_old).sum()), int((changed & as_new).sum()))

