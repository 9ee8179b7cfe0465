"""``p4sub gen``: generate ITCH feeds, INT traces, Siena messages and subscription workloads, and
with ``--spec SPEC`` packets of any protocol a spec describes (:mod:`runtime.spec_gen`).

Each generator is seeded and deterministic; long runs report progress on stderr. Summaries go
to stderr too, so that ``p4sub gen rules -o -`` can be piped.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import math
import sys
import time
from typing import Callable, Iterator, TextIO

from compiler.base import P4subError, staged
from p4sub import add_command


def _range(text: str) -> tuple[int, int]:
    """``"3"`` or ``"1-12"`` as an inclusive integer range."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
        else:
            lo = hi = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LO-HI, got {text!r}") from None
    if lo > hi:
        raise argparse.ArgumentTypeError(f"empty range {text!r}")
    return lo, hi


def _exponent(text: str) -> float:
    """A Zipf exponent: a finite number >= 0 (0 = uniform); ``nan``, ``inf`` and negatives are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not 0 <= value < math.inf:  # NaN fails it too
        raise argparse.ArgumentTypeError(f"a Zipf exponent must be a finite number >= 0 (0 = uniform), got {text!r}")
    return value


def _ipv4(text: str) -> bytes:
    try:
        return ipaddress.IPv4Address(text).packed
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IPv4 address: {text!r}") from None


def _port(text: str) -> int:
    value = int(text, 0)
    if not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"not a UDP port: {text!r}")
    return value


class _Progress:
    """Percent progress on stderr, at most a few times a second; silent for short runs."""

    def __init__(self, what: str, enabled: bool, stream: TextIO | None = None) -> None:
        self.what = what
        self.enabled = enabled
        self.stream = stream or sys.stderr  # looked up now: a default bound at import goes stale under redirection
        self.start = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.5 and done < total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        end = "\r" if self.stream.isatty() else "\n"
        print(f"{self.what}: {done:,}/{total:,} ({100 * done // max(total, 1)}%, {rate:,.0f}/s)", end=end, file=self.stream, flush=True)

    def finish(self) -> None:
        if self.enabled and self.stream.isatty():
            print(file=self.stream)


#: Counts that size what gen builds or writes, refused at once above their bound (as compile's
#: bounds are, docs/compiler.md "Bounds"): past them a run takes hours or fails on memory after
#: minutes. Per subcommand: option -> (bound, why).
_COUNT = (1_000_000_000, "a billion at about a million a second is a quarter of an hour and tens of GB")
BOUNDS: dict[str, dict[str, tuple[int, str]]] = {
    "itch": {"messages": _COUNT, "symbols": (1_000_000, "symbol names are built in memory")},
    "int": {"packets": _COUNT, "switches": (1_000_000, "each switch has its latency model in memory")},
    "siena": {"packets": _COUNT, "values": (1_000_000, "the distinct values are built in memory"),
              "attributes": (1_000, "a message carries every attribute, 4 or 8 bytes each, in one packet")},
    "rules": {"filters": _COUNT, "symbols": (1_000_000, "symbol names are built in memory"),
              "switches": (1_000_000, "as gen int --switches, whose traces the rules match"),
              "thresholds": (1_000_000, "the thresholds are built in memory"),
              "values": (1_000_000, "the distinct values are built in memory"),
              "attributes": (1_000, "as gen siena --attributes, whose messages the rules match")},
    "spec": {"spec_packets": _COUNT},
}


def max_rule_port() -> int:
    """The largest ``fwd`` port ``compile`` accepts on every target (p4sub's 9-bit default with no
    target, v1model, TNA; minus the ports a target reserves: v1model's drop port 511): gen rules draws
    its ports from 1..--hosts, so that its rules compile whatever --target is given."""
    from compiler.compile import CompileOptions
    from p4sub.compile import TARGETS, reserved_ports, target_port_bits

    highest = []
    for target in TARGETS:
        port = (1 << (target_port_bits(target) or CompileOptions().port_bits)) - 1
        while port in reserved_ports(target):
            port -= 1
        highest.append(port)
    return min(highest)


def check_bounds(command: str, args: argparse.Namespace) -> None:
    """Refuse an option past its bound (:data:`BOUNDS`) before anything is built, saying by how much."""
    for dest, (bound, why) in BOUNDS.get(command, {}).items():
        value = getattr(args, dest, None)
        if isinstance(value, int) and value > bound:
            option = "--packets" if dest == "spec_packets" else f"--{dest}"
            raise P4subError(f"{option} {value:,}: {value / bound:,.1f} times the bound of {bound:,} ({why})")
    if command == "rules" and args.hosts > max_rule_port():
        most = max_rule_port()
        raise P4subError(f"--hosts {args.hosts:,}: rules forward to ports 1..HOSTS and compile accepts ports up to "
                         f"{most} on every target (9-bit ports, 511 is v1model's drop port); {args.hosts - most:,} "
                         f"too many: give --hosts 1 to {most}")


def binary_output(path: str, what: str) -> str:
    """``path`` as the file a binary output (a pcap) goes to: ``-`` is refused rather than written as a
    file of that name, since only ``gen rules`` writes to stdout (text); ``/dev/stdout`` pipes a pcap."""
    if path == "-":
        raise P4subError(f"-o -: {what} is binary and is not written to stdout; give a file name "
                         "(-o /dev/stdout to pipe it)")
    return path


def run_itch(args: argparse.Namespace) -> int:
    from apps.itch.feed import FeedConfig, write_itch_binaryfile, write_itch_feed
    from apps.udp import UdpEndpoints

    check_bounds("itch", args)
    binary_output(args.output, "an ITCH feed (pcap or BinaryFILE)")
    cfg = FeedConfig(messages=args.messages, symbols=args.symbols, zipf=args.zipf, batch=args.batch, seed=args.seed,
                     session=args.session, generator=args.generator)
    cfg.validate()
    progress = _Progress("gen itch", args.progress or (not args.quiet and args.messages >= 1_000_000))
    started = time.monotonic()
    if args.format == "pcap":
        ep = UdpEndpoints(src_ip=args.src_ip, dst_ip=args.dst_ip, src_port=args.src_port, dst_port=args.dst_port)
        with staged(args.output) as tmp:
            s = write_itch_feed(tmp, cfg, ep, progress, udp_checksum=not args.no_udp_checksum)
        summary = f"{s.messages:,} messages in {s.packets:,} packets ({s.bytes / 1e6:.1f} MB)"
    else:
        with staged(args.output) as tmp:
            n = write_itch_binaryfile(tmp, cfg, compress=args.format == "binaryfile.gz", progress=progress)
        summary = f"{n:,} messages (Nasdaq BinaryFILE{', gzip' if args.format == 'binaryfile.gz' else ''})"
    progress.finish()
    if not args.quiet:
        print(f"wrote {args.output}: {summary} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


def run_int(args: argparse.Namespace) -> int:
    from apps.int.generator import IntTraceConfig, write_int_trace

    check_bounds("int", args)
    binary_output(args.output, "an INT trace (pcap)")
    cfg = IntTraceConfig(packets=args.packets, switches=args.switches, hops=args.hops, anomalies=args.anomalies,
                         seed=args.seed, int_port=args.int_port, reports=args.reports, report_port=args.report_port,
                         hosts=args.hosts)
    cfg.validate()
    progress = _Progress("gen int", args.progress or (not args.quiet and args.packets >= 200_000))
    started = time.monotonic()
    with staged(args.output) as tmp:
        s = write_int_trace(tmp, cfg, progress)
    progress.finish()
    if not args.quiet:
        kind = "telemetry reports" if args.reports else "INT-MD packets"
        print(f"wrote {args.output}: {s.packets:,} {kind}, {s.hops:,} hops, {s.anomalous_hops:,} anomalous "
              f"({s.bytes / 1e6:.1f} MB) in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


def run_rules(args: argparse.Namespace) -> int:
    from apps import workloads as w

    lines: Iterator[str]
    check_bounds("rules", args)
    if args.spec_out is not None and args.workload != "siena":
        raise P4subError(f"--spec-out writes the Siena spec; it does not apply to --workload {args.workload}")
    if args.spec_out == "-":
        raise P4subError("--spec-out needs a file name (the rules may be on stdout)")
    spec_text: str | None = None
    if args.workload == "itch":
        lo, hi = args.constraints or (2, 2)
        if lo != hi:
            raise P4subError("itch takes a single --constraints value (1..5)")
        lines = w.itch_rules(args.filters, args.symbols, args.hosts, lo, args.integer_prices, args.symbol_zipf, args.seed)
    elif args.workload == "int":
        lo, hi = args.constraints or (2, 2)
        if lo != hi:
            raise P4subError("int takes a single --constraints value (1..4)")
        lines = w.int_rules(args.filters, args.switches, args.thresholds, args.hosts, args.seed, lo)
    elif args.workload == "hicn":
        if args.constraints is not None:
            raise P4subError("--constraints does not apply to --workload hicn (one exact id per filter)")
        lines = w.hicn_rules(args.filters, args.field, args.id_bits, args.hosts, args.seed)
    else:
        ops = tuple(args.operators.split()) if args.operators else w.SIENA_OPERATORS
        cfg = w.SienaConfig(
            attributes=args.attributes, constraints=args.constraints or (1, 4), operators=ops,
            int_fraction=args.int_fraction, values=args.values, attribute_distribution=args.attribute_distribution,
            value_distribution=args.value_distribution, zipf=args.zipf, header=args.header, hosts=args.hosts,
        )
        lines = w.siena_rules(args.filters, cfg, args.seed)
        if args.spec_out is not None:
            from apps.siena.spec import siena_spec_text

            spec_text = siena_spec_text(cfg)  # before any output: a bad --header writes nothing
    if args.topology is not None:
        lines = w.network_rules(lines, topology_hosts(args.topology), args.hosts_per_rule or (1, 3), args.seed)
    elif args.hosts_per_rule is not None:
        raise P4subError("--hosts-per-rule goes with --topology (network rules name hosts)")
    progress = _Progress("gen rules", args.progress or (not args.quiet and args.filters >= 1_000_000 and args.output != "-"))
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        # The spec is written (to its temporary name, or into a device) before the rules replace their
        # file, and put in place after them: a --spec-out that cannot be written leaves -o as it was.
        if spec_text is not None:
            _write_open(stack, args.spec_out, spec_text)
        written = _write_lines(args.output, lines, lambda n: progress(n, args.filters))
    progress.finish()
    if not args.quiet:
        print(f"wrote {args.output if args.output != '-' else 'stdout'}: {written - 1:,} {args.workload} rules "
              f"in {time.monotonic() - started:.1f} s", file=sys.stderr)
        if spec_text is not None:
            print(f"wrote {args.spec_out}: the Siena spec these rules test", file=sys.stderr)
    return 0


def topology_hosts(text: str) -> list[str]:
    """The host names of a topology as ``p4sub route`` reads it, in its order (h1, h2, ...)."""
    from compiler.network import parse_topology_arg

    return list(parse_topology_arg(text).hosts())


def run_siena(args: argparse.Namespace) -> int:
    from apps import workloads as w
    from apps.siena.trace import DEFAULT_ENDPOINTS, siena_packets, write_siena_pcap

    if args.packets < 0:
        raise P4subError("--packets must be >= 0")
    check_bounds("siena", args)
    binary_output(args.output, "a Siena trace (pcap)")
    # Constraints and operators only shape rules; keep them valid for any --attributes.
    cfg = w.SienaConfig(
        attributes=args.attributes, constraints=(1, max(1, min(4, args.attributes))), int_fraction=args.int_fraction,
        values=args.values, value_distribution=args.value_distribution, zipf=args.zipf, header=args.header,
    )
    started = time.monotonic()
    columns = siena_packets(args.packets, cfg, args.seed)  # validates everything before the file exists
    progress = _Progress("gen siena", args.progress or (not args.quiet and args.packets >= 1_000_000))
    with staged(args.output) as tmp:
        n = write_siena_pcap(tmp, columns, DEFAULT_ENDPOINTS, udp_checksum=not args.no_udp_checksum, progress=progress)
    progress.finish()
    if not args.quiet:
        print(f"wrote {args.output}: {n:,} Siena messages of {cfg.attributes} attributes "
              f"in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


def run_spec(args: argparse.Namespace) -> int:
    """``p4sub gen --spec SPEC -o FILE``: random packets along the spec's parse graph, as pcap."""
    from apps.pcap import write_pcap
    from compiler.spec import read_spec
    from runtime.spec_gen import SpecPacketGenerator, rule_constants

    if args.gen_command is not None:
        raise P4subError(f"--spec generates packets of the spec's own protocol; it does not go with gen {args.gen_command}")
    if not args.spec_output:
        raise P4subError("gen --spec needs -o FILE (the pcap to write)")
    if args.spec_packets < 0:
        raise P4subError("--packets must be >= 0")
    check_bounds("spec", args)
    binary_output(args.spec_output, "a trace (pcap)")
    spec = read_spec(args.spec)
    constants = None
    if args.spec_rules:
        from compiler.rules import check_rules, read_rules

        constants = rule_constants(check_rules(read_rules(args.spec_rules), spec))
    gen = SpecPacketGenerator(spec, args.spec_seed, constants)
    first = gen.packet() if args.spec_packets else None  # a spec no walk can accept fails before the file exists
    progress = _Progress("gen --spec", not args.spec_quiet and args.spec_packets >= 100_000)
    start_ns, gap_ns = 1_548_806_400 * 10**9, 1_000

    def frames() -> Iterator[tuple[int, bytes]]:
        for i in range(args.spec_packets):
            if i % 10_000 == 0:
                progress(i, args.spec_packets)
            yield start_ns + i * gap_ns, first if i == 0 else gen.packet()

    started = time.monotonic()
    with staged(args.spec_output) as tmp:
        n = write_pcap(tmp, frames())
    progress.finish()
    if not args.spec_quiet:
        print(f"wrote {args.spec_output}: {n:,} packets of {spec.path} in {time.monotonic() - started:.1f} s",
              file=sys.stderr)
    return 0


def _without_spec(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A subcommand's runner that refuses ``gen --spec`` before it (the options would be ignored)."""
    def checked(args: argparse.Namespace) -> int:
        if getattr(args, "spec", None):
            raise P4subError(f"--spec generates packets of the spec's own protocol; it does not go with "
                             f"gen {args.gen_command}")
        return run(args)
    return checked


def _write_open(stack: contextlib.ExitStack, path: str, text: str) -> None:
    """Write ``text`` for ``path`` under ``stack``: it is renamed into place when the stack closes
    without an error (a device is written at once)."""
    try:
        with open(stack.enter_context(staged(path)), "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise P4subError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _write_lines(path: str, lines: Iterator[str], progress: Callable[[int], None]) -> int:
    # Validation errors surface on the first line, before the output file is created.
    first = next(lines)
    with contextlib.ExitStack() as stack:
        try:
            out: TextIO = (sys.stdout if path == "-" else
                           stack.enter_context(open(stack.enter_context(staged(path)), "w", encoding="utf-8",
                                                    buffering=1 << 20)))
        except OSError as exc:
            raise P4subError(f"{path}: cannot write: {exc.strerror or exc}") from None
        count = 1
        out.write(first + "\n")
        for line in lines:
            out.write(line + "\n")
            count += 1
            if count % 65536 == 0:
                progress(count)
    return count


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "gen", "generate ITCH feeds, INT traces, Siena messages and subscription workloads",
        "p4sub gen itch --messages 1000000 --symbols 100 --zipf 1.1 --batch 1-12 --seed 1 -o feed.pcap",
    )
    parser.add_argument("--spec", help="write packets of this spec's protocol: random walks of its parse graph, "
                                       "random values for the queried fields (needs -o)")
    parser.add_argument("--packets", dest="spec_packets", type=int, default=10_000, help="with --spec: packets (10000)")
    parser.add_argument("--seed", dest="spec_seed", type=int, default=0, help="with --spec: random seed (0)")
    parser.add_argument("--rules", dest="spec_rules", metavar="RULES",
                        help="with --spec: draw the queried fields near these rules' constants half of the time")
    parser.add_argument("-o", "--output", dest="spec_output", help="with --spec: the pcap to write")
    parser.add_argument("-q", "--quiet", dest="spec_quiet", action="store_true", help="with --spec: no summary")
    parser.set_defaults(func=lambda args: run_spec(args) if args.spec else (parser.print_help(), 2)[1])
    gen = parser.add_subparsers(dest="gen_command", metavar="WHAT")

    itch = add_command(
        gen, "itch", "a TotalView-ITCH 5.0 trading day as MoldUDP64/UDP/IPv4/Ethernet (pcap) or BinaryFILE",
        "p4sub gen itch --messages 10000000 --symbols 100 --zipf 1.1 --batch 1-12 --seed 1 -o feed.pcap",
    )
    itch.add_argument("--messages", type=int, default=100_000, help="ITCH messages in all, system events included (100000)")
    itch.add_argument("--symbols", type=int, default=100, help="stock symbols (100)")
    itch.add_argument("--zipf", type=_exponent, default=1.1, help="Zipf exponent of symbol popularity, 0 = uniform (1.1)")
    itch.add_argument("--batch", type=_range, default=(1, 12), help="messages per MoldUDP64 packet, uniform in LO-HI (1-12)")
    itch.add_argument("--seed", type=int, default=0, help="random seed (0)")
    itch.add_argument("--format", choices=("pcap", "binaryfile", "binaryfile.gz"), default="pcap", help="output format (pcap)")
    itch.add_argument("--generator", choices=("v2", "v1"), default="v2",
                      help="feed format version: v2 vectorised (default), v1 the feeds of p4sub before it (70k msg/s)")
    itch.add_argument("--session", default="0000000001", help="MoldUDP64 session, 10 characters (0000000001)")
    itch.add_argument("--src-ip", type=_ipv4, default=_ipv4("10.0.0.1"), help="IPv4 source (10.0.0.1)")
    itch.add_argument("--dst-ip", type=_ipv4, default=_ipv4("233.54.12.111"), help="IPv4 destination (233.54.12.111)")
    itch.add_argument("--src-port", type=_port, default=50000, help="UDP source port (50000)")
    itch.add_argument("--dst-port", type=_port, default=1234, help="UDP destination port (1234)")
    itch.add_argument("--no-udp-checksum", action="store_true", help="send UDP checksum 0 instead of computing it")
    itch.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")
    itch.add_argument("--progress", action="store_true", help="report progress on stderr even for short runs")
    itch.add_argument("-o", "--output", required=True, help="output file")
    itch.set_defaults(func=_without_spec(run_itch))

    intp = add_command(
        gen, "int", "INT-MD packets over UDP (or Telemetry Report v2.0 packets) with anomalous hop latencies",
        "p4sub gen int --packets 100000 --switches 100 --hops 1-5 --anomalies 0.01 --seed 1 -o int.pcap",
    )
    intp.add_argument("--packets", type=int, default=10_000, help="packets (10000)")
    intp.add_argument("--switches", type=int, default=100, help="switch ids 1..N (100)")
    intp.add_argument("--hops", type=_range, default=(1, 5), help="hops per packet, uniform in LO-HI, at most 8 (1-5)")
    intp.add_argument("--anomalies", type=float, default=0.01, help="fraction of hops with an anomalous latency (0.01)")
    intp.add_argument("--hosts", type=int, default=200, help="end hosts sending the traffic (200)")
    intp.add_argument("--seed", type=int, default=0, help="random seed (0)")
    intp.add_argument("--int-port", type=_port, default=0x1234, help="UDP port announcing INT (4660 = 0x1234)")
    intp.add_argument("--reports", action="store_true", help="write Telemetry Report v2.0 packets as a collector receives them")
    intp.add_argument("--report-port", type=_port, default=32766, help="UDP port of telemetry reports (32766)")
    intp.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")
    intp.add_argument("--progress", action="store_true", help="report progress on stderr even for short runs")
    intp.add_argument("-o", "--output", required=True, help="output pcap")
    intp.set_defaults(func=_without_spec(run_int))

    siena = add_command(
        gen, "siena", "Siena-style messages over UDP (pcap), drawn like the constants of gen rules --workload siena",
        "p4sub gen siena --packets 100000 --attributes 10 --int-fraction 0.7 --values 1000 --seed 1 -o siena.pcap",
    )
    siena.add_argument("--packets", type=int, default=10_000, help="messages, one per packet (10000)")
    siena.add_argument("--attributes", type=int, default=10, help="attributes per message (10)")
    siena.add_argument("--int-fraction", type=float, default=0.7, help="share of integer attributes (0.7)")
    siena.add_argument("--values", type=int, default=1000, help="distinct values per attribute (1000)")
    siena.add_argument("--value-distribution", choices=("uniform", "zipf"), default="uniform", help="(uniform)")
    siena.add_argument("--zipf", type=_exponent, default=1.0, help="Zipf exponent of values (1.0)")
    siena.add_argument("--header", default="siena", help="header name of the attributes (siena)")
    siena.add_argument("--seed", type=int, default=0, help="random seed; the rules' seed shares their words (0)")
    siena.add_argument("--no-udp-checksum", action="store_true", help="send UDP checksum 0 instead of computing it")
    siena.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")
    siena.add_argument("--progress", action="store_true", help="report progress on stderr even for short runs")
    siena.add_argument("-o", "--output", required=True, help="output pcap")
    siena.set_defaults(func=_without_spec(run_siena))

    rules = add_command(
        gen, "rules", "subscription workloads: Camus ITCH, INT, hICN, Siena-style",
        "p4sub gen rules --workload itch --filters 100000 --symbols 100 --seed 1 -o rules.sub",
    )
    rules.add_argument("--workload", choices=("itch", "int", "hicn", "siena"), required=True, help="which workload")
    rules.add_argument("--filters", type=int, required=True, help="number of rules")
    rules.add_argument("--seed", type=int, default=0, help="random seed (0)")
    rules.add_argument("--hosts", type=int, default=200, help="fwd() ports drawn from 1..HOSTS (200)")
    rules.add_argument("--topology", metavar="TOPOLOGY",
                       help="write network rules for p4sub route over this topology (fat-tree:4, a .topo file, ...): "
                            "each rule forwards to --hosts-per-rule of its hosts, by name (fwd(h3, h12))")
    rules.add_argument("--hosts-per-rule", type=_range, default=None, metavar="LO-HI",
                       help="with --topology: subscribing hosts per rule, drawn uniformly (1-3)")
    rules.add_argument("--constraints", type=_range, help="constraints per filter: itch N in 1..5 (2), int N in 1..4 (2), siena LO-HI (1-4)")
    rules.add_argument("--symbols", type=int, default=100, help="itch: stock symbols, as gen itch names them (100)")
    rules.add_argument("--integer-prices", action="store_true", help="itch: whole-dollar price thresholds")
    rules.add_argument("--symbol-zipf", type=_exponent, default=0.0, help="itch: Zipf exponent of symbol choice (0 = uniform)")
    rules.add_argument("--switches", type=int, default=100, help="int: switch ids 1..N (100)")
    rules.add_argument("--thresholds", type=int, default=1000, help="int: distinct latency thresholds, 1 us..10 ms (1000)")
    rules.add_argument("--field", default="hicn.name_id", help="hicn: the exact-match field (hicn.name_id)")
    rules.add_argument("--id-bits", type=int, default=32, help="hicn: content id width in bits (32)")
    rules.add_argument("--attributes", type=int, default=10, help="siena: attributes (10)")
    rules.add_argument("--operators", help='siena: operators, e.g. "= < > != prefix" (all)')
    rules.add_argument("--int-fraction", type=float, default=0.7, help="siena: share of integer attributes (0.7)")
    rules.add_argument("--values", type=int, default=1000, help="siena: distinct values per attribute (1000)")
    rules.add_argument("--attribute-distribution", choices=("uniform", "zipf"), default="uniform", help="siena (uniform)")
    rules.add_argument("--value-distribution", choices=("uniform", "zipf"), default="uniform", help="siena (uniform)")
    rules.add_argument("--zipf", type=_exponent, default=1.0, help="siena: Zipf exponent (1.0)")
    rules.add_argument("--header", default="siena", help="siena: header name of the attributes (siena)")
    rules.add_argument("--spec-out", metavar="FILE", help="siena: also write the matching P4 spec to FILE")
    rules.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")
    rules.add_argument("--progress", action="store_true", help="report progress on stderr even for short runs")
    rules.add_argument("-o", "--output", default="-", help="output file, - for stdout (-)")
    rules.set_defaults(func=_without_spec(run_rules))
