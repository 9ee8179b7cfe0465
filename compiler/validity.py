"""Header validity as part of the match: a rule applies exactly when the headers it reads are valid.

A packet carries some headers and not others (an ITCH packet has no DNS query, an ARP packet no
IPv4 header). The rendered program knows which are valid (``hdr.h.isValid()``, set by the spec's
parser); the rules must be judged the same way, or a program would apply a rule to a header that is
not there, or refuse every packet that lacks a header some *other* rule reads.

How it compiles:

* the **guard** is the set of headers every rule reads: a packet without one of them matches no
  rule, so the tables need not run (the program tests them in one ``if``, as before);
* each other header a rule reads becomes a 1-bit **validity field** ``h.$valid`` of the diagram,
  and the rule's cubes require it to be 1. Headers no rule needs beyond the guard cost nothing: a
  rule set over one protocol compiles exactly as it did without this module.

Only scalar headers get validity fields. The rows of a header stack are its messages (one row per
element the parser extracted), so a stacked header is valid in every row by construction; a stack
the rules query stays in the guard, and a rule over scalar headers alone is evaluated per message
of such a spec like every other rule (docs/compiler.md, "Header validity").
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import rules as ast
from compiler.spec import QueryField, Spec

SUFFIX = "$valid"


def field_name(header: str) -> str:
    """The diagram field that holds ``header``'s validity: ``ipv4`` -> ``ipv4.$valid``."""
    return f"{header}.{SUFFIX}"


def is_validity(name: str) -> bool:
    return name.endswith("." + SUFFIX)


def header_of_validity(name: str) -> str:
    return name[: -len(SUFFIX) - 1]


def rule_headers(rule: ast.Rule, spec: Spec) -> frozenset[str]:
    """The scalar and stacked header instances whose fields ``rule`` compares (aggregates and state
    variables read no header of the packet, and intrinsic metadata such as
    ``standard_metadata.ingress_port`` is no header instance: it is always present)."""
    out = set()
    for cmp in ast.comparisons(rule.filter):
        attr = cmp.attribute
        if isinstance(attr, ast.Field):
            header = attr.name.split(".", 1)[0]
            if spec.header(header) is not None:
                out.add(header)
    return frozenset(out)


@dataclass(frozen=True)
class Plan:
    """Validity of a rule set: the guard, the validity fields, and each rule's required fields."""

    guard: tuple[str, ...]
    fields: dict[str, QueryField]
    per_rule: tuple[tuple[str, ...], ...]
    queried: tuple[str, ...]  # every header some rule reads


def plan(rules: ast.RuleSet, spec: Spec) -> Plan:
    """The guard (headers every rule reads, spec order) and a validity field per other scalar header."""
    order = {h.name: i for i, h in enumerate(spec.headers)}
    read = [rule_headers(r, spec) for r in rules]
    common = frozenset.intersection(*read) if read else frozenset()
    stacked = {h for hs in read for h in hs if spec.header(h).stack_size}
    guard = tuple(sorted(common | stacked, key=order.__getitem__))
    extra = sorted({h for hs in read for h in hs} - set(guard), key=order.__getitem__)
    fields = {field_name(h): QueryField(field_name(h), 1, "exact") for h in extra}
    per_rule = tuple(tuple(field_name(h) for h in sorted(hs - set(guard), key=order.__getitem__)) for hs in read)
    queried = tuple(sorted({h for hs in read for h in hs}, key=order.__getitem__))
    return Plan(guard, fields, per_rule, queried)
