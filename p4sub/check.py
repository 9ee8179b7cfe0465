"""``p4sub check SPEC RULES``: type-check a rule file against a spec and summarise it."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from compiler.base import CompileError, P4subError, paused, raise_all
from compiler.dnf import DEFAULT_LIMIT, to_dnf
from compiler.rules import Call, Drop, TypedRules, check_rules, comparisons, read_rules
from compiler.stateful import plan
from p4sub import add_command
from p4sub.compile import TARGETS, reserved_ports


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "check", "type-check subscriptions against a P4 spec and print a summary",
                    "p4sub check apps/itch/itch.p4 apps/itch/rules.sub")
    p.add_argument("spec", help="P4 file with the protocol's headers, parser and @query_* annotations")
    p.add_argument("rules", help="subscription rule file")
    p.add_argument("--port-bits", type=int, default=9, help="width of egress ports (9 on v1model and Tofino)")
    p.add_argument("--dnf-limit", type=int, default=DEFAULT_LIMIT,
                   help="largest DNF a single rule may expand to (as compile's)")
    p.add_argument("--target", choices=TARGETS, default="none",
                   help="also apply this target's checks on the rules (bmv2: port 511 is the drop port), as "
                        "`compile --target` does")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with paused():  # the command keeps its rules to the end: the collector would only walk them (1.5 of 3.4 s at 100k)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from compiler.spec import read_spec

    if not 1 <= args.port_bits <= 32:
        raise P4subError(f"--port-bits {args.port_bits}: expected a width from 1 to 32 bits")
    spec = read_spec(args.spec)
    if args.dnf_limit < 1:
        raise P4subError(f"--dnf-limit {args.dnf_limit}: expected a positive number")
    typed = check_rules(read_rules(args.rules), spec, port_bits=args.port_bits,
                        reserved_ports=reserved_ports(args.target))
    plan(typed)  # every state variable and aggregate has a counter (compiler.stateful)
    check_dnf(typed, args.dnf_limit)
    for note in typed.spec.notes:  # what a whole program held that a spec does not need, inferred actions
        print(note, file=sys.stderr)
    constants: dict[str, set[str]] = defaultdict(set)
    for rule in typed.rules:
        for cmp in comparisons(rule.filter):
            constants[cmp.attribute.name].add(f"{cmp.op} {cmp.value}")
    ports = sorted({p for r in typed.rules for p in r.ports})
    calls = sorted({a.name for r in typed.rules for a in r.actions if isinstance(a, Call)})
    drops = sum(1 for r in typed.rules if any(isinstance(a, Drop) for a in r.actions))
    print(f"{args.rules}: {len(typed.rules)} rules, OK against {args.spec}")
    print(f"{'field':<32} {'match':<8} {'width':>5}  distinct constraints")
    for name, info in typed.fields.items():
        kind = info.match_kind or "auto"
        print(f"{name:<32} {kind:<8} {info.width:>5}  {len(constants[name])}")
    print(f"ports: {len(ports)} ({_span(ports)})" + (f"; user actions: {', '.join(calls)}" if calls else "")
          + (f"; rules that drop: {drops}" if drops else ""))
    return 0


def check_dnf(typed: TypedRules, limit: int) -> None:
    """The per-rule check compile makes before building diagrams: no rule's DNF passes ``limit``
    cubes (every such rule reported, at its location)."""
    errors: list[P4subError] = []
    for rule in typed.rules:
        try:
            to_dnf(rule, typed.fields, limit)
        except CompileError as exc:
            errors.append(exc)
    raise_all(errors)


def _span(ports: list[int]) -> str:
    if not ports:
        return "none"
    return ", ".join(map(str, ports)) if len(ports) <= 8 else f"{ports[0]}..{ports[-1]}"
