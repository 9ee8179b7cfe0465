"""What a replay tells its user: ``summary.json``, a table on stdout and three plots.

The numbers come from :class:`runtime.replay.ReplayResult`; nothing here recomputes them. Rates
are named for what they divide: *end to end* divides by the whole command's wall time, from the
process's start to the report written (``p4sub replay`` adds it, with its stages, as
``command``); *job* by the time from the first byte read to the last counter collected (cutting
the traces and the Spark job); *pipeline* by the time spent inside the reference model only,
summed over tasks, which is a per-core figure (times the cores for the whole cluster's).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from runtime.replay import ReplayResult
from runtime.replay_partition import PORT_METRICS


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def summary(result: ReplayResult) -> dict[str, Any]:
    """The replay as JSON-ready data (written as ``summary.json``)."""
    t, s = result.total, result.total.scalars
    streamed = result.timings["split"] + result.timings["job"]
    model_s = s["model_ns"] / 1e9
    ports = []
    for i, port in enumerate(result.space.ports):
        row = {"port": port, **{m: int(t.ports[m][i]) for m in PORT_METRICS}}
        row["fp_rate"] = row["false_positives"] / row["delivered"] if row["delivered"] else 0.0
        row["fp_packet_rate"] = row["fp_packets"] / row["delivered_packets"] if row["delivered_packets"] else 0.0
        ports.append(row)
    parts = []
    for stats, rng in zip(result.partitions, result.ranges):
        ps = stats.scalars
        parts.append({
            "part": stats.part, "trace": rng.path, "start": rng.start, "end": rng.end,
            "packets": ps["packets"], "messages": ps["messages"], "rows": ps["rows"],
            "damaged": sum(stats.damage.values()), "seconds": ps["wall_ns"] / 1e9,
            "messages_per_s": _rate(ps["messages"], ps["wall_ns"] / 1e9),
            "pipeline_rows_per_s": _rate(ps["rows"], ps["model_ns"] / 1e9),
        })
    totals = {m: int(t.ports[m].sum()) for m in PORT_METRICS}
    return {
        "app": result.app,
        "traces": result.traces,
        "master": result.master,
        "cores": result.cores,
        "partitions": len(result.partitions),
        "rules": result.rules,
        "ground_truth": "exact: every message evaluated against every rule (vectorised)",
        "exact": result.exact,
        "packets": s["packets"],
        "messages": s["messages"],
        "rows": s["rows"],
        "damaged": sum(t.damage.values()),
        "damage": dict(sorted(t.damage.items())),
        "skipped": dict(sorted(t.skipped.items())),
        "parse_statuses": dict(sorted(t.statuses.items())),
        "totals": totals,
        "throughput": {
            "job_messages_per_s": _rate(s["messages"], streamed),
            "job_rows_per_s": _rate(s["rows"], streamed),
            "pipeline_rows_per_s_per_core": _rate(s["rows"], model_s),
            "pipeline_messages_per_s_per_core": _rate(s["messages"], model_s),
            "pipeline_rows_per_s_all_cores": _rate(s["rows"], model_s) * min(result.cores, max(1, len(result.partitions))),
        },
        "timings_s": {**{k: round(v, 6) for k, v in result.timings.items()},
                      **{f"tasks_{k[:-3]}": s[k] / 1e9 for k in ("decode_ns", "model_ns", "truth_ns", "count_ns", "wall_ns",
                                                                        "cpu_ns")}},
        "ports": ports,
        "partition_detail": parts,
        "ground_truth_families": result.families,
    }


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _whole_command(data: dict[str, Any]) -> list[str]:
    command = data.get("command")
    if not command:
        return []
    stages = ", ".join(f"{k} {v:.1f}" for k, v in command["stages_s"].items())
    return [f"end to end {_si(command['messages_per_s'])} messages/s: the whole command, {command['seconds']:.1f} s "
            f"({stages}; Spark's start, overlapping rules and index: {command['spark_start_s']:.1f} s)"]


def text_table(data: dict[str, Any]) -> str:
    """The short table printed on stdout."""
    th = data["throughput"]
    lines = [
        f"replayed {data['messages']:,} messages ({data['rows']:,} rows for the pipeline) in {data['packets']:,} packets "
        f"from {len(data['traces'])} trace(s); {data['damaged']:,} damaged spot(s) skipped; parser: "
        + (", ".join(f"{n:,} {k}" for k, n in data["parse_statuses"].items()) or "no packet"),
        *_whole_command(data),
        f"job {_si(th['job_messages_per_s'])} messages/s on {data['master']} ({data['partitions']} partitions); "
        f"pipeline alone {_si(th['pipeline_rows_per_s_per_core'])} rows/s per core "
        f"({_si(th['pipeline_messages_per_s_per_core'])} messages/s)",
        "",
        f"{'port':>6} {'delivered':>11} {'wanted':>11} {'false+':>9} {'false-':>9} {'extra B':>11} "
        f"{'packets':>10} {'false+ pkt':>10} {'extra pkt B':>12}",
    ]
    for p in data["ports"]:
        if not (p["delivered"] or p["wanted"] or p["delivered_packets"]):
            continue
        lines.append(f"{p['port']:>6} {p['delivered']:>11,} {p['wanted']:>11,} {p['false_positives']:>9,} {p['false_negatives']:>9,} "
                     f"{p['fp_bytes']:>11,} {p['delivered_packets']:>10,} {p['fp_packets']:>10,} {p['fp_packet_bytes']:>12,}")
    t = data["totals"]
    lines.append(f"{'all':>6} {t['delivered']:>11,} {t['wanted']:>11,} {t['false_positives']:>9,} {t['false_negatives']:>9,} "
                 f"{t['fp_bytes']:>11,} {t['delivered_packets']:>10,} {t['fp_packets']:>10,} {t['fp_packet_bytes']:>12,}")
    lines.append("")
    if data["exact"]:
        lines.append("no false negatives: every port received every message its subscriptions asked for"
                     + ("" if t["false_positives"] else ", and nothing else"))
    else:
        lines.append(f"FALSE NEGATIVES: {t['false_negatives']:,} wanted deliveries missing (the pipeline loses messages)")
    return "\n".join(lines)


MAX_TICKS = 50


def _width(bars: int, inches: float) -> float:
    """Figure width: room for each bar up to a screen's width (beyond it, bars get thinner)."""
    return min(20.0, max(6.0, inches * bars + 2))


