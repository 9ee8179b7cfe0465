"""``p4sub eval pleroma --quick``: both systems on the same network, no missed event, the report written."""

from __future__ import annotations

import json

from p4sub import main
from runtime.pleroma_dir import load_any


def test_quick_run_writes_json_table_and_plots_and_misses_nothing(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["eval", "pleroma", "--quick", "--quiet", "--programs", "--report", str(out)]) == 0
    report = json.loads((out / "pleroma.json").read_text())
    assert {p.name for p in out.iterdir()} == {"pleroma.json", "pleroma.md", "pleroma_fat-tree4_itch.png",
                                               "pleroma_fat-tree4_siena.png", "pleroma_balogh.png", "bmv2"}
    # One BMv2 program per switch, its entries as many as the switch's flows at the merge resolution.
    itch = next(n for n in report["networks"] if n["workload"] == "itch")
    programs = sorted((out / "bmv2" / "fat-tree4-itch").glob("*/program.p4"))
    assert len(programs) == itch["switches"]
    total = sum(len(json.loads((p.parent / "entries.p4rt.json").read_text())["updates"]) for p in programs)
    groups = sum((p.parent / "commands.txt").read_text().count("mc_mgrp_create") for p in programs)
    merged_base = next(r for r in itch["pleroma"] if r["requested_resolution"] == 24)
    assert total - groups == merged_base["flows"]["total"]
    # And one directory per merge method and limit, its entries as many as the flows that method left.
    for row in itch["merged"]:
        d = out / "bmv2" / f"fat-tree4-itch-{row['method']}-{row['limit']}"
        programs = sorted(d.glob("*/program.p4"))
        assert len(programs) == itch["switches"], d
        entries = sum(len(json.loads((p.parent / "entries.p4rt.json").read_text())["updates"]) for p in programs)
        groups = sum((p.parent / "commands.txt").read_text().count("mc_mgrp_create") for p in programs)
        assert entries - groups == row["flows"]["total"], row["method"]
        assert _flows_netsim_loads(d) == row["flows"]["total"], row["method"]
    assert _flows_netsim_loads(out / "bmv2" / "fat-tree4-itch") == merged_base["flows"]["total"]
    for net in report["networks"]:
        rows = net["pleroma"] + net["merged"] + [net["finest"]] + [r for r in net["p4sub"] if "error" not in r]
        assert rows and all(r["false_negatives"] == 0 for r in rows)
        exact = net["p4sub"][0]
        assert exact["variant"] == "exact" and exact["exact"] and exact["false_positives"] == 0
        if net["finest"]["exact"]:  # rank indexing at full resolution, nothing truncated: no false positive
            assert net["finest"]["false_positives"] == 0 and net["finest"]["extra_link_copies"] == 0
        for r in net["merged"]:  # every switch within the limit
            assert r["flows"]["max"] <= r["limit"] and r["fits"]
        # The same events reach both systems: the deliveries wanted are the same.
        assert len({r["delivered"] - r["false_positives"] for r in rows}) == 1
        # Every change set planned (S2 Alg. 7): the churn, and each merge from the flows it started from.
        plans = {d["change"]: d for d in net["deployment"]}
        assert any(c.startswith("churn") for c in plans)
        for r in net["merged"]:
            d = next(d for d in net["deployment"]
                     if d["change"] == f"unconstrained -> {r['method']}" and d["limit"] == r["limit"])
            assert d["flows_after"] == r["flows"]["total"] and d["flows_before"] == merged_total(net)
            assert d["steps"] == d["add"] + d["modify"] + d["delete"]
    b = report["balogh"]
    assert all(r["false_negatives"] == 0 and r["flows"]["max"] <= r["limit"] for r in b["merged"])
    assert "| p4sub | exact |" in capsys.readouterr().out


def _flows_netsim_loads(directory) -> int:
    """The flows of a --programs directory as ``p4sub netsim`` loads it (entries read back)."""
    network = load_any(directory)
    assert network.kind == "pleroma"
    return sum(len(keys) for sw in network.switches.values() for t in sw.tables.values() for keys in t.keys)


def merged_total(net) -> int:
    """The unconstrained flows at the merge resolution (24 bits in the quick run)."""
    return next(r for r in net["pleroma"] if r["requested_resolution"] == 24)["flows"]["total"]


def test_bad_options_are_user_errors(capsys):
    assert main(["eval", "pleroma", "--quick", "--quiet", "--workloads", "itch,fix"]) == 2
    assert "unknown workload" in capsys.readouterr().err
    assert main(["eval", "pleroma", "--quick", "--quiet", "--limits", "150"]) == 2
    assert main(["eval", "pleroma", "--quick", "--quiet", "--methods", "lru"]) == 2
    assert main(["eval", "pleroma", "--quick", "--quiet", "--seed", "-1"]) == 2
    assert main(["eval", "pleroma", "--quick", "--quiet", "--max-dz", "0"]) == 2
    assert main(["eval", "pleroma", "--quick", "--quiet", "--programs"]) == 2
