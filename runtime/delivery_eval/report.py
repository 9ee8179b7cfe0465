"""Writing an evaluation out: JSON, a Markdown table, and PNG plots like the dissertation's
Figs. 3.10 to 3.15 (one metric over the subscriber fraction, one line per scheme)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

#: (file stem, metric, y label, title, dissertation figure, log scale)
FIGURES = (
    ("header_bytes", "header_bytes", "initial header (bytes)", "Initial header size", "Fig. 3.10", False),
    ("bytes", "bytes", "bytes over all links", "Transmitted bytes", "Figs. 3.11 / 3.14", False),
    ("lookups", "lookups", "table lookups", "Table lookups", "Fig. 3.12", True),
    ("packets", "packets", "packets over all links", "Transmitted packets", "Fig. 3.13", False),
    ("delay", "delay_ms", "worst-case delay (ms)", "Worst-case delay", "Fig. 3.15", True),
    ("recirculations", "recirculations", "recirculations", "Recirculations", "", True),
    ("rules", "rules", "rules installed", "Rules installed (static + per notification)", "", True),
    ("false_positives", "false_positive_deliveries", "copies to non-receivers", "False-positive deliveries", "", False),
)

TABLE_COLUMNS = (
    ("header B", "header_bytes", "{:.0f}"),
    ("frames", "frames_sent", "{:.0f}"),
    ("packets", "packets", "{:.0f}"),
    ("bytes", "bytes", "{:.0f}"),
    ("lookups", "lookups", "{:.0f}"),
    ("recirc", "recirculations", "{:.0f}"),
    ("rules", "rules", "{:.0f}"),
    ("delay ms", "delay_ms", "{:.2f}"),
    ("FP hosts", "false_positive_deliveries", "{:.1f}"),
    ("FP links", "false_positive_links", "{:.1f}"),
)

def markdown_table(report: dict) -> str:
    """One row per (fraction, scheme): the means of the main metrics, then the dissertation checks."""
    topo = report["topology"]
    cfg = report["config"]
    lines = [
        f"Topology {topo['name']}: {topo['switches']} switches, {topo['hosts']} hosts, {topo['links']} links; "
        f"{cfg['runs']} runs per point, seed {cfg['seed']}, payload {cfg['payload']} B, tree {cfg['tree_method']}, "
        f"widths {cfg['widths']}.",
        "",
        "| subs | scheme | " + " | ".join(c for c, _, _ in TABLE_COLUMNS) + " | exact runs |",
        "|---|---|" + "---:|" * (len(TABLE_COLUMNS) + 1),
    ]
    for r in report["results"]:
        cells = [fmt.format(r["mean"][k]) for _, k, fmt in TABLE_COLUMNS]
        lines.append(f"| {round(r['fraction'] * 100)}% ({r['receivers']}) | {r['scheme']} | " + " | ".join(cells)
                     + f" | {r['exact_runs']}/{r['runs']} |")
    if report.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items())]
    lines += checks_table(report)
    return "\n".join(lines) + "\n"


def checks_table(report: dict) -> list[str]:
    """The Markdown lines of the report's checks against the dissertation's claims (none without checks)."""
    if not report.get("checks"):
        return []
    lines = ["", "| dissertation claim | stated | ours | agrees |", "|---|---|---|---|"]
    for c in report["checks"]:
        mark = {True: "yes", False: "no", None: "n/a"}[c["agrees"]]
        lines.append(f"| {c['claim']} | {c['dissertation']} | {c['ours']} | {mark} |")
    return lines


def plot(report: dict, outdir: Path) -> list[Path]:
    """One PNG per figure in ``outdir``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    schemes = list(dict.fromkeys(r["scheme"] for r in report["results"]))
    markers = "osD^v<>px*hH+"
    palette = plt.get_cmap("tab20").colors
    colours = [palette[(2 * i) % 20 + (2 * i) // 20] for i in range(20)]  # dark shades first
    paths = []
    for stem, metric, ylabel, title, figure, log in FIGURES:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, name in enumerate(schemes):
            rows = [r for r in report["results"] if r["scheme"] == name]
            xs = [r["fraction"] * 100 for r in rows]
            ys = [r["mean"][metric] for r in rows]
            if metric == "header_bytes" and not any(ys):
                continue
            if log and not any(y > 0 for y in ys):
                continue
            ax.plot(xs, ys, marker=markers[i % len(markers)], markersize=4, label=name,
                    color=colours[i % len(colours)], linestyle="-" if i < 10 else "--")
        ax.set_xlabel("subscribers (% of hosts)")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("symlog" if metric == "rules" else "log")
        topo = report["topology"]
        ax.set_title(f"{title} — {topo['name']}" + (f" (cf. dissertation {figure})" if figure else ""), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = outdir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths

def save_report(report: dict, outdir: str | Path, stem: str, markdown: Callable[[dict], str],
                plot_files: Callable[[dict, Path], list[Path]] | None) -> list[Path]:
    """``STEM.json``, ``STEM.md`` and the plots (``plot_files``, unless None) in ``outdir`` (created if
    missing): what every ``p4sub eval`` writes."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = [outdir / f"{stem}.json", outdir / f"{stem}.md"]
    written[0].write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    written[1].write_text(markdown(report), encoding="utf-8")
    if plot_files is not None:
        written += plot_files(report, outdir)
    return written


def write_report(report: dict, outdir: str | Path, plots: bool = True) -> list[Path]:
    """``delivery.json``, ``delivery.md`` and the plots in ``outdir`` (created if missing)."""
    return save_report(report, outdir, "delivery", markdown_table, plot if plots else None)
