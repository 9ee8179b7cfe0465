"""Subscription workloads: seeded generators of rule text in the p4sub subscription language.

One rule per line, ``filter: actions;``. The generators yield lines so that a million rules
stream to disk; :func:`workload_text` joins them for small uses. Every generator takes a
``seed`` and is deterministic.

* ``itch``  - Camus' market-data workload: ``add_order.stock == "S" and add_order.price > P:
  fwd(H);`` with S among the feed generator's symbols (so rules match generated feeds), P in
  (0, 1000) dollars (4 decimals or whole dollars) and H among the hosts; 1 to 5 constraints.
* ``int``   - ``int_hop.switch_id == X and int_hop.hop_latency > L: fwd(H);`` with X among the
  switches and L among log-spaced latency thresholds (ns) from 1 us to 10 ms, so that some
  rules fire on normal traffic and most only on anomalies of :mod:`apps.int.generator`.
* ``hicn``  - exact matches on distinct content ids: ``hicn.name_id == ID: fwd(H);``.
* ``siena`` - the knobs of Carzaniga's Siena Synthetic Benchmark Generator: typed attributes,
  operators ``= < > != prefix``, a range of constraints per filter, uniform or Zipf choice of
  attributes and values (ecosystem digest §6.6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from apps.itch.symbols import symbol_names
from compiler.base import P4subError

ITCH_PRICE_SCALE = 10_000
MAX_PRICE_RAW = 1000 * ITCH_PRICE_SCALE


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise P4subError(message)


def _price(raw: int) -> str:
    """A Price(4) value as the shortest decimal the language reads back exactly (50.25, 7)."""
    whole, frac = divmod(raw, ITCH_PRICE_SCALE)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:04d}".rstrip("0")


def _zipf_choice(rng: np.random.Generator, n: int, exponent: float, size: int) -> np.ndarray:
    """Indices 0..n-1 with P(k) proportional to (k+1)^-exponent (exponent 0 is uniform)."""
    if exponent == 0:
        return rng.integers(0, n, size)
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights / weights.sum())
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), n - 1)


def _header(name: str, **params: object) -> str:
    return f"# workload: {name} " + " ".join(f"{k}={v}" for k, v in params.items())


BLOCK = 65536


def itch_rules(
    filters: int,
    symbols: int = 100,
    hosts: int = 200,
    constraints: int = 2,
    integer_prices: bool = False,
    symbol_zipf: float = 0.0,
    seed: int = 0,
) -> Iterator[str]:
    """Camus ITCH rules. Constraints, in order: stock ==, price >, shares >, buy_sell_indicator ==,
    price < (an upper band above the lower bound)."""
    _check(filters >= 0, "--filters must be >= 0")
    _check(symbols >= 1 and hosts >= 1, "--symbols and --hosts must be at least 1")
    _check(1 <= constraints <= 5, "ITCH filters have 1 to 5 constraints")
    rng = np.random.default_rng(seed)
    names = symbol_names(symbols)
    yield _header("itch", filters=filters, symbols=symbols, hosts=hosts, constraints=constraints,
                  integer_prices=integer_prices, symbol_zipf=symbol_zipf, seed=seed)
    done = 0
    while done < filters:
        n = min(BLOCK, filters - done)
        sym = _zipf_choice(rng, symbols, symbol_zipf, n)
        if integer_prices:
            low = rng.integers(1, 1000, n) * ITCH_PRICE_SCALE
        else:
            low = rng.integers(1, MAX_PRICE_RAW, n)
        host = rng.integers(1, hosts + 1, n)
        shares = rng.integers(1, 100, n) * 100
        side = rng.integers(0, 2, n)
        width = rng.integers(1, 51, n) * ITCH_PRICE_SCALE if integer_prices else rng.integers(1, 5001, n) * 100  # $0.01-$50
        for i in range(n):
            parts = [f'add_order.stock == "{names[sym[i]]}"']
            if constraints >= 2:
                parts.append(f"add_order.price > {_price(int(low[i]))}")
            if constraints >= 3:
                parts.append(f"add_order.shares > {int(shares[i])}")
            if constraints >= 4:
                parts.append(f'add_order.buy_sell_indicator == "{"BS"[side[i]]}"')
            if constraints >= 5:
                parts.append(f"add_order.price < {_price(min(MAX_PRICE_RAW - 1, int(low[i] + width[i])))}")
            yield f"{' and '.join(parts)}: fwd({int(host[i])});"
        done += n


def latency_thresholds(count: int, low_ns: int = 1_000, high_ns: int = 10_000_000) -> list[int]:
    """``count`` distinct latency thresholds, log-spaced between ``low_ns`` and ``high_ns``."""
    _check(count >= 1, "--thresholds must be at least 1")
    values = sorted({int(round(v)) for v in np.geomspace(low_ns, high_ns, count)})
    extra = high_ns
    while len(values) < count:  # rounding merged some neighbours: extend above the range
        extra += 1
        values.append(extra)
    return values


#: Queue-occupancy thresholds (packets), log-spaced: the INT generator's queues hold a few packets
#: normally and 2,000 to 20,000 in an anomaly (apps.int.generator).
OCCUPANCY_LEVELS = np.unique(np.geomspace(1, 20_000, 200).astype(np.int64))


def int_rules(filters: int, switches: int = 100, thresholds: int = 1000, hosts: int = 200, seed: int = 0,
              constraints: int = 2) -> Iterator[str]:
    """Camus INT rules on the last hop pushed. Constraints, in order: switch_id ==, hop_latency >,
    queue_occupancy >, hop_latency < (an upper band above the lower bound): the spec's three query
    fields, the latency twice as a band. Two (Camus's) draw the same rules as before there was a choice."""
    _check(filters >= 0, "--filters must be >= 0")
    _check(switches >= 1 and hosts >= 1, "--switches and --hosts must be at least 1")
    _check(1 <= constraints <= 4, "INT filters have 1 to 4 constraints")
    levels = latency_thresholds(thresholds)
    rng = np.random.default_rng(seed)
    yield _header("int", filters=filters, switches=switches, thresholds=thresholds, hosts=hosts, seed=seed,
                  constraints=constraints)
    done = 0
    while done < filters:
        n = min(BLOCK, filters - done)
        sw = rng.integers(1, switches + 1, n)
        lat = rng.integers(0, len(levels), n)
        host = rng.integers(1, hosts + 1, n)
        if constraints >= 3:  # drawn after the two-constraint draws, which stay as they were
            occupancy = rng.choice(OCCUPANCY_LEVELS, n)
            band = rng.integers(1, 11, n)  # the upper bound, 1 to 10 thresholds above the lower
        for i in range(n):
            parts = [f"int_hop.switch_id == {int(sw[i])}"]
            if constraints >= 2:
                parts.append(f"int_hop.hop_latency > {levels[lat[i]]}")
            if constraints >= 3:
                parts.append(f"int_hop.queue_occupancy > {int(occupancy[i])}")
            if constraints >= 4:
                upper = levels[lat[i] + band[i]] if lat[i] + band[i] < len(levels) else levels[-1] + int(band[i])
                parts.append(f"int_hop.hop_latency < {upper}")
            yield f"{' and '.join(parts)}: fwd({int(host[i])});"
        done += n


def hicn_rules(filters: int, field: str = "hicn.name_id", id_bits: int = 32, hosts: int = 200, seed: int = 0) -> Iterator[str]:
    """Exact matches on ``filters`` distinct random ids of ``id_bits`` bits."""
    _check(filters >= 0, "--filters must be >= 0")
    _check("." in field and " " not in field, f"--field must be header.field, got {field!r}")
    _check(1 <= id_bits <= 128, "--id-bits must be 1..128")
    _check(filters <= 1 << id_bits, f"cannot draw {filters} distinct ids from {id_bits} bits")
    rng = np.random.default_rng(seed)
    yield _header("hicn", filters=filters, field=field, id_bits=id_bits, hosts=hosts, seed=seed)
    seen: set[int] = set()
    done = 0
    while done < filters:
        n = min(BLOCK, filters - done)
        host = rng.integers(1, hosts + 1, n)
        ids: list[int] = []
        while len(ids) < n:
            for chunk in _random_ids(rng, id_bits, n - len(ids)):
                if chunk not in seen:
                    seen.add(chunk)
                    ids.append(chunk)
        for i in range(n):
            yield f"{field} == {ids[i]}: fwd({int(host[i])});"
        done += n


def _random_ids(rng: np.random.Generator, bits: int, n: int) -> list[int]:
    words = math.ceil(bits / 32)
    raw = rng.integers(0, 1 << 32, (n, words), dtype=np.uint64)
    out = []
    for row in raw.tolist():
        v = 0
        for w in row:
            v = (v << 32) | w
        out.append(v >> (32 * words - bits))
    return out


SIENA_OPERATORS = ("=", "<", ">", "!=", "prefix")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class SienaConfig:
    """Knobs of the Siena Synthetic Benchmark Generator (defaults in parentheses in the CLI)."""

    attributes: int = 10
    constraints: tuple[int, int] = (1, 4)
    operators: tuple[str, ...] = SIENA_OPERATORS
    int_fraction: float = 0.7
    values: int = 1000
    attribute_distribution: str = "uniform"
    value_distribution: str = "uniform"
    zipf: float = 1.0
    header: str = "siena"
    hosts: int = 200

    def validate(self) -> None:
        lo, hi = self.constraints
        _check(self.attributes >= 1, "--attributes must be at least 1")
        _check(1 <= lo <= hi <= self.attributes, f"--constraints {lo}-{hi} must lie in 1..{self.attributes} (distinct attributes per filter)")
        bad = [op for op in self.operators if op not in SIENA_OPERATORS]
        _check(not bad and bool(self.operators), f"unknown operators {bad}; choose among {' '.join(SIENA_OPERATORS)}")
        _check(0.0 <= self.int_fraction <= 1.0, "--int-fraction must be between 0 and 1")
        _check(self.values >= 2, "--values must be at least 2")
        for d in (self.attribute_distribution, self.value_distribution):
            _check(d in ("uniform", "zipf"), f"distribution must be uniform or zipf, got {d!r}")
        _check(self.header.isidentifier(), f"--header must be an identifier, got {self.header!r}")
        int_ops = [op for op in self.operators if op != "prefix"]
        _check(bool(int_ops) or self.int_fraction == 0.0, "integer attributes need one of = < > !=")
        _check(self.hosts >= 1, "--hosts must be at least 1")


def siena_words(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct lower-case words of 2 to 8 letters (string attribute values)."""
    rng = np.random.default_rng(seed + 0x5E7A)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        length = int(rng.integers(2, 9))
        w = "".join(_LETTERS[i] for i in rng.integers(0, 26, length))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def siena_rules(filters: int, config: SienaConfig = SienaConfig(), seed: int = 0) -> Iterator[str]:
    """Siena-style filters. Attribute ``k`` is an integer (32-bit) if ``k < int_fraction *
    attributes`` and a string (up to 8 characters) otherwise; ``prefix`` applies to strings,
    ``< >`` to integers, ``= !=`` to both. Integer values lie in 1..values; string values are
    ``values`` distinct words; with ``zipf`` distributions rank 1 is the most frequent."""
    _check(filters >= 0, "--filters must be >= 0")
    config.validate()
    rng = np.random.default_rng(seed)
    n_int = round(config.int_fraction * config.attributes)
    names = [f"{config.header}.{'i' if k < n_int else 's'}{k}" for k in range(config.attributes)]
    words = siena_words(config.values, seed)
    int_ops = [op for op in config.operators if op != "prefix"]
    str_ops = [op for op in config.operators if op not in ("<", ">")] or ["="]
    attr_zipf = config.zipf if config.attribute_distribution == "zipf" else 0.0
    value_zipf = config.zipf if config.value_distribution == "zipf" else 0.0
    lo, hi = config.constraints
    ops_text = "[" + " ".join(config.operators) + "]"
    yield _header("siena", filters=filters, attributes=config.attributes, constraints=f"{lo}-{hi}",
                  operators=ops_text, int_fraction=config.int_fraction, values=config.values,
                  attribute_distribution=config.attribute_distribution, value_distribution=config.value_distribution,
                  zipf=config.zipf, seed=seed)
    # Attributes are drawn without replacement with probability proportional to their weight:
    # sorting log-weights plus Gumbel noise gives exactly that (the Gumbel top-k trick).
    log_w = -attr_zipf * np.log(np.arange(1, config.attributes + 1, dtype=np.float64))
    done = 0
    while done < filters:
        n = min(BLOCK // 4, filters - done)
        count = rng.integers(lo, hi + 1, n)
        order = np.argsort(-(log_w + rng.gumbel(size=(n, config.attributes))), axis=1)[:, :hi]
        value = _zipf_choice(rng, config.values, value_zipf, n * hi).reshape(n, hi)
        int_op = rng.integers(0, len(int_ops), (n, hi)) if int_ops else np.zeros((n, hi), dtype=np.int64)
        str_op = rng.integers(0, len(str_ops), (n, hi))
        cut = rng.random((n, hi))
        host = rng.integers(1, config.hosts + 1, n)
        for i in range(n):
            parts = []
            picked = sorted(range(int(count[i])), key=lambda j: order[i, j])
            for j in picked:
                a = int(order[i, j])
                if a < n_int:
                    op = int_ops[int_op[i, j]]
                    parts.append(f"{names[a]} {'==' if op == '=' else op} {int(value[i, j]) + 1}")
                else:
                    op = str_ops[str_op[i, j]]
                    word = words[value[i, j]]
                    if op == "prefix":
                        word = word[: 1 + int(cut[i, j] * len(word))]
                    parts.append(f'{names[a]} {"==" if op == "=" else op} "{word}"')
            yield f"{' and '.join(parts)}: fwd({int(host[i])});"
        done += n


def network_rules(lines: Iterator[str], hosts: Sequence[str], per_rule: tuple[int, int] = (1, 3),
                  seed: int = 0) -> Iterator[str]:
    """A workload's rules as network rules for ``p4sub route``: each rule's ``fwd(PORT)`` becomes
    ``fwd(HOST, ...)`` naming ``per_rule`` (LO-HI, drawn uniformly) distinct random ``hosts``.

    The filters are the workload's own, drawn from its seed; the hosts come from a stream of their
    own (``seed`` offset), so the same filters can be spread over another topology."""
    lo, hi = per_rule
    _check(bool(hosts), "the topology has no hosts")
    _check(1 <= lo <= hi <= len(hosts), f"--hosts-per-rule {lo}-{hi} must lie in 1..{len(hosts)} (the topology's hosts)")
    rng = np.random.default_rng(seed + 0x40575)
    for line in lines:
        if line.startswith("#"):
            yield f"{line} hosts_per_rule={lo}-{hi}"
            continue
        head, found, _ = line.rpartition("fwd(")
        _check(bool(found), f"a workload rule without fwd(): {line!r}")
        picked = rng.choice(len(hosts), int(rng.integers(lo, hi + 1)), replace=False)
        yield f"{head}fwd({', '.join(hosts[i] for i in sorted(picked))});"


WORKLOADS = ("itch", "int", "hicn", "siena")


def workload_text(lines: Iterator[str] | Sequence[str]) -> str:
    return "\n".join(lines) + "\n"
