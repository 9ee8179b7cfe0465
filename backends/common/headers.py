"""Header types, the headers struct and the metadata struct, rendered as P4_16 declarations.

Every field is rendered as ``bit<W>`` (a spec's typedefs are resolved to their widths by the spec
reader), so the generated program does not depend on the spec's typedef names. The headers struct
keeps the spec's member order (it is also the deparser's emit order) and its stacks (``t[N] name``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backends.common.names import identifier
from compiler.base import SpecError
from compiler.spec import HeaderInstance, HeaderType, Spec

INDENT = "    "
HEADERS_STRUCT = "p4sub_headers_t"
METADATA_STRUCT = "p4sub_metadata_t"


@dataclass(frozen=True)
class Member:
    """A struct member: P4 type text, name, optional annotations (``@field_list(1)``)."""

    type: str
    name: str
    annotations: str = ""

    def render(self) -> str:
        prefix = f"{self.annotations} " if self.annotations else ""
        return f"{prefix}{self.type} {self.name};"


def bits(width: int) -> str:
    return f"bit<{width}>"


def header_type_decl(htype: HeaderType) -> str:
    """``header t { bit<8> a; ... }`` (or ``struct`` for a struct of bit fields)."""
    kind = "struct" if htype.is_struct else "header"
    lines = [f"{kind} {identifier(htype.name)} {{"]
    for f in htype.fields:
        if f.width <= 0:
            raise SpecError(f"field {htype.name}.{f.name} has no fixed width (varbit fields are not supported)",
                            f.location)
        lines.append(f"{INDENT}{bits(f.width)} {f.name};")
    lines.append("}")
    return "\n".join(lines)


def used_header_types(spec: Spec) -> list[HeaderType]:
    """The header types the headers struct uses, in the order of first use (what the program declares)."""
    out: dict[str, HeaderType] = {}
    for inst in spec.headers:
        htype = spec.header_types.get(inst.type_name)
        if htype is None:
            raise SpecError(f"header {inst.name} has unknown type {inst.type_name}", inst.location)
        out.setdefault(htype.name, htype)
    return list(out.values())


def header_type_decls(spec: Spec) -> list[str]:
    """Declarations of every header type the headers struct uses."""
    return [header_type_decl(t) for t in used_header_types(spec)]


def header_member(inst: HeaderInstance) -> Member:
    """``ipv4_t ipv4`` or, for a stack, ``add_order_t[12] add_order``."""
    t = identifier(inst.type_name)
    return Member(f"{t}[{inst.stack_size}]" if inst.stack_size else t, inst.name)


def struct_decl(name: str, members: list[Member]) -> str:
    """A struct declaration; an empty struct is legal P4 and is rendered as ``struct n { }``."""
    if not members:
        return f"struct {name} {{\n}}"
    return "\n".join([f"struct {name} {{"] + [INDENT + m.render() for m in members] + ["}"])


def headers_struct_decl(spec: Spec, name: str = HEADERS_STRUCT) -> str:
    """The headers struct: the spec's members, in order, stacks included."""
    if not spec.headers:
        raise SpecError(f"{spec.path}: the spec declares no headers struct members")
    return struct_decl(name, [header_member(h) for h in spec.headers])


def header_width(spec: Spec, header: str) -> int:
    """Width in bits of one element of header instance ``header`` (stack element for stacks)."""
    inst = spec.header(header)
    if inst is None:
        raise KeyError(header)
    return spec.header_types[inst.type_name].width


_REF = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[\d+\]|\.last|\.next)?\.([A-Za-z_][A-Za-z0-9_]*)$")


def ref_width(spec: Spec, ref: str) -> int | None:
    """Width of a header field reference as a parser writes it: ``ipv4.protocol``,
    ``msg[3].type``, ``msg.last.type``, ``msg.next.type``; None if unknown."""
    m = _REF.match(ref)
    if not m:
        return None
    return spec.field_width(f"{m.group(1)}.{m.group(2)}")
