"""How the IR's names become P4 identifiers, P4 expressions and P4Info / control-plane names.

Both P4 targets name things the same way, so that an entry written for one program is written for
the other with only the control's name changed:

* a table or action keeps its IR name as its P4 identifier and carries ``@name("<ir name>")``.
  p4c's hierarchical naming prefixes the enclosing control, so the P4Info (and BMv2 JSON) name of
  table ``leaf_actions`` in control ``MyIngress`` is ``MyIngress.leaf_actions``. ``NoAction`` comes
  from ``core.p4`` and is called ``NoAction`` everywhere.
* a key carries ``@name("<IR field reference>")``: the P4Info match-field name of the key on
  ``hdr.add_order.price`` is ``add_order.price`` and that of the state key is ``meta.p4sub_state``,
  whatever expression the program actually matches (a metadata copy of a stacked field, say).
  Control-plane code therefore names match fields with the IR's ``Key.field``, unchanged.
* metadata ``meta.<name>`` of the IR is member ``<name>`` of the metadata struct; packet field
  ``h.f`` is ``hdr.h.f``; an intrinsic metadata field a spec queries (``standard_metadata.ingress_port``,
  ``ig_intr_md.ingress_port``: :mod:`compiler.spec.metadata`) is the target's own metadata, spelled
  by ``TargetFacts.query_metadata``, and its key keeps the IR name as ``@name``.

Why stable ``@name`` annotations: the P4Info names are part of the installed state; a change in how
the program is rendered (a key read from a copy instead of the header) must not rename anything the
control plane writes.
"""

from __future__ import annotations

import re

from compiler import ir
from compiler.base import TargetError
from compiler.spec import INTRINSIC_METADATA, Spec, intrinsic_width

HDR = "hdr"
VALID = "$valid"  # compiler.rules.validity's field of a header: hdr.h.isValid() as a 1-bit key
META = "meta"
PACKET = "packet"
NO_ACTION = "NoAction"

# Words a P4_16 program cannot use as identifiers (the language's keywords and the names every
# program sees from core.p4). Sanitised names that collide get a trailing underscore.
P4_KEYWORDS = frozenset("""
abstract action actions apply bit bool const control default else entries enum error exit extern false
header header_union if in inout int key list match_kind out package parser return select state string
struct switch table this transition true tuple type typedef value_set varbit void packet_in packet_out
NoAction exact ternary lpm range optional accept reject verify
""".split())

_STACK_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[\d+\])?$")


def identifier(name: str) -> str:
    """A legal P4 identifier for ``name``: non-alphanumerics become ``_``, runs collapse, keywords get ``_``.

    ``add_order.price`` -> ``add_order_price``; ``avg(x.y)`` -> ``avg_x_y``; ``apply`` -> ``apply_``.
    """
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    out = re.sub(r"_+", "_", out).strip("_") or "_"
    if out[0].isdigit():
        out = "_" + out
    return out + "_" if out in P4_KEYWORDS else out


def name_annotation(name: str) -> str:
    """``@name("...")`` for a control-plane name (quotes and backslashes escaped)."""
    return '@name("' + name.replace("\\", "\\\\").replace('"', '\\"') + '")'


def meta_member(ref: str) -> str:
    """The metadata struct member of an IR metadata reference: ``meta.p4sub_state`` -> ``p4sub_state``."""
    if not ref.startswith(META + "."):
        raise ValueError(f"{ref!r} is not a metadata reference (meta.<name>)")
    return identifier(ref[len(META) + 1:])


def is_meta(ref: str) -> bool:
    return ref.startswith(META + ".")


def split_field(ref: str) -> tuple[str, str]:
    """``h.f`` -> (``h``, ``f``); ``h[2].f`` -> (``h[2]``, ``f``)."""
    if "." not in ref:
        raise ValueError(f"{ref!r} is not a header.field reference")
    inst, fld = ref.split(".", 1)
    return inst, fld


def is_packet_field(spec: Spec, ref: str) -> bool:
    """True when ``ref`` is ``header.field`` of a header instance of the spec (stacks included)."""
    if is_meta(ref) or "." not in ref:
        return False
    inst, fld = split_field(ref)
    m = _STACK_PART.match(inst)
    if not m or spec.header(m.group(1)) is None:
        return False
    if fld == VALID:
        return True
    return spec.field_width(f"{m.group(1)}.{fld}") is not None


def is_intrinsic(spec: Spec, ref: str) -> bool:
    """True when ``ref`` is an architecture's intrinsic metadata field (``standard_metadata.ingress_port``)
    rather than a field of one of the spec's headers: a key on it reads the target's metadata, and no
    header's validity decides whether it is there (it always is)."""
    if is_meta(ref) or "." not in ref:
        return False
    inst, fld = split_field(ref)
    return spec.header(inst) is None and intrinsic_width(inst, fld) is not None


