"""The ``p4sub`` command line: one module per subcommand, each with ``register(subparsers)``.

Errors a user can cause are :class:`~compiler.base.errors.P4subError`; they are caught here, once,
printed to stderr and turned into exit status 2. Anything else is a bug and shows its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from compiler import __version__
from compiler.base import P4subError

# Subcommand modules, in the order ``p4sub --help`` lists them. A module that cannot be imported
# (an optional part not installed) is left out of the listing rather than breaking the others.
SUBCOMMANDS = (
    "p4sub.check",
    "p4sub.compile",
    "p4sub.simulate",
    "p4sub.explain",
    "p4sub.verify",
    "p4sub.build",
    "p4sub.install",
    "p4sub.serve",
    "p4sub.gen",
    "p4sub.replay",
    "p4sub.route",
    "p4sub.netsim",
    "p4sub.eval",
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command`` (the name of one subcommand module, which registers
    that command alone) only that module is imported: the others' imports (the compiler, the BDD
    library, networkx, ...) cost about a second that ``p4sub gen`` or ``p4sub replay`` need not pay."""
    parser = argparse.ArgumentParser(
        prog="p4sub",
        description="Compile packet subscriptions into programmable-switch pipelines.",
        epilog="example:\n  p4sub check apps/itch/itch.p4 apps/itch/rules.sub\n"
        "  p4sub compile apps/itch/itch.p4 apps/itch/rules.sub --target bmv2 -o out",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"p4sub {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        if command is not None and name != f"p4sub.{command}":
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None, *, exit_when_interrupted: bool = False) -> int:
    """Run a p4sub command; its exit code. ``exit_when_interrupted`` (the console command): an
    interrupted command ends the process inside the handler, before the exception's traceback is
    let go: freeing the frames it holds (a large compile's diagram and tables) took 2 to 7 s after a
    SIGTERM, and the outputs are already cleaned up when the handler runs."""
    given = list(sys.argv[1:] if argv is None else argv)
    command = given[0] if given and f"p4sub.{given[0]}" in SUBCOMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(given)
    args.argv = given  # recorded in output manifests
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = _interrupt_on_sigterm()
    try:
        return int(args.func(args) or 0)
    except P4subError as exc:
        print(f"p4sub: error: {exc}" if exc.location is None else str(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("p4sub: interrupted", file=sys.stderr)
        code = 128 + getattr(exc, "signum", signal.SIGINT)  # 130 for SIGINT, 143 for SIGTERM, as a shell says
        if exit_when_interrupted:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except BrokenPipeError:
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGINT, previous[1])


def cli() -> None:
    """The ``p4sub`` command: :func:`main`, then exit. An interrupted command ends inside main's
    handler, without the interpreter's teardown, which freeing a large compile's objects made take
    10 s and more after a SIGTERM (its outputs are already cleaned up by then)."""
    sys.exit(main(exit_when_interrupted=True))


def _interrupt_on_sigterm():
    """SIGTERM (``kill``, ``timeout``) raises KeyboardInterrupt as SIGINT does, so that staged outputs
    (:mod:`compiler.base.outputs`) are cleaned up rather than left beside their target. Only the first
    SIGINT or SIGTERM interrupts: one that follows while the cleanup runs is ignored (a second Ctrl-C
    50 ms after the first raised inside the cleanup and ended in a traceback). The old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return None

    pid = os.getpid()
    fired = []

    def interrupt(signum, frame):
        if os.getpid() != pid:  # a forked worker (route's process pool): terminate as by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if fired:
            return
        fired.append(signum)
        raise Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt

    # A signal the parent set to be ignored (nohup, a background job) stays ignored.
    return tuple(signal.getsignal(sig) if signal.getsignal(sig) == signal.SIG_IGN else signal.signal(sig, interrupt)
                 for sig in (signal.SIGTERM, signal.SIGINT))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is (as SIGINT raises KeyboardInterrupt); ``signum`` gives the exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def add_command(sub: argparse._SubParsersAction, name: str, help: str, example: str) -> argparse.ArgumentParser:
    """Add a subcommand whose ``--help`` ends with an example, as git's do."""
    return sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


if __name__ == "__main__":
    sys.exit(main())
