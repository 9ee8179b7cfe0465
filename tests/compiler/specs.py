"""Specs built in code, so that compiler tests do not depend on the P4 spec reader."""

from __future__ import annotations

from compiler.spec.model import Counter, FieldDef, HeaderInstance, HeaderType, QueryField, Spec, UserAction


def make_spec(fields: dict[str, tuple[int, dict]], counters: dict[str, int] | None = None,
              actions: dict[str, tuple[int, ...]] | None = None) -> Spec:
    """``fields``: {"h.f": (width, QueryField keyword overrides or {} for an unannotated field)}."""
    by_header: dict[str, list[FieldDef]] = {}
    for ref, (width, _) in fields.items():
        h, f = ref.split(".")
        by_header.setdefault(h, []).append(FieldDef(f, width))
    types = {f"{h}_t": HeaderType(f"{h}_t", tuple(fs)) for h, fs in by_header.items()}
    headers = tuple(HeaderInstance(h, f"{h}_t") for h in by_header)
    query = {ref: QueryField(ref, width, **kw) for ref, (width, kw) in fields.items() if kw is not None and kw != {}}
    return Spec(
        path="test.p4",
        header_types=types,
        headers_struct="headers",
        headers=headers,
        query_fields=query,
        counters={n: Counter(n, w, 4) for n, w in (counters or {}).items()},
        actions={n: UserAction(n, ws) for n, ws in (actions or {}).items()},
    )


ITCH_LIKE = make_spec({
    "add_order.stock": (64, {"match_kind": "exact", "is_string": True}),
    "add_order.price": (32, {"match_kind": "range", "scale": 4}),
    "add_order.shares": (32, {"match_kind": "range"}),
    "add_order.side": (8, {"match_kind": "exact", "is_string": True}),
    "ipv4.dst_addr": (32, {"match_kind": "lpm"}),
    "ipv6.dst_addr": (128, {}),
    "ethernet.dst_addr": (48, {}),
    "udp.dst_port": (16, {}),
}, counters={"msg_rate": 100000}, actions={"mark": (8,), "count_it": ()})
