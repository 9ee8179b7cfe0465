"""The hICN example replayed: which Interests go to the cache, by content popularity (docs/apps.md, "hICN").

    python benchmarks/hicn_replay.py --out docs/hicn

Generates apps/hicn's trace (hot and cold contents), compiles apps/hicn/rules.sub, replays the
trace through the pipeline (runtime.replay, in process: the model against the ground truth's own
per-message counters) and, per content, counts its Interests and how many the model sent to the
cache. Writes ``hicn.json`` (the replay's per-port table and the per-content figures) and
``hicn.png`` (share of a content's Interests sent to the cache against its Interests per second).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run(out: Path, seconds: float, seed: int) -> dict:
    import sys

    sys.path.insert(0, str(ROOT))
    from apps.hicn.trace import TraceConfig, trace
    from apps.pcap import write_pcap
    from compiler.compile import compile_files
    from runtime.model import Model
    from runtime.replay import replay_local
    from runtime.spec_trace import read_trace

    config = TraceConfig(seconds=seconds, seed=seed)
    compiled = compile_files(ROOT / "apps/hicn/hicn.p4", ROOT / "apps/hicn/rules.sub")
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "hicn.pcap"
        write_pcap(pcap, trace(config))
        start = time.perf_counter()
        result = replay_local(compiled.pipeline, compiled.typed, [pcap])
        replay_s = time.perf_counter() - start
        model = Model(compiled.pipeline)
        cols = read_trace(pcap, compiled.pipeline.spec, model.inputs + model.validity)
    res = model.run(cols)
    to_cache = np.array([2 in p for p in res.port_sets()])
    names = cols["ipv6.dst_addr"]
    catalogue = np.array([int(n) >> 112 == 0xB001 for n in names])
    per: dict[int, list[int]] = {}
    for name, cached, inside in zip(names.tolist(), to_cache.tolist(), catalogue.tolist()):
        if inside:
            entry = per.setdefault(int(name), [0, 0])
            entry[0] += 1
            entry[1] += int(cached)
    contents = sorted(per.items(), key=lambda kv: -kv[1][0])
    ports = {str(p): {m: int(result.total.ports[m][i]) for m in ("delivered", "wanted", "false_positives",
                                                                 "false_negatives")}
             for i, p in enumerate(result.space.ports)}
    report = {
        "trace": {"seconds": seconds, "rate": config.rate, "hot": config.hot, "cold": config.cold,
                  "hot_share": config.hot_share, "seed": seed, "interests": int(len(names))},
        "rules": "apps/hicn/rules.sub (to the cache after 50 Interests in a content's current second)",
        "replay": {"exact": result.exact, "ports": ports, "seconds": round(replay_s, 3)},
        "contents": [{"name": f"{n:032x}", "interests": c, "to_cache": k} for n, (c, k) in contents[:20]],
        "hot_to_cache": sum(k for _, (c, k) in contents[:config.hot]) / max(1, sum(c for _, (c, _) in contents[:config.hot])),
        "cold_to_cache": sum(k for _, (c, k) in contents[config.hot:]),
        # Cold contents sent to the cache share a counter cell with a hot one (crc32 mod slots).
        "cold_to_cache_sharing_a_hot_cell": _sharing(contents, config.hot, compiled.pipeline.updates[0].size),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "hicn.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(contents, seconds, out / "hicn.png")
    return report


def _sharing(contents, hot: int, slots: int) -> int:
    import zlib

    def cell(name: int) -> int:
        return zlib.crc32(name.to_bytes(16, "big")) % slots

    hot_cells = {cell(n) for n, _ in contents[:hot]}
    return sum(k for n, (_, k) in contents[hot:] if k and cell(n) in hot_cells)


def plot(contents, seconds: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = np.array([c / seconds for _, (c, _) in contents])
    share = np.array([k / c for _, (c, k) in contents])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.scatter(rate, share, s=8)
    ax.axvline(50, color="grey", linestyle=":", label="threshold: 50 Interests per second")
    ax.set_xscale("log")
    ax.set_xlabel("Interests per second for the content")
    ax.set_ylabel("share sent to the cache")
    ax.set_title("hICN: Interests to the cache by content popularity")
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "hicn")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    report = run(args.out, args.seconds, args.seed)
    print(json.dumps({k: report[k] for k in ("trace", "replay", "hot_to_cache", "cold_to_cache")}, indent=2))


if __name__ == "__main__":
    main()
