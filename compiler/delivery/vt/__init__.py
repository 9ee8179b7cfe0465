"""Virtual trees (dissertation chapters 5 and 6): installed partial trees named by tree labels,
extended by hop labels and pruned by stop labels.

* :mod:`.labels` — the 16-bit labels (2-bit type, 14-bit id), edge ids, EtherType 0x9999 frames;
* :mod:`.installed` — the VTs installed per switch under a ``max_rules`` budget, ids never reused;
* :mod:`.steiner`, :mod:`.encoder` — Algorithm 5.1 (single pass and best gain);
* :mod:`.switch` — what a VT-aware switch does with a frame; :mod:`.scheme` — both as a
  :class:`~compiler.delivery.scheme.Scheme` the chapter-3 simulator follows hop by hop.

The evaluations of chapters 5 and 6 (``p4sub eval vt``) are in :mod:`runtime.delivery_eval.vt`.
"""

from compiler.delivery.vt.combined import (
    DEFAULT_MAX_RULES,
    DEFAULT_STRATEGY,
    VT_DROP_REASONS,
    VtPlan,
    VtPush,
    VtSwitchPlan,
    plan_vt,
    push_words,
    vt_plan_json,
)
from compiler.delivery.vt.encoder import VtEncoding, encode
from compiler.delivery.vt.installed import VirtualTree, VtTable
from compiler.delivery.vt.labels import ETHERTYPE_VT, LABEL_BYTES, EdgeIds, Kind, Label
from compiler.delivery.vt.scheme import VirtualTrees
from compiler.delivery.vt.steiner import VtGraph
from compiler.delivery.vt.workload import Workload, table_5_1

__all__ = [
    "DEFAULT_MAX_RULES", "DEFAULT_STRATEGY", "ETHERTYPE_VT", "LABEL_BYTES", "VT_DROP_REASONS", "EdgeIds", "Kind",
    "Label", "VirtualTree", "VirtualTrees", "VtEncoding", "VtGraph", "VtPlan", "VtPush", "VtSwitchPlan", "VtTable",
    "Workload", "encode", "plan_vt", "push_words", "table_5_1", "vt_plan_json",
]