def field_expression(ref: str, *, hdr: str = HDR, meta: str = META, index: int | None = None,
                     intrinsic: dict[str, str] | None = None) -> str:
    """The P4 expression for an IR field reference.

    ``meta.x`` -> ``meta.x``; ``h.f`` -> ``hdr.h.f``; with ``index`` (the header is a stack)
    ``h.f`` -> ``hdr.h[index].f``; a header's validity field ``h.$valid`` -> ``hdr.h.isValid()``;
    an intrinsic metadata field found in ``intrinsic`` (a target's ``query_metadata``) -> the
    target's expression for it (``standard_metadata.ingress_port``).
    """
    if is_meta(ref):
        return f"{meta}.{meta_member(ref)}"
    if intrinsic and ref in intrinsic:
        return intrinsic[ref]
    inst, fld = split_field(ref)
    if index is not None:
        inst = f"{inst}[{index}]"
    if fld == VALID:
        return f"{hdr}.{inst}.isValid()"
    return f"{hdr}.{inst}.{fld}"


def _valid_expr(spec: Spec, headers: tuple[str, ...], joiner: str, hdr: str) -> str:
    parts = []
    for h in headers:
        inst = spec.header(h)
        parts.append(f"{hdr}.{h}[0].isValid()" if inst is not None and inst.stack_size else f"{hdr}.{h}.isValid()")
    return f" {joiner} ".join(parts) if parts else "true"


def guard_condition(pipeline: ir.Pipeline, *, hdr: str = HDR) -> str:
    """The condition under which the tables run: every guard header valid (a stack: its first element)."""
    return _valid_expr(pipeline.spec, pipeline.guard_headers(), "&&", hdr)


def looked_at_condition(pipeline: ir.Pipeline, *, hdr: str = HDR) -> str:
    """True for packets the subscriptions look at: they carry some queried header; the others take
    the default path (compiler.default_path)."""
    return _valid_expr(pipeline.spec, pipeline.queried_headers(), "||", hdr)


def check_key_fields(pipeline: ir.Pipeline, target) -> None:
    """Raise :class:`TargetError` for keys the target cannot render.

    ``target`` is a :class:`~backends.common.target.TargetFacts`. Packet fields, pipeline metadata
    and the intrinsic metadata fields in the target's ``query_metadata`` are rendered. Refused: an
    intrinsic metadata field the target's ingress does not have (v1model's ``packet_length`` on
    TNA), and keys on state variables and windowed aggregates (``@query_counter`` names,
    ``count(...)``) that the pipeline's updates (``Pipeline.updates``) do not compute.
    """
    name = getattr(target, "name", target)
    available = getattr(target, "query_metadata", {})
    fields = sorted({k.field for t in pipeline.tables for k in t.keys})
    missing = [f for f in fields if is_intrinsic(pipeline.spec, f) and f not in available]
    if missing:
        arch = getattr(target, "architecture", name)
        owners = sorted({INTRINSIC_METADATA[split_field(f)[0]].architecture for f in missing})
        raise TargetError(f"{name}: cannot match {', '.join(missing)}: {' and '.join(owners)} intrinsic metadata that "
                          f"the {arch} ingress does not have; queryable metadata on {name}: "
                          f"{', '.join(sorted(available)) or 'none'} (the ingress port maps across targets)")
    stateful = pipeline.state_reads()  # computed before the tables (backends.common.state)
    bad = [f for f in fields if not is_meta(f) and not is_packet_field(pipeline.spec, f)
           and not is_intrinsic(pipeline.spec, f) and f not in stateful]
    if bad:
        raise TargetError(f"{name}: cannot render table keys on {', '.join(bad)}: state variables and aggregates "
                          "(@query_counter names, count(...), sum(...), avg(...)) need the pipeline's counters "
                          "(compile the rules with p4sub compile, which binds them: compiler.stateful); packet "
                          "fields and intrinsic metadata (the ingress port) are matched directly")


# -- control-plane names -----------------------------------------------------------------------


def qualified(control: str, name: str) -> str:
    """The P4Info / BMv2-JSON name of a table or action declared in ``control``."""
    if name == NO_ACTION:
        return NO_ACTION
    return f"{control}.{name}" if control else name


def p4info_table_name(table: str, control: str) -> str:
    """``leaf_actions`` in ``MyIngress`` -> ``MyIngress.leaf_actions``."""
    return qualified(control, table)


def p4info_action_name(action: str, control: str) -> str:
    """``set_state`` in ``MyIngress`` -> ``MyIngress.set_state``; ``NoAction`` stays ``NoAction``."""
    return qualified(control, action)


def p4info_param_name(param: ir.Param | str) -> str:
    """An action parameter's P4Info name: its P4 identifier (``state`` is a keyword: ``state_``)."""
    return identifier(param if isinstance(param, str) else param.name)


def p4info_key_name(key: ir.Key) -> str:
    """The match-field name of a key in P4Info: the IR field reference (``add_order.price``)."""
    return key.field
