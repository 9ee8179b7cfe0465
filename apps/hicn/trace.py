"""hICN Interest traces with hot and cold content (apps/hicn/hicn.p4).

``python -m apps.hicn.trace OUT.pcap [--seconds S] [--rate R] [--hot H] [--cold C] [--hot-share F]``
writes Interests (Ethernet, IPv6, the hICN transport header) arriving as a Poisson process of ``R``
per second: a share ``F`` of them for ``H`` hot contents, the rest for ``C`` cold ones, each
content named by an IPv6 address in ``b001::/16`` and each Interest asking for the next segment of
its content. A few Interests name content outside the catalogue (``9001::/16``). The hot contents
pass apps/hicn/rules.sub's threshold (50 Interests in a second) early in every second; the cold
ones never do. The trace is seeded and deterministic.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
from dataclasses import dataclass

CATALOGUE = 0xB001 << 112
OTHER = 0x9001 << 112
PROTO_HICN = 6


def content_name(index: int, prefix: int = CATALOGUE) -> int:
    """The IPv6 address that names content ``index`` (a /64 per content under the prefix)."""
    return prefix | (index + 1) << 64


def interest_frame(name: int, segment: int, consumer: int = 1) -> bytes:
    """One Interest for ``segment`` of the content named ``name`` (a 128-bit IPv6 address)."""
    hicn = struct.pack("!HHIIBBHHH", 40000, 9695, segment, 0, 5 << 4, 0x02, 1000, 0, 0)
    ipv6 = struct.pack("!IHBB16s16s", 6 << 28, len(hicn), PROTO_HICN, 64,
                       (0xFD00 << 112 | consumer).to_bytes(16, "big"), name.to_bytes(16, "big"))
    eth = bytes.fromhex("020000000002" "020000000001" "86dd")
    return eth + ipv6 + hicn


@dataclass(frozen=True)
class TraceConfig:
    seconds: float = 5.0
    rate: float = 2000.0          # Interests per second, all contents
    hot: int = 5                  # hot contents
    cold: int = 2000              # cold contents
    hot_share: float = 0.6        # share of Interests for the hot contents
    other_share: float = 0.02     # share for names outside the catalogue
    seed: int = 0


def interests(config: TraceConfig = TraceConfig()) -> list[tuple[int, int, int]]:
    """``(timestamp_ns, name, segment)`` in time order."""
    rng = random.Random(config.seed)
    segments: dict[int, int] = {}
    out = []
    t = 0.0
    while True:
        t += rng.expovariate(config.rate)
        if t >= config.seconds:
            return out
        roll = rng.random()
        if roll < config.other_share:
            name = content_name(rng.randrange(100), OTHER)
        elif roll < config.other_share + config.hot_share:
            name = content_name(rng.randrange(config.hot))
        else:
            name = content_name(config.hot + rng.randrange(config.cold))
        segments[name] = segments.get(name, -1) + 1
        out.append((int(t * 1e9), name, segments[name]))


def trace(config: TraceConfig = TraceConfig()) -> list[tuple[int, bytes]]:
    """``(timestamp_ns, frame)`` for :func:`apps.pcap.write_pcap`."""
    return [(ts, interest_frame(name, seg)) for ts, name, seg in interests(config)]


def main(argv: list[str] | None = None) -> int:
    from apps.pcap import write_pcap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seconds", type=float, default=TraceConfig.seconds)
    parser.add_argument("--rate", type=float, default=TraceConfig.rate)
    parser.add_argument("--hot", type=int, default=TraceConfig.hot)
    parser.add_argument("--cold", type=int, default=TraceConfig.cold)
    parser.add_argument("--hot-share", type=float, default=TraceConfig.hot_share)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.hot < 1 or args.cold < 1 or not 0 <= args.hot_share <= 1:
        parser.error("seconds and rate must be positive, hot and cold at least 1, hot-share in [0, 1]")
    config = TraceConfig(args.seconds, args.rate, args.hot, args.cold, args.hot_share, seed=args.seed)
    n = write_pcap(args.out, trace(config))
    print(f"{args.out}: {n} Interests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
