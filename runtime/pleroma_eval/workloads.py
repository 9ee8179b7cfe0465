"""The workloads of ``p4sub eval pleroma``: host subscriptions and the events published to them.

* ``itch`` and ``siena``: the rules of ``p4sub gen rules --workload itch|siena`` spread over the
  topology's hosts (``apps.workloads.network_rules``), events drawn like their constants (ITCH:
  stocks Zipf 1.1 as the feed generator draws them, prices, shares and sides uniform; Siena:
  ``apps.siena.trace.siena_packets``);
* ``balogh``: the thesis's synthetic space (S2 §6.1: six dimensions, values 0..4095), subscriptions
  uniform (1 or 2 dimensions each, a range of 5 to 30 % of the domain on each: the thesis does not
  give its subscriptions' shape), events around five Zipf-weighted hotspots (normal, σ = 2 % of the
  domain): the *mixed* configuration, where the history-based optimiser is said to give "almost no
  false positives at all".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apps import workloads as w
from apps.itch.symbols import symbol_names
from apps.siena.spec import siena_spec_text
from apps.siena.trace import siena_packets
from compiler.base import P4subError
from compiler.network import HOST_ID_BITS, Topology, parse_network_rules
from compiler.rules import TypedRules, check_rules, encode_string
from compiler.spec import Spec, parse_spec

WORKLOADS = ("itch", "siena", "balogh")
BALOGH_DIMENSIONS = 6
BALOGH_DOMAIN = 4096
ITCH_SYMBOLS = 50
SIENA = w.SienaConfig(attributes=6, constraints=(1, 3), values=200)

BALOGH_SPEC = """
header ev_t { """ + " ".join(f"bit<16> d{i};" for i in range(BALOGH_DIMENSIONS)) + """ }
struct headers_t { ev_t ev; }
parser P(packet_in pkt, out headers_t hdr) { state start { pkt.extract(hdr.ev); transition accept; } }
""" + "\n".join(f"@query_field(ev.d{i})" for i in range(BALOGH_DIMENSIONS)) + "\n"


@dataclass
class Workload:
    name: str
    spec: Spec
    typed: TypedRules
    rules_text: str
    columns: dict[str, np.ndarray]  # events, one row each
    event_bytes: int  # an event's packet on the wire (IPv4), for the header overhead
    spec_text: str = ""  # the spec's source, for the network directories --programs writes


def make(name: str, topology: Topology, filters: int, events: int, seed: int) -> Workload:
    """``filters`` host subscriptions over ``topology`` and ``events`` events, all from ``seed``."""
    hosts = topology.hosts()
    rng = np.random.default_rng([seed, 0x9E1])
    if name == "itch":
        from compiler.spec import read_spec
        from pathlib import Path

        import apps.itch as itch_pkg

        spec_path = Path(itch_pkg.__file__).parent / "itch.p4"
        spec = read_spec(spec_path)
        spec_text = spec_path.read_text(encoding="utf-8")
        lines = w.itch_rules(filters, ITCH_SYMBOLS, len(hosts), 2, False, 0.0, seed)
        names = symbol_names(ITCH_SYMBOLS)
        weights = 1.0 / np.arange(1, ITCH_SYMBOLS + 1) ** 1.1
        sym = rng.choice(ITCH_SYMBOLS, events, p=weights / weights.sum())
        codes = np.array([encode_string(s, 64) for s in names], dtype=np.uint64)
        columns = {"add_order.stock": codes[sym],
                   "add_order.price": rng.integers(1, w.MAX_PRICE_RAW, events).astype(np.uint64),
                   "add_order.shares": rng.integers(1, 10_000, events).astype(np.uint64),
                   "add_order.buy_sell_indicator": np.full(events, ord("B"), dtype=np.uint64)}
        size = 14 + 20 + 8 + 20 + 2 + 36  # Ethernet, IPv4, UDP, MoldUDP64, one add-order message
    elif name == "siena":
        spec_text = siena_spec_text(SIENA)
        spec = parse_spec(spec_text, "siena.p4")
        lines = w.siena_rules(filters, SIENA, seed)
        columns = siena_packets(events, SIENA, seed)
        size = 14 + 20 + 8 + sum(4 if "i" in f.split(".")[1] else 8 for f in columns)
    elif name == "balogh":
        spec_text = BALOGH_SPEC
        spec = parse_spec(spec_text, "balogh.p4")
        lines = _balogh_rules(filters, rng)
        columns = _balogh_events(events, rng)
        size = 14 + 20 + 8 + 2 * BALOGH_DIMENSIONS
    else:
        raise P4subError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    text = w.workload_text(w.network_rules(lines, hosts, (1, 1), seed))
    typed = check_rules(parse_network_rules(text, topology, f"<{name} rules>"), spec, port_bits=HOST_ID_BITS)
    return Workload(name, spec, typed, text, columns, size, spec_text)


def _balogh_rules(filters: int, rng: np.random.Generator):
    yield f"# workload: balogh filters={filters}"
    for _ in range(filters):
        dims = rng.choice(BALOGH_DIMENSIONS, int(rng.integers(1, 3)), replace=False)
        parts = []
        for d in sorted(dims):
            width = int(rng.integers(BALOGH_DOMAIN // 20, BALOGH_DOMAIN * 3 // 10))
            lo = int(rng.integers(0, BALOGH_DOMAIN - width))
            parts.append(f"ev.d{d} >= {lo} and ev.d{d} < {lo + width}")
        yield f"{' and '.join(parts)}: fwd(1);"


def _balogh_events(n: int, rng: np.random.Generator, hotspots: int = 5) -> dict[str, np.ndarray]:
    centres = rng.integers(0, BALOGH_DOMAIN, (hotspots, BALOGH_DIMENSIONS))
    weights = 1.0 / np.arange(1, hotspots + 1)
    which = rng.choice(hotspots, n, p=weights / weights.sum())
    points = centres[which] + rng.normal(0, BALOGH_DOMAIN * 0.02, (n, BALOGH_DIMENSIONS))
    points = np.clip(np.rint(points), 0, BALOGH_DOMAIN - 1).astype(np.uint64)
    return {f"ev.d{i}": points[:, i] for i in range(BALOGH_DIMENSIONS)}
