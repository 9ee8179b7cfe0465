"""Every program kind p4sub renders for TNA, judged by bf-p4c: accepted or not, and its resources beside ours.

For each kind the script runs what a user runs, as subprocesses of the installed ``p4sub``
(``compile``/``route`` with ``--target tofino``, then ``p4sub build OUT``, which runs bf-p4c and
records its placement in ``OUT/resources.json`` beside the estimate), and prints per program:
bf-p4c's verdict (the first error line when it refuses), its compile seconds, and stages, SRAM and
TCAM units by bf-p4c and by p4sub's estimate with the estimate's error. Include mode compiles the
user's own program (``examples/coexist/coexist_tna.p4``) with bf-p4c directly, as docs/tofino.md
says a user does.

    PATH=/path/to/p4c/build:$PATH .venv/bin/python benchmarks/bench_bf_p4c.py --json docs/fit/bf_p4c.json
    .venv/bin/python benchmarks/bench_bf_p4c.py --only itch,int      # some kinds

Needs bf-p4c on PATH (p4c built with -DENABLE_TOFINO=ON); the machine's load is printed beside each
figure.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.tofino import bf_p4c  # noqa: E402

P4SUB = [sys.executable, "-m", "p4sub"]


def p4sub(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*P4SUB, *map(str, args)], cwd=ROOT, capture_output=True, text=True)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def must(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


# Each kind: (name, how to make its outputs) -> the output directories holding a TNA program.
def single(spec: str, rules: str, *extra: str) -> Callable[[Path], list[Path]]:
    def make(work: Path) -> list[Path]:
        out = work / "out"
        must(p4sub("compile", spec, rules, "--target", "tofino", "-o", out, *extra), "compile")
        return [out]
    return make


def generated(workload: str, filters: int, *extra: str) -> Callable[[Path], list[Path]]:
    def make(work: Path) -> list[Path]:
        rules, spec = work / "rules.sub", work / "spec.p4"
        gen = ["gen", "rules", "--workload", workload, "--filters", str(filters), "-o", rules]
        if workload not in ("itch", "int"):
            gen += ["--spec-out", spec]
        must(p4sub(*gen), "gen rules")
        spec_path = {"itch": "apps/itch/itch.p4", "int": "apps/int/int.p4"}.get(workload, str(spec))
        out = work / "out"
        must(p4sub("compile", spec_path, rules, "--target", "tofino", "-o", out, *extra), "compile")
        return [out]
    return make


def routed(*extra: str) -> Callable[[Path], list[Path]]:
    """One switch of each role (edge, aggregation, core) of ``examples/fat-tree-4``."""
    def make(work: Path) -> list[Path]:
        net = work / "net"
        must(p4sub("route", "examples/fat-tree-4.topo", "examples/fat-tree-4.rules", "--spec", "apps/itch/itch.p4",
                   "--target", "tofino", "--quiet", "-o", net, *extra), "route")
        picked: dict[str, Path] = {}
        for d in sorted(p for p in net.iterdir() if (p / "program.p4").is_file()):
            picked.setdefault(d.name.rstrip("0123456789_").rstrip("_") or d.name, d)
        return list(picked.values())
    return make


def stateful(work: Path) -> list[Path]:
    """examples/stateful's counters without its ``avg`` rule (Tofino has no divider: p4sub refuses it)."""
    rules = work / "rules.sub"
    rules.write_text("".join(line for line in (ROOT / "examples/stateful/itch-rate.rules").read_text().splitlines(True)
                             if "avg(" not in line))
    out = work / "out"
    must(p4sub("compile", "examples/stateful/itch-rate.p4", rules, "--target", "tofino", "-o", out), "compile")
    return [out]


