"""Header validity as part of the match: a rule applies exactly when the headers it reads are valid.

A packet carries some headers and not others (an ITCH packet has no DNS query, an ARP packet no
IPv4 header). The rendered program knows which are valid (``hdr.h.isValid()``, set by the spec's
parser); the rules must be judged the same way, or a program would apply a rule to a header that is
not there, or refuse every packet that lacks a header some *other* rule reads.

How it compiles:

* the **guard** is the set of headers every rule reads: a packet without one of them matches no
  rule, so the tables need not run (the program tests them in one ``if``, as before). Headers the
  spec's parser always extracts before a guard header (``Spec.implied_headers``: IPv4 before an
  ITCH Add Order) join it: they are valid whenever it is;
* each other header a rule reads becomes a 1-bit **validity field** ``h.$valid`` of the diagram,
  and the rule's cubes require it to be 1, unless another header the rule reads implies it. Headers
  no rule needs beyond the guard cost nothing: a rule set over one protocol compiles exactly as it
  did without this module. The compiler orders validity fields first and the tables fold them into
  one table (compiler.tables).

Only scalar headers get validity fields. The rows of a header stack are its messages (one row per
element the parser extracted), so a stacked header is valid in every row by construction; a stack
the rules query stays in the guard, and a rule over scalar headers alone is evaluated per message
of such a spec like every other rule (docs/compiler.md, "Header validity").
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.rules import memo as filter_memo
from compiler.rules import nodes as ast
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
    shared = filter_memo.memo(spec)
    if shared is not None:
        return shared.get("headers", rule.filter, lambda: _headers(rule.filter, spec))
    return _headers(rule.filter, spec)


def _headers(filter_: ast.Filter, spec: Spec) -> frozenset[str]:
    out = set()
    for cmp in ast.comparisons(filter_):
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


def guard_of(common: frozenset[str], union: frozenset[str], spec: Spec) -> frozenset[str]:
    """The guard of rules that all read ``common`` and together read ``union``: those headers, the
    stacked ones read, and the read headers the guard's headers imply (valid under it anyway)."""
    implied = spec.implied_headers()  # h valid => implied[h] valid, by the spec's parser
    guard_set = frozenset(common) | {h for h in union if spec.header(h).stack_size}
    return guard_set | (union & frozenset().union(*(implied.get(g, frozenset()) for g in guard_set)))


def required(headers: frozenset[str], guard: frozenset[str], spec: Spec) -> tuple[str, ...]:
    """The validity fields a rule reading ``headers`` must test under ``guard``: its headers, less
    the guard's and those another of them implies (spec order)."""
    implied = spec.implied_headers()
    order = {h.name: i for i, h in enumerate(spec.headers)}
    left = headers - guard
    return tuple(field_name(h) for h in sorted((h for h in left if not any(h in implied.get(g, ()) for g in left
                                                                             if g != h)), key=order.__getitem__))


def plan(rules: ast.RuleSet, spec: Spec) -> Plan:
    """The guard (headers every rule reads, spec order) and a validity field per other scalar header."""
    order = {h.name: i for i, h in enumerate(spec.headers)}
    read = [rule_headers(r, spec) for r in rules]
    union = frozenset().union(*read)
    common = frozenset.intersection(*read) if read else frozenset()
    guard_set = guard_of(common, union, spec)
    guard = tuple(sorted(guard_set, key=order.__getitem__))

    fields_of: dict[frozenset[str], tuple[str, ...]] = {}  # rules read few distinct header sets
    for hs in read:
        if hs not in fields_of:
            fields_of[hs] = required(hs, guard_set, spec)
    per_rule = tuple(fields_of[hs] for hs in read)
    fields = {f: QueryField(f, 1, "exact") for f in sorted({f for fs in per_rule for f in fs},
                                                           key=lambda f: order[header_of_validity(f)])}
    queried = tuple(sorted(union, key=order.__getitem__))
    return Plan(guard, fields, per_rule, queried)
