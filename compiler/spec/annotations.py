"""The ``@query_*`` annotations of a spec (and their Camus ``@pragma`` forms), checked into Spec parts.

Both readers (P4_16 and P4_14) hand their annotations here once the headers struct is known, so
that every dialect means the same thing by ``@pragma query_field(add_order.price, 32)``. A
pragma-only spec (nothing but ``@pragma query_*`` lines, as Camus's include-mode specs are) has no
header declarations: :func:`synthesize_headers` makes one header type per instance from the
pragmas' widths first.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable

from compiler.base import P4subError, SourceLocation, SpecError
from compiler.spec import expr as ex
from compiler.spec.metadata import INTRINSIC_METADATA, intrinsic_width
from compiler.spec.model import Counter, FieldDef, HeaderInstance, HeaderType, QueryField, UserAction
from compiler.spec.syntax import RawAnnotation, RawArg, RawRef, path_text

QUERY_FIELD_KINDS = {
    "query_field": None,
    "query_field_exact": "exact",
    "query_field_range": "range",
    "query_field_lpm": "lpm",
    "query_field_ternary": "ternary",
}
QUERY_ANNOTATIONS = (*QUERY_FIELD_KINDS, "query_counter", "query_field_counter", "query_action",
                     "query_default_action", "query_control")
#: Standard P4_16 annotations that say nothing about packet layout; accepted and ignored.
IGNORED_ANNOTATIONS = ("name", "hidden", "noWarn", "deprecated", "brief", "description")
MAX_SCALE = 38
#: The longest counter window (v1model's 48-bit microsecond ingress timestamp) and the most cells
#: (a 32-bit cell index): past them a counter compiled, but no switch could keep it.
MAX_WINDOW_US = (1 << 48) - 1
MAX_SLOTS = (1 << 32) - 1
#: Camus's query_field_counter has no window argument in practice; its compiler uses this one.
CAMUS_COUNTER_WINDOW = 10000
_METADATA_HINT = ", ".join(f"{md.instance}.{name}" for md in INTRINSIC_METADATA.values() for name in md.fields)


@dataclass
class AnnotationContext:
    """What annotations are checked against.

    ``metadata_names`` are names that are metadata rather than headers (a P4_16 parser's other
    parameters, P4_14 ``metadata`` instances), with what they are, for a precise error.
    """

    instances: dict[str, HeaderInstance]
    header_types: dict[str, HeaderType]
    hdr_param: str = "hdr"
    metadata_names: dict[str, str] = field(default_factory=dict)


@dataclass
class Annotations:
    """The Spec parts the annotations give."""

    query_fields: dict[str, QueryField] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    actions: dict[str, UserAction] = field(default_factory=dict)
    default_action: str | None = None
    default_action_location: SourceLocation | None = None
    notes: list[tuple[SourceLocation, str]] = field(default_factory=list)


def read_annotations(annotations: Iterable[RawAnnotation], ctx: AnnotationContext,
                     errors: list[P4subError]) -> Annotations:
    """Check every annotation; problems go to ``errors`` (all of them, not only the first)."""
    out = Annotations()
    for ann in annotations:
        try:
            _one(ann, ctx, out)
        except SpecError as exc:
            errors.append(exc)
    return out


def _one(ann: RawAnnotation, ctx: AnnotationContext, out: Annotations) -> None:
    if ann.name in QUERY_FIELD_KINDS:
        qf = _query_field(ann, ctx)
        if qf.name in out.query_fields:
            raise SpecError(f"{qf.name} is annotated twice (first at {out.query_fields[qf.name].location})",
                            ann.location)
        out.query_fields[qf.name] = qf
    elif ann.name in ("query_counter", "query_field_counter"):
        counter = _query_counter(ann, ctx) if ann.name == "query_counter" else _query_field_counter(ann, ctx)
        if counter.name in out.counters:
            raise SpecError(f"duplicate counter {counter.name!r} (first at {out.counters[counter.name].location})",
                            ann.location)
        out.counters[counter.name] = counter
    elif ann.name == "query_action":
        action = _query_action(ann)
        if action.name in out.actions:
            raise SpecError(f"duplicate action {action.name!r} (first at {out.actions[action.name].location})",
                            ann.location)
        out.actions[action.name] = action
    elif ann.name == "query_default_action":
        name = _query_default_action(ann)
        if out.default_action is not None:
            raise SpecError(f"{_spelled(ann)} is given twice (first {out.default_action!r} at "
                            f"{out.default_action_location})", ann.location)
        out.default_action, out.default_action_location = name, ann.location
    elif ann.name == "query_control":
        if ann.args:
            raise SpecError(f"{_spelled(ann)} takes no arguments", ann.location)
        out.notes.append((ann.location, f"ignored {_spelled(ann)}: p4sub generates the subscription control "
                                        f"itself (Camus marked where to insert it)"))
    elif ann.name == "headers" and not ann.pragma:
        if ann.args:
            raise SpecError("@headers takes no arguments", ann.location)
    elif ann.name in IGNORED_ANNOTATIONS and not ann.pragma:
        pass
    else:
        raise SpecError(_unknown_annotation(ann), ann.location)


def _spelled(ann: RawAnnotation) -> str:
    return f"@pragma {ann.name}" if ann.pragma else f"@{ann.name}"


def _unknown_annotation(ann: RawAnnotation) -> str:
    spelled = _spelled(ann)
    if ann.pragma:
        return (f"{spelled} is not supported in a spec file (@pragma is read for "
                f"{', '.join(QUERY_ANNOTATIONS)}){_did_you_mean(ann.name, QUERY_ANNOTATIONS)}")
    known = [*QUERY_ANNOTATIONS, "headers"]
    return (f"unknown annotation {spelled}{_did_you_mean(ann.name, known)} (a spec file reads @query_field, "
            f"@query_field_exact/_range/_lpm/_ternary, @query_counter, @query_field_counter, @query_action, "
            f"@query_default_action and @headers; it ignores {', '.join('@' + a for a in IGNORED_ANNOTATIONS)})")


# ------------------------------------------------------------------------------------------------
# query fields


def _field_ref(ann: RawAnnotation, ctx: AnnotationContext) -> tuple[str, str, RawRef]:
    """The ``(instance, field)`` an annotation names, or a SpecError saying what to write instead."""
    spelled = _spelled(ann)
    args = ann.args or []
    if not args or args[0].kind != "expr" or not isinstance(args[0].value, RawRef):
        raise SpecError(f"{spelled} needs the field it makes queryable: {spelled}(header.field)", ann.location)
    ref = args[0].value
    parts = ref.path.parts
    names_only = all(isinstance(p, str) for p in parts)
    if names_only and len(parts) == 2:
        return parts[0], parts[1], ref
    text = path_text(ref.path)
    if names_only and len(parts) == 3 and parts[0] in (ctx.hdr_param or "hdr", "hdr"):
        raise SpecError(f"{spelled}({text}): name the header instance without the '{parts[0]}.' prefix: "
                        f"{spelled}({parts[1]}.{parts[2]})", ref.location)
    if names_only and len(parts) > 2:
        raise SpecError(f"{spelled}({text}): nested struct fields are not queryable yet; a query field is "
                        f"header.field (the header instance, then the field) or intrinsic metadata "
                        f"({_METADATA_HINT})", ref.location)
    raise SpecError(f"{spelled}({text}): a query field is header.field (the header instance name, then the "
                    f"field)", ref.location)


def _query_field(ann: RawAnnotation, ctx: AnnotationContext) -> QueryField:
    spelled = _spelled(ann)
    inst_name, field_name, ref = _field_ref(ann, ctx)
    name = f"{inst_name}.{field_name}"
    inst = ctx.instances.get(inst_name)
    metadata = False
    if inst is None and inst_name in INTRINSIC_METADATA:
        declared = intrinsic_width(inst_name, field_name)
        if declared is None:
            md = INTRINSIC_METADATA[inst_name]
            raise SpecError(f"{spelled}({name}): {md.architecture}'s {inst_name} ({md.type_name}) has no queryable "
                            f"field {field_name!r}{_did_you_mean(field_name, md.fields)} (p4sub reads "
                            f"{', '.join(md.fields)}: fields valid when ingress starts)", ref.location)
        metadata, declared_in = True, f"{INTRINSIC_METADATA[inst_name].architecture}'s {inst_name}"
    elif inst is None:
        if inst_name in ctx.metadata_names:
            raise SpecError(f"{spelled}({name}): {inst_name} is {ctx.metadata_names[inst_name]}, not a header: user "
                            f"metadata fields are not queryable yet (query header fields, or intrinsic metadata: "
                            f"{_METADATA_HINT})", ref.location)
        by_type = [i.name for i in ctx.instances.values() if i.type_name == inst_name]
        if by_type:
            raise SpecError(f"{spelled}({name}): {inst_name} is a header type; query fields name the instance: "
                            f"{by_type[0]}.{field_name}", ref.location)
        raise SpecError(f"{spelled}({name}): unknown header instance {inst_name!r}"
                        f"{_did_you_mean(inst_name, ctx.instances)}", ref.location)
    else:
        htype = ctx.header_types[inst.type_name]
        fdef = htype.field(field_name)
        if fdef is None:
            raise SpecError(f"{spelled}({name}): header {inst_name} ({inst.type_name}) has no field "
                            f"{field_name!r}{_did_you_mean(field_name, [f.name for f in htype.fields])}", ref.location)
        declared, declared_in = fdef.width, inst.type_name
    scale, is_string, width = 0, False, None
    for arg in (ann.args or [])[1:]:
        if arg.kind == "expr" and isinstance(arg.value, RawRef) and path_text(arg.value.path) == "string":
            is_string = True
        elif arg.kind == "expr" and isinstance(arg.value, ex.Num):
            width = arg.value.value
        elif arg.kind == "keyword" and arg.key in ("scale", "width") and isinstance(arg.value, ex.Num):
            if arg.key == "scale":
                scale = arg.value.value
            else:
                width = arg.value.value
        else:
            raise SpecError(f"{spelled}({name}, ...): unknown argument; expected a width (e.g. {declared}), "
                            f"scale=N or string", arg.location)
    if width is not None and width != declared:
        raise SpecError(f"{spelled}({name}, {width}): width {width} does not match the declared width of {name} "
                        f"(bit<{declared}> in {declared_in})", ann.location)
    if not 0 <= scale <= MAX_SCALE:
        raise SpecError(f"{spelled}({name}, scale={scale}): scale is a number of decimal digits, 0 to {MAX_SCALE}",
                        ann.location)
    if is_string and scale:
        raise SpecError(f"{spelled}({name}): a field cannot be both a string and scaled", ann.location)
    if is_string and declared % 8:
        raise SpecError(f"{spelled}({name}, string): a string field needs a whole number of bytes; {name} is "
                        f"{declared} bits", ann.location)
    return QueryField(name, declared, QUERY_FIELD_KINDS[ann.name], scale, is_string, ann.location, metadata)


def _width_arg(ann: RawAnnotation) -> RawArg | None:
    """The width argument of a query-field annotation (``(h.f, 32)`` or ``(h.f, width=32)``), if any."""
    for arg in (ann.args or [])[1:]:
        if arg.kind == "expr" and isinstance(arg.value, ex.Num):
            return arg
        if arg.kind == "keyword" and arg.key == "width" and isinstance(arg.value, ex.Num):
            return arg
    return None


def synthesize_headers(annotations: Iterable[RawAnnotation],
                       errors: list[P4subError]) -> tuple[dict[str, HeaderType], dict[str, HeaderInstance]]:
    """Header types and instances of a pragma-only spec, made up from its query-field pragmas.

    One header type ``<instance>_t`` per instance, with the named fields at the pragmas' widths in
    the order they first appear. Intrinsic metadata fields need no header. The width argument is
    required: there is no declaration to take it from.
    """
    fields: dict[str, dict[str, FieldDef]] = {}
    first: dict[str, SourceLocation] = {}
    ctx = AnnotationContext({}, {})
    for ann in annotations:
        if ann.name not in QUERY_FIELD_KINDS:
            continue
        try:
            inst_name, field_name, ref = _field_ref(ann, ctx)
        except SpecError as exc:
            errors.append(exc)
            continue
        if inst_name in INTRINSIC_METADATA:
            continue
        width_arg = _width_arg(ann)
        spelled = _spelled(ann)
        if width_arg is None:
            errors.append(SpecError(f"{spelled}({inst_name}.{field_name}) needs the field's width in a pragma-only "
                                    f"spec (there are no header declarations to take it from): "
                                    f"{spelled}({inst_name}.{field_name}, W)", ann.location))
            continue
        width = width_arg.value.value
        if not 0 < width <= ex.MAX_WIDTH:
            errors.append(SpecError(f"{spelled}({inst_name}.{field_name}, {width}): a width goes from 1 to "
                                    f"{ex.MAX_WIDTH} bits", width_arg.location))
            continue
        first.setdefault(inst_name, ref.location)
        fields.setdefault(inst_name, {}).setdefault(field_name, FieldDef(field_name, width, f"bit<{width}>",
                                                                         ref.location))
    header_types = {f"{name}_t": HeaderType(f"{name}_t", tuple(fdefs.values()), False, first[name])
                    for name, fdefs in fields.items()}
    instances = {name: HeaderInstance(name, f"{name}_t", None, first[name]) for name in fields}
    return header_types, instances


# ------------------------------------------------------------------------------------------------
# counters and actions


def _query_counter(ann: RawAnnotation, ctx: AnnotationContext) -> Counter:
    usage = f"{_spelled(ann)}(name, window_us, slots)"
    args = ann.args or []
    positional = [a for a in args if a.kind != "keyword"]
    keywords = {a.key: a for a in args if a.kind == "keyword"}
    repeated = len(keywords) != sum(a.kind == "keyword" for a in args)
    if len(positional) != 3 or set(keywords) - {"width", "key", "field"} or repeated:
        raise SpecError(f"{usage} takes a name, a window in microseconds and a number of slots (and optionally "
                        "key=h.f, field=h.g, width=N)", ann.location)
    name_arg, *numbers = positional
    name = _counter_name(name_arg, usage)
    values = [_positive(arg, usage, what) for arg, what in zip(numbers, ("window_us", "slots"))]
    _within_clock(values[0], numbers[0], usage)
    if values[1] > MAX_SLOTS:
        raise SpecError(f"{usage}: slots {values[1]:,} is more than the {MAX_SLOTS:,} cells a 32-bit cell index "
                        "holds (v1model's hash and register index, TNA's CRC32)", numbers[1].location)
    width = 32
    if "width" in keywords:
        arg = keywords["width"]
        if not isinstance(arg.value, ex.Num) or not 0 < arg.value.value <= 64:
            raise SpecError(f"{usage}: width must be 1 to 64 bits", arg.location)
        width = arg.value.value
    if name in ctx.instances:
        raise SpecError(f"counter {name!r} has the name of a header instance", ann.location)
    refs = {k: _state_field(keywords[k], ctx, f"{usage}: {k}=") for k in ("key", "field") if k in keywords}
    if "field" in refs and refs["field"][1] > 64:
        raise SpecError(f"{usage}: field={refs['field'][0]} has {refs['field'][1]} bits; sums are of fields of "
                        "at most 64 bits", keywords["field"].location)
    return Counter(name, values[0], values[1], width, ann.location,
                   key=refs["key"][0] if "key" in refs else None, field=refs["field"][0] if "field" in refs else None)


def _state_field(arg: RawArg, ctx: AnnotationContext, usage: str) -> tuple[str, int]:
    """A counter's ``key=`` or ``field=``: a header field (or intrinsic metadata) and its width."""
    if not (arg.kind == "keyword" and isinstance(arg.value, RawRef)
            and all(isinstance(p, str) for p in arg.value.path.parts) and len(arg.value.path.parts) == 2):
        raise SpecError(f"{usage} takes a field, header.field", arg.location)
    inst_name, field_name = arg.value.path.parts
    ref = f"{inst_name}.{field_name}"
    inst = ctx.instances.get(inst_name)
    if inst is None:
        width = intrinsic_width(inst_name, field_name) if inst_name in INTRINSIC_METADATA else None
        if width is None:
            raise SpecError(f"{usage}{ref}: unknown header instance {inst_name!r}"
                            f"{_did_you_mean(inst_name, ctx.instances)}", arg.location)
        return ref, width
    fdef = ctx.header_types[inst.type_name].field(field_name)
    if fdef is None:
        raise SpecError(f"{usage}{ref}: header {inst_name} ({inst.type_name}) has no field {field_name!r}"
                        f"{_did_you_mean(field_name, [f.name for f in ctx.header_types[inst.type_name].fields])}",
                        arg.location)
    return ref, fdef.width


