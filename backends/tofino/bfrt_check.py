"""``entries.bfrt.json`` checked against bf-p4c's ``bf-rt.json`` for the same program.

p4sub names every table, key field, action and data field the way it expects BF Runtime to name
them (:mod:`backends.tofino.bfrt`). bf-p4c's ``bf-rt.json`` is what the switch's BF Runtime server
will actually answer to: an entry whose table, key or data field it does not know is refused at
install time, on the switch. :func:`problems` compares the two before that: every table p4sub
writes exists with that name; its key fields have the same names, match types and widths; its
actions exist; every entry's key and data fields are ones BF Runtime knows for that table and
action. Fields BF Runtime adds on its own (``$MATCH_PRIORITY``, ``$ENTRY_TTL``, the PRE's tables) are
known.
"""

from __future__ import annotations

from typing import Any

#: bf-rt.json's match types, by the names entries.bfrt.json uses.
MATCH_TYPES = {"exact": "Exact", "ternary": "Ternary", "range": "Range", "lpm": "LPM"}
#: Key fields BF Runtime adds to a table (not declared in P4).
IMPLICIT_KEYS = {"$MATCH_PRIORITY"}
#: How many problems to list before summing up the rest.
LIMIT = 20


def _schema_tables(schema: dict) -> dict[str, dict]:
    return {t["name"]: t for t in schema.get("tables", [])}


def _width(field: dict) -> int | None:
    kind = field.get("type") or {}
    return kind.get("width")


def problems(entries_doc: dict, schema: dict) -> list[str]:
    """What in ``entries_doc`` (entries.bfrt.json) BF Runtime, as ``schema`` (bf-rt.json) describes
    it, would not accept; empty when every name, match type and width agrees."""
    tables = _schema_tables(schema)
    out: list[str] = []
    actions_of: dict[str, dict[str, set[str]]] = {}
    for t in entries_doc.get("tables", []):
        name = t["table_name"]
        st = tables.get(name)
        if st is None:
            near = [n for n in tables if n.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]]
            out.append(f"table {name}: not in bf-rt.json" + (f" (bf-p4c calls it {near[0]})" if near else ""))
            continue
        keys = {k["name"]: k for k in st.get("key", [])}
        for k in t.get("keys", []):
            sk = keys.get(k["name"])
            if sk is None:
                out.append(f"table {name}: key field {k['name']} not in bf-rt.json (it has "
                           f"{', '.join(sorted(n for n in keys if n not in IMPLICIT_KEYS)) or 'none'})")
                continue
            want = MATCH_TYPES.get(k["match_type"], k["match_type"])
            if sk.get("match_type") != want:
                out.append(f"table {name}: key {k['name']} is {sk.get('match_type')} in bf-rt.json, {want} here")
            if _width(sk) is not None and _width(sk) != k["width"]:
                out.append(f"table {name}: key {k['name']} is {_width(sk)} bits in bf-rt.json, {k['width']} here")
        declared = {k["name"] for k in t.get("keys", [])}
        extra = sorted(n for n in keys if n not in declared and n not in IMPLICIT_KEYS)
        if extra:
            out.append(f"table {name}: bf-rt.json has key fields p4sub does not fill: {', '.join(extra)}")
        specs = {a["name"]: {d["name"] for d in a.get("data", [])} for a in st.get("action_specs", [])}
        actions_of[name] = specs
        for a in t.get("actions", []):
            if a not in specs and a.rsplit(".", 1)[-1] not in {s.rsplit(".", 1)[-1] for s in specs}:
                out.append(f"table {name}: action {a} not in bf-rt.json (it has {', '.join(sorted(specs)) or 'none'})")
    seen: set[tuple[str, str]] = set()
    for e in entries_doc.get("entries", []):
        name, action = e["table_name"], e.get("action")
        if name not in actions_of or (name, action or "") in seen:
            continue
        seen.add((name, action or ""))
        keys = {k["name"] for k in tables[name].get("key", [])} | IMPLICIT_KEYS
        unknown = sorted(set(e.get("key", {})) - keys)
        if unknown:
            out.append(f"table {name}: entries set key fields bf-rt.json does not have: {', '.join(unknown)}")
        if action is not None:
            data = actions_of[name].get(action)
            if data is None:
                out.append(f"table {name}: entries use action {action}, not in bf-rt.json")
            elif set(e.get("data", {})) != data:
                out.append(f"table {name}, action {action}: data fields {sorted(e.get('data', {}))} here, "
                           f"{sorted(data)} in bf-rt.json")
    if len(out) > LIMIT:
        out = out[:LIMIT] + [f"... and {len(out) - LIMIT} more"]
    return out


def summary(schema: dict) -> dict[str, Any]:
    """Table and action counts of a bf-rt.json (for reports)."""
    tables = [t for t in schema.get("tables", []) if not t["name"].startswith("$") and "." in t["name"]]
    return {"tables": len(tables), "actions": sum(len(t.get("action_specs", [])) for t in tables)}
