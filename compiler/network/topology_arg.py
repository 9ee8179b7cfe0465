"""A topology named on the command line: a generator (``fat-tree:4``), a file, or a Topology Zoo network.

The one place that knows every way a user names a topology (``route``, ``eval``, the benchmarks);
generated ones are bounded by size before they are built.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from compiler.base import P4subError
from compiler.network.topology import (
    JELLYFISH_DEFAULT_DEGREE,
    Topology,
    facebook_fabric,
    fat_tree,
    jellyfish,
    leaf_spine,
)
from compiler.network.topohub_zoo import installed as topohub_installed
from compiler.network.topohub_zoo import read_topohub_zoo
from compiler.network.topology_file import read_graphml, read_topology


def parse_topology_arg(spec: str, seed: int = 1) -> Topology:
    """Turn a CLI topology argument into a :class:`Topology`.

    Accepted forms: ``fat-tree:K``, ``leaf-spine:LEAVES,SPINES,HOSTS``, ``jellyfish:N[,DEGREE[,HOSTS]]``,
    ``facebook[:PODS,RACKS,HOSTS,PLANES,SPINES]``, ``zoo:NAME`` (a Topology Zoo network,
    :func:`zoo_topology`), a ``.topo`` file, or a ``.graphml`` file.
    """
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    try:
        if kind in ("fat-tree", "fattree", "fat_tree"):
            (k,) = _ints(rest, 1, 1, spec)
            _bounded(spec, 5 * k * k // 4 + k ** 3 // 4)
            return fat_tree(k)
        if kind in ("leaf-spine", "leafspine", "leaf_spine"):
            leaves, spines, hosts = _ints(rest, 3, 3, spec)
            _bounded(spec, leaves + spines + leaves * hosts)
            return leaf_spine(leaves, spines, hosts)
        if kind == "jellyfish":
            nums = _ints(rest, 1, 3, spec)
            n = nums[0]
            degree = nums[1] if len(nums) > 1 else JELLYFISH_DEFAULT_DEGREE
            hosts = nums[2] if len(nums) > 2 else 1
            _bounded(spec, n + n * hosts)
            return jellyfish(n, degree, hosts, seed=seed)
        if kind in ("facebook", "facebook-fabric", "fb"):
            if not rest:
                return facebook_fabric()
            pods, racks, hosts, planes, spines = _ints(rest, 5, 5, spec)
            _bounded(spec, pods * racks * (1 + hosts) + pods * planes + planes * spines)
            return facebook_fabric(pods, racks, hosts, planes, spines)
        if kind == "zoo":
            return zoo_topology(rest.strip())
    except ValueError as exc:
        raise P4subError(f"bad topology spec {spec!r}: {exc}") from None
    path = Path(spec)
    if path.suffix.lower() == ".topo":
        return read_topology(path)
    if path.suffix.lower() in (".graphml", ".xml"):
        return read_graphml(path)
    raise P4subError(
        f"unknown topology {spec!r}; use fat-tree:K, leaf-spine:L,S,H, jellyfish:N[,D[,H]], facebook, zoo:NAME, "
        "or a .topo / .graphml file"
    )


#: Where ``zoo:NAME`` looks for ``NAME.graphml``, in order (docs/topology.md, "Topology Zoo GraphML").
ZOO_ENV = "P4SUB_ZOO_DIR"
ZOO_CACHE = Path("~/.cache/p4sub/topology-zoo")


def zoo_dirs() -> list[Path]:
    """``$P4SUB_ZOO_DIR``, then ``~/.cache/p4sub/topology-zoo``. No Zoo file ships with p4sub: the Zoo's
    data is third-party, fetched by the user (docs/topology.md)."""
    env = os.environ.get(ZOO_ENV)
    return ([Path(env).expanduser()] if env else []) + [ZOO_CACHE.expanduser()]


def zoo_topology(name: str) -> Topology:
    """Topology Zoo network ``name`` (``Dfn``, ``Litnet``; case as the Zoo spells it): its GraphML from
    :func:`zoo_dirs` when one is there, else topohub's graph of it (:mod:`compiler.network.topohub_zoo`;
    the two differ, docs/topology.md), both made a topology by the same rules. Neither: a
    :class:`P4subError` naming where it looked and the closest names."""
    path = _find_zoo_file(name)
    if path is not None:
        return read_graphml(path)
    hub = topohub_installed()
    if hub is not None and name in hub.names:
        return read_topohub_zoo(name)
    dirs = zoo_dirs()
    known = set(hub.names if hub else ()) | {p.stem for d in dirs if d.is_dir()
                                             for p in (*d.glob("*.graphml"), *d.glob("graphml/*.graphml"))}
    folded = sorted(k for k in known if k.lower() == name.lower())
    close = folded + [c for c in difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6) if c not in folded]
    hint = f"; did you mean {', '.join(f'zoo:{c}' for c in close[:3])}?" if close else ""
    source = (f"topohub {hub.version} has no Zoo network {name!r} either" if hub else
              "topohub, which ships most Zoo networks, is not installed (pip install topohub)")
    raise P4subError(f"zoo:{name}: no {name}.graphml in {', '.join(str(d) for d in dirs)}, and {source}{hint} "
                     f"(docs/topology.md, \"Topology Zoo GraphML\": the Zoo's files go in one of those folders, "
                     f"or set {ZOO_ENV})")


def zoo_file(name: str) -> Path:
    """The GraphML file of Topology Zoo network ``name`` in :func:`zoo_dirs`; a :class:`P4subError` when none
    is there (``zoo:NAME`` then reads topohub, :func:`zoo_topology`)."""
    path = _find_zoo_file(name)
    if path is None:
        dirs = zoo_dirs()
        raise P4subError(f"zoo:{name}: no {name}.graphml in {', '.join(str(d) for d in dirs)}; download the Zoo's "
                         f"GraphML files into one of them (docs/topology.md, \"Topology Zoo GraphML\") or set {ZOO_ENV}")
    return path


def _find_zoo_file(name: str) -> Path | None:
    if not name or "/" in name or name.startswith("."):
        raise P4subError(f"zoo:{name}: expected a Topology Zoo network name such as zoo:Dfn")
    for d in zoo_dirs():
        for candidate in (d / f"{name}.graphml", d / "graphml" / f"{name}.graphml"):
            if candidate.is_file():
                return candidate
    return None


#: Generated topologies (``fat-tree:K``, ...) larger than this many nodes are refused before they are
#: built: fat-tree:64 has 70,656; fat-tree:1000 would have 250 million and run for minutes, then fail.
MAX_GENERATED_NODES = 200_000


def _bounded(spec: str, nodes: int) -> None:
    if nodes > MAX_GENERATED_NODES:
        raise P4subError(f"topology {spec!r} has {nodes:,} nodes (switches and hosts), {nodes / MAX_GENERATED_NODES:,.0f} "
                         f"times the {MAX_GENERATED_NODES:,} p4sub builds")


def _ints(text: str, least: int, most: int, spec: str) -> list[int]:
    parts = [p for p in text.split(",") if p.strip()] if text else []
    if not least <= len(parts) <= most:
        want = str(least) if least == most else f"{least} to {most}"
        raise ValueError(f"expected {want} comma-separated numbers")
    if any(len(p.strip()) > 12 for p in parts):
        raise ValueError("a number of more than 12 digits")
    return [int(p) for p in parts]
