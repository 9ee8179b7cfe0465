"""State variables and windowed aggregates: which counter each rule attribute reads, and the IR for it.

Rules test ``rate``, ``count(rate)``, ``sum(rate)``, ``avg(add_order.price)``; the spec declares the
counters (``@query_counter(rate, 100000, 1024, key=add_order.stock, field=add_order.price)``). The
diagram matches these attributes like packet fields; this module binds each to its counter and
function and describes, in the Pipeline IR, the registers and the update that computes their
values before the tables run (:class:`compiler.ir.StateUpdate`). The semantics (anchored tumbling
windows per cell, update before read, integer average) are in docs/compiler.md, "Stateful
subscriptions"; :mod:`runtime.state` executes them for the reference model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from compiler import ir
from compiler import rules as ast
from compiler.base import CompileError, P4subError, raise_all
from compiler.rules import TypedRules
from compiler.rules import memo as filter_memo
from compiler.spec import Counter, Spec

FUNCTIONS = ("count", "sum", "avg")
#: Window ends are kept in 64 bits (a 48-bit microsecond clock plus the window never overflows them).
END_WIDTH = 64


def is_stateful(attr: ast.Attribute) -> bool:
    return isinstance(attr, (ast.StateVar, ast.Aggregate))


def bind(attr: ast.Attribute, spec: Spec) -> tuple[Counter, str]:
    """The counter a stateful attribute reads and the function of it (``count``, ``sum``, ``avg``).

    ``v`` is ``count(v)``; ``sum(v)``/``avg(v)`` need ``v`` to have ``field=``; ``f(h.g)`` is ``f`` of
    the one counter whose ``field=`` is ``h.g``. Raises CompileError (with the attribute's location).
    """
    if isinstance(attr, ast.StateVar):
        return _counter(attr.name, attr, spec), "count"
    if not isinstance(attr, ast.Aggregate) or attr.function not in FUNCTIONS:
        raise CompileError(f"{attr} is not a state variable or an aggregate", getattr(attr, "location", None))
    arg = attr.argument
    if isinstance(arg, ast.StateVar):
        counter = _counter(arg.name, attr, spec)
        if attr.function != "count" and counter.field is None:
            raise CompileError(f"{attr}: counter {counter.name!r} adds up no field; declare it with field=h.f "
                               f"(@query_counter({counter.name}, {counter.window_us}, {counter.slots}, field=h.f))",
                               attr.location)
        return counter, attr.function
    keeping = [c for c in spec.counters.values() if c.field == arg.name]
    if not keeping:
        raise CompileError(f"{attr} needs a window: declare a counter that adds up {arg.name}, "
                           f"@query_counter(NAME, WINDOW_US, SLOTS, field={arg.name}), and test "
                           f"{attr.function}(NAME) or {attr}", attr.location)
    if len(keeping) > 1:
        raise CompileError(f"{attr} is ambiguous: counters {', '.join(c.name for c in keeping)} all add up "
                           f"{arg.name}; name one: {attr.function}({keeping[0].name})", attr.location)
    return keeping[0], attr.function


def relax(f: ast.Filter, positive: bool = True) -> ast.Filter:
    """``f`` with its stateful comparisons taken as holding: a filter every packet ``f`` matches
    also matches, whatever the counters read. A switch upstream of a rule's last hop forwards with
    it, so that only the last hop counts and judges (docs/compiler.md, "Where state lives"). Under a
    ``not`` a comparison is taken as failing, which again widens the whole. ``f`` itself when it
    tests no state."""
    if isinstance(f, ast.Comparison):
        return ast.Const(positive, f.location) if is_stateful(f.attribute) else f
    if isinstance(f, ast.Not):
        item = relax(f.item, not positive)
        return f if item is f.item else ast.Not(item, f.location)
    if isinstance(f, (ast.And, ast.Or)):
        items = tuple(relax(i, positive) for i in f.items)
        return f if all(a is b for a, b in zip(items, f.items)) else type(f)(items, f.location)
    return f


def _counter(name: str, attr: ast.Attribute, spec: Spec) -> Counter:
    counter = spec.counters.get(name)
    if counter is None:
        raise CompileError(f"{attr}: no counter {name!r} in the spec (declare it with @query_counter)",
                           getattr(attr, "location", None))
    return counter


def field_width(spec: Spec, ref: str) -> int:
    """The width of a counter's key or field: a header field, or intrinsic metadata."""
    width = spec.field_width(ref)
    if width is None:
        from compiler.spec import intrinsic_width

        inst, name = ref.split(".", 1)
        width = intrinsic_width(inst, name)
    if width is None:
        raise P4subError(f"{spec.path}: no field {ref} (a counter's key or field)")
    return width


def read_field(counter: str, function: str) -> str:
    """The metadata that holds ``function`` of ``counter`` while the tables run."""
    return f"meta.p4sub_st_{counter}_{function}"


@dataclass(frozen=True)
class StatePlan:
    """What the rules' stateful attributes need: one update per counter read (spec order)."""

    updates: tuple[ir.StateUpdate, ...] = ()

    @property
    def registers(self) -> tuple[ir.Register, ...]:
        out = []
        for u in self.updates:
            out.append(ir.Register(u.end, END_WIDTH, u.size, u.index))
            out.append(ir.Register(u.count, u.width, u.size, u.index))
            if u.total:
                out.append(ir.Register(u.total, u.width, u.size, u.index))
        return tuple(out)

    @property
    def metadata(self) -> tuple[ir.Metadata, ...]:
        seen: dict[str, int] = {}
        for u in self.updates:
            for r in u.reads:
                seen.setdefault(r.field, u.width)
        return tuple(ir.Metadata(name, width) for name, width in seen.items())


def plan(typed: TypedRules) -> StatePlan:
    """Bind every stateful attribute of ``typed`` to its counter; all binding errors together."""
    spec = typed.spec
    if spec is None:
        return StatePlan()
    reads: dict[str, list[ir.StateRead]] = {}
    errors: list[P4subError] = []
    seen: set[str] = set()
    shared = filter_memo.memo(spec)
    for rule in typed.rules:
        stateful = (_stateful_attributes(rule.filter) if shared is None
                    else shared.get("stateful", rule.filter, lambda: _stateful_attributes(rule.filter)))
        for attr in stateful:
            if attr.name in seen:
                continue
            seen.add(attr.name)
            try:
                counter, function = bind(attr, spec)
            except CompileError as exc:
                errors.append(exc)
                continue
            width = typed.fields[attr.name].width
            reads.setdefault(counter.name, []).append(ir.StateRead(attr.name, function, read_field(counter.name, function),
                                                                   width))
    raise_all(errors)
    updates = []
    for counter in spec.counters.values():
        if counter.name not in reads:
            continue
        summed = any(r.function in ("sum", "avg") for r in reads[counter.name])
        when = tuple(dict.fromkeys(ref.split(".", 1)[0] for ref in (counter.key, counter.field)
                                   if ref and spec.header(ref.split(".", 1)[0]) is not None))
        base = f"p4sub_{counter.name}"
        updates.append(ir.StateUpdate(
            counter.name, counter.window_us, counter.width, counter.slots if counter.key else 1,
            f"{base}_end", f"{base}_count", f"{base}_sum" if summed else "", counter.key or "",
            (counter.field or "") if summed else "", when, tuple(reads[counter.name])))
    return StatePlan(tuple(updates))


def _stateful_attributes(f: ast.Filter) -> tuple[ast.Attribute, ...]:
    return tuple(cmp.attribute for cmp in ast.comparisons(f) if is_stateful(cmp.attribute))


def attach(pipeline: ir.Pipeline, state: StatePlan) -> ir.Pipeline:
    """``pipeline`` with the plan's updates, registers and metadata (format 4); unchanged without state."""
    if not state.updates:
        return pipeline
    known = {m.name for m in pipeline.metadata}
    metadata = pipeline.metadata + tuple(m for m in state.metadata if m.name not in known)
    return dataclasses.replace(pipeline, updates=state.updates, registers=pipeline.registers + state.registers,
                               metadata=metadata, format_version=ir.STATEFUL_VERSION)
