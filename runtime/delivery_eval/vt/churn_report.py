"""Writing the chapter-6 evaluation out: ``vt-churn.json``, ``vt-churn.md`` and PNG plots.

Plots: ``vt_churn.png`` (Fig. 6.14: one panel per migration scenario, entries per notification over
churn, one line per strategy, at the largest budget), ``vt_churn_labels.png`` (the label mix per
strategy at the lowest, middle and highest churn level, stacked tree / hop / stop, one panel per
scenario) and, when several budgets were run, ``vt_zoo_rules.png`` (Fig. 6.9a: entries over rules
per switch at the lowest churn level, one panel per scenario).
"""

from __future__ import annotations

from pathlib import Path

from runtime.delivery_eval.report import save_report


def markdown(report: dict) -> str:
    topo, cfg = report["topology"], report["config"]
    lines = [
        f"Topology {topo['name']}: {topo['nodes']} nodes, {topo['edges']} edges, mean degree {topo['mean_degree']}, "
        f"degree variance {topo['degree_variance']}, diameter {topo['diameter']}; {cfg['runs']} runs x "
        f"{cfg['messages']} notifications per point, {cfg['publisher_share']:.0%} publishers, "
        f"{cfg['subscriber_share']:.0%} subscribers per publisher, seed {cfg['seed']}.",
        "",
        "| scenario | strategy | rules | churn | entries (tree/hop/stop) | header B | load B/notif | VTs | max entries | exact |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        m = r["mean"]
        lines.append(
            f"| {r['scenario']} | {r['strategy']} | {r['rules']} | {round(r['churn'] * 100)}% | "
            f"{m['labels']:.1f} ({m['trees']:.1f}/{m['hops']:.1f}/{m['stops']:.1f}) | {m['header_bytes']:.1f} | "
            f"{m['bytes']:.0f} | {r['install']['vts']:.0f} | {r['install']['max_entries']:.0f} | "
            f"{r['exact']}/{r['notifications']} |")
    return "\n".join(lines) + "\n"


def plot(report: dict, outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["results"]
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    budgets = sorted({r["rules"] for r in rows})
    levels = sorted({r["churn"] for r in rows})
    top = budgets[-1]
    name = report["topology"]["name"]
    colours = plt.get_cmap("tab10").colors
    markers = "osD^v<>px*hH+"
    paths = []

    def lines(stem: str, x_of, select, xlabel: str, title: str) -> None:
        fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4.2), squeeze=False)
        top_y = max((r["mean"]["labels"] for r in rows if select(r)), default=1.0) * 1.08
        for ax, sc in zip(axes[0], scenarios):
            for i, s in enumerate(strategies):
                pts = sorted((x_of(r), r["mean"]["labels"]) for r in rows
                             if r["scenario"] == sc and r["strategy"] == s and select(r))
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=markers[i % len(markers)], markersize=4,
                        color=colours[i % 10], label=s, linestyle="--" if s == "hops" else "-")
            ax.set_title(sc, fontsize=10)
            ax.set_xlabel(xlabel)
            ax.grid(True, alpha=0.3)
            ax.set_ylim(0, top_y)
        axes[0][0].set_ylabel("entries per notification (tree + hop + stop)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{title} — {name}", fontsize=11)
        fig.tight_layout()
        path = outdir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    if len(levels) > 1:
        lines("vt_churn", lambda r: round(r["churn"] * 100), lambda r: r["rules"] == top, "churn (% of clients relocated)",
              f"Header entries over churn, {top} rules per switch (cf. Fig. 6.14)")
    if len(budgets) > 1:
        lines("vt_zoo_rules", lambda r: r["rules"], lambda r: r["churn"] == levels[0], "rules per switch",
              f"Header entries over rules, {round(levels[0] * 100)} % churn (cf. Fig. 6.9a)")
    shown = sorted({levels[0], levels[len(levels) // 2], levels[-1]})
    fig, axes = plt.subplots(len(scenarios), 1, figsize=(max(8, 1.1 * len(strategies) * len(shown) / 2),
                                                         3.4 * len(scenarios)), squeeze=False)
    width = 0.8 / len(shown)
    for ax, sc in zip(axes[:, 0], scenarios):
        for j, level in enumerate(shown):
            for i, s in enumerate(strategies):
                r = next((r for r in rows if r["scenario"] == sc and r["strategy"] == s and r["rules"] == top
                          and r["churn"] == level), None)
                if r is None:
                    continue
                x = i + (j - (len(shown) - 1) / 2) * width
                bottom = 0.0
                for k, colour in (("trees", "tab:green"), ("hops", "tab:blue"), ("stops", "tab:red")):
                    ax.bar(x, r["mean"][k], width * 0.9, bottom=bottom, color=colour,
                           label=k if (i, j) == (0, 0) else None)
                    bottom += r["mean"][k]
        ax.set_ylim(0, 1.08 * max((r["mean"]["labels"] for r in rows if r["scenario"] == sc and r["rules"] == top),
                                  default=1.0))
        ax.set_xticks(range(len(strategies)), strategies, fontsize=8)
        ax.set_ylabel("entries per notification")
        ax.set_title(f"{sc}: bars per strategy at {', '.join(f'{round(c * 100)} %' for c in shown)} churn "
                     f"(left to right), {top} rules", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Label mix — {name}", fontsize=11)
    fig.tight_layout()
    path = outdir / "vt_churn_labels.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def write_report(report: dict, outdir: str | Path, plots: bool = True) -> list[Path]:
    return save_report(report, outdir, "vt-churn", markdown, plot if plots else None)


def ranking(report: dict) -> dict[str, list[tuple[str, float]]]:
    """Per scenario, (strategy, entries) from fewest entries up, at the highest churn level and budget."""
    rows = report["results"]
    level, budget = max(r["churn"] for r in rows), max(r["rules"] for r in rows)
    out: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        if r["churn"] == level and r["rules"] == budget:
            out.setdefault(r["scenario"], []).append((r["strategy"], r["mean"]["labels"]))
    return {sc: sorted(v, key=lambda x: x[1]) for sc, v in out.items()}


def survey_markdown(reports: list[dict]) -> str:
    """Fig. 6.15 as a table: every network's Table 6.1 columns and its best two strategies per scenario."""
    scenarios = list(dict.fromkeys(r["scenario"] for rep in reports for r in rep["results"]))
    lines = ["| network | nodes | edges | mean degree | degree variance | diameter | "
             + " | ".join(f"{s}: best, second (entries)" for s in scenarios) + " |",
             "|---|---:|---:|---:|---:|---:|" + "---|" * len(scenarios)]
    for rep in sorted(reports, key=lambda r: (r["topology"]["diameter"] or 0, r["topology"]["name"])):
        t, ranks = rep["topology"], ranking(rep)
        cells = [", ".join(f"{name} {entries:.1f}" for name, entries in ranks.get(s, [])[:2]) for s in scenarios]
        lines.append(f"| {t.get('spec', t['name'])} | {t['nodes']} | {t['edges']} | {t['mean_degree']} | "
                     f"{t['degree_variance']} | {t['diameter']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def survey_plot(reports: list[dict], path: Path) -> Path:
    """Fig. 6.15: per scenario, networks at (diameter, degree variance), log-log; colour = best
    strategy, area = its entries per notification."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(r["scenario"] for rep in reports for r in rep["results"]))
    strategies = list(dict.fromkeys(r["strategy"] for rep in reports for r in rep["results"]))
    colours = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4.4), squeeze=False)
    for ax, sc in zip(axes[0], scenarios):
        seen = set()
        for rep in reports:
            t, ranks = rep["topology"], ranking(rep)
            if sc not in ranks or not t["diameter"]:
                continue
            name, entries = ranks[sc][0]
            i = strategies.index(name)
            ax.scatter(t["diameter"], max(t["degree_variance"], 0.05), s=12 * entries, color=colours[i % 10],
                       alpha=0.75, label=name if name not in seen else None, edgecolors="k", linewidths=0.3)
            seen.add(name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("diameter d")
        ax.set_title(sc, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("degree variance")
    fig.suptitle("Best strategy per network after the highest churn (cf. Fig. 6.15); dot area = entries", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
