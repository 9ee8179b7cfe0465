"""Writing the VT evaluation out: ``vt.json``, ``vt.md`` and PNG plots like Figs. 5.11 and 5.12.

Plots (one panel per density, one line per strategy, x = rules per switch): ``vt_header_bytes.png``
(initial header, Fig. 5.11), ``vt_network_load.png`` (KB per round, Fig. 5.12) and
``vt_labels.png`` (mean tree / hop / stop labels per notification at each budget, stacked). A sweep
of one budget (Fig. 5.13's scarce memory) gets ``vt_single_budget.png`` instead: header and load
per strategy, one bar per density.
"""

from __future__ import annotations

from pathlib import Path

from runtime.delivery_eval.report import checks_table, save_report


def markdown(report: dict) -> str:
    topo, cfg = report["topology"], report["config"]
    lines = [
        f"Topology {topo['name']}: {topo['switches']} switches, {topo['hosts']} hosts, {topo['links']} links; "
        f"{cfg['runs']} runs x {cfg['messages']} notifications per point, seed {cfg['seed']}, "
        f"{report['publishers_per_round']} publishers ({cfg['publisher_share']:.0%}), payload {cfg['payload']} B, "
        f"encoder {cfg['mode']}{'' if cfg['prefilter'] else ' (no prefilter)'}.",
        "",
        "| density | strategy | rules | header B | labels (tree/hop/stop) | load B/notif | KB/round | VTs | max entries | exact |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        m = r["mean"]
        lines.append(
            f"| {round(r['density'] * 100)}% | {r['strategy']} | {r['rules']} | {m['header_bytes']:.1f} | "
            f"{m['labels']:.1f} ({m['trees']:.1f}/{m['hops']:.1f}/{m['stops']:.1f}) | {m['bytes']:.0f} | "
            f"{r['load_per_round_kb']:.1f} | {r['install']['vts']:.0f} | {r['install']['max_entries']:.0f} | "
            f"{r['exact']}/{r['notifications']} |")
    lines += checks_table(report)
    return "\n".join(lines) + "\n"


def plot(report: dict, outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["results"]
    densities = sorted({r["density"] for r in rows})
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    markers = "osD^v<>px*hH+"
    colours = plt.get_cmap("tab10").colors
    paths = []
    if len({r["rules"] for r in rows}) == 1:
        return [_single_budget(report, outdir, plt)]
    for stem, key, ylabel, title in (
        ("vt_header_bytes", lambda r: r["mean"]["header_bytes"], "initial header (bytes, 4 + 2 per label)",
         "Initial header size (cf. Fig. 5.11)"),
        ("vt_network_load", lambda r: r["load_per_round_kb"], "KB over all links per round",
         "Network load, one notification per publisher (cf. Fig. 5.12)"),
    ):
        fig, axes = plt.subplots(1, len(densities), figsize=(5.2 * len(densities), 4.2), squeeze=False)
        for ax, d in zip(axes[0], densities):
            for i, s in enumerate(strategies):
                pts = sorted((r["rules"], key(r)) for r in rows if r["strategy"] == s and r["density"] == d)
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=markers[i % len(markers)], markersize=4,
                        color=colours[i % 10], label=s, linestyle="--" if s == "hops" else "-")
            ax.set_title(f"{round(d * 100)} % subscribers", fontsize=10)
            ax.set_xlabel("rules per switch (max_rules)")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{title} — {report['topology']['name']}", fontsize=11)
        fig.tight_layout()
        path = outdir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    vt_strategies = [s for s in strategies if s != "hops"]
    budgets = sorted({r["rules"] for r in rows})
    fig, axes = plt.subplots(len(densities), 1, figsize=(max(7, 0.9 * len(vt_strategies) * len(budgets) / 3), 3.6 * len(densities)),
                             squeeze=False)
    width = 0.8 / max(1, len(budgets))
    for ax, d in zip(axes[:, 0], densities):
        for j, b in enumerate(budgets):
            for i, s in enumerate(vt_strategies):
                r = next((r for r in rows if r["strategy"] == s and r["density"] == d and r["rules"] == b), None)
                if r is None:
                    continue
                x = i + (j - (len(budgets) - 1) / 2) * width
                bottom = 0.0
                for k, colour in (("trees", "tab:green"), ("hops", "tab:blue"), ("stops", "tab:red")):
                    v = r["mean"][k]
                    ax.bar(x, v, width * 0.9, bottom=bottom, color=colour, label=k if (i, j) == (0, 0) else None)
                    bottom += v
        top = max((r["mean"]["labels"] for r in rows if r["density"] == d), default=1.0)
        ax.set_ylim(0, top * 1.08)
        ax.set_xticks(range(len(vt_strategies)), vt_strategies, fontsize=8)
        ax.set_ylabel("labels per notification")
        ax.set_title(f"{round(d * 100)} % subscribers: bars per strategy at {', '.join(map(str, budgets))} rules (left to right)",
                     fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = outdir / "vt_labels.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def _single_budget(report: dict, outdir: Path, plt) -> Path:
    """One budget (the scarce-memory sweep of Fig. 5.13): header bytes and load per strategy, one
    group of bars per strategy, one bar per density."""
    rows = report["results"]
    densities = sorted({r["density"] for r in rows})
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    budget = rows[0]["rules"]
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 0.8 * len(strategies) * len(densities) / 2), 7))
    width = 0.8 / len(densities)
    colours = plt.get_cmap("tab10").colors
    for ax, key, ylabel in ((axes[0], lambda r: r["mean"]["header_bytes"], "initial header (bytes)"),
                            (axes[1], lambda r: r["load_per_round_kb"], "KB per round")):
        for j, d in enumerate(densities):
            xs, ys = [], []
            for i, s in enumerate(strategies):
                r = next((r for r in rows if r["strategy"] == s and r["density"] == d), None)
                if r is not None:
                    xs.append(i + (j - (len(densities) - 1) / 2) * width)
                    ys.append(key(r))
            ax.bar(xs, ys, width * 0.9, color=colours[j % 10], label=f"{round(d * 100)} % subscribers")
        ax.set_xticks(range(len(strategies)), strategies, fontsize=8, rotation=20)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title(f"{budget} rules per switch (cf. Fig. 5.13) — {report['topology']['name']}", fontsize=10)
    fig.tight_layout()
    path = outdir / "vt_single_budget.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(report: dict, outdir: str | Path, plots: bool = True) -> list[Path]:
    return save_report(report, outdir, "vt", markdown, plot if plots else None)
