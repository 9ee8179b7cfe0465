"""``p4sub verify OUT``: prove that a compiled pipeline gives every packet what its rules say."""

from __future__ import annotations

import argparse
import json
import time

from compiler import ir
from compiler.rules import TypedRules, field_kind, json_value
from compiler.verify import Output, verify
from p4sub import add_command
from p4sub.replay import typed_rules


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "verify", "prove, with BDDs over all packets, that a pipeline forwards exactly as its rules say",
                    "p4sub verify out --rules apps/itch/rules.sub")
    p.add_argument("out", help="directory with pipeline.json (from p4sub compile)")
    p.add_argument("--rules", help="the rule file the pipeline was compiled from (default: OUT/sources.json)")
    p.add_argument("--spec", help="spec to check the rules against (default: the one in pipeline.json)")
    p.add_argument("--superset", action="store_true",
                   help="accept extra deliveries (an approximate compile): fail only on a missing one")
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    p.set_defaults(func=run)


def _output_text(o: Output) -> str:
    return f"port {o[1]}" if o[0] == "port" else f"{o[1]}({', '.join(map(str, o[2]))})"


def _packet(values: dict[str, int], typed: TypedRules) -> dict[str, int | str]:
    """Field values as ``p4sub simulate`` and ``p4sub explain`` read them (docs/packets.md): strings
    for string fields, exact decimal strings for scaled fields (``"50.0001"``), else integers."""
    out: dict[str, int | str] = {}
    for name, value in values.items():
        info = typed.fields.get(name)
        if info is None:
            out[name] = value
            continue
        kind = field_kind(info.scale, info.is_string)
        out[name] = json_value(value, info.width, kind=kind, scale=info.scale)
    return out


def run(args: argparse.Namespace) -> int:
    pipeline = ir.load(args.out)
    typed = typed_rules(args, pipeline)
    started = time.perf_counter()
    verdict = verify(pipeline, typed)
    seconds = time.perf_counter() - started
    differences = [{"output": _output_text(d.output),
                    "missing": _packet(d.missing, typed) if d.missing else None,
                    "extra": _packet(d.extra, typed) if d.extra else None} for d in verdict.differences]
    ok = verdict.equivalent or (args.superset and verdict.sound)
    if args.json:
        print(json.dumps({"equivalent": verdict.equivalent, "sound": verdict.sound, "outputs": verdict.outputs,
                          "variables": verdict.variables, "bdd_nodes": verdict.nodes, "seconds": round(seconds, 3),
                          "differences": differences}))
        return 0 if ok else 1
    size = f"{verdict.outputs} outputs, {verdict.variables} BDD variables, {verdict.nodes:,} nodes, {seconds:.2f} s"
    if verdict.equivalent:
        print(f"equivalent: every packet gets exactly the outputs its rules give it ({size})")
        return 0
    print(f"{'superset' if verdict.sound else 'NOT equivalent'}: {len(differences)} of {verdict.outputs} outputs "
          f"differ ({size})")
    for d in differences:
        if d["missing"]:
            print(f"  {d['output']}: missing for {json.dumps(d['missing'])}")
        if d["extra"]:
            print(f"  {d['output']}: extra for {json.dumps(d['extra'])}")
    return 0 if ok else 1
