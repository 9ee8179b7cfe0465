"""Chapter 6's clustered clients and migration scenarios (dissertation §6.5.2, §6.6, Fig. 6.13).

**Dense and sparse nodes** (§6.5.2): the switches are grouped by k-means (k-means++ seeding;
a switch's sample is its vector of hop distances to every switch, since the dissertation does not
say what it clustered on and Zoo files lack coordinates for some nodes); each group's *centre* is
the switch nearest its centroid; breadth-first searches from the centres, one node per centre in
turn, mark nodes dense until 60 % of the switches are. A dense switch's hosts are
:data:`DENSE_WEIGHT` times as likely as a sparse switch's to be picked as a client (the
dissertation says "high and low probabilities" and gives no values).

**Scenarios** (Fig. 6.13), as node weights before (``initial``) and after migration (``target``):

* ``uniform``: every node equally likely, before and after;
* ``nearby``: four clusters, and new clients join the same four clusters;
* ``distant``: four clusters; clients start in the two whose centres are closest to each other
  and move to the other two (the pair of centres that are farthest from the first pair), so the
  old clusters fade and new ones form.

**Clients and churn** (§6.6): 30 % of hosts publish, each publisher has 30 % of hosts as
subscribers, both drawn by the initial weights; every host keeps one notification frequency (1 to
100 %, Table 5.1's model, which freq-relation's 30 % threshold needs). A client is one publisher
role or one subscription. Churn ``c`` relocates the first ``c`` of a fixed random order of all
clients (so churn levels are nested: 50 % moves the clients 40 % moved and more): a relocated
client is removed and a new one placed at a different node drawn by the target weights, keeping
the number of clients constant. The workload carries the scenario's dense regions (all four
clusters, old and new alike), which the clusters strategy installs its VTs in: the dissertation's
"topologies with predefined clusters" (Fig. 6.8), and why clusters "offers usable VTs for both old
and new client clusters" under distant migration. VTs are installed once, on the 0 % workload, and never updated
(the dissertation's setting: "updates are not required after initial deployment").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import networkx as nx
import numpy as np

from compiler.base import P4subError
from compiler.delivery.vt import Workload
from compiler.network import Topology

SCENARIOS = ("uniform", "nearby", "distant")
CLUSTERS = 4
DENSE_SHARE = 0.6
#: How much likelier a dense node is to get a client than a sparse one (not given; our choice).
DENSE_WEIGHT = 9.0


@dataclass(frozen=True)
class Clusters:
    """k-means groups of switches, their centre switches, and the dense region grown around each centre."""

    groups: tuple[tuple[str, ...], ...]
    centres: tuple[str, ...]
    dense: tuple[frozenset[str], ...]


def kmeans_clusters(topology: Topology, k: int, rng: random.Random) -> Clusters:
    """k-means (k-means++ seeding, Lloyd iterations) over the switches' hop-distance vectors, then
    the dense regions by round-robin breadth-first search from the centres (module docstring)."""
    sg = topology.switch_graph()
    switches = list(topology.switches())
    k = min(k, len(switches))
    if k < 1:
        raise P4subError("clustering needs at least one switch")
    dist = dict(nx.all_pairs_shortest_path_length(sg))
    far = 1 + max((d for row in dist.values() for d in row.values()), default=0)
    x = np.array([[dist[a].get(b, far) for b in switches] for a in switches], dtype=float)
    centroids = [x[rng.randrange(len(switches))]]
    while len(centroids) < k:
        d2 = np.min([((x - c) ** 2).sum(axis=1) for c in centroids], axis=0)
        total = float(d2.sum())
        if total == 0:
            break
        r, acc, pick = rng.random() * total, 0.0, len(switches) - 1
        for i, v in enumerate(d2):
            acc += float(v)
            if acc >= r:
                pick = i
                break
        centroids.append(x[pick])
    c = np.array(centroids)
    labels = np.zeros(len(switches), dtype=int)
    for _ in range(100):
        labels = np.argmin(((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2), axis=1)
        new = np.array([x[labels == j].mean(axis=0) if (labels == j).any() else c[j] for j in range(len(c))])
        if np.allclose(new, c):
            break
        c = new
    groups, centres = [], []
    for j in range(len(c)):
        members = [switches[i] for i in range(len(switches)) if labels[i] == j]
        if not members:
            continue
        groups.append(tuple(members))
        centres.append(min(members, key=lambda s: (float(((x[switches.index(s)] - c[j]) ** 2).sum()),
                                                   topology.node_id(s))))
    return Clusters(tuple(groups), tuple(centres), dense_regions(sg, centres, DENSE_SHARE))


def dense_regions(graph: nx.Graph, centres: list[str], share: float) -> tuple[frozenset[str], ...]:
    """Breadth-first from every centre, one new node per centre in turn, until ``share`` of the
    nodes are taken; a node belongs to the region that reached it first."""
    goal = math.ceil(share * graph.number_of_nodes())
    orders = [list(nx.bfs_tree(graph, c)) for c in centres]
    taken: set[str] = set()
    regions: list[set[str]] = [set() for _ in centres]
    cursors = [0] * len(centres)
    while len(taken) < goal and any(cursors[i] < len(orders[i]) for i in range(len(centres))):
        for i, order in enumerate(orders):
            while cursors[i] < len(order) and order[cursors[i]] in taken:
                cursors[i] += 1
            if cursors[i] < len(order) and len(taken) < goal:
                taken.add(order[cursors[i]])
                regions[i].add(order[cursors[i]])
                cursors[i] += 1
    return tuple(frozenset(r) for r in regions)


@dataclass(frozen=True)
class Scenario:
    """Host weights before and after migration, and the clusters they came from."""

    name: str
    initial: dict[str, float]
    target: dict[str, float]
    clusters: Clusters | None = None


def scenario(topology: Topology, name: str, rng: random.Random) -> Scenario:
    """The host weights of migration scenario ``name`` (module docstring)."""
    if name not in SCENARIOS:
        raise P4subError(f"unknown migration scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    hosts = topology.hosts()
    if name == "uniform":
        flat = {h: 1.0 for h in hosts}
        return Scenario(name, flat, dict(flat))
    cl = kmeans_clusters(topology, CLUSTERS, rng)

    def weights(regions) -> dict[str, float]:
        dense = set().union(*regions) if regions else set()
        return {h: DENSE_WEIGHT if topology.host_attachment(h)[0] in dense else 1.0 for h in hosts}

    if name == "nearby" or len(cl.centres) < 4:
        w = weights(cl.dense)
        return Scenario(name, w, dict(w), cl)
    sg = topology.switch_graph()
    hop = dict(nx.all_pairs_shortest_path_length(sg))
    idx = range(len(cl.centres))
    pairs = [(a, b) for a in idx for b in idx if a < b]

    def split(pair):
        rest = tuple(i for i in idx if i not in pair)
        gap = min(hop[cl.centres[a]][cl.centres[b]] for a in pair for b in rest)
        return gap, -hop[cl.centres[pair[0]]][cl.centres[pair[1]]], pair, rest

    _, _, old, new = max((split(p) for p in pairs), key=lambda t: (t[0], t[1], [-i for i in t[2]]))
    return Scenario(name, weights([cl.dense[i] for i in old]), weights([cl.dense[i] for i in new]), cl)


def _weighted_sample(rng: random.Random, items: list[str], weights: dict[str, float], k: int) -> list[str]:
    """``k`` distinct items, each draw proportional to its weight among those left (no replacement)."""
    pool = list(items)
    out = []
    for _ in range(min(k, len(pool))):
        total = sum(weights[i] for i in pool)
        r, acc = rng.random() * total, 0.0
        for j, item in enumerate(pool):
            acc += weights[item]
            if acc >= r:
                out.append(pool.pop(j))
                break
        else:
            out.append(pool.pop())
    return out


def _pick(rng: random.Random, candidates: list[str], weights: dict[str, float]) -> str | None:
    return (_weighted_sample(rng, candidates, weights, 1) or [None])[0]


def churned_workloads(topology: Topology, sc: Scenario, levels: tuple[float, ...], rng: random.Random, *,
                      publisher_share: float = 0.3, subscriber_share: float = 0.3,
                      min_frequency: float = 0.01) -> dict[float, Workload]:
    """The workload at every churn level (0 to 1) of scenario ``sc`` (module docstring)."""
    hosts = topology.hosts()
    if len(hosts) < 3:
        raise P4subError("the churn workload needs at least three hosts")
    n_pub = max(1, math.floor(publisher_share * len(hosts) + 0.5))
    n_sub = max(1, min(len(hosts) - 1, math.floor(subscriber_share * (len(hosts) - 1) + 0.5)))
    frequency = {h: rng.uniform(min_frequency, 1.0) for h in hosts}
    publishers = _weighted_sample(rng, hosts, sc.initial, n_pub)
    subs = [_weighted_sample(rng, [h for h in hosts if h != p], sc.initial, n_sub) for p in publishers]
    clients = [("pub", i, -1) for i in range(len(publishers))]
    clients += [("sub", i, j) for i in range(len(publishers)) for j in range(len(subs[i]))]
    rng.shuffle(clients)
    base = rng.random()
    out = {}
    for level in sorted(levels):
        if not 0 <= level <= 1:
            raise P4subError("churn levels must be between 0 and 100 %")
        pubs, lists = list(publishers), [list(s) for s in subs]
        step = random.Random(f"churn-moves:{base!r}")  # every level replays the same draws: levels nest
        for kind, i, j in clients[:round(level * len(clients))]:
            if kind == "pub":
                new = _pick(step, [h for h in hosts if h not in pubs and h != pubs[i]], sc.target)
                if new is None:
                    continue
                pubs[i] = new
                if new in lists[i]:  # a publisher does not subscribe to itself: that subscription moves too
                    k = lists[i].index(new)
                    repl = _pick(step, [h for h in hosts if h not in lists[i] and h != new], sc.target)
                    if repl is None:
                        del lists[i][k]
                    else:
                        lists[i][k] = repl
            else:
                if j >= len(lists[i]):
                    continue
                new = _pick(step, [h for h in hosts if h not in lists[i] and h != pubs[i]], sc.target)
                if new is not None:
                    lists[i][j] = new
        order = sorted(range(len(pubs)), key=lambda i: topology.node_id(pubs[i]))
        out[level] = Workload(tuple(pubs[i] for i in order),
                              {pubs[i]: tuple(sorted(lists[i], key=topology.node_id)) for i in order}, frequency,
                              sc.clusters.dense if sc.clusters is not None else None)
    return out
