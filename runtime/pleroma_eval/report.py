"""``p4sub eval pleroma``'s report: pleroma.json, pleroma.md and PNG plots.

* ``pleroma_<topology>_<workload>.png``: per topology and workload, the subscriber false-positive rate
  against the largest switch's flows (PLEROMA at each resolution, each merge method under each
  limit) with p4sub's entries and false positives beside them;
* ``pleroma_balogh.png``: Balogh's experiment, merge ratio against the network false-positive rate
  merging adds, one line per method (S2 Figs. 6.3/6.4's axes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _pleroma_line(variant: str, r: dict[str, Any], seconds: Any) -> str:
    """A PLEROMA row of a network's table: its variant, then the columns every variant has."""
    f = r["flows"]
    return (f"| PLEROMA | {variant} | {f['max']} | {f['mean']} | {f['total']} | {r['false_positives']} | "
            f"{r['false_negatives']} | {_pct(r['subscriber_fpr'])} | {r['link_copies']} | {r['extra_link_copies']} | "
            f"{r['extra_header_bytes']} | {seconds} |")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [f"PLEROMA against p4sub: {cfg['filters']} subscriptions per network, {cfg['events']} events "
             f"({round(100 * cfg['history_share'])} % of them the history), {cfg['publishers']} publishers, "
             f"{cfg['indexing']} indexing, {cfg['tree']} tree, at most {cfg['max_dz']} dz per subscription; "
             f"seed {cfg['seed']}; {report['seconds']} s.", ""]
    for net in report["networks"]:
        lines += [f"### {net['topology']} ({net['switches']} switches, {net['hosts']} hosts), {net['workload']}: "
                  f"{net['subscriptions']} subscriptions, {net['events']} events measured", "",
                  "| system | variant | flows/entries max | mean | total | FP at hosts | FN | subscriber FPR | "
                  "link copies | extra copies | extra header B | compile s |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in net["p4sub"]:
            if "error" in r:
                lines.append(f"| p4sub | {r['variant']} | {r['error']} |||||||||")
                continue
            e = r["entries"]
            lines.append(f"| p4sub | {r['variant']}{'' if r['exact'] else ' (widened)'} | {e['max']} | {e['mean']} | "
                         f"{e['total']} | {r['false_positives']} | {r['false_negatives']} | "
                         f"{_pct(r['subscriber_fpr'])} | "
                         f"{r['link_copies']} | {r['extra_link_copies']} | 0 | {r['compile_seconds']} |")
        for r in net["pleroma"]:
            lines.append(_pleroma_line(f"{r['requested_resolution']} bits (dz {r['resolution']}; per sub: "
                                       f"{r['dz_per_subscription']} dz, {r['subscription_bits']} bits)",
                                       r, r["compile_seconds"]))
        fine = net.get("finest")
        if fine:
            lines.append(_pleroma_line(f"finest: rank, {fine['resolution']} bits, <= {fine['max_dz']} dz/sub "
                                       f"({fine['dz_per_subscription']} dz, {fine['subscription_bits']} bits; "
                                       f"{'exact' if fine['exact'] else 'not exact'})", fine, fine["compile_seconds"]))
        for r in net["merged"]:
            lines.append(_pleroma_line(f"{r['method']}, limit {r['limit']} ({round(100 * r['limit_share'])} %)"
                                       f"{'' if r['fits'] else ', does not fit'}", r, f"+{r['merge_seconds']}"))
        lines.append("")
        if net.get("deployment"):
            lines += ["Change sets deployed as S2 Alg. 7 (every state forwards each event as the old or the new "
                      "flows): steps, and the most flows a switch holds above max(before, after).", "",
                      "| change | limit | steps | add | modify | delete | flows before | after | largest switch "
                      "at peak | peak above max(before, after) | plan s |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for d in net["deployment"]:
                lines.append(f"| {d['change']} | {d.get('limit', '')} | {d['steps']} | {d['add']} | {d['modify']} | "
                             f"{d['delete']} | {d['flows_before']} | {d['flows_after']} | {d['max_peak']} | "
                             f"{d['overshoot']} | {d['seconds']} |")
            lines.append("")
    b = report.get("balogh")
    if b:
        u = b["unconstrained"]
        lines += [f"### Balogh's mixed workload: {b['topology']} ({b['switches']} switches, {b['hosts']} hosts), "
                  f"{b['subscriptions']} subscriptions, {b['events']} events measured, {b['indexing']} indexing at "
                  f"{b['resolution']} bits, at most {b['max_dz']} dz per subscription", "",
                  f"Unconstrained: largest switch {u['flows']['max']} flows ({u['flows']['total']} in all), network "
                  f"FPR {_pct(u['network_fpr'])}, subscriber FPR {_pct(u['subscriber_fpr'])}, "
                  f"FN {u['false_negatives']}.", "",
                  "| method | limit | fits | merge ratio (flows) | per switch | network FPR | added | subscriber FPR | "
                  "added | FN | seconds |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in b["merged"]:
            lines.append(f"| {r['method']} | {r['limit']} | {'yes' if r['fits'] else 'no'} | "
                         f"{_pct(r['merge_ratio'])} | "
                         f"{_pct(r['switch_merge_ratio'])} | {_pct(r['network_fpr'])} | "
                         f"{100 * r['added_network_fpr']:+.2f} pp | {_pct(r['subscriber_fpr'])} | "
                         f"{100 * r['added_subscriber_fpr']:+.2f} pp | {r['false_negatives']} | {r['merge_seconds']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def program_dir(topology: str, workload: str, method: str | None = None, limit: int | None = None) -> str:
    """``bmv2/``'s subdirectory for one network's flows: ``<topology>-<workload>`` unconstrained,
    ``<topology>-<workload>-<method>-<limit>`` after merging (a sibling, so that each directory holds
    exactly one switch per subdirectory, one flow set)."""
    name = f"{topology.replace(':', '')}-{workload}"
    return name if method is None else f"{name}-{method}-{limit}"


def write_programs(report: dict[str, Any], out: Path) -> list[Path]:
    """Each network's PLEROMA flows at the merge resolution (kept with ``keep_tables``) as one v1model
    program per switch (:mod:`backends.bmv2.pleroma_program`): the unconstrained flows in
    ``bmv2/<topology>-<workload>/<switch>/``, those after each merge method under each flow limit in
    ``bmv2/<topology>-<workload>-<method>-<limit>/<switch>/``. Each of those directories is a network
    ``p4sub netsim`` runs (:mod:`runtime.pleroma_dir`: manifest, topology, rules, spec)."""
    from runtime import pleroma_dir

    paths = []
    for net in report["networks"]:
        if "programs_of" not in net:
            continue
        topology, wl, pnet = net["programs_of"]
        sets = [(None, None, net["tables"])] + net.get("merged_tables", [])
        for method, limit, tables in sets:
            base = Path(out) / "bmv2" / program_dir(net["topology"], net["workload"], method, limit)
            extra = {"workload": net["workload"], **({"method": method, "limit": limit} if method else {})}
            paths += pleroma_dir.write(base, topology, wl.rules_text, wl.spec_text, pnet, tables, extra)
    return paths


def write_report(report: dict[str, Any], out: Path, plots: bool = True) -> list[Path]:
    out = Path(out)
    report = {**report, "networks": [{k: v for k, v in n.items() if k not in ("tables", "merged_tables", "programs_of")}
                                      for n in report["networks"]]}
    paths = [out / "pleroma.json", out / "pleroma.md"]
    paths[0].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(report), encoding="utf-8")
    if plots:
        paths += _plots(report, out)
    return paths


def _plots(report: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for net in report["networks"]:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = [r["flows"]["max"] for r in net["pleroma"]]
        ys = [100 * r["subscriber_fpr"] for r in net["pleroma"]]
        ax.plot(xs, ys, "o-", color="tab:blue", label="PLEROMA, by dz resolution")
        if net.get("finest"):
            fine = net["finest"]
            ax.scatter([fine["flows"]["max"]], [100 * fine["subscriber_fpr"]], marker="P", s=90, color="navy",
                       label="PLEROMA finest (rank, full resolution)", zorder=3)
        labels: dict[tuple[int, float], list[str]] = {}  # resolutions that give the same point share a label
        for r in net["pleroma"]:
            labels.setdefault((r["flows"]["max"], 100 * r["subscriber_fpr"]), []).append(str(r["requested_resolution"]))
        for point, names in labels.items():
            ax.annotate("/".join(names) + " bits", point, textcoords="offset points", xytext=(4, 4), fontsize=8)
        markers = {"baseline": "v", "ms": "^", "traffic": "s", "history": "D"}
        for method, m in markers.items():
            rows = [r for r in net["merged"] if r["method"] == method]
            if rows:
                ax.scatter([r["flows"]["max"] for r in rows], [100 * r["subscriber_fpr"] for r in rows], marker=m,
                           label=f"PLEROMA {method}, flow limits", zorder=3)
        for r in net["p4sub"]:
            if "error" not in r:
                ax.scatter([r["entries"]["max"]], [100 * r["subscriber_fpr"]], marker="*", s=160, color="tab:red",
                           label=f"p4sub {r['variant']} (entries)", zorder=4)
        ax.set_xscale("log")
        ax.set_xlabel("flows (PLEROMA) / table entries (p4sub) on the largest switch")
        ax.set_ylabel("false positives at hosts (% of deliveries)")
        ax.set_title(f"{net['topology']}, {net['workload']}: {net['subscriptions']} subscriptions")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        name = f"pleroma_{net['topology'].replace(':', '')}_{net['workload']}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)
    b = report.get("balogh")
    if b:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for method in ("baseline", "ms", "traffic", "history"):
            rows = sorted((r for r in b["merged"] if r["method"] == method), key=lambda r: r["switch_merge_ratio"])
            if rows:
                ax.plot([100 * r["switch_merge_ratio"] for r in rows], [100 * r["added_network_fpr"] for r in rows],
                        "o-", label=method)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("merge ratio: mean flow reduction per switch (%)")
        ax.set_ylabel("network false-positive rate added by merging (pp)")
        ax.set_title(f"Balogh's mixed workload on {b['topology']} ({b['subscriptions']} subscriptions)")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "pleroma_balogh.png", dpi=110)
        plt.close(fig)
        paths.append(out / "pleroma_balogh.png")
    return paths