def _bars(ax, left: np.ndarray, heights: list[float], width: float, color: str, label: str) -> None:
    """Bars as one artist (a collection of rectangles): ``ax.bar`` makes an artist per bar, and
    with hundreds of ports adding and drawing them was most of the report's time."""
    from matplotlib.collections import PolyCollection

    h = np.asarray(heights, dtype=float)
    verts = np.stack([np.stack([left, np.zeros_like(h)], 1), np.stack([left, h], 1),
                      np.stack([left + width, h], 1), np.stack([left + width, np.zeros_like(h)], 1)], 1)
    bars = PolyCollection(verts, facecolors=color, edgecolors="none", label=label)
    bars.sticky_edges.y.append(0)  # as ax.bar: the axis starts at 0, no margin below
    ax.add_collection(bars, autolim=True)
    ax.autoscale_view()


def plot(data: dict[str, Any], out_dir: Path) -> list[Path]:
    """Deliveries per port, false-positive rate per port, throughput per partition (PNG, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ports = [p for p in data["ports"] if p["delivered"] or p["wanted"]]
    x = np.arange(len(ports))
    # At most MAX_TICKS port labels: laying out hundreds of rotated labels was most of the plots' time.
    step = max(1, -(-len(ports) // MAX_TICKS))
    ticks, labels = x[::step], [str(p["port"]) for p in ports[::step]]
    paths = []

    fig, ax = plt.subplots(figsize=(_width(len(ports), 0.35), 4))
    width = 0.4
    _bars(ax, x - width, [p["wanted"] for p in ports], width, "#4c72b0", "wanted")
    _bars(ax, x, [p["delivered"] for p in ports], width, "#55a868", "delivered")
    _bars(ax, x, [p["false_positives"] for p in ports], width, "#c44e52", "false positives")
    ax.set_xticks(ticks, labels, rotation=90 if len(ticks) > 24 else 0)
    ax.set_xlabel("port")
    ax.set_ylabel("messages")
    ax.set_title("Deliveries per port")
    ax.legend(loc="upper left")  # a fixed place: "best" searched every bar and took half the plot time
    fig.tight_layout()
    paths.append(out_dir / "deliveries_per_port.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(_width(len(ports), 0.35), 4))
    _bars(ax, x - 0.4, [100 * p["fp_rate"] for p in ports], 0.8, "#c44e52", "messages")
    ax.plot(x, [100 * p["fp_packet_rate"] for p in ports], "k.", label="packets")
    ax.set_xticks(ticks, labels, rotation=90 if len(ticks) > 24 else 0)
    ax.set_xlabel("port")
    ax.set_ylabel("false positives (% of delivered)")
    ax.set_title("False-positive rate per port")
    ax.legend(loc="upper left")
    fig.tight_layout()
    paths.append(out_dir / "false_positive_rate.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    parts = data["partition_detail"]
    fig, ax = plt.subplots(figsize=(_width(len(parts), 0.3), 4))
    px = np.arange(len(parts))
    _bars(ax, px - 0.4, [p["messages_per_s"] / 1e6 for p in parts], 0.8, "#4c72b0", "task, end to end")
    ax.plot(px, [p["pipeline_rows_per_s"] / 1e6 for p in parts], "o", color="#dd8452", label="pipeline alone (rows)")
    ax.set_xlabel("partition")
    ax.set_ylabel("million messages per second")
    ax.set_title("Throughput per partition")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "throughput_per_partition.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


class Plotting:
    """matplotlib imported on a thread (about a second), started before the replay job so that
    the report does not wait for it; :func:`write_report` joins it before plotting."""

    def __init__(self) -> None:
        self._thread = threading.Thread(target=self._load, name="p4sub-import-matplotlib", daemon=True)
        self._thread.start()

    @staticmethod
    def _load() -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401
        except Exception:  # plot() imports it again in the caller's thread and fails there
            pass

    def ready(self) -> None:
        self._thread.join()


def write_report(result: ReplayResult, out_dir: str | os.PathLike[str], plots: bool | Plotting = True) -> dict[str, Any]:
    """Write ``summary.json`` (and the plots, unless ``plots`` is False) into ``out_dir``; return the
    summary. ``plots``: a :class:`Plotting` started earlier, or True."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = summary(result)
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if isinstance(plots, Plotting):
        plots.ready()
    if plots:
        plot(data, out)
    return data
