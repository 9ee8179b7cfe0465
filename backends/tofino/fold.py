"""Fold a field table's miss table into it, to save logical tables.

The IR gives a field table ``(state, field) -> next state`` a second table ``state -> next state``
applied on its miss (the field values no edge names go to one default child per state). On Tofino
each is a logical table, and a stage holds 16: with a stack of messages evaluated side by side, the
pairs fill stages long before memory runs out. When the field's key is ternary, range or LPM, the
miss entries fit in the field table itself as lowest-priority entries whose field match is a
wildcard (ternary mask 0, the whole range, a /0 prefix); a narrow exact key becomes ternary (full
mask for the existing entries) so it can hold a wildcard too. The folded pipeline forwards exactly
as the original: a packet that matches an original entry still does (they outrank the wildcards),
and one that does not reaches the wildcard of its state, which is the miss table's entry.
"""

from __future__ import annotations

import dataclasses

from compiler import ir

WILDCARD_PRIORITY = 0  # below every field entry: the IR gives range and ternary entries priority >= 1
MAX_EXACT_WIDTH = 16   # wider exact keys stay exact: a ternary copy would cost TCAM for every entry
#: An exact table bigger than this stays exact whatever its key width: made ternary, hICN's 100k content
#: ids took 245 of the chip's 288 TCAM blocks in bf-p4c's placement (the SRAM table: 22 RAMs). 4,096
#: entries is 8 TCAM blocks deep, what one stage's miss-table branch is worth at most.
MAX_EXACT_ENTRIES = 4096


def fold_miss_tables(pipeline: ir.Pipeline, max_exact_width: int | None = MAX_EXACT_WIDTH,
                     max_exact_entries: int = MAX_EXACT_ENTRIES) -> ir.Pipeline:
    """The pipeline with every foldable ``on_miss`` table merged into the table that applies it
    (exact keys up to ``max_exact_width`` bits become ternary, ``None``: any width, in tables of at
    most ``max_exact_entries`` entries)."""
    tables = {t.name: t for t in pipeline.tables}
    by_table: dict[str, list[ir.Entry]] = {}
    for e in pipeline.entries:
        by_table.setdefault(e.table, []).append(e)
    folded: dict[str, ir.Table] = {}
    removed: set[str] = set()
    for t in pipeline.tables:
        miss = tables.get(t.on_miss) if t.on_miss else None
        if miss is None or not _foldable(t, miss, max_exact_width, max_exact_entries):
            continue
        keys = tuple(k if i == 0 or k.match_kind != "exact" else dataclasses.replace(k, match_kind="ternary")
                     for i, k in enumerate(t.keys))
        entries = [ir.Entry(e.table, tuple(_as_kind(m, keys[i], t.keys[i]) for i, m in enumerate(e.matches)),
                            e.action, e.args, max(e.priority, 1) if _needs_priority(keys) else e.priority)
                   for e in by_table.get(t.name, [])]
        for e in by_table.get(miss.name, []):
            entries.append(ir.Entry(t.name, (e.matches[0],) + tuple(_wildcard(k) for k in keys[1:]),
                                    e.action, e.args, WILDCARD_PRIORITY))
        by_table[t.name] = entries
        by_table.pop(miss.name, None)
        removed.add(miss.name)
        folded[t.name] = dataclasses.replace(t, keys=keys, on_miss=miss.on_miss, default_action=miss.default_action,
                                             default_args=miss.default_args, size=t.size + miss.size,
                                             actions=tuple(dict.fromkeys(t.actions + miss.actions)))
    if not folded:
        return pipeline
    new_tables = tuple(folded.get(t.name, t) for t in pipeline.tables if t.name not in removed)
    new_entries = tuple(e for t in new_tables for e in by_table.get(t.name, []))
    return dataclasses.replace(pipeline, tables=new_tables, entries=new_entries,
                               control=tuple(c for c in pipeline.control if c not in removed))


def _foldable(t: ir.Table, miss: ir.Table, max_exact_width: int | None, max_exact_entries: int) -> bool:
    """A (state, field...) table whose field keys can hold a wildcard, and a state-only miss table."""
    if len(t.keys) < 2 or len(miss.keys) != 1 or miss.keys[0] != t.keys[0] or t.keys[0].match_kind != "exact":
        return False
    exact = [k for k in t.keys[1:] if k.match_kind == "exact"]
    if exact and (t.size > max_exact_entries or any(max_exact_width is not None and k.width > max_exact_width
                                                    for k in exact)):
        return False
    return all(k.match_kind in ("ternary", "range", "lpm", "exact") for k in t.keys[1:])


def _needs_priority(keys: tuple[ir.Key, ...]) -> bool:
    return any(k.match_kind in ("ternary", "range") for k in keys)


def _as_kind(match: object, key: ir.Key, original: ir.Key) -> object:
    if original.match_kind == "exact" and key.match_kind == "ternary" and isinstance(match, ir.Exact):
        return ir.Ternary(match.value, (1 << key.width) - 1)
    return match


def _wildcard(key: ir.Key) -> object:
    if key.match_kind == "ternary":
        return ir.Ternary(0, 0)
    if key.match_kind == "range":
        return ir.Range(0, (1 << key.width) - 1)
    return ir.Lpm(0, 0)
