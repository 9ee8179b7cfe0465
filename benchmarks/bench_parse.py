"""Rule-file parsing speed in every spelling (issue 16 item 4: >= 100,000 rules/s each), and the
whole `p4sub check` / `p4sub compile` on 100,000 rules in Camus's own syntax.

Each spelling is a seeded file of N rules (100,000 by default) parsed by `compiler.rules.parser.parse_rules`
(the hand-written parser, the lark grammar only for what it cannot vouch for). Prints one JSON line
per spelling: CPU seconds (process time, best of --repeat: the machine is shared), rules/s, whether
the grammar was needed, and how many rules were read token by token (not by one match of
compiler/rules/fastparse.py's regexes). Every row is held to the target but `token_path`, which shows
what the rules the one match does not take (more than 64 comparisons, comments among the
actions) cost.

    .venv/bin/python benchmarks/bench_parse.py                   # every spelling, then check and compile
    .venv/bin/python benchmarks/bench_parse.py --no-cli --rules 20000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.itch.symbols import symbol_names  # noqa: E402
from apps.workloads import SienaConfig, itch_rules, siena_rules  # noqa: E402
from compiler.rules import fastparse
from compiler.rules import parser as lang

REPO = Path(__file__).resolve().parent.parent
TARGET = 100_000  # rules/s
REPORTED_ONLY = ("token_path",)


def p4sub_syntax(n: int, rng: random.Random, constraints: int = 2) -> str:
    """`p4sub gen rules --workload itch` (2 constraints by default): `==`, quoted symbols, decimal
    prices, a '#' header line."""
    return "\n".join(itch_rules(n, constraints=constraints, seed=rng.randrange(1 << 30))) + "\n"


def p4sub_five(n: int, rng: random.Random) -> str:
    """The same with all 5 ITCH constraints: the cost grows with the comparisons."""
    return p4sub_syntax(n, rng, 5)


def camus_syntax(n: int, rng: random.Random, negate: bool = True) -> str:
    """p4pubsub's compiler_runtime workload in Camus's spelling: `=`, quoted strings, and a `!` on
    every fourth rule (none in the file the end-to-end check and compile read, as in p4pubsub's)."""
    names = symbol_names(100)
    out = []
    for i in range(n):
        neg = "! " if negate and i % 4 == 0 else ""
        out.append(f'{neg}add_order.stock = "{rng.choice(names)}" and add_order.shares > {rng.randint(1, 1000)}: '
                   f"fwd({rng.randint(1, 200)});")
    return "\n".join(out) + "\n"


def commented(n: int, rng: random.Random) -> str:
    """Camus's spelling with `#` and `//` comments: a header, a comment line every 10 rules, trailing ones."""
    rules = camus_syntax(n, rng).splitlines()
    out = ["# subscribers of the trading floor", "// generated, seed 1"]
    for i, rule in enumerate(rules):
        if i % 10 == 0:
            out.append(f"# block {i // 10}")
        out.append(f"{rule}   # subscriber {i}")
    return "\n".join(out) + "\n"


def siena_prefix(n: int, rng: random.Random) -> str:
    """`p4sub gen rules --workload siena` with `prefix` among the operators (1 to 4 constraints)."""
    config = SienaConfig(operators=("=", "<", ">", "!=", "prefix"), int_fraction=0.5)
    return "\n".join(siena_rules(n, config, seed=rng.randrange(1 << 30))) + "\n"


def addresses(n: int, rng: random.Random) -> str:
    """IPv4 addresses and prefixes (`10.0.0.0 / 8` too), IPv6 prefixes in full and compressed, MACs."""
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(f"ipv4.dstAddr = 10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}: fwd({i % 200});")
        elif kind == 1:
            out.append(f"ipv4.srcAddr = 10.{rng.randint(0, 255)}.0.0 / 16 and ipv4.dstAddr = 192.168.{rng.randint(0, 255)}.0/24"
                       f" : fwd({i % 200});")
        elif kind == 2:
            group = rng.randint(0, 0xFFFF)
            spelled = f"ff02:{group:04x}:0000:0000:0000:0000:0000:0000/32" if i % 8 == 2 else f"ff02:{group:x}::/32"
            out.append(f"! ig_intr_md.ingress_port = {rng.randint(1, 200)} and ipv6.dstAddr = {spelled} : fwd({i % 200});")
        else:
            mac = ":".join(f"{rng.randint(0, 255):02x}" for _ in range(6))
            out.append(f"ethernet.dstAddr = {mac}:fwd({i % 200});")
    return "\n".join(out) + "\n"


def in_turn(n: int, *forms) -> str:
    """n rules, the i-th written by ``forms[i % len(forms)](i)``."""
    return "\n".join(forms[i % len(forms)](i) for i in range(n)) + "\n"


def user_actions(n: int, rng: random.Random) -> str:
    """User actions with constant arguments, as in p4pubsub's DNS and INT apps."""
    return in_turn(n, lambda i: f"int_hop.hop_latency > {rng.randint(1000, 10000)} : report({rng.randint(1, 100)}, 0x{rng.randint(0, 255):02x});",
                   lambda i: f'dns_query.label = "n{rng.randint(0, 99999)}" : answerDNS(10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)});')


def general(n: int, rng: random.Random) -> str:
    """`or`, parentheses, `not (...)`, several actions."""
    out = []
    for i in range(n):
        out.append(f'(h.a == {rng.randint(0, 999)} or h.b < {rng.randint(0, 999)}) and not (h.s prefix "ab" or h.c = 1)'
                   f" : fwd({i % 200}), mark({i});")
    return "\n".join(out) + "\n"


def shapes(n: int, rng: random.Random) -> str:
    """The other shapes once read token by token, in turn: `true`/`false`, a comment inside the rule
    (over two lines), 10 comparisons, `not not (...)`."""
    out = []
    for i in range(n):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        kind = i % 4
        if kind == 0:
            out.append(f"true and h.a == {a} or false : fwd({i % 200});")
        elif kind == 1:
            out.append(f'h.s == "x{a}"  # subscriber {i}\n    and h.b < {b} : fwd({i % 200});')
        elif kind == 2:
            out.append(" and ".join(f"h.f{j} > {a + j}" for j in range(10)) + f" : fwd({i % 200});")
        else:
            out.append(f"not not (h.a == {a} or h.b == {b}) : drop;")
    return "\n".join(out) + "\n"


def operands(n: int, rng: random.Random) -> str:
    """Comparisons of other operands, in turn: aggregates and state variables (issue 17's stateful
    subscriptions), a constant on the left and a bare word facing a field (Camus's grammar), `!`."""
    return in_turn(n, lambda i: f"count(flow) > {rng.randint(0, 999)} and avg(h.lat) < {rng.randint(0, 999)} : fwd({i % 200});",
                   lambda i: f"v == GOOGL and {rng.randint(0, 999)} < add_order.price : fwd({i % 200});",
                   lambda i: f"SUM(h.len) >= {rng.randint(0, 999)} or ! v > {rng.randint(0, 999)} : drop;")


def action_arguments(n: int, rng: random.Random) -> str:
    """User actions whose arguments are strings, fields, state variables and aggregates."""
    return in_turn(n, lambda i: f"h.a == {rng.randint(0, 999)} : report(h.b, count(flow), v);",
                   lambda i: f'h.a == {rng.randint(0, 999)} : tag("s{rng.randint(0, 99999)}"), fwd({i % 200});')


def token_path(n: int, rng: random.Random) -> str:
    """What is still read token by token (reported, not held to the target): 70 comparisons (more
    than the one match's 64), a comment among the actions."""
    return in_turn(n, lambda i: f"h.a == {rng.randint(0, 999)} : fwd({i % 200}), # then\n    mark(1);",
                   lambda i: " and ".join(f"h.f{j} > {rng.randint(0, 999)}" for j in range(70)) + f" : fwd({i % 200});")


SPELLINGS = {"p4sub": p4sub_syntax, "p4sub_5_constraints": p4sub_five, "camus": camus_syntax, "comments": commented, "siena_prefix": siena_prefix,
             "addresses": addresses, "user_actions": user_actions, "general": general, "shapes": shapes,
             "operands": operands, "action_arguments": action_arguments, "token_path": token_path}


def token_by_token(text: str) -> int:
    """How many rules of the text compiler/rules/fastparse.py reads token by token (not by one match)."""
    read = []
    parser = fastparse._Parser(text, "bench")
    plain = parser.rule
    parser.rule = lambda: read.append(1) or plain()
    parser.run()
    return len(read)


def measure(name: str, text: str, repeat: int) -> dict:
    counts = fastparse.parse(text, name)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        rules = lang.parse_rules(text, name)
        best = min(best, time.process_time() - start)
    row = {"spelling": name, "rules": len(rules), "cpu_s": round(best, 3), "rules_per_s": round(len(rules) / best),
           "grammar_needed": bool(counts.stopped or counts.doubtful), "token_by_token": token_by_token(text)}
    if name not in REPORTED_ONLY:
        row["target"] = TARGET
        row["meets_target"] = row["rules_per_s"] >= TARGET
    return row


# The command in a child that reports its own peak memory.
_CHILD = ("import resource, sys\nfrom p4sub import main\ncode = main(sys.argv[1:])\n"
          "print('peak_rss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)")


def run_cli(*args: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"p4sub {' '.join(args)} failed: {done.stderr.strip()}")
    peak = int(done.stderr.split("peak_rss_kb")[-1])
    return {"wall_s": round(wall, 2), "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "peak_rss_mb": peak // 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=sorted(SPELLINGS))
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end check and compile")
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    rows = []
    if not args.no_cli and not args.only:  # first, while this process is small (a child's peak
        # memory counts this process's pages at the fork)
        with tempfile.TemporaryDirectory() as tmp:
            rules = Path(tmp) / "camus.sub"
            rules.write_text(camus_syntax(args.rules, random.Random(1), negate=False))
            spec = str(REPO / "apps/itch/itch.p4")
            for command in (["check", spec, str(rules)], ["compile", spec, str(rules), "-o", str(Path(tmp) / "out")]):
                row = {"command": f"p4sub {command[0]}", "rules": args.rules, "syntax": "camus", **run_cli(*command)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for name, make in SPELLINGS.items():
        if args.only and name != args.only:
            continue
        rows.append(measure(name, make(args.rules, random.Random(1)), args.repeat))
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
