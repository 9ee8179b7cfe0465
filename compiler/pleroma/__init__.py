"""PLEROMA (Bhowmik et al.) and Balogh's flow-limit algorithms: content-based pub/sub in prefix flows.

* :mod:`.dz` - the event space over the spec's queried fields, attribute domains, an event's dz,
  IPv6 multicast addresses;
* :mod:`.decompose` - a subscription as the fewest dz's at a resolution;
* :mod:`.flows` - dissemination trees and the per-switch flows PLEROMA's configurator (Alg. 1) builds;
* :mod:`.lpm` - flows run as a switch runs them (longest prefix), and events walked through a network;
* :mod:`.merge` - Balogh's merge trees, cost functions and local/global merging under a flow limit;
* :mod:`.configurator` - S1 Alg. 1 request by request, the local enforcers on every add;
* :mod:`.limit` - a network held to a flow limit by one of those methods;
* :mod:`.churn` - subscriptions arriving and leaving (S1's configurator, unsubscriptions included);
* :mod:`.deploy` - a change of flows as ordered steps that lose no event (S2 Alg. 7);
* :mod:`.scheme` - all of it for one network: host rules in, flows per switch out.

Public face: the names below.
"""

from compiler.pleroma.decompose import Decomposition, decompose, minimise
from compiler.pleroma.dz import INDEXINGS, Dimension, EventSpace, event_space, interleave, ipv6_prefix, ipv6_text
from compiler.pleroma.flows import TREES, Tables, Tree, canonical, flow_count, flow_tables, lookup, trees
from compiler.pleroma.lpm import LpmTable, compile_tables, walk
from compiler.pleroma.scheme import PleromaNetwork, build
from compiler.pleroma.limit import MergeStats, enforce
from compiler.pleroma.merge import METHODS, Samples, merge_at, merge_points, ms_cost
from compiler.pleroma.churn import subscribe, unsubscribe
from compiler.pleroma.deploy import Plan, Step, plan

__all__ = [
    "Decomposition", "Dimension", "EventSpace", "INDEXINGS", "LpmTable", "METHODS", "MergeStats", "Plan", "PleromaNetwork",
    "Samples", "Step", "TREES", "Tables", "Tree", "build", "canonical", "compile_tables", "decompose", "enforce",
    "event_space", "flow_count", "flow_tables", "interleave", "ipv6_prefix", "ipv6_text", "lookup", "merge_at",
    "merge_points", "minimise", "ms_cost", "plan", "subscribe", "trees", "unsubscribe", "walk",
]
