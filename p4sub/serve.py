"""``p4sub serve OUT``: a long-running update mode that holds the compiled state and takes subscription changes.

Camus has a controller; ``compile --update`` is one process per change, which pays for starting
Python and loading the session every time. ``serve`` loads OUT's incremental session once (its
``session.pickle`` when ``compile --session`` or ``compile --update`` kept one, else by reading the
pipeline back) and then reads changes, one a line, from standard input (or ``--changes FILE``):

    + add_order.stock == "GOOGL" and add_order.price > 50 : fwd(3);     # add this rule
    - add_order.stock == "TEAM" and add_order.price > 34.0943 : fwd(15); # remove one copy of it

Blank lines and ``#`` comments are skipped. Each change is applied at once (the session's update:
only the diagram's part the rule touches is rebuilt), and its delta - the entries and multicast
groups to add, modify and delete, as ``delta.json`` holds them - is written to ``--deltas DIR`` as
``000001.json``, ``000002.json``, ... (each appears whole: written beside and renamed), with one line
on standard output per change. A bad line (not ``+``/``-``, a syntax or type error, a rule that is
not there to remove) gets an error on standard error that names ``<stdin>:LINE:COL`` and leaves the
state as it was; the next line is read. At the end (EOF, Ctrl-C, SIGTERM) a summary with the
per-change latency (change read -> delta written) goes to standard error; nothing in OUT is ever
written, and a delta being written when interrupted is not left half-written.

Pushing each delta to a running switch with the hitless plan of ``install --hitless`` is the
:class:`Server` ``push`` hook (:class:`backends.bmv2.hitless.Pusher` plans and renders only what an
update touches); the command line has no switch client that stays connected (the installer's P4Runtime
client runs in its own virtualenv, one process per install), so ``serve`` writes deltas, and
``benchmarks/bench_commands.py --rows stream`` measures the push against the installer's in-memory
stand-in.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, TextIO

from compiler.base import P4subError, ParseError, staged
from p4sub import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "serve", "hold a compiled pipeline in memory and apply subscription changes as they come",
                    "printf '+ add_order.stock == \"GOOGL\" : fwd(3);\\n' | p4sub serve out --deltas deltas/")
    p.add_argument("out", help="a compile (or compile --update) output; its session.pickle is loaded when it has one")
    p.add_argument("--changes", default="-", metavar="FILE",
                   help="read changes from FILE instead of standard input ('+ RULE' adds, '- RULE' removes)")
    p.add_argument("--deltas", metavar="DIR", help="write each change's delta to DIR/NNNNNN.json (DIR new or empty)")
    p.set_defaults(func=run)


class Server:
    """The compiled state and what one change does to it. ``push(old, new, update)``, when given, gets
    each incremental update's pipelines before and after (a switch client, or the installer's stand-in)."""

    def __init__(self, session, *, deltas: Path | None = None, push: Callable | None = None,
                 name: str = "<stdin>", out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.session = session
        self.deltas = deltas
        self.push = push
        self.name = name
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.pipeline = session.pipeline() if push is not None else None
        self.applied = 0
        self.errors = 0
        self.latencies: list[float] = []  # seconds, change read -> delta written (and pushed)

    def handle(self, lineno: int, line: str, started: float | None = None) -> bool:
        """Apply one input line; False (and an error on ``err``) when it is refused."""
        started = time.perf_counter() if started is None else started
        text = line.rstrip("\n")
        body = text.strip()
        if not body or body.startswith("#") or body.startswith("//"):
            return False
        try:
            add, remove = self._parse(lineno, text)
            update = self.session.update(add, remove)
        except P4subError as exc:
            self.errors += 1
            print(f"p4sub serve: error: {exc}" if exc.location is None else f"p4sub serve: {exc}", file=self.err)
            return False
        if self.push is not None:  # the pipelines before and after: O(entries), only when pushing
            new = self.session.pipeline()
            try:
                if not update.incremental or update.program_changed:
                    raise P4subError("the change needs " + ("another program" if update.program_changed else
                                     f"a full compile ({update.reason})") + ": not pushed hitlessly")
                self.push(self.pipeline, new, update)
            except P4subError as exc:  # the switch holds the old state: so does the server
                self.session.update(remove, add)
                self.errors += 1
                print(f"p4sub serve: {self.name}:{lineno}: error: {exc}; the change is undone", file=self.err)
                return False
            self.pipeline = new
        self.applied += 1
        if self.deltas is not None:
            self._write(update, text)
        seconds = time.perf_counter() - started
        self.latencies.append(seconds)
        d = update.delta
        how = "incremental" if update.incremental else f"full compile ({update.reason})"
        print(f"{self.applied}: {how}; entries +{len(d.added)} ~{len(d.modified)} -{len(d.deleted)}, groups "
              f"+{len(d.groups_added)} ~{len(d.groups_modified)} -{len(d.groups_deleted)}; {seconds * 1e3:.1f} ms",
              file=self.out, flush=True)
        if update.program_changed:
            print("warning: the rules now need another program (tables, widths or sizes differ): this delta does "
                  "not install as entry changes", file=self.err)
        return True

    def _parse(self, lineno: int, text: str):
        from compiler.rules import parse_rules

        sign = text.lstrip()[:1]
        column = len(text) - len(text.lstrip()) + 1
        if sign not in ("+", "-"):
            raise ParseError("a change is '+ RULE' (add) or '- RULE' (remove)", _location(self.name, lineno, column))
        at = text.index(sign)
        # The sign blanked out, the rule parsed where it stands: errors name this line and column.
        rules = parse_rules("\n" * (lineno - 1) + text[:at] + " " + text[at + 1:], self.name).rules
        if not rules:
            raise ParseError(f"'{sign}' needs a rule after it", _location(self.name, lineno, column))
        return (list(rules), []) if sign == "+" else ([], list(rules))

    def _write(self, update, line: str) -> None:
        path = self.deltas / f"{self.applied:06d}.json"
        info = {"change": line, **update.to_json()}
        with staged(path) as tmp:
            Path(tmp).write_text(json.dumps({**update.delta.to_json(), **info}, separators=(",", ":")) + "\n",
                                 encoding="utf-8")

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        out = {"changes": self.applied, "refused": self.errors}
        if lat:
            out.update(median_ms=round(statistics.median(lat) * 1e3, 2),
                       p99_ms=round(lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3, 2),
                       max_ms=round(lat[-1] * 1e3, 2))
        return out


def _location(name: str, line: int, column: int):
    from compiler.base import SourceLocation

    return SourceLocation(name, line, column)


def load_session(out: Path):
    """OUT's session: its kept one (checked, :mod:`compiler.incremental.cache`), else read back from
    the pipeline and the rules' copy. The rules are read once, so that a removal can be checked."""
    from compiler.base import find_listed
    from compiler.incremental import Incremental, cache
    from compiler.rules import read_rules
    from p4sub.compile_update import RULES_COPY, check_base, old_lanes

    listed = check_base(out)
    copy = out / RULES_COPY
    if not copy.is_file():
        raise P4subError(f"{out}: keeps no copy of its rules ({RULES_COPY}): compile it again with this p4sub")
    found = cache.load(out, listed if listed is not None else find_listed(out), RULES_COPY)
    if isinstance(found, cache.Kept):
        session = found.session
        session.detach_rules(lambda: read_rules(copy))
    else:
        from compiler import ir

        if (out / cache.NAME).exists():
            print(f"note: {out}: {found}: reading the pipeline back instead", file=sys.stderr)
        pipeline = ir.load(out / "pipeline.json")
        try:
            stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stats = {}
        from compiler.compile import CompileOptions

        session = Incremental(pipeline.spec, read_rules(copy), pipeline, CompileOptions(),
                              exact=stats.get("exact", True), stats=stats, lanes=old_lanes(out))
    session.rules  # read now: a removal is checked against them, and the first change should not pay for it
    session.warm()
    return session


