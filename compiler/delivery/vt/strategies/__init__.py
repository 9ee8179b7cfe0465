"""VT installation strategies (dissertation chapters 5 and 6), by name.

``hops`` installs nothing (source routing by hop labels: the baseline). Chapter 5 (hierarchical
fabrics, :mod:`.fabric`): ``broadcast``, ``topo``, ``tree``, ``tree-shared``, ``path``,
``threshold:T[:hops]``. Chapter 6 (any topology, :mod:`.arbitrary`): ``random``,
``random-variant``, ``cycles``, ``partitions``, ``clusters``, ``relation``, ``freq-relation[:T]``
(T = 30 by default), ``hybrid[:T]``. T is a percentage.
"""

from __future__ import annotations

from typing import Iterator

from compiler.base import P4subError
from compiler.delivery.vt.strategies.arbitrary import (
    Clusters,
    Cycles,
    Hybrid,
    Partitions,
    RandomTrees,
    RandomVariant,
    Relation,
)
from compiler.delivery.vt.strategies.base import Context, Proposal, Strategy, install_strategy
from compiler.delivery.vt.strategies.fabric import Broadcast, PublisherTrees, TopoBased

#: Names ``make_strategy`` accepts (T = a percentage).
STRATEGIES = ("hops", "broadcast", "topo", "tree", "tree-shared", "path", "threshold:T", "threshold:T:hops",
              "random", "random-variant", "cycles", "partitions", "clusters", "relation", "freq-relation:T",
              "hybrid:T")


class HopsOnly(Strategy):
    """No VTs: every link of the delivery tree is a hop label (the source-routed baseline)."""

    name = "hops"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        return iter(())


def _percent(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise P4subError(f"strategy {spec!r}: {text!r} is not a percentage") from None
    if not 0 <= value <= 100:
        raise P4subError(f"strategy {spec!r}: the threshold must be between 0 and 100")
    return value / 100


def make_strategy(spec: str) -> Strategy:
    """The strategy named ``spec`` (see :data:`STRATEGIES`)."""
    name, *args = spec.strip().split(":")
    simple = {"hops": HopsOnly, "broadcast": Broadcast, "topo": TopoBased, "random": RandomTrees,
              "random-variant": RandomVariant, "cycles": Cycles, "partitions": Partitions, "clusters": Clusters}
    if name in simple and not args:
        return simple[name]()
    if name == "tree" and not args:
        return PublisherTrees()
    if name == "tree-shared" and not args:
        return PublisherTrees(shared=True)
    if name == "path" and not args:
        return PublisherTrees(threshold=1.0)
    if name == "threshold" and len(args) in (1, 2) and args[1:] in ([], ["hops"]):
        return PublisherTrees(threshold=_percent(args[0], spec), paths=args[1:] != ["hops"])
    if name == "relation" and not args:
        return Relation()
    if name == "freq-relation" and len(args) <= 1:
        return Relation(_percent(args[0], spec) if args else 0.3)
    if name == "hybrid" and len(args) <= 1:
        return Hybrid(_percent(args[0], spec) if args else 0.3)
    raise P4subError(f"unknown VT strategy {spec!r}; choose from {', '.join(STRATEGIES)}")


__all__ = ["STRATEGIES", "Context", "Strategy", "install_strategy", "make_strategy"]