KINDS: dict[str, Callable[[Path], list[Path]]] = {
    "itch": single("apps/itch/itch.p4", "apps/itch/rules.sub"),
    "itch-first": single("apps/itch/itch.p4", "apps/itch/rules.sub", "--batch", "first"),
    "itch-1k": generated("itch", 1000),
    "itch-3k": generated("itch", 3000),
    "int": single("apps/int/int.p4", "apps/int/rules.sub"),
    "stateful": stateful,
    "siena-groups": generated("siena", 50, "--delivery", "groups"),
    "siena-bitmap-lanes": generated("siena", 1000, "--delivery", "bitmap", "--lanes", "auto"),
    "route-mr": routed("--policy", "mr"),
    "route-tr": routed("--policy", "tr"),
    "header-stack": routed("--delivery", "header-stack"),
    "vt": routed("--delivery", "vt"),
}


def judge(out: Path) -> dict[str, Any]:
    """``p4sub build OUT`` (bf-p4c), and the figures it recorded in OUT/resources.json."""
    start = time.perf_counter()
    done = p4sub("build", out)
    row: dict[str, Any] = {"program": out.name, "seconds": round(time.perf_counter() - start, 1), "load": load()}
    resources = json.loads((out / "resources.json").read_text()) if (out / "resources.json").is_file() else {}
    est = resources.get("estimate", resources)
    row["estimate"] = {"stages": est.get("stages"), "sram": est.get("sram_blocks"), "tcam": est.get("tcam_blocks")}
    if done.returncode != 0:
        errors = [ln for ln in done.stderr.splitlines()
                  if re.search(r"(^|[\s:\]])error:", ln)
                  and "no binary will be generated" not in ln and "bf-p4c failed" not in ln]
        row.update(accepted=False, error=(errors or done.stderr.strip().splitlines() or ["?"])[0][:400])
        return row
    bf = resources["bf_p4c"]
    row.update(accepted=True, bf_p4c={"stages": bf["stages"], "sram": bf["sram_blocks"], "tcam": bf["tcam_blocks"],
                                      "map_rams": bf["map_rams"]},
               error_percent={k: v["error_percent"] for k, v in resources["comparison"]["totals"].items()})
    return row


def include_mode(work: Path, compiler: str) -> dict[str, Any]:
    out = work / "out"
    must(p4sub("compile", "examples/coexist/itch-spec.p4", "examples/coexist/rules.sub", "--target", "tofino",
               "--emit", "control", "-o", out), "compile --emit control")
    build = work / "build"
    start = time.perf_counter()
    done = subprocess.run(bf_p4c.command(ROOT / "examples/coexist/coexist_tna.p4", build, compiler, ["-I", str(out)]),
                          capture_output=True, text=True)
    row: dict[str, Any] = {"program": "coexist_tna.p4", "seconds": round(time.perf_counter() - start, 1),
                           "load": load(), "accepted": done.returncode == 0}
    if done.returncode != 0:
        row["error"] = done.stderr.strip().splitlines()[0][:400] if done.stderr.strip() else "?"
        return row
    m = bf_p4c.read(build)
    row["bf_p4c"] = {"stages": m.stages, "sram": m.sram_blocks, "tcam": m.tcam_blocks, "map_rams": m.map_rams}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated kinds (default: all): " + ", ".join([*KINDS, "include"]))
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--keep", type=Path, help="keep the outputs under this directory")
    args = ap.parse_args()
    compiler = shutil.which(bf_p4c.COMPILER)
    if compiler is None:
        print(bf_p4c.HOW_TO_GET, file=sys.stderr)
        return 2
    wanted = [k for k in args.only.split(",") if k] or [*KINDS, "include"]
    print(f"bf-p4c: {bf_p4c.version(compiler)}")
    rows = []
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    for kind in wanted:
        work = Path(tempfile.mkdtemp(prefix=f"bf-{kind}-", dir=args.keep))
        try:
            if kind == "include":
                found = [include_mode(work, compiler)]
            else:
                found = [judge(out) for out in KINDS[kind](work)]
        except RuntimeError as exc:
            found = [{"program": kind, "accepted": False, "error": f"p4sub: {exc}"}]
        for row in found:
            row["kind"] = kind
            rows.append(row)
            print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    accepted = sum(1 for r in rows if r.get("accepted"))
    print(f"{accepted} of {len(rows)} programs accepted by bf-p4c")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"bf_p4c": bf_p4c.version(compiler), "rows": rows}, indent=1) + "\n")
    return 0 if accepted == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