def _query_field_counter(ann: RawAnnotation, ctx: AnnotationContext) -> Counter:
    """Camus's ``query_field_counter(name, window)``: a tumbling-window counter rules test by name.

    Camus's compiler reads the name only (its grammar is ``(name, )``) and uses a window of 10000;
    its tables key the counter as a 32-bit range field. Here it is a :class:`Counter` with one slot
    (a single tumbling window), the window if given (else 10000), read as microseconds like
    ``@query_counter``'s, and width 32.
    """
    usage = f"{_spelled(ann)}(name, window_us)"
    args = ann.args or []
    if not 1 <= len(args) <= 2 or any(a.kind == "keyword" for a in args):
        raise SpecError(f"{usage} takes a counter name and optionally a window in microseconds (default "
                        f"{CAMUS_COUNTER_WINDOW}); for slots and width write @query_counter(name, window_us, slots)",
                        ann.location)
    name = _counter_name(args[0], usage)
    window = _positive(args[1], usage, "window_us") if len(args) == 2 else CAMUS_COUNTER_WINDOW
    if len(args) == 2:
        _within_clock(window, args[1], usage)
    if name in ctx.instances:
        raise SpecError(f"counter {name!r} has the name of a header instance", ann.location)
    return Counter(name, window, 1, 32, ann.location)


