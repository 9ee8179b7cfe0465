"""A damaged pipeline.json is refused by compiler.ir.load with the file and the JSON path of what is
wrong (compiler/ir/check.py), so every reader exits 2 instead of crashing. Issue 19, "Tracebacks"."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from compiler import ir
from compiler.base.errors import P4subError
from p4sub import main

REPO = Path(__file__).resolve().parents[3]
ITCH = str(REPO / "apps/itch/itch.p4")
ITCH_RULES = str(REPO / "apps/itch/rules.sub")


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("pj") / "out"
    assert main(["compile", ITCH, ITCH_RULES, "-o", str(out), "--delivery", "groups"]) == 0
    return out, json.loads((out / "pipeline.json").read_text())


def _first(data: dict, table_role: str) -> int:
    names = {t["name"] for t in data["tables"] if t["role"] == table_role}
    return next(i for i, e in enumerate(data["entries"]) if e["table"] in names)


def damage(data: dict, how: str) -> tuple[dict, str]:
    """A copy of ``data`` damaged ``how``; and the message fragment expected."""
    d = copy.deepcopy(data)
    e = _first(d, "field")
    if how == "entry table":
        d["entries"][e]["table"] = "nosuch"
        return d, f"entries[{e}].table: no table 'nosuch' in the pipeline"
    if how == "entry action":
        d["entries"][e]["action"] = "NoSuchAction"
        return d, f"entries[{e}].action: 'NoSuchAction' is not one of"
    if how == "entry arity":
        d["entries"][e]["args"] = d["entries"][e]["args"] + [1]
        return d, f"entries[{e}].args: set_state takes 1 arguments, 2 given"
    if how == "matches arity":
        d["entries"][e]["matches"] = d["entries"][e]["matches"][:1]
        return d, f"entries[{e}].matches: 1 matches for the 2 keys"
    if how == "match kind":
        d["entries"][e]["matches"][0] = {"kind": "Range", "lo": 0, "hi": 1}
        return d, f"entries[{e}].matches[0]: a Range match on the exact key meta.p4sub_state"
    if how == "unknown match kind":
        d["entries"][e]["matches"][0] = {"kind": "Wildcard", "value": 0}
        return d, f"entries[{e}].matches[0]: unknown kind 'Wildcard'"
    if how == "value too wide":
        d["entries"][e]["matches"][0]["value"] = 1 << 40
        return d, f"entries[{e}].matches[0]: value 1099511627776 does not fit in"
    if how == "empty range":
        i = next(i for i, x in enumerate(d["entries"]) if x["matches"] and x["matches"][-1]["kind"] == "Range")
        m = d["entries"][i]["matches"][-1]
        m["lo"], m["hi"] = m["hi"] + 1, m["lo"]
        return d, f"entries[{i}].matches[{len(d['entries'][i]['matches']) - 1}]: empty range"
    if how == "argument too wide":
        d["entries"][e]["args"] = [1 << 70]
        return d, f"entries[{e}].args[0]: argument state = 1180591620717411303424 does not fit"
    if how == "string for an integer":
        d["entries"][e]["priority"] = "high"
        return d, f"entries[{e}].priority: expected an integer, got a string"
    if how == "boolean for an integer":
        d["tables"][0]["size"] = True
        return d, "tables[0].size: expected an integer, got a boolean"
    if how == "missing member":
        del d["tables"][0]["keys"]
        return d, "tables[0].keys: missing"
    if how == "null entries":
        d["entries"] = None
        return d, "entries: expected an array, got null"
    if how == "table action":
        d["tables"][0]["actions"] = ["ghost"]
        return d, "tables[0].actions[0]: no action 'ghost' in the pipeline"
    if how == "default action":
        d["tables"][0]["default_action"] = "ghost"
        return d, "tables[0].default_action: no action 'ghost'"
    if how == "key width":
        d["tables"][0]["keys"][0]["width"] = 0
        return d, "tables[0].keys[0].width: width 0 is not between 1 and 65536"
    if how == "key match kind":
        d["tables"][0]["keys"][0]["match_kind"] = "fuzzy"
        return d, "tables[0].keys[0].match_kind: unknown match kind 'fuzzy'"
    if how == "on_miss missing":
        d["tables"][0]["on_miss"] = "ghost"
        return d, "tables[0].on_miss: no table 'ghost'"
    if how == "on_miss cycle":
        i = next(i for i, t in enumerate(d["tables"]) if t["on_miss"])
        miss = next(j for j, t in enumerate(d["tables"]) if t["name"] == d["tables"][i]["on_miss"])
        d["tables"][miss]["on_miss"] = d["tables"][i]["name"]
        return d, "on_miss chain from"
    if how == "control":
        d["control"] = d["control"] + ["ghost"]
        return d, f"control[{len(d['control']) - 1}]: no table 'ghost'"
    if how == "primitive":
        d["actions"][0]["body"] = [{"op": "teleport", "args": []}]
        return d, "actions[0].body[0].op: unknown primitive 'teleport'"
    if how == "metadata ref":
        i = next(i for i, a in enumerate(d["actions"]) if any(p["op"] == "set_meta" for p in a["body"]))
        j = next(j for j, p in enumerate(d["actions"][i]["body"]) if p["op"] == "set_meta")
        d["actions"][i]["body"][j]["args"][0] = "meta.ghost"
        return d, f"actions[{i}].body[{j}].args[0]: 'meta.ghost' is not a metadata field"
    if how == "duplicate table":
        d["tables"].append(copy.deepcopy(d["tables"][0]))
        return d, f"tables[{len(d['tables']) - 1}].name: {d['tables'][0]['name']!r} is declared twice"
    if how == "multicast id":
        d["multicast_groups"] = [{"id": 0, "ports": [1]}]
        return d, "multicast_groups[0].id: group id 0 is not positive"
    if how == "match kind not a string":
        d["entries"][e]["matches"][0]["kind"] = {"a": 1}
        return d, f"entries[{e}].matches[0]: unknown kind"
    if how == "multicast group gone":
        gone = d["multicast_groups"].pop()["id"]
        i = next(i for i, x in enumerate(d["entries"]) if x["action"] == "multicast" and x["args"] == [gone])
        return d, f"entries[{i}].args: multicast group {gone} is not one of the pipeline's multicast_groups"
    if how == "delivery kind":
        d["delivery"]["kind"] = "carrier pigeon"
        return d, "delivery.kind: unknown delivery 'carrier pigeon'"
    if how == "spec header type":
        d["spec"]["headers"][0]["type_name"] = "ghost_t"
        return d, "spec.headers[0].type_name: no header type 'ghost_t'"
    if how == "parser state":
        name = next(iter(d["spec"]["parser_states"]))
        d["spec"]["parser_states"][name]["cases"][0]["next_state"] = "ghost"
        return d, f"spec.parser_states.{name}.cases[0].next_state: no parser state 'ghost'"
    if how == "top level":
        return [1, 2, 3], "the top level is not a JSON object"
    raise AssertionError(how)


CASES = ["entry table", "entry action", "entry arity", "matches arity", "match kind", "unknown match kind",
         "value too wide", "empty range", "argument too wide", "string for an integer", "boolean for an integer",
         "missing member", "null entries", "table action", "default action", "key width", "key match kind",
         "on_miss missing", "on_miss cycle", "control", "primitive", "metadata ref", "duplicate table",
         "multicast id", "match kind not a string", "multicast group gone", "delivery kind", "spec header type", "parser state", "top level"]


@pytest.mark.parametrize("how", CASES)
def test_load_names_the_file_and_the_bad_path(good, tmp_path, how):
    _, data = good
    damaged, message = damage(data, how)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(damaged))
    with pytest.raises(P4subError) as info:
        ir.load(path)
    assert str(info.value).startswith(f"{path}: "), str(info.value)
    assert message in str(info.value)


def test_an_undamaged_pipeline_loads_equal(good):
    out, data = good
    assert ir.load(out) == ir.from_json(ir.Pipeline, data)


@pytest.mark.parametrize("how", ["entry action", "match kind", "on_miss cycle", "metadata ref", "top level"])
def test_every_reader_exits_2_on_a_damaged_pipeline(good, tmp_path, capsys, how):
    out, data = good
    bad = tmp_path / "bad"
    bad.mkdir()
    damaged, message = damage(data, how)
    (bad / "pipeline.json").write_text(json.dumps(damaged))
    packets = tmp_path / "p.jsonl"
    packets.write_text((REPO / "examples/itch-packets.jsonl").read_text())
    packet = (REPO / "examples/itch-packets.jsonl").read_text().splitlines()[0]
    for argv in (["simulate", str(bad), "--packets", str(packets)], ["explain", str(bad), "--packet", packet],
                 ["verify", str(bad), "--rules", ITCH_RULES],
                 ["replay", str(bad), "--trace", str(packets), "--rules", ITCH_RULES],
                 ["compile", ITCH, ITCH_RULES, "-o", str(tmp_path / "o"), "--like", str(bad)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
