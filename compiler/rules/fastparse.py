"""The hand-written scanner and recursive-descent parser of rule files: the whole grammar of
``grammar/subscription.lark``, every spelling, at the speed of reading.

lark's LALR parser spends about half a millisecond a rule. This parser reads the same language and
builds the very AST lark's transformer builds, source locations included (a node is located at
its first token; a parenthesised first child moves its parent to the ``(``, as lark's
``propagate_positions`` does). It never reports an error itself: the grammar stays the one place
that words errors. Instead it says, rule by rule, what it could not vouch for:

- a rule it parsed but whose meaning is an error or a limit (host bits in a prefix, both sides
  constants, an unknown aggregate, a bare port number, a number of more than 200 digits) is
  *doubtful*: :func:`compiler.rules.parser.parse_rules` has lark read exactly those rules, in place;
- text it cannot parse (a syntax error, a character outside its tokens, nesting near the limit)
  *stops* it: lark reads from the rule before onwards, so that its parser is in the state it would
  be in after the whole prefix and reports the same error at the same place.

Two ways of reading a rule. The usual one (up to 64 comparisons ``operand OP operand``, each
operand a constant, a field, a state variable or an aggregate, or ``true``/``false``, joined by
``and``/``or``, with any ``not`` and parentheses, blanks and comments between tokens, then actions
with any arguments) is one regular-expression match, and the shape's builder (compiler/
rule_shapes.py: code compiled once per shape of rule) makes its Rule from the match's groups: that
is what makes 100,000 rules a second. The match is first tried with the own regexes of the shapes
of the last rules read (``_shape_regex``: the shape's texts fixed), then with ``_RULE`` (a field
against a constant, 8 atoms), ``_LONG_RULE`` (64) and ``_OPERAND_RULE`` (any operands, 8). Any
other rule (more atoms, comments inside a constant or among the actions) is read token by token: a
scanner of the grammar's terminals (the same regular expressions, in lark's priority order, with no
parser state) and a recursive descent; the few places where lark's contextual lexer decides by
state (a keyword or a name, ``fwd``/``drop`` or a user action) are decided by the parser, which
knows its state.
``tests/compiler/test_fastparse.py`` holds the two parsers to the same ASTs, locations and errors.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from decimal import Decimal

from compiler.base import SourceLocation
from compiler.rules import build as rule_build
from compiler.rules import nodes as ast
from compiler.rules import shapes as rule_shapes
from compiler.rules.values import MAX_NUMBER_DIGITS

#: Deepest parse tree a rule file may have (compiler.rules.parser checks lark's trees against it).
MAX_NESTING = 100

# The grammar's terminals, written as in grammar/subscription.lark (a test compares them with lark's).
ADDRESS_RE = (r"(?=[0-9a-fA-F:]*:[0-9a-fA-F:]*:)[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}(?:(?<=::)|(?<!:))(?<!:::)"
              r"(?![0-9A-Za-z_(])")
IPV4_RE = r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}"
HEX_RE = r"0[xX][0-9a-fA-F]+"
DECIMAL_RE = r"[0-9]+\.[0-9]+"
INT_RE = r"[0-9]+"
DOTTED_RE = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+"
NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
STRING_RE = r'"(\\.|[^"\\\n])*"'
WS_RE = r"[ \t\f\r\n]"

# Token kinds. CMP (``h.f OP constant`` with a plain constant) and FWD1 (``fwd(port)``) fuse the
# commonest runs of tokens into one match; anywhere else than where a comparison or an action
# starts, such text is a syntax error in the grammar too, and the parser stops there.
(ADDRESS, IPV4, HEX, DECIMAL, INT, KWORD, WORD, STRING, OP, AND, OR, NOT, PUNCT, ERROR, END, CMP, FWD1) = range(1, 18)


def _plain(regex: str) -> str:
    """The regex with its groups made non-capturing (the scanner numbers only its own)."""
    return regex.replace("(\\.", "(?:\\.").replace("(:", "(?::").replace('(\\\\', "(?:\\\\")


_SKIP = rf"(?:{WS_RE}++|#[^\n]*+|//[^\n]*+)*+"  # blanks and comments, never backtracked into
# Where this holds, ADDRESS (lark's first choice) cannot match: it needs two ':' in its first groups.
_NO_ADDRESS = r"(?![0-9a-fA-F]{0,4}:[0-9a-fA-F]{0,4}:)"
_KWORD = r"(?i:not|true|false)(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
_WORD = rf"{NAME_RE}(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_NUMBER = rf"{_NO_ADDRESS}(?:{IPV4_RE}|{HEX_RE}|{DECIMAL_RE}|{INT_RE})"
_ALTERNATIVES = [  # (regex, kind), first match wins
    (rf"(?!{_KWORD})({_plain(DOTTED_RE)}){_SKIP}(==|!=|<=|>=|<|>|=|(?i:prefix)\b){_SKIP}({_plain(STRING_RE)}|{_NUMBER})",
     CMP),
    (rf"fwd{_SKIP}\({_SKIP}({HEX_RE}|{INT_RE}){_SKIP}\)", FWD1),
    (_plain(STRING_RE), STRING), ("==|!=|<=|>=|<|>|=", OP), (r"&&|\^|∧", AND), (r"\|\||∨", OR), ("!|¬", NOT),
    ("[(),;/]", PUNCT),
    (rf"{_NO_ADDRESS}{_KWORD}", KWORD), (rf"{_NO_ADDRESS}{_WORD}", WORD), (rf"{_NO_ADDRESS}{IPV4_RE}", IPV4),
    (rf"{_NO_ADDRESS}{HEX_RE}", HEX), (rf"{_NO_ADDRESS}{DECIMAL_RE}", DECIMAL), (rf"{_NO_ADDRESS}{INT_RE}", INT),
    # What may be an address: lark's order (priority, then length).
    (_plain(ADDRESS_RE), ADDRESS), (IPV4_RE, IPV4), (HEX_RE, HEX), (DECIMAL_RE, DECIMAL), (INT_RE, INT),
    (_KWORD, KWORD), (_WORD, WORD), (":", PUNCT), ("(?s:.)", ERROR), (r"\Z", END),
]
_SCANNER = re.compile(_SKIP + "(?:" + "|".join(f"({regex})" for regex, _ in _ALTERNATIVES) + ")")
_KIND: list[int] = [0]  # group number -> kind
for _regex, _kind in _ALTERNATIVES:
    _KIND.append(_kind)
    _KIND.extend([0] * re.compile(_regex).groups)
assert len(_KIND) == _SCANNER.groups + 1

# The usual rule as one match: up to RULE_SLOTS atoms (a comparison or ``true``/``false``), each
# after any number of ``not`` and ``(`` and before any number of ``)``, joined by ``and`` or ``or``,
# then actions (``fwd(ports)``, ``drop``, user actions with any arguments), then ';' or the end.
# Blanks and comments between the tokens of the filter (only blanks inside a constant and inside the
# actions, whose text is read again). Every token is an atomic group tried in lark's order, so a
# shorter reading of a token is never taken to make the rest fit. The parentheses are matched by
# compiler/rules/shapes.py, once per shape, not by the regex. Anything else is read token by token.
RULE_SLOTS = 64  # comparisons (or true/false) in a rule read by one match
_W = rf"{WS_RE}*+"
_S = rf"{WS_RE}*+(?:(?:#|//)[^\n]*+{WS_RE}*+)*+"  # _SKIP, quicker where there is no comment
_CONSTANT = rf"(?>{_plain(STRING_RE)}|{_plain(ADDRESS_RE)}(?:{_W}/{_W}[0-9]++)?|{IPV4_RE}(?:{_W}/{_W}[0-9]++)?|{HEX_RE}|{DECIMAL_RE}|{INT_RE})"
_LIT = rf"(?>{_CONSTANT}|{NAME_RE})"  # a constant, or a bare word
_ARG = (rf"(?>{_plain(STRING_RE)}|{_plain(ADDRESS_RE)}|{IPV4_RE}|{HEX_RE}|{DECIMAL_RE}|{INT_RE}|{_plain(DOTTED_RE)}"
        rf"|{NAME_RE}{_W}\({_W}(?>{_plain(DOTTED_RE)}|{NAME_RE}){_W}\)|{NAME_RE})")  # an action's argument: any operand
_PORT = rf"(?>{HEX_RE}|{INT_RE})"
_AND_KW = r"(?i:and)\b|&&|\^|∧"
_OR_KW = r"(?i:or)\b|\|\||∨"


_OP = r"(==|!=|<=|>=|<|>|=|(?i:prefix)\b)"
_FIELD = rf"(?!{_KWORD})((?>{_plain(DOTTED_RE)}))"
_NO_GROUP = "(){0}"  # a group that never takes part: its value is None, as an unused alternative's
# Where a filter starts, a keyword is not a name (lark's contextual lexer): such rules are read token by token.
_NOT_KEYWORD = r"(?!(?i:not|true|false|and|or|prefix)(?![A-Za-z0-9_]))"


def _operand(left: bool, kind: str | None = None) -> str:
    """An operand of _OPERAND_RULE: five groups (a constant, a field, an aggregate's function and
    argument, a bare name), one taking part; ``kind`` (rule_shapes' "lit", "field", "agg", "var")
    holds it to one."""
    guard = _NOT_KEYWORD if left else ""
    forms = {"lit": (f"({_CONSTANT})", 0, 4), "field": (_FIELD, 1, 3),
             "agg": (rf"{guard}((?>{NAME_RE})){_S}\({_S}((?>{_plain(DOTTED_RE)}|{NAME_RE})){_S}\)", 2, 1),
             "var": (rf"{guard}((?>{NAME_RE}))(?!{_S}\()", 4, 0)}
    if kind is None:
        return "(?:" + "|".join(form for form, _, _ in forms.values()) + ")"
    form, before, after = forms[kind]
    return _NO_GROUP * before + form + _NO_GROUP * after


_PREFIX = rf"((?:(?=[!¬(nN])(?:!|¬|(?i:not)\b|\(){_S})*+)"
_TRUTH = r"((?i:true|false)(?![A-Za-z0-9_.]))"
_CLOSES = rf"((?:{_S}\))*+)"
_ATOMS = {  # the atom of a slot (all but its join, prefix and closes), by layout
    "usual": rf"(?:{_FIELD}{_S}{_OP}{_S}({_LIT})|{_TRUTH})",
    "operands": rf"(?:{_operand(True)}{_S}{_OP}{_S}{_operand(False)}|{_TRUTH})",
}


def _slots(n: int, atom: str, join: str = "") -> str:
    slot = rf"{join}{_PREFIX}{atom}{_CLOSES}"
    return slot + (rf"(?:{_S}{_slots(n - 1, atom, rf'({_AND_KW}|{_OR_KW}){_S}')})?" if n > 1 else "")


def _action(capture: bool) -> str:
    g = "(" if capture else "(?:"
    return (rf"{g}fwd){_W}\({_W}{g}{_PORT}(?:{_W},{_W}{_PORT})*+){_W}\)|{g}drop)(?:{_W}\({_W}\))?"
            rf"|(?!(?:fwd|drop)(?![A-Za-z0-9_])){g}(?>{NAME_RE})){_W}\({_W}{g}(?:{_ARG}(?:{_W},{_W}{_ARG})*+)?){_W}\)")


def _rule(slots: int, atom: str = _ATOMS["usual"]) -> re.Pattern:
    """After the slots: the first action's groups, the second's, then the text of any more (and an
    empty group inside it, so that whether there are more is in compiler/rule_shapes's shape)."""
    return re.compile(rf"{_SKIP}(){_slots(slots, atom)}{_S}:{_S}(?:{_action(True)})(?:{_W},{_W}(?:{_action(True)}))?"
                      rf"((?:{_W},{_W}(){_action(False)})*+){_W}(?:;|\Z)")


# The usual rule, then (tried when the first does not match) one of up to RULE_SLOTS atoms: a
# regex of fewer slots matches faster and has fewer groups to hand over.
_SHORT_SLOTS = 8
_RULE = _rule(_SHORT_SLOTS)
_LONG_RULE: re.Pattern | None = None  # _rule(RULE_SLOTS), compiled when first needed (it takes 70 ms)


def _long_rule() -> re.Pattern:
    global _LONG_RULE
    if _LONG_RULE is None:
        _LONG_RULE = _rule(RULE_SLOTS)
    return _LONG_RULE


def _long_match(text: str, pos: int) -> re.Match | None:
    return _long_rule().match(text, pos)


_PAST_SHORT_SLOTS = rule_shapes.USUAL.group(_SHORT_SLOTS, "join")  # in a _LONG_RULE match, the join before atom _SHORT_SLOTS + 1
# Then rules whose comparisons have any operands (rule_shapes.OPERANDS): a constant on the left, state
# variables and aggregates (`count(x) > 5`, `v == GOOGL`), a bare word facing a field.
_OPERAND_RULE = _rule(_SHORT_SLOTS, _ATOMS["operands"])
_SHORT_RUN = 8
_RECENT = 6
_ACTION_RE = re.compile(_action(True))
# How deep the one match lets parentheses and negations nest (lark's tree grows by about 2 per '(' and 1 per
# 'not'); deeper rules are read token by token, which stops where lark's limit (MAX_NESTING) is near.
_FLAT_DEPTH = 60


def _fixed_action(fwd: str | None, drop: str | None, name: str | None) -> str:
    """_action(True) held to one kind (its five groups kept, the others never taking part)."""
    if fwd is not None:
        return rf"(fwd){_W}\({_W}({_PORT}(?:{_W},{_W}{_PORT})*+){_W}\){_NO_GROUP * 3}"
    if drop is not None:
        return rf"{_NO_GROUP * 2}(drop)(?:{_W}\({_W}\))?{_NO_GROUP * 2}"
    return rf"{_NO_GROUP * 3}({re.escape(name)}){_W}\({_W}((?:{_ARG}(?:{_W},{_W}{_ARG})*+)?){_W}\)"


def _shape_regex(layout: rule_shapes.Layout, shape: tuple) -> re.Pattern:
    """The usual rule held to one shape (compiler/rules/shapes.py: its joins, its not/'(' runs as
    written, its true/false, its operands' kinds, its ')' runs, its actions' kinds): the slots of
    _RULE (or _OPERAND_RULE, by ``layout``), as many as the shape has, with those texts fixed;
    the groups numbered alike. A match is one the layout's regex would make, with this shape, and
    its shape's builder reads it without looking the shape up. Where the rules of a file have a few
    shapes, trying theirs first is about a third quicker than _RULE."""
    parts = [_SKIP, "()"]
    per_slot = layout.per_slot
    slots = layout.slots(shape)
    for k in range(slots):
        join, prefix, truth, closes = shape[per_slot * k:per_slot * k + 4]
        if k:
            boundary = r"\b" if join[-1].isalpha() else ""
            parts.append(rf"{_S}({re.escape(join)}){boundary}{_S}")
        parts.append(f"({re.escape(prefix)})" + ("(?![A-Za-z0-9_])" if prefix[-1:].isalpha() else ""))
        if truth is not None:
            parts.append(_NO_GROUP * (layout.roles["truth"] - 3) + rf"({re.escape(truth)})(?![A-Za-z0-9_.])")
        elif layout is rule_shapes.USUAL:
            parts.append(rf"{_FIELD}{_S}{_OP}{_S}({_LIT}){_NO_GROUP}")
        else:
            left, right = layout.operands(shape, k)
            parts.append(rf"{_operand(True, left)}{_S}{_OP}{_S}{_operand(False, right)}{_NO_GROUP}")
        parts.append(f"({re.escape(closes)})")
    kinds = shape[-7:-1]
    parts.append(rf"{_S}:{_S}{_fixed_action(*kinds[:3])}")
    parts.append(rf"{_W},{_W}{_fixed_action(*kinds[3:])}" if any(k is not None for k in kinds[3:]) else _NO_GROUP * 5)
    parts.append(rf"((?:{_W},{_W}(){_action(False)})++)" if shape[-1] is not None else _NO_GROUP * 2)
    return re.compile("".join(parts) + rf"{_W}(?:;|\Z)")


_FIXED: dict[tuple, "re.Pattern | None"] = {}  # (layout, shape with its slots only) -> _shape_regex
# Compiled regexes kept (tens of kB each); past them, rules of new shapes are read by _RULE (those
# _OPERAND_RULE would take, token by token).
_MAX_FIXED = 1024


def _fixed(layout: rule_shapes.Layout, shape: tuple) -> re.Pattern | None:
    """_shape_regex of a shape given with its slots only, compiled once (None past _MAX_FIXED)."""
    key = (layout, shape)
    if key not in _FIXED:
        if len(_FIXED) >= _MAX_FIXED:
            return None
        _FIXED[key] = _shape_regex(layout, shape)
    return _FIXED[key]


_PORT_RE = re.compile(_PORT)
_ARG_RE = re.compile(_ARG)
_AGGREGATE_RE = re.compile(rf"({NAME_RE}){_W}\({_W}((?>{_plain(DOTTED_RE)}|{NAME_RE})){_W}\)")


# Keywords are case-insensitive and whole words (the scanner's WORD stops at the word's end).
_CASES = lambda word: frozenset(  # noqa: E731
    "".join(c.upper() if bit >> i & 1 else c for i, c in enumerate(word)) for bit in range(2 ** len(word)))
AND_WORDS, OR_WORDS, NOT_WORDS = _CASES("and"), _CASES("or"), _CASES("not")
TRUE_WORDS, FALSE_WORDS, PREFIX_WORDS = _CASES("true"), _CASES("false"), _CASES("prefix")
_FILTER_KEYWORDS = NOT_WORDS | TRUE_WORDS | FALSE_WORDS



class _Stop(Exception):
    """The text cannot be parsed here (or not safely): the grammar takes over."""


@dataclass
class Parsed:
    """What the fast parser read. ``rules[i]`` is None for a doubtful rule, listed in ``doubtful``;
    ``spans[i]`` is where that rule lies (from the end of the one before, through its ';').
    ``stopped`` means the parser could not go on after the last rule of ``rules``: the grammar reads
    from ``stop_from`` (the start of that last rule, so that lark reaches the rest in the state the
    whole file puts it in) to the end."""

    rules: list = field(default_factory=list)
    doubtful: list[int] = field(default_factory=list)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)
    stopped: bool = False
    stop_from: int = 0  # with stopped: the offset from which lark reads (the rule before the stop)


def literal(text: str, at: SourceLocation):
    """The constant a _RULE literal stands for (a bare name is a string), None if doubtful."""
    c = text[0]
    if c == '"':
        return ast.String(rule_build.unescape(text[1:-1]), at)
    if text.isdigit():
        return ast.Number(int(text), False, at) if len(text) <= MAX_NUMBER_DIGITS else None
    if ":" in text or "/" in text or text.count(".") == 3:
        address, _, length = text.partition("/")
        length = length.strip()
        if len(length) > MAX_NUMBER_DIGITS:
            return None
        node = (_colon if ":" in text else _ipv4)(address.strip(), length, at)
        return None if type(node) is str else node
    if c.isdigit():
        if len(text) > MAX_NUMBER_DIGITS:
            return None
        if text[1:2] in ("x", "X"):
            return ast.Number(int(text, 16), True, at)
        return ast.Number(Decimal(text), False, at)
    return ast.String(text, at)


def _filter_literal(text: str, at: SourceLocation):
    """:func:`literal` for a comparison's constant: a number, address or bare word of more than
    MAX_NUMBER_DIGITS characters is doubtful too (only a quoted string may be that long)."""
    return literal(text, at) if text[0] == '"' or len(text) <= MAX_NUMBER_DIGITS else None


_SHAPE_OF_RULE, _SHAPE_OF_LONG_RULE = (rule_shapes.shape_of(slots) for slots in (_SHORT_SLOTS, RULE_SLOTS))
_UNKNOWN = object()


def parse(text: str, path: str) -> Parsed:
    """Parse a whole rule file (BOM already stripped)."""
    return _Parser(text, path).run()


class _Parser:
    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.newlines = [-1]
        self.last_offset = -1
        self.line, self.line_from, self.line_to = 1, -1, -1  # the line of the last location: (from, to)
        self.last_loc: SourceLocation | None = None
        find = text.find
        at = find("\n")
        while at >= 0:
            self.newlines.append(at)
            at = find("\n", at + 1)

    def run(self) -> Parsed:
        out = Parsed()
        text, size = self.text, len(self.text)
        rule_match, long_match, operand_match = _RULE.match, _long_match, _OPERAND_RULE.match
        scan, kind_of = _SCANNER.finditer, _KIND
        pos = 0
        last_start = 0  # where the last rule read starts (the end of the one before)
        # _RULE fails on a rule of more atoms than its slots only when it has read them all. Where such
        # rules come often, _LONG_RULE is tried first, until _SHORT_RUN rules in a row fit _RULE.
        long_first, short_run = False, 0
        # The shapes of the last rules read (at most _RECENT, the latest first): their own regexes
        # are tried first, and a match needs no shape looked up.
        recent: list[tuple] = []
        while True:
            m = None
            for i, (match, layout, shape) in enumerate(recent):
                m = match(text, pos)
                if m is not None:
                    if i:
                        recent.insert(0, recent.pop(i))
                    rule = self.flat_rule(m, layout, shape, m.groups())
                    break
            else:
                if long_first:
                    m = long_match(text, pos)
                    if m is not None and m.group(_PAST_SHORT_SLOTS) is None:
                        short_run += 1
                        long_first = short_run < _SHORT_RUN
                    else:
                        short_run = 0
                else:
                    m = rule_match(text, pos)
                    if m is None:
                        m = long_match(text, pos)
                        long_first, short_run = m is not None, 0
                rule = None
                if m is not None:
                    groups = m.groups()
                    shape = (_SHAPE_OF_RULE if m.re is _RULE else _SHAPE_OF_LONG_RULE)(groups)
                    rule = self.flat_rule(m, rule_shapes.USUAL, shape, groups)
                    layout, own = rule_shapes.USUAL, rule_shapes.own_slots(shape)
                    fixed = _fixed(layout, own) if rule is not None else None
                else:  # other operands: read by the shape's own regex at once
                    m = operand_match(text, pos)
                    if m is not None:
                        layout, own = rule_shapes.OPERANDS, rule_shapes.operands_shape(m.groups(), _SHORT_SLOTS)
                        fixed = _fixed(layout, own)
                        m = fixed.match(text, pos) if fixed is not None else None
                        rule = self.flat_rule(m, layout, own, m.groups()) if m is not None else None
                if rule is not None and fixed is not None:
                    recent.insert(0, (fixed.match, layout, own))
                    del recent[_RECENT:]
            if rule is not None:
                end = m.end()
            else:  # token by token, up to the next ';'
                self.doubt = False
                kinds, values, offsets = self.kinds, self.values, self.offsets = [], [], []
                for t in scan(text, pos):
                    g = t.lastindex
                    k = kind_of[g]
                    kinds.append(k)
                    values.append(t if k >= CMP else t.group(g))
                    offsets.append(t.start(g))
                    if k == END or (k == PUNCT and values[-1] == ";"):
                        break
                if kinds[0] == END:
                    return out
                kinds.append(END)  # a sentinel: a lookahead past the ';' finds an end, not an IndexError
                values.append("")
                offsets.append(size)
                self.i = 0
                try:
                    rule = self.rule()
                    k = kinds[self.i]
                    if k == PUNCT and values[self.i] == ";":
                        end = offsets[self.i] + 1
                    elif k == END:
                        end = size
                    else:
                        raise _Stop
                except _Stop:
                    out.stopped = True
                    out.stop_from = last_start if out.rules else 0
                    return out
                if self.doubt:
                    out.doubtful.append(len(out.rules))
                    out.spans[len(out.rules)] = (pos, end)
                    rule = None
            out.rules.append(rule)
            last_start, pos = pos, end

    def flat_rule(self, m: re.Match, layout: rule_shapes.Layout, shape: tuple, groups: tuple) -> ast.Rule | None:
        """The Rule of a match (of _RULE, or of a _shape_regex) of that shape, its groups laid out
        as ``layout`` says, made by the shape's builder (compiler/rules/shapes.py); None (and the
        rule read token by token) if anything in it is doubtful or the shape has no builder (its
        parentheses do not match, it nests deeper than _FLAT_DEPTH, it compares two constants or two
        attributes). This is the hot loop."""
        first = m.start(1)  # the rule's first token (the empty group before the first slot)
        if not self.line_from < first < self.line_to:
            self.seek(first)
        oneline = m.end() <= self.line_to
        build = layout.tables[oneline].get(shape, _UNKNOWN)
        if build is _UNKNOWN:
            build = rule_shapes.builder(layout, shape, oneline, _FLAT_DEPTH, MAX_NUMBER_DIGITS)
        if build is None:
            return None
        return build(m, groups, m.start, self.path, self.line, self.line_from, self.loc, _filter_literal, self.action,
                     self.more_actions)

    def more_actions(self, m: re.Match, group: int) -> list | None:
        """The actions in a _RULE match's group of actions after the second, None if one is doubtful."""
        out = []
        for a in _ACTION_RE.finditer(self.text, m.start(group), m.end(group)):
            action = self.action(a)
            if action is None:
                return None
            out.append(action)
        return out

    def action(self, m: re.Match, at: int = 0):
        """The action of an _ACTION_RE match (or of _RULE's first action, its groups after ``at``)."""
        ports, drop, name = m.group(at + 2, at + 3, at + 4)
        loc = self.loc
        if ports is not None:
            if "," in ports:
                found = _PORT_RE.findall(ports)
                if any(len(p) > MAX_NUMBER_DIGITS for p in found):
                    return None
                numbers = tuple(sorted({int(p, 16) if p[1:2] in ("x", "X") else int(p) for p in found}))
            elif len(ports) > MAX_NUMBER_DIGITS:
                return None
            else:
                numbers = (int(ports, 16) if ports[1:2] in ("x", "X") else int(ports),)
            return ast.Forward(numbers, loc(m.start(at + 1)))
        if drop is not None:
            return ast.Drop(loc(m.start(at + 3)))
        values = []
        for a in _ARG_RE.finditer(self.text, m.start(at + 5), m.end(at + 5)):
            text = a.group()
            if text[0] == '"' or ":" in text or not (text[0].isalpha() or text[0] == "_"):
                value = literal(text, loc(a.start()))
            else:
                value = self.argument(text, a.start())
            if value is None:
                return None
            values.append(value)
        return ast.Call(name, tuple(values), loc(m.start(at + 4)))

    def argument(self, text: str, at: int):
        """An attribute as an action's argument: a field, a state variable, an aggregate (None if
        its function is not one)."""
        if "(" not in text:
            return (ast.Field if "." in text else ast.StateVar)(text, self.loc(at))
        agg = _AGGREGATE_RE.match(text)
        function, arg = agg.group(1, 2)
        if function.lower() not in ast.AGGREGATES:
            return None
        argument = (ast.Field if "." in arg else ast.StateVar)(arg, self.loc(at + agg.start(2)))
        return ast.Aggregate(function.lower(), argument, self.loc(at))

    # -- helpers ----------------------------------------------------------------------------
    def loc(self, offset: int) -> SourceLocation:
        """The location of a token; a rule, its first comparison and its field share one object."""
        if offset == self.last_offset:
            return self.last_loc
        if not self.line_from < offset < self.line_to:  # not on the line of the last location
            self.seek(offset)
        loc = SourceLocation(self.path, self.line, offset - self.line_from)
        self.last_offset = offset
        self.last_loc = loc
        return loc

    def seek(self, offset: int) -> None:
        """Puts the line cache on the line of ``offset``."""
        nl = self.newlines
        line = bisect_left(nl, offset)
        self.line, self.line_from = line, nl[line - 1]
        self.line_to = nl[line] if line < len(nl) else len(self.text)

    def expect(self, char: str) -> None:
        if self.kinds[self.i] == PUNCT and self.values[self.i] == char:
            self.i += 1
        else:
            raise _Stop

    def number(self, text: str) -> bool:
        """False (and the rule doubtful) for a number longer than the grammar lets through."""
        if len(text) > MAX_NUMBER_DIGITS:
            self.doubt = True
            return False
        return True

    # -- rules ------------------------------------------------------------------------------
    def rule(self) -> ast.Rule:
        i = self.i
        where = self.loc(self.offsets[i])
        filt = self.conjunction_of_comparisons() if self.kinds[i] == CMP else None
        if filt is None:
            self.i = i
            filt = self.disjunction(2)
        self.expect(":")
        kinds, values = self.kinds, self.values
        i = self.i
        if kinds[i] == FWD1 and (kinds[i + 1] == END or (kinds[i + 1] == PUNCT and values[i + 1] == ";")):
            port = values[i].group(6)  # the usual single fwd(port): no actions to merge
            if self.number(port):
                self.i = i + 1
                forward = ast.Forward((int(port, 16) if port[1:2] in ("x", "X") else int(port),), self.loc(self.offsets[i]))
                return ast.Rule(filt, (forward,), where)
        return ast.Rule(filt, self.actions(), where)

    def conjunction_of_comparisons(self):
        """The usual filter, ``h.f OP c (and h.f OP c)*`` up to the ':', without the general descent
        (None, and the tokens left for it, when the filter is anything else)."""
        kinds, values = self.kinds, self.values
        i = self.i
        items = []
        while True:
            self.i = i + 1
            items.append(self.comparison(values[i], self.offsets[i]))
            i = self.i
            k = kinds[i]
            if (k == AND or (k == WORD and values[i] in AND_WORDS)) and kinds[i + 1] == CMP:
                i += 1
            elif k == PUNCT and values[i] == ":":
                return items[0] if len(items) == 1 else ast.And(tuple(items), items[0].location)
            else:
                return None

    def actions(self) -> tuple:
        kinds, values, offsets = self.kinds, self.values, self.offsets
        items = []
        while True:
            i = self.i
            k, v = kinds[i], values[i]
            if k == FWD1:
                self.i = i + 1
                port = v.group(6)
                if self.number(port):
                    items.append(ast.Forward((int(port, 16) if port[1:2] in ("x", "X") else int(port),),
                                             self.loc(offsets[i])))
            elif k == WORD and v == "fwd":
                self.i = i + 1
                self.expect("(")
                ports = [self.port()]
                while kinds[self.i] == PUNCT and values[self.i] == ",":
                    self.i += 1
                    ports.append(self.port())
                self.expect(")")
                items.append(ast.Forward(tuple(ports), self.loc(offsets[i])))
            elif k == WORD and v == "drop":
                self.i = i + 1
                if kinds[self.i] == PUNCT and values[self.i] == "(":
                    self.i += 1
                    self.expect(")")
                items.append(ast.Drop(self.loc(offsets[i])))
            elif k == WORD and "." not in v:
                self.i = i + 1
                self.expect("(")
                args = []
                if not (kinds[self.i] == PUNCT and values[self.i] == ")"):
                    args.append(self.operand())
                    while kinds[self.i] == PUNCT and values[self.i] == ",":
                        self.i += 1
                        args.append(self.operand())
                self.expect(")")
                items.append(ast.Call(v, tuple(args), self.loc(offsets[i])))
            elif k == INT:  # p4pubsub's first compiler's ': N;', an error the grammar words
                self.i = i + 1
                self.doubt = True
            else:
                raise _Stop
            if kinds[self.i] == PUNCT and values[self.i] == ",":
                self.i += 1
            else:
                break
        return rule_build.merge_actions(items)

    def port(self) -> int:
        k, v = self.kinds[self.i], self.values[self.i]
        self.i += 1
        if k == INT:
            return int(v) if self.number(v) else 0
        if k == HEX:
            return int(v, 16) if self.number(v) else 0
        raise _Stop

    # -- filters ----------------------------------------------------------------------------
    # ``depth`` bounds from above the depth of lark's tree at the parent of what is parsed (the rule
    # is at 2): the fast parser stops before anything nears MAX_NESTING, and recursion stays shallow.
    def disjunction(self, depth: int):
        return self.joined(depth, OR, OR_WORDS, ast.Or, self.conjunction)

    def conjunction(self, depth: int):
        return self.joined(depth, AND, AND_WORDS, ast.And, self.negation)

    def joined(self, depth: int, symbol: int, words: frozenset, kind: type, operand):
        """``operand (joiner operand)*`` as one ``kind`` node, a parenthesised ``kind`` flattened into
        it (lark's or_expr and and_expr); a lone operand stays itself."""
        start = self.offsets[self.i]
        first = operand(depth + 1)
        k, v = self.kinds[self.i], self.values[self.i]
        if not (k == symbol or (k == WORD and v in words)):
            return first
        items = list(first.items) if type(first) is kind else [first]
        while k == symbol or (k == WORD and v in words):
            self.i += 1
            item = operand(depth + 1)
            if type(item) is kind:
                items.extend(item.items)
            else:
                items.append(item)
            k, v = self.kinds[self.i], self.values[self.i]
        return kind(tuple(items), self.loc(start))

    def negation(self, depth: int):
        kinds, values = self.kinds, self.values
        k = kinds[self.i]
        if not (k == NOT or (k == WORD and values[self.i] in NOT_WORDS)):
            return self.atom(depth)
        starts = []
        while k == NOT or (k == WORD and values[self.i] in NOT_WORDS):
            starts.append(self.offsets[self.i])
            self.i += 1
            k = kinds[self.i]
        item = self.atom(depth + len(starts))
        for start in reversed(starts):
            item = ast.Not(item, self.loc(start))
        return item

    def atom(self, depth: int):
        if depth + 4 > MAX_NESTING:
            raise _Stop  # lark measures it and says where
        i = self.i
        k, v = self.kinds[i], self.values[i]
        if k == PUNCT and v == "(":
            self.i = i + 1
            inner = self.disjunction(depth)
            self.expect(")")
            return inner
        if k == WORD and v in _FILTER_KEYWORDS:
            if v in NOT_WORDS:
                raise _Stop  # pragma: no cover - negation() takes every 'not'
            self.i = i + 1
            return ast.Const(v in TRUE_WORDS, self.loc(self.offsets[i]))
        if k == KWORD:
            raise _Stop  # 'not.x' where a filter starts: the keyword, then an error
        if k == CMP:
            self.i = i + 1
            return self.comparison(v, self.offsets[i])
        left = self.operand(depth + 1)
        k, v = self.kinds[self.i], self.values[self.i]
        if k == OP:
            op = "==" if v == "=" else v
        elif k == WORD and v in PREFIX_WORDS:
            op = "prefix"
        else:
            raise _Stop
        self.i += 1
        right = self.operand(depth + 1)
        oriented = rule_build.orient(left, op, right)
        if type(oriented) is str:
            self.doubt = True
            return ast.Const(False)
        return ast.Comparison(*oriented, left.location)

    def comparison(self, m: re.Match, start: int):
        """A CMP token: ``h.f OP constant``, the constant a string or a number (an IPv4 address may
        take its prefix length after it)."""
        name, op, text = m.group(2, 3, 4)
        where = self.loc(start)
        at = self.loc(m.start(4))
        if op == "=":
            op = "=="
        elif op[0] not in "<>!=":
            op = "prefix"
        c = text[0]
        if c == '"':
            value = ast.String(rule_build.unescape(text[1:-1]), at)
        elif not self.number(text):
            value = ast.Number(0)
        elif text[1:2] in ("x", "X"):
            value = ast.Number(int(text, 16), True, at)
        elif "." not in text:
            value = ast.Number(int(text), False, at)
        elif text.count(".") == 1:
            value = ast.Number(Decimal(text), False, at)
        else:
            value = self.address(IPV4, text, at)
        return ast.Comparison(ast.Field(name, where), op, value, where)

    # -- operands ---------------------------------------------------------------------------
    def operand(self, depth: int = 4):
        """An attribute or a constant (the grammar's ``operand`` and ``arg``)."""
        i = self.i
        k, v = self.kinds[i], self.values[i]
        self.i = i + 1
        if k == WORD or k == KWORD:
            if "." in v:
                return ast.Field(v, self.loc(self.offsets[i]))
            if self.kinds[i + 1] == PUNCT and self.values[i + 1] == "(":
                return self.aggregate(i, depth)
            return ast.StateVar(v, self.loc(self.offsets[i]))
        if k == STRING:
            return ast.String(rule_build.unescape(v[1:-1]), self.loc(self.offsets[i]))
        if k == INT:
            return ast.Number(int(v) if self.number(v) else 0, False, self.loc(self.offsets[i]))
        if k == HEX:
            return ast.Number(int(v, 16) if self.number(v) else 0, True, self.loc(self.offsets[i]))
        if k == DECIMAL:
            return ast.Number(Decimal(v) if self.number(v) else 0, False, self.loc(self.offsets[i]))
        if k == IPV4 or k == ADDRESS:
            return self.address(k, v, self.loc(self.offsets[i]))
        raise _Stop

    def address(self, kind: int, text: str, where: SourceLocation):
        """An IPv4, IPv6 or MAC address (just read), with the prefix length after it if any."""
        if self.kinds[self.i] == PUNCT and self.values[self.i] == "/":
            if self.kinds[self.i + 1] != INT:
                raise _Stop
            length = self.values[self.i + 1]
            self.i += 2
            if not self.number(length):
                return ast.Number(0)
        else:
            length = ""
        node = (_ipv4 if kind == IPV4 else _colon)(text, length, where)
        if type(node) is str:
            self.doubt = True
            return ast.Number(0)
        return node

    def aggregate(self, i: int, depth: int):
        """``NAME ( attribute )``, the name at token i and the '(' next."""
        if depth + 2 > MAX_NESTING:
            raise _Stop
        self.i = i + 2
        k, v = self.kinds[self.i], self.values[self.i]
        if k != WORD and k != KWORD:
            raise _Stop
        if "." in v:
            self.i += 1
            arg = ast.Field(v, self.loc(self.offsets[self.i - 1]))
        elif self.kinds[self.i + 1] == PUNCT and self.values[self.i + 1] == "(":
            arg = self.aggregate(self.i, depth + 1)
        else:
            self.i += 1
            arg = ast.StateVar(v, self.loc(self.offsets[self.i - 1]))
        self.expect(")")
        function = self.values[i]
        if function.lower() not in ast.AGGREGATES:
            self.doubt = True
        return ast.Aggregate(function.lower(), arg, self.loc(self.offsets[i]))


def _ipv4(address: str, length: str, where: SourceLocation) -> ast.IPAddress | str:
    """rule_build.ipv4 of ``address/length`` (``length`` may be empty) without the ipaddress module
    in the usual case (no leading zeros, no host bits); anything else goes through rule_build.ipv4,
    which says what is wrong."""
    octets = [int(octet) for octet in address.split(".")]
    if max(octets) > 255 or ".".join(map(str, octets)) != address:  # too big, or leading zeros
        return rule_build.ipv4(f"{address}/{length}" if length else address, where)
    value = octets[0] << 24 | octets[1] << 16 | octets[2] << 8 | octets[3]
    if not length:
        return ast.IPAddress(4, value, 32, where)
    plen = int(length)
    if plen > 32 or value & ((1 << (32 - plen)) - 1):
        return rule_build.ipv4(f"{address}/{length}", where)
    return ast.IPAddress(4, value, plen, where)


def _colon(address: str, length: str, where: SourceLocation) -> ast.IPAddress | ast.MACAddress | str:
    """rule_build.colon_address of ``address/length`` without the ipaddress module for well-formed
    MAC and IPv6 addresses (each group at most 4 hex digits, as the scanner's ADDRESS reads them);
    anything else goes through rule_build.colon_address."""
    head, double, tail = address.partition("::")
    if double:
        heads = head.split(":") if head else []
        tails = tail.split(":") if tail else []
        groups = heads + ["0"] * (8 - len(heads) - len(tails)) + tails
        regular = len(heads) + len(tails) <= 7 and "" not in heads and "" not in tails
    else:
        groups = address.split(":")
        if not length and len(groups) == 6 and all(len(g) == 2 for g in groups):
            return ast.MACAddress(int("".join(groups), 16), where)
        regular = len(groups) == 8 and "" not in groups
    if regular:
        value = int("".join(g.rjust(4, "0") for g in groups), 16)
        plen = int(length) if length else 128
        if plen <= 128 and not value & ((1 << (128 - plen)) - 1):
            return ast.IPAddress(6, value, plen, where)
    return rule_build.colon_address(f"{address}/{length}" if length else address, where)
