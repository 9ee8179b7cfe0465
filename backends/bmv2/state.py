"""Counters on v1model: registers, the ingress timestamp, window roll-over, then the values the tables match.

For each :class:`compiler.ir.StateUpdate` the ingress, before anything else, runs (docs/compiler.md,
"Stateful subscriptions")::

    if (<the counter's headers are valid>) {
        hash(cell, HashAlgorithm.crc32, 32w0, { key }, 32w<slots>);   // keyed counters only
        now = (bit<64>) standard_metadata.ingress_global_timestamp;  // microseconds
        end.read(e, cell); count.read(c, cell); sum.read(s, cell);
        if (now >= e) { e = now + WINDOW; c = 0; s = 0; end.write(cell, e); }
        c = c + 1; s = s + (bit<W>) value;
        count.write(cell, c); sum.write(cell, s);
        meta.p4sub_st_<counter>_count = c; ... _sum = s; ... _avg = s / c (long division)
    }

BMv2 (p4c-bm2-ss) refuses a division whose operands are not compile-time constants, so the average
is a restoring long division unrolled over the W bits of the sum (W compare-and-subtract steps on
constant bit slices). The key's bytes are those of the field zero-extended to whole bytes, as
the model hashes them (runtime.state.cells); BMv2's ``crc32`` is the IEEE CRC-32 zlib computes, and
its ``hash(..., base, data, max)`` gives ``base + crc % max``.
"""

from __future__ import annotations

from compiler import ir

from backends.common.names import meta_member
from backends.common.state import inputs

NOW = "p4sub_now"


def declarations(pipeline: ir.Pipeline) -> list[str]:
    """The registers, declared in the ingress control."""
    return [f"register<bit<{r.width}>>({r.size}) {r.name};" for r in pipeline.registers]


def apply_lines(pipeline: ir.Pipeline, intrinsic: dict[str, str], *, meta: str = "meta") -> list[str]:
    """The statements that update every counter and write its reads, at the top of the ingress
    (``meta``: the metadata's name, ``p4sub`` in include mode)."""
    if not pipeline.updates:
        return []
    out = ["// Counters (docs/compiler.md, \"Stateful subscriptions\"): update, then read.",
           f"bit<64> {NOW} = (bit<64>)standard_metadata.ingress_global_timestamp;"]
    for u in pipeline.updates:
        out += _update(pipeline, u, intrinsic, meta)
    return out


def _update(pipeline: ir.Pipeline, u: ir.StateUpdate, intrinsic: dict[str, str], meta: str) -> list[str]:
    io = inputs(pipeline, u, intrinsic)
    w = u.width
    p = f"p4sub_{u.counter}"
    reads = {r.function: f"{meta}.{meta_member(r.field)}" for r in u.reads}
    body = [f"bit<32> {p}_cell = 32w0;"]
    if u.index:
        nbytes = (io.key_width + 7) // 8
        key = io.key if io.key_width == 8 * nbytes else f"(bit<{8 * nbytes}>){io.key}"
        body.append(f"hash({p}_cell, HashAlgorithm.crc32, 32w0, {{ {key} }}, 32w{u.size});")
    body += [f"bit<64> {p}_e;", f"{u.end}.read({p}_e, {p}_cell);",
             f"bit<{w}> {p}_c;", f"{u.count}.read({p}_c, {p}_cell);"]
    if u.total:
        body += [f"bit<{w}> {p}_s;", f"{u.total}.read({p}_s, {p}_cell);"]
    reset = [f"{p}_e = {NOW} + 64w{u.window_us};", f"{p}_c = {w}w0;"] + ([f"{p}_s = {w}w0;"] if u.total else [])
    body += [f"if ({NOW} >= {p}_e) {{"] + ["    " + line for line in reset + [f"{u.end}.write({p}_cell, {p}_e);"]] + ["}"]
    body += [f"{p}_c = {p}_c + {w}w1;", f"{u.count}.write({p}_cell, {p}_c);"]
    if u.total:
        body += [f"{p}_s = {p}_s + (bit<{w}>){io.value};", f"{u.total}.write({p}_cell, {p}_s);"]
    if "count" in reads:
        body.append(f"{reads['count']} = {p}_c;")
    if "sum" in reads:
        body.append(f"{reads['sum']} = {p}_s;")
    if "avg" in reads:
        body += _divide(f"{p}_s", f"{p}_c", reads["avg"], w, p)
    zero = [f"{field} = {w}w0;" for field in reads.values()]
    return ([f"// {u.counter}: window {u.window_us} us, {u.size} cell(s)"
             + (f" by crc32({u.index})" if u.index else "")] + zero
            + [f"if ({io.valid}) {{"] + ["    " + line for line in body] + ["}"])


def _divide(dividend: str, divisor: str, out: str, w: int, p: str) -> list[str]:
    """``out = dividend / divisor`` (0 when the divisor is 0) by restoring long division."""
    q, r = f"{p}_q", f"{p}_r"
    lines = [f"bit<{w}> {q} = {w}w0;", f"bit<{w + 1}> {r} = {w + 1}w0;"]
    for i in range(w - 1, -1, -1):
        lines += [f"{r} = ({r} << 1) | (bit<{w + 1}>){dividend}[{i}:{i}];",
                  f"if ({r} >= (bit<{w + 1}>){divisor}) {{ {r} = {r} - (bit<{w + 1}>){divisor}; {q}[{i}:{i}] = 1w1; }}"]
    lines.append(f"if ({divisor} != {w}w0) {{ {out} = {q}; }}")
    return lines
