"""Camus's users' own spec and rule files, as written, through p4sub (issue 14's table).

The files are not part of p4sub: point the script at checkouts of the public repositories
usi-systems/camus-compiler and usi-systems/p4pubsub. For every (spec, rules) pair it runs `check`,
`compile` (no target, BMv2 and Tofino: a whole program, or the include-mode control for a
pragma-only spec), `verify`, and, for whole BMv2 programs when p4c and simple_switch are installed, builds
the program and runs packets from `gen --spec` (near the rules' constants) through a real
simple_switch, comparing every output with the reference model on the row the spec's parse graph
reads from the same bytes.

    .venv/bin/python benchmarks/camus_files.py --camus-compiler ../camus-compiler --p4pubsub ../p4pubsub \\
        --out docs/camus-files
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAIRS = [  # (repo, spec, rules)
    ("camus-compiler", "examples/itch.p4", "examples/itch_rules.txt"),
    ("p4pubsub", "camus_itch_demo.p4app/p4src/spec_router.p4", "camus_itch_demo.p4app/rules.txt"),
    ("p4pubsub", "compiler_runtime/p4src/spec_router.p4", "camus_itch_demo.p4app/rules.txt"),
    ("p4pubsub", "kafka.p4app/p4src/router.tmpl.p4", "kafka.p4app/rules.txt"),
    ("p4pubsub", "int/spec.p4", "int/rules.txt"),
    ("p4pubsub", "coexistence/ipv4-spec.p4", "coexistence/ipv4-rules.txt"),
    ("p4pubsub", "coexistence/itch-spec.p4", "coexistence/itch-rules.txt"),
    ("p4pubsub", "coexistence/dns-spec.p4", "coexistence/dns-rules.txt"),
    ("p4pubsub", "coexistence/int-spec.p4", "coexistence/int-rules.txt"),
    ("p4pubsub", "cartracker/car-spec.p4", "cartracker/car-rules.txt"),
    ("p4pubsub", "hicn/hicn-tofino/ptf-tests/hicn/spec.p4", "hicn/hicn-tofino/ptf-tests/hicn/rules.txt"),
    ("p4pubsub", "hicn/hicn-tofino/ptf-tests/hicn/spec.p4", "hicn/experiment/tofino1.rules.txt"),
    ("p4pubsub", "hicn/hicn-tofino/ptf-tests/hicn/spec.p4", "hicn/experiment/tofino2.rules.txt"),
]
PROBES = 300


def p4sub(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "p4sub", *args], capture_output=True, text=True, timeout=600)


def first_error(done: subprocess.CompletedProcess) -> str:
    lines = [x for x in done.stderr.splitlines() if x.strip() and "note:" not in x]
    return lines[0] if lines else ""


def on_switch(out: Path, spec_path: Path, rules: Path, work: Path) -> str:
    """Build the BMv2 program, run generated packets through simple_switch, compare with the model."""
    from apps.pcap import read_pcap
    from compiler import ir
    from runtime import bmv2_pcap
    from runtime.model import Model
    from runtime.parse_graph import ParseGraph

    if not (shutil.which("p4c-bm2-ss") and shutil.which("simple_switch") and shutil.which("simple_switch_CLI")):
        return "not run (needs p4c-bm2-ss and simple_switch)"
    built = p4sub("build", str(out))
    if built.returncode:
        return "p4c refused: " + first_error(built)
    trace = work / "probes.pcap"
    gen = p4sub("gen", "--spec", str(spec_path), "--rules", str(rules), "--packets", str(PROBES), "-o", str(trace), "-q")
    if gen.returncode:
        return "gen --spec failed: " + first_error(gen)
    pipeline = ir.load(out)
    model, graph = Model(pipeline), ParseGraph(pipeline.spec)
    # The program recomputes the IPv4 checksum on the way out, so the probes carry correct ones, as
    # real packets do (gen --spec fills the checksum field at random).
    frames = [with_ipv4_checksum(r.data, graph, pipeline.spec) for r in read_pcap(trace)[0]]
    ports = sorted({p for g in pipeline.multicast_groups for p in g.ports}
                   | {e.args[0] for e in pipeline.entries if e.action == "forward"} | {0})
    expected: Counter = Counter()
    for f in frames:
        got, _ = model.run_one(graph.parse(f).row(model.inputs + model.validity))
        expected.update((p, f) for p in got)
    received = bmv2_pcap.run(out / "program.json", (out / "commands.txt").read_text(), ports, {0: frames})
    seen = Counter((p, f) for p, fs in received.items() for f in fs)
    if seen == expected:
        return f"agrees with the model on {len(frames)} packets ({sum(expected.values())} deliveries)"
    return (f"DIFFERS on {len(frames)} packets: {sum((expected - seen).values())} missing, "
            f"{sum((seen - expected).values())} extra")


def with_ipv4_checksum(frame: bytes, graph, spec) -> bytes:
    from backends.common.messages import ipv4_checksum

    info = ipv4_checksum(spec)
    header = graph.parse(frame).headers.get(info.header) if info else None
    if header is None or header.bit_offset % 8:
        return frame
    start = header.bit_offset // 8
    data = bytearray(frame)
    data[start + 10:start + 12] = b"\0\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(start, start + 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    data[start + 10:start + 12] = (~total & 0xFFFF).to_bytes(2, "big")
    return bytes(data)


def try_pair(roots: dict[str, Path], repo: str, spec: str, rules: str, work: Path,
             rules_path: Path | None = None) -> dict:
    spec_path, rules_path = roots[repo] / spec, rules_path or roots[repo] / rules
    row = {"repo": repo, "spec": spec, "rules": rules}
    done = p4sub("check", str(spec_path), str(rules_path))
    row["check"] = "ok" if done.returncode == 0 else first_error(done)
    if done.returncode:
        return row
    base = work / f"{repo}-{spec}-{rules_path.name}".replace("/", "_")
    none = p4sub("compile", str(spec_path), str(rules_path), "-o", str(base / "none"))
    row["compile"] = "ok" if none.returncode == 0 else first_error(none)
    verdict = p4sub("verify", str(base / "none"))
    row["verify"] = verdict.stdout.split(":")[0] if verdict.returncode == 0 else first_error(verdict) or verdict.stdout[:80]
    from compiler.spec.reader import read_spec

    pragma_only = read_spec(spec_path).pragma_only
    bmv2_args = ["--target", "bmv2"] + (["--emit", "control"] if pragma_only else [])
    bmv2 = p4sub("compile", str(spec_path), str(rules_path), "-o", str(base / "bmv2"), *bmv2_args)
    row["bmv2"] = (("ok (include mode: the control for the user's program)" if pragma_only else "ok")
                   if bmv2.returncode == 0 else first_error(bmv2))
    tofino = p4sub("compile", str(spec_path), str(rules_path), "-o", str(base / "tofino"), "--target", "tofino",
                   *(["--emit", "control"] if pragma_only else []))
    row["tofino"] = (("ok (include mode: the control for the user's program)" if pragma_only else "ok")
                     if tofino.returncode == 0 else first_error(tofino))
    p4test = shutil.which("p4test")
    include = Path(os.environ.get("P4SUB_TNA_INCLUDE") or (Path(p4test).resolve().parents[1] / "share/p4c/p4include"
                                                           if p4test else "."))
    if tofino.returncode == 0 and not pragma_only and p4test and (include / "tna.p4").is_file():
        front = subprocess.run(["p4test", "-D__TARGET_TOFINO__=1", "-I", str(include), str(base / "tofino" / "program.p4")],
                               capture_output=True, text=True, timeout=300)
        row["tofino"] = "ok, p4test accepts it" if front.returncode == 0 else "p4test refuses: " + front.stderr[:200]
    if bmv2.returncode == 0 and not pragma_only:
        row["simple_switch"] = on_switch(base / "bmv2", spec_path, rules_path, base)
    else:
        row["simple_switch"] = ("needs the user's own program around the control (not in the repository)"
                                if pragma_only else "-")
    return row


def short(text: str, roots: dict[str, Path], tmp: Path) -> str:
    """A message without this machine's paths (the checkouts' roots, the scratch directory)."""
    for name, root in roots.items():
        text = text.replace(str(root) + "/", f"{name}/")
    return text.replace(str(tmp) + "/", "").replace("p4sub: error: ", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--camus-compiler", required=True, help="checkout of usi-systems/camus-compiler")
    ap.add_argument("--p4pubsub", required=True, help="checkout of usi-systems/p4pubsub")
    ap.add_argument("--out", help="write camus-files.json and camus-files.md here")
    args = ap.parse_args()
    roots = {"camus-compiler": Path(args.camus_compiler), "p4pubsub": Path(args.p4pubsub)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="p4sub-camus-") as tmp:
        for i, (repo, spec, rules) in enumerate(PAIRS, 1):
            print(f"[{i}/{len(PAIRS)}] {repo}: {spec} + {rules}", file=sys.stderr, flush=True)
            row = try_pair(roots, repo, spec, rules, Path(tmp))
            row = {k: short(v, roots, Path(tmp)) for k, v in row.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if "bare number is not an action" in row["check"]:
                # p4pubsub's first compiler's ': N;' form is refused by design; the same rules in
                # the fwd(N) form show what the spec does.
                text = (roots[repo] / rules).read_text()
                fixed = Path(tmp) / ("fwd-" + rules.replace("/", "_"))
                fixed.write_text(re.sub(r":\s*(\d+)\s*;", r": fwd(\1);", text))
                row = try_pair(roots, repo, spec, rules + " (as fwd(N))", Path(tmp), fixed)
                row = {k: short(v, roots, Path(tmp)) for k, v in row.items()}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "camus-files.json").write_text(json.dumps(rows, indent=2) + "\n")
        cols = ["check", "compile", "verify", "bmv2", "tofino", "simple_switch"]
        lines = ["| repository | spec | rules | " + " | ".join(cols) + " |", "|" + "---|" * (3 + len(cols))]
        for r in rows:
            lines.append(f"| {r['repo']} | `{r['spec']}` | `{r['rules']}` | "
                         + " | ".join(str(r.get(c, "-")).replace("|", "\\|") for c in cols) + " |")
        (out / "camus-files.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
