"""Speed of the delivery code: topology generation, delivery trees, encoding, and simulating one
notification per scheme. Prints its numbers; run it as

    .venv/bin/python benchmarks/bench_delivery.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time

from compiler.base.errors import P4subError
from compiler.delivery.stack import HeaderStackEncoding
from compiler.delivery.tree import steiner_tree
from compiler.delivery.wire import ETHERTYPE_IPV4, ethernet_frame, host_mac
from compiler.network.topology import facebook_fabric, fat_tree, jellyfish
from runtime.delivery_eval import SCHEMES, make_scheme, simulate
from runtime.delivery_eval.evaluation import PUBLISHER_DST, workload


def timed(fn, repeat: int) -> float:
    """Best-of-``repeat`` wall time of ``fn()`` in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    r = args.repeat

    print("topology generation (ms)")
    for name, fn in [("jellyfish(255, 4)", lambda: jellyfish(255, 4)), ("fat_tree(8)", lambda: fat_tree(8)),
                     ("facebook_fabric()", facebook_fabric)]:
        print(f"  {name:24s} {timed(fn, r):8.2f}")

    topo = jellyfish(255, 4, seed=1)
    frame_payload = bytes(50)
    print("\njellyfish-255-4, one notification; times in ms (best of %d)" % r)
    print(f"  {'':26s}" + "".join(f"{p:>10s}" for p in ("10%", "50%", "90%")))
    cases = [workload(topo, f, 0, 1) for f in (0.1, 0.5, 0.9)]
    trees = {}
    for method in ("sph", "spt"):
        row = []
        for pub, recv in cases:
            ingress = topo.host_attachment(pub)[0]
            row.append(timed(lambda: steiner_tree(topo, ingress, recv, method=method), r))
            trees[method, pub] = steiner_tree(topo, ingress, recv, method=method)
        print(f"  {'tree ' + method:26s}" + "".join(f"{t:10.2f}" for t in row))
    for name in SCHEMES:
        try:
            scheme = make_scheme(name, topo)
        except P4subError:
            continue
        scheme.static_rules()
        enc_row, sim_row = [], []
        for pub, recv in cases:
            tree = trees["sph", pub]
            frame = ethernet_frame(PUBLISHER_DST, host_mac(topo.node_id(pub)), ETHERTYPE_IPV4, frame_payload)
            if isinstance(scheme, HeaderStackEncoding):
                enc_row.append(timed(lambda: scheme.encode_tree(tree), r))
            sim_row.append(timed(lambda: simulate(scheme, pub, recv, frame, tree), r))
        if enc_row:
            print(f"  {'encode ' + scheme.name:26s}" + "".join(f"{t:10.2f}" for t in enc_row))
        print(f"  {'simulate ' + scheme.name:26s}" + "".join(f"{t:10.2f}" for t in sim_row))


if __name__ == "__main__":
    main()
