"""Evaluating the header-stack encodings: the baselines, the hop-by-hop simulator, the sweeps.

The compiler's encodings (:mod:`compiler.delivery`) are compared here with unicast, broadcast,
OpenFlow multicast, LIPSIN, BIER and Elmo on the same topologies and receivers, all behind the
compiler's :class:`~compiler.delivery.scheme.Scheme` interface so that :func:`simulate` can follow
any of them hop by hop. This package sits beside the runtime because evaluation reads what the
compiler produces; nothing in ``compiler/`` imports it (the CLI only inside its commands).
"""

from __future__ import annotations

from typing import Callable

from compiler.base import P4subError
from compiler.delivery import ENCODINGS, Scheme, Widths, encoding_factories
from compiler.network import Topology
from runtime.delivery_eval.baselines.bier import BierStyle
from runtime.delivery_eval.baselines.broadcast import Broadcast
from runtime.delivery_eval.baselines.elmo import ElmoStyle
from runtime.delivery_eval.baselines.lipsin import Lipsin
from runtime.delivery_eval.baselines.openflow import OpenFlowMulticast
from runtime.delivery_eval.baselines.unicast import Unicast
from runtime.delivery_eval.simulator import RunMetrics, simulate

#: Scheme names accepted by :func:`make_scheme` and ``p4sub eval delivery --schemes``.
BASELINES = ("unicast", "broadcast", "openflow", "lipsin", "bier", "elmo")
SCHEMES = ENCODINGS + BASELINES


def make_scheme(
    name: str,
    topology: Topology,
    *,
    widths: Widths | None = None,
    split: int = 2,
    static_share: float = 0.7,
    seed: int = 1,
) -> Scheme:
    """Build a scheme by name. ``split`` is the port-block count of ``mcgroup-split``;
    ``static_share`` the share of receivers a hybrid's stored tree serves; ``seed`` LIPSIN's."""
    factories: dict[str, Callable[[], Scheme]] = {
        **encoding_factories(topology, widths=widths, split=split, static_share=static_share),
        "unicast": lambda: Unicast(topology),
        "broadcast": lambda: Broadcast(topology),
        "openflow": lambda: OpenFlowMulticast(topology),
        "lipsin": lambda: Lipsin(topology, seed=seed),
        "bier": lambda: BierStyle(topology),
        "elmo": lambda: ElmoStyle(topology),
    }
    if name not in factories:
        raise P4subError(f"unknown delivery scheme {name!r}; choose from {', '.join(SCHEMES)}")
    return factories[name]()


__all__ = [
    "BASELINES", "SCHEMES", "BierStyle", "Broadcast", "ElmoStyle", "Lipsin", "OpenFlowMulticast", "RunMetrics",
    "Unicast", "make_scheme", "simulate",
    # public modules: the chapter-3 evaluation and its report, and the VT evaluations
    "evaluation", "report", "vt",
]
