"""Check rules against a spec, and say what every attribute a rule tests is (width, match kind, scale).

All errors of a file are collected and reported together (up to a limit), each with the rule's
``FILE:LINE:COL``: a user fixing a rule file wants the whole list, not one error per run.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Mapping

from compiler.base import P4subError, SourceLocation, TypeCheckError, raise_all
from compiler.rules import memo as filter_memo
from compiler.rules import nodes as ast
from compiler.rules import validity
from compiler.rules.values import encode_string, scale_decimal, string_prefix_range
from compiler.spec import QueryField, Spec, UserAction

AGGREGATE_WIDTH = 32
V1MODEL_PORT_BITS = 9
ORDERING = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class TypedRules:
    """Rules that passed the checks, with the attributes they test (in spec order, then first use)."""

    rules: ast.RuleSet
    fields: dict[str, QueryField] = field(default_factory=dict)
    spec: Spec | None = None
    # Header validity (compiler.rules.validity): headers every rule reads, the 1-bit validity fields of
    # the others, and per rule the validity fields its cubes require.
    guard: tuple[str, ...] = ()
    validity: dict[str, QueryField] = field(default_factory=dict)
    rule_validity: tuple[tuple[str, ...], ...] = ()
    queried: tuple[str, ...] = ()

    @property
    def match_fields(self) -> dict[str, QueryField]:
        """What the diagram matches: the validity fields first (two values each), then the attributes."""
        return {**self.validity, **self.fields} if self.validity else self.fields


def attribute_name(attr: ast.Attribute) -> str:
    """The name an attribute has in the pipeline: ``h.f``, a state variable, or ``avg(h.f)``."""
    return attr.name


def check_rules(rules: ast.RuleSet, spec: Spec, *, port_bits: int = V1MODEL_PORT_BITS, max_errors: int = 50,
                reserved_ports: Mapping[int, str] | None = None) -> TypedRules:
    """Type-check ``rules`` against ``spec``; raise every error found (ErrorList) or return TypedRules.

    ``reserved_ports``: ports the target gives another meaning (port -> what it is, e.g. v1model's
    drop port 511), refused at the ``fwd`` that names them, so that ``check --target`` and
    ``compile --target`` refuse the same rules at the same place.
    """
    if not 1 <= port_bits <= 64:
        raise P4subError(f"ports of {port_bits} bits: expected a width from 1 to 64")
    checker = _Checker(spec, port_bits, max_errors, reserved_ports or {})
    for rule in rules:  # every rule, so that the count of errors past the first ``max_errors`` is right
        checker.rule(rule)
    raise_all(checker.errors, checker.more)
    order = {name: i for i, name in enumerate(spec.query_fields)}
    fields = dict(sorted(checker.fields.items(), key=lambda kv: (order.get(kv[0], len(order)), checker.first_use[kv[0]])))
    if checker.inferred:  # the pipeline's spec declares them, so that every later reader agrees
        spec = dataclasses.replace(spec, actions={**spec.actions, **checker.inferred},
                                   notes=spec.notes + tuple(f"{a.location or spec.path}: note: action {a.name} is not "
                                                            f"declared; its arguments are taken as {list(a.arg_widths)} "
                                                            f"bits (declare @query_action({a.name}, ...) to fix them)"
                                                            for a in checker.inferred.values()))
    valid = validity.plan(rules, spec)
    return TypedRules(rules, fields, spec, valid.guard, valid.fields, valid.per_rule, valid.queried)


class _Checker:
    def __init__(self, spec: Spec, port_bits: int, max_errors: int = 50,
                 reserved_ports: Mapping[int, str] | None = None) -> None:
        self.spec = spec
        self.port_bits = port_bits
        self.reserved_ports = dict(reserved_ports or {})
        self.errors: list[P4subError] = []
        self.max_errors = max_errors
        self.more = 0  # errors past max_errors: counted, not kept
        self.fields: dict[str, QueryField] = {}
        self.first_use: dict[str, int] = {}
        self._known = spec.all_fields()
        self.inferred: dict[str, UserAction] = {}  # undeclared actions of a pragma-only spec

    def error(self, message: str, location: SourceLocation | None) -> None:
        if len(self.errors) < self.max_errors:
            self.errors.append(TypeCheckError(message, location))
        else:
            self.more += 1

    # -- rules and actions ------------------------------------------------------------------
    def rule(self, rule: ast.Rule) -> None:
        shared = filter_memo.memo(self.spec)
        checked = shared.find("checked", rule.filter) if shared is not None else None
        # A filter that passed against this spec's own field infos needs only its attributes
        # registered (in order: first use orders the fields); any other info checks it again.
        fields = self.fields
        if checked is None or not (all(fields.get(attr.name) is info for attr, info in checked) or
                                   all(self.attribute(attr) is info for attr, info in checked)):
            errors = len(self.errors) + self.more
            used = []
            for cmp in ast.comparisons(rule.filter):
                info = self.attribute(cmp.attribute)
                if info is not None:
                    self.comparison(cmp, info)
                used.append((cmp.attribute, info))
            if shared is not None and len(self.errors) + self.more == errors and all(i is not None for _, i in used):
                shared.put("checked", rule.filter, tuple(used))
        for action in rule.actions:
            self.action(action, rule.location)

    def action(self, action: ast.Action, rule_loc: SourceLocation | None) -> None:
        loc = action.location or rule_loc
        if isinstance(action, ast.Forward):
            limit = (1 << self.port_bits) - 1
            for port in action.ports:
                if port > limit:
                    self.error(f"port {port} is out of range: ports are {self.port_bits}-bit (0..{limit})", loc)
                elif port in self.reserved_ports:
                    self.error(f"port {port} is {self.reserved_ports[port]}", loc)
        elif isinstance(action, ast.Call):
            decl = self.spec.actions.get(action.name)
            if decl is None and self.spec.pragma_only:
                decl = self.infer(action, loc)
                if decl is None:
                    return
            if decl is None:
                known = ["fwd", "drop", *self.spec.actions]
                self.error(f"unknown action {action.name!r}{_did_you_mean(action.name, known)}"
                           " (declare user actions in the spec with @query_action)", loc)
                return
            if len(action.args) != len(decl.arg_widths):
                self.error(f"action {action.name!r} takes {len(decl.arg_widths)} arguments, got {len(action.args)}", loc)
                return
            for arg, width in zip(action.args, decl.arg_widths):
                problem = _argument_problem(arg, width)
                if problem:
                    self.error(f"argument {arg} of {action.name!r} {problem}", getattr(arg, "location", None) or loc)

    def infer(self, action: ast.Call, loc: SourceLocation | None) -> UserAction | None:
        """An undeclared action in a pragma-only spec: the user's own program defines it (Camus's
        ``answerDNS(10.0.0.97)``), so its argument widths come from the calls: an address its width,
        an integer 32 bits (64 when larger). A later call with a wider argument widens it."""
        widths = []
        for arg in action.args:
            if isinstance(arg, ast.IPAddress):
                widths.append(arg.width)
            elif isinstance(arg, ast.MACAddress):
                widths.append(48)
            elif isinstance(arg, ast.Number) and not isinstance(arg.value, Decimal) and arg.value < 1 << 128:
                widths.append(32 if arg.value < 1 << 32 else 64 if arg.value < 1 << 64 else 128)
            else:
                self.error(f"argument {arg} of {action.name!r}: an undeclared action takes integers or addresses", loc)
                return None
        old = self.inferred.get(action.name)
        if old is not None and len(old.arg_widths) != len(widths):
            self.error(f"action {action.name!r} is called with {len(old.arg_widths)} and {len(widths)} arguments", loc)
            return None
        if old is not None:
            widths = [max(a, b) for a, b in zip(old.arg_widths, widths)]
        decl = self.inferred[action.name] = UserAction(action.name, tuple(widths), loc)
        return decl

    # -- attributes -------------------------------------------------------------------------
    def attribute(self, attr: ast.Attribute) -> QueryField | None:
        name = attribute_name(attr)
        if name in self.fields:
            return self.fields[name]
        info = self._resolve(attr)
        if info is not None:
            self.fields[name] = info
            self.first_use[name] = len(self.first_use)
        return info

    def _resolve(self, attr: ast.Attribute) -> QueryField | None:
        if isinstance(attr, ast.Field):
            return self._field(attr)
        if isinstance(attr, ast.StateVar):
            if attr.name in self.spec.counters:
                counter = self.spec.counters[attr.name]
                return QueryField(attr.name, counter.width, "range", location=attr.location)
            known = list(self.spec.counters) + self._known
            self.error(f"unknown attribute {attr.name!r}{_did_you_mean(attr.name, known)}: "
                       "use header.field for packet fields, or declare a state variable with @query_counter", attr.location)
            return None
        arg = attr.argument
        if isinstance(arg, ast.StateVar) and arg.name not in self.spec.counters:
            self.error(f"unknown state variable {arg.name!r} in {attr}{_did_you_mean(arg.name, list(self.spec.counters))}",
                       arg.location)
            return None
        if isinstance(arg, ast.Field) and self._field(arg) is None:
            return None
        # The counter that keeps the aggregate gives its width; the field it adds up, its scale
        # (compiler.stateful binds them and reports an aggregate no counter keeps).
        if isinstance(arg, ast.StateVar):
            counter = self.spec.counters[arg.name]
            summed = counter.field or ""
        else:
            keeping = [c for c in self.spec.counters.values() if c.field == arg.name]
            counter = keeping[0] if len(keeping) == 1 else None
            summed = arg.name
        scale = self.spec.query_fields[summed].scale if summed in self.spec.query_fields else 0
        return QueryField(attr.name, counter.width if counter else AGGREGATE_WIDTH, "range",
                          scale=scale if attr.function != "count" else 0, location=attr.location)

    def _field(self, attr: ast.Field) -> QueryField | None:
        declared = self.spec.query_fields.get(attr.name)
        if declared is not None:
            return declared
        width = self.spec.field_width(attr.name)
        if width is None:
            self.error(f"unknown field {attr.name!r}{_did_you_mean(attr.name, self._known)}", attr.location)
            return None
        return QueryField(attr.name, width, None, location=attr.location)

    # -- comparisons ------------------------------------------------------------------------
    def comparison(self, cmp: ast.Comparison, info: QueryField) -> None:
        loc = cmp.location or cmp.value.location
        value, op, name, width = cmp.value, cmp.op, info.name, info.width
        kind = info.match_kind
        if kind == "exact" and op in ORDERING + ("prefix",):
            self.error(f"{name!r} is declared @query_field_exact: '{op}' needs a range or ternary match "
                       f"(declare it @query_field or @query_field_range)", loc)
            return
        try:
            if isinstance(value, ast.String):
                if op in ORDERING:
                    raise ValueError(f"strings are compared with == , != and prefix, not '{op}'")
                # Any field of whole bytes takes a string, as in Camus; the spec's `string` marker is only a hint
                # (for printing values). A fixed-point field is declared to hold numbers.
                if info.scale:
                    raise ValueError(f"{name!r} holds fixed-point numbers (scale={info.scale}); "
                                     f"compare it with a number, not the string {value}")
                if width % 8:
                    raise ValueError(f"a string needs a field of whole bytes; {name!r} has {width} bits")
                (string_prefix_range if op == "prefix" else encode_string)(value.value, width)
                return
            if op == "prefix":
                raise ValueError(f"'prefix' takes a string, got {value}; on a numeric field use ranges or an IP prefix")
            if isinstance(value, ast.IPAddress):
                if width != value.width:
                    raise ValueError(f"IPv{value.version} {'prefix' if value.prefix_len < value.width else 'address'} "
                                     f"{value} needs a {value.width}-bit field; {name!r} has {width} bits")
                if value.prefix_len < value.width and op in ORDERING:
                    raise ValueError(f"'{op}' with a prefix {value} is ambiguous; use == or != with prefixes")
                return
            if isinstance(value, ast.MACAddress):
                if width != 48:
                    raise ValueError(f"a MAC address needs a 48-bit field; {name!r} has {width} bits")
                return
            number = value.value
            if isinstance(number, Decimal):
                if not info.scale:
                    raise ValueError(f"{value} is not an integer and {name!r} has no decimal scale "
                                     "(declare one with scale=N in its @query_field annotation)")
                number = scale_decimal(number, info.scale)
            elif info.scale:
                number = scale_decimal(number, info.scale)
            if number >= 1 << width:
                raise ValueError(f"constant {value} does not fit in {width}-bit field {name!r}"
                                 f" (max {((1 << width) - 1) / 10 ** info.scale if info.scale else (1 << width) - 1})")
        except ValueError as exc:
            self.error(str(exc), loc)


def constant_value(value: ast.Constant, info: QueryField) -> int:
    """The integer a (checked) numeric, address or MAC constant stands for on ``info``'s field."""
    if isinstance(value, ast.Number):
        return scale_decimal(value.value, info.scale) if info.scale else int(value.value)
    if isinstance(value, (ast.IPAddress, ast.MACAddress)):
        return value.value
    return encode_string(value.value, info.width)


def _argument_problem(arg: ast.Constant | ast.Attribute, width: int) -> str | None:
    """What is wrong with a user-action argument of ``width`` bits, or None: integers and addresses
    (IPv4, IPv6, MAC, as Camus's ``answerDNS(10.0.0.97)``) stand for their integer value."""
    if isinstance(arg, ast.IPAddress):
        if arg.prefix_len < arg.width:
            return "is a prefix; an action argument takes one address"
        if arg.width > width:
            return f"is a {arg.width}-bit IPv{arg.version} address; the argument has {width} bits"
        return None
    if isinstance(arg, ast.MACAddress):
        return f"is a 48-bit MAC address; the argument has {width} bits" if width < 48 else None
    if not isinstance(arg, ast.Number) or isinstance(arg.value, Decimal):
        return "is not an integer or an address (IPv4, IPv6, MAC); arguments are constants"
    return f"does not fit in {width} bits" if arg.value >= 1 << width else None


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close and "." in name:
        tail = name.split(".", 1)[1]
        close = [c for c in candidates if c.endswith("." + tail)][:1]
    return f"; did you mean {close[0]!r}?" if close else ""