def _counter_name(arg: RawArg, usage: str) -> str:
    if not (arg.kind == "expr" and isinstance(arg.value, RawRef) and len(arg.value.path.parts) == 1):
        raise SpecError(f"{usage}: the first argument is the counter's name", arg.location)
    return path_text(arg.value.path)


def _within_clock(window_us: int, arg: RawArg, usage: str) -> None:
    """A window the switches' clocks can measure: v1model's ingress timestamp (and the model's) counts
    microseconds in 48 bits, so a longer window never ends; TNA's shorter bound is its backend's."""
    if window_us > MAX_WINDOW_US:
        raise SpecError(f"{usage}: window_us {window_us:,} is longer than the {MAX_WINDOW_US:,} us (8.9 years) a "
                        "48-bit microsecond timestamp measures", arg.location)


def _positive(arg: RawArg, usage: str, what: str) -> int:
    if not (arg.kind == "expr" and isinstance(arg.value, ex.Num)) or arg.value.value <= 0:
        raise SpecError(f"{usage}: {what} must be a positive integer", arg.location)
    return arg.value.value


def _query_action(ann: RawAnnotation) -> UserAction:
    usage = f"{_spelled(ann)}(name, width, ...)"
    args = ann.args or []
    if not args or args[0].kind != "expr" or not isinstance(args[0].value, RawRef) or \
            len(args[0].value.path.parts) != 1:
        raise SpecError(f"{usage}: the first argument is the action's name", ann.location)
    name = path_text(args[0].value.path)
    if name in ("fwd", "drop"):
        raise SpecError(f"{usage}: {name!r} is built in", ann.location)
    widths = []
    for arg in args[1:]:
        if not (arg.kind == "expr" and isinstance(arg.value, ex.Num)) or not 0 < arg.value.value <= ex.MAX_WIDTH:
            raise SpecError(f"{usage}: argument widths are positive integers (bits)", arg.location)
        widths.append(arg.value.value)
    return UserAction(name, tuple(widths), ann.location)


def _query_default_action(ann: RawAnnotation) -> str:
    usage = f"{_spelled(ann)}(NAME)"
    args = ann.args or []
    if len(args) != 1 or args[0].kind != "expr" or not isinstance(args[0].value, RawRef) or \
            len(args[0].value.path.parts) != 1:
        raise SpecError(f"{usage} takes the name of the action to run when no rule matches", ann.location)
    return path_text(args[0].value.path)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
