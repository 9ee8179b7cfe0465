"""A whole network: topologies, Camus routing over them, and a compile of every switch.

* :mod:`.topology` - :class:`Topology` (stable port numbers, an up/down orientation) and the
  generators (fat tree, leaf-spine, Facebook fabric, Jellyfish);
* :mod:`.topology_file` - p4sub's ``.topo`` text and Topology Zoo GraphML, read and written;
* :mod:`.topology_arg` - a topology as a user names it (``fat-tree:4``, a file, ``zoo:Dfn``);
* :mod:`.topohub_zoo` - Topology Zoo networks from the ``topohub`` package, for ``zoo:NAME`` when no
  Zoo GraphML is on the machine;
* :mod:`.host_rules` - network rule files, whose actions name hosts (``fwd(h12)``);
* :mod:`.routing` - Camus Algorithm 1 (MR and TR policies, α-approximation towards switches);
* :mod:`.compile` - route, then compile every switch with the single-switch core, in a process
  pool or on Spark. Rendering a switch for a target is handed in by the caller (``emit``): this
  package, like the rest of the compiler, never imports a backend.

Public face: the names below.
"""

from compiler.network.compile import HOST_ID_BITS, compile_network, layer_name
from compiler.network.host_rules import parse_network_rules, read_network_rules
from compiler.network.routing import POLICIES, UP_PORT, orientation
from compiler.network.topology import (
    DOWN,
    UP,
    Topology,
    bits_for,
    ceil_bytes,
    facebook_fabric,
    fat_tree,
    from_switch_graph,
    jellyfish,
    leaf_spine,
    spanning_tree_ports,
)
from compiler.network.topology_arg import parse_topology_arg
from compiler.network.topology_file import read_graphml, read_topology, write_topology

__all__ = [
    "DOWN", "HOST_ID_BITS", "POLICIES", "UP", "UP_PORT", "Topology", "bits_for", "ceil_bytes", "compile_network",
    "facebook_fabric", "fat_tree", "from_switch_graph", "jellyfish", "layer_name", "leaf_spine", "orientation",
    "parse_network_rules", "parse_topology_arg", "read_graphml", "read_network_rules", "read_topology",
    "spanning_tree_ports", "write_topology",
]
