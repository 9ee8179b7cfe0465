"""A PLEROMA network as a directory netsim loads, beside ``p4sub route``'s directories.

``p4sub eval pleroma --programs`` renders every switch's flows as a BMv2 program and entries
(:mod:`backends.bmv2.pleroma_program`). :func:`write` adds what it takes to run them as a network:
``network.json`` (``"kind": "pleroma"``: the event space the publisher indexes events by, the
resolution, the dissemination trees, one directory per switch), ``topology.topo``,
``hosts.rules`` (the host subscriptions, the ground truth) and ``spec.p4`` (the fields they read).
:func:`load` reads such a directory into a netsim :class:`runtime.netsim.Network`, each switch's
flows read back from its ``entries.p4rt.json`` (what BMv2 would install, not a copy kept aside);
:func:`load_any` takes either kind, by the manifest's ``kind`` (``p4sub`` when absent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backends.bmv2.pleroma_program import ENTRIES, read_flows, render
from compiler.base import InputError, P4subError, read_text
from compiler.network import HOST_ID_BITS, Topology, read_network_rules, read_topology, write_topology
from compiler.pleroma import Dimension, EventSpace, PleromaNetwork, Tables, Tree
from compiler.rules import check_rules
from compiler.spec import parse_spec
from runtime.netsim import Network, load_network
from runtime.netsim_pleroma import pleroma_network

FORMAT = "p4sub-pleroma-network/1"
MANIFEST = "network.json"


def write(out: Path, topology: Topology, rules_text: str, spec_text: str, net: PleromaNetwork, tables: Tables,
          info: dict[str, Any] | None = None) -> list[Path]:
    """Every switch's program and entries under ``out/<switch>/``, and the files that make ``out`` a
    network netsim can run (module docstring). ``tables`` are ``net``'s flows or a merge method's."""
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for switch in topology.switches():
        paths += render(switch, tables.get(switch, {}), out / switch)
    write_topology(topology, out / "topology.topo")
    (out / "hosts.rules").write_text(rules_text, encoding="utf-8")
    (out / "spec.p4").write_text(spec_text, encoding="utf-8")
    distinct: list[Tree] = []
    which: dict[str, int] = {}
    for publisher, tree in net.trees.items():
        if not any(tree is t for t in distinct):
            distinct.append(tree)
        which[publisher] = next(i for i, t in enumerate(distinct) if t is tree)
    space = net.space
    manifest = {
        "format": FORMAT, "kind": "pleroma", "topology": topology.name, "topology_file": "topology.topo",
        "rules_file": "hosts.rules", "spec_file": "spec.p4",
        "note": "each switch's flows are its entries.p4rt.json; events carry their dz (resolution bits of the "
                "event space below) in ff0e::/16 | dz << (112 - resolution)",
        "resolution": net.resolution, "tree": net.tree,
        "trees": [{"root": t.root, "parent": t.parent} for t in distinct], "publisher_tree": which,
        "space": {"indexing": space.indexing, "widths": list(space.widths), "layout": [list(x) for x in space.layout],
                  "dimensions": [{"field": d.field, "bits": d.bits, "cuts": list(d.cuts)} for d in space.dimensions]},
        "switches": [{"name": s, "dir": s} for s in topology.switches()],
        **(info or {}),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return paths + [out / n for n in ("topology.topo", "hosts.rules", "spec.p4", MANIFEST)]


def _manifest(out: Path) -> dict[str, Any] | None:
    """The parsed ``network.json``, or None when there is none (load_network then says what to run)."""
    try:
        info = json.loads(read_text(out / MANIFEST, "network file"))
    except InputError as exc:
        if exc.reason == "no such file":
            return None
        raise
    except (ValueError, RecursionError) as exc:
        raise P4subError(f"{out / MANIFEST}: unreadable: {exc}") from None
    return info if isinstance(info, dict) else None


def load_any(out_dir: str | Path) -> Network:
    """A ``p4sub route`` directory or a PLEROMA network directory, by its manifest's ``kind``."""
    out = Path(out_dir)
    info = _manifest(out)
    if info is not None and info.get("kind", "p4sub") == "pleroma":
        return load(out, info)
    if info is not None and info.get("kind", "p4sub") != "p4sub":
        raise P4subError(f"{out / MANIFEST}: unknown network kind {info['kind']!r}; expected p4sub or pleroma")
    return load_network(out)


def load(out: Path, info: dict[str, Any]) -> Network:
    """The PLEROMA network in ``out`` (``info``: its manifest), as netsim runs it."""
    where = out / MANIFEST
    if info.get("format") != FORMAT:
        raise P4subError(f"{where}: format {info.get('format')!r}, expected {FORMAT!r} (rerun p4sub eval pleroma "
                         "--programs)")
    try:
        topology = read_topology(out / str(info["topology_file"]))
        spec = parse_spec(read_text(out / str(info["spec_file"]), "spec file"), str(out / str(info["spec_file"])))
        typed = check_rules(read_network_rules(out / str(info["rules_file"]), topology), spec, port_bits=HOST_ID_BITS)
        sp = info["space"]
        dims = tuple(Dimension(str(d["field"]), tuple(int(c) for c in d["cuts"]), int(d["bits"]))
                     for d in sp["dimensions"])
        layout = tuple((int(a), int(b)) for a, b in sp["layout"])
        if any(not 0 <= a < len(dims) or not 0 <= b < dims[a].bits for a, b in layout):
            raise ValueError("the layout names a dimension bit that does not exist")
        space = EventSpace(dims, layout, str(sp["indexing"]), tuple(int(w) for w in sp["widths"]))
        resolution = int(info["resolution"])
        if not 0 <= resolution <= min(64, space.max_length):
            raise ValueError(f"resolution {resolution} outside 0..{min(64, space.max_length)}")
        trees = [Tree(str(t["root"]), {str(k): (None if v is None else str(v)) for k, v in t["parent"].items()})
                 for t in info["trees"]]
        publisher_trees = {str(p): trees[int(i)] for p, i in info["publisher_tree"].items()}
        tree = str(info["tree"])
        names = [str(e["name"]) for e in info["switches"]]
        dirs = {str(e["name"]): str(e.get("dir", e["name"])) for e in info["switches"]}
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise P4subError(f"{where}: not a PLEROMA network manifest ({type(exc).__name__}: {exc}); rerun p4sub eval "
                         "pleroma --programs") from None
    if sorted(names) != sorted(topology.switches()):
        odd = sorted(set(names) ^ set(topology.switches()))
        raise P4subError(f"{where}: its switches do not match {info['topology_file']} (e.g. {', '.join(odd[:3])})")
    for t in trees:
        if set(t.parent) != set(topology.switches()):
            raise P4subError(f"{where}: a tree does not span {info['topology_file']}'s switches")
    unknown = [f for f in (d.field for d in dims) if f not in typed.fields and spec.field_width(f) is None]
    if unknown:
        raise P4subError(f"{where}: dimension {unknown[0]} is no field of {info['spec_file']}")
    tables: Tables = {name: read_flows(out / dirs[name] / ENTRIES) for name in names}
    return pleroma_network(topology, typed, spec, space, resolution, tables, publisher_trees, tree,
                           {k: info[k] for k in ("method", "limit", "topology") if k in info})