def _deltas_dir(path: str | None) -> Path | None:
    if path is None:
        return None
    d = Path(path)
    if d.exists() and (not d.is_dir() or any(d.iterdir())):
        raise P4subError(f"--deltas {d}: must be a new or empty directory")
    return d


def run(args: argparse.Namespace) -> int:
    from compiler.base import bulk_objects, open_input

    out = Path(args.out)
    if not out.is_dir():
        raise P4subError(f"{out}: no such output directory")
    stream = sys.stdin if args.changes == "-" else open_input(args.changes, "changes file", limit=False)  # refused now
    deltas = _deltas_dir(args.deltas)
    t = time.perf_counter()
    with bulk_objects():
        session = load_session(out)
    if deltas is not None:  # made once the session loaded: a failed start leaves no new directory
        deltas.mkdir(parents=True, exist_ok=True)
    name = "<stdin>" if args.changes == "-" else args.changes
    server = Server(session, deltas=deltas, name=name)
    print(f"serving {out}: {session.n_rules} rules, loaded in {time.perf_counter() - t:.2f} s; "
          "reading changes ('+ RULE' / '- RULE')", file=sys.stderr, flush=True)
    try:
        for lineno, raw in enumerate(stream, 1):
            started = time.perf_counter()
            line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
            server.handle(lineno, line, started)
    finally:
        if stream is not sys.stdin:
            stream.close()
        print("serve: " + json.dumps(server.summary()), file=sys.stderr, flush=True)
    return 0 if not server.errors else 2
