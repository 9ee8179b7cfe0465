"""The TNA VT program of one switch (``p4sub route ... --delivery vt --target tofino``) and its entries.

:func:`render_vt` renders ``templates/vt.p4.j2`` for one switch of a
:class:`~compiler.delivery.vt.combined.VtPlan`: the Tofino counterpart of
:mod:`backends.bmv2.vt_program`, with the same labels, EtherType, drop reasons and entries. A
host-facing switch also runs the subscription tables of the plan's receiver-set pipeline and the push
table, as the TNA header-stack program's edge does (:func:`backends.tofino.stack_program.subscription_context`).

Why the pipeline is laid out differently from v1model's (one label and one clone per pass,
recirculating): a Tofino pass applies a table once, shifts only by constants and has no run-time
header-stack index, and every recirculation costs a pass of the pipe. So all labels are read in one
pass by one set of ``check_hop`` / ``check_tree`` / ``check_stop`` tables per label position (the
dissertation's "m replicated tables", §3.2.3), hop and stop entries carry their port's bitmap bit
instead of the port, and the copies come from one multicast group per switch holding all its ports,
pruned in the egress by the bridged bitmap of ports to serve. No packet recirculates.

Control-plane objects (BF Runtime names; ``i`` = label position 0 .. max_labels - 1):

* ``pipe.SwitchIngress.check_tree_i``: ``vt_label[i].ident`` (tree label) -> ``vt_tree_i(mask)``;
* ``pipe.SwitchIngress.check_hop_i`` / ``check_stop_i``: ``vt_label[i].ident`` (hop / stop label of one
  of the switch's links) -> ``vt_hop_i(port_bit)`` / ``vt_stop_i(port_bit)``; every position holds
  the same entries, the v1model program's ``check_*`` entries with ``port`` as ``1 << (port - 1)``;
* ``pipe.SwitchIngress.vt_in_bit`` / ``pipe.SwitchEgress.vt_port_bit``: the switch's ports -> their bit;
* ``pipe.SwitchIngress.vt_push``: ``meta.p4sub_rset`` -> ``vt_push_stack(count, l0 .. l{N-1}, send, pops_0 ..,
  drop, reason)`` (edges: the labels, then the scan's outcome for them, :mod:`backends.tofino.vt_edge`);
* ``pipe.SwitchEgress.vt_host_port``: ``eg_intr_md.egress_port`` -> ``vt_strip``;
* ``$pre.node`` / ``$pre.mgid``: group :data:`GROUP` with every port of the switch;
* counter ``SwitchIngress.vt_drops`` (index = position in ``VT_DROP_REASONS``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backends.bmv2.vt_program import host_size, link_size, tree_size
from backends.common.headers import HEADERS_STRUCT, METADATA_STRUCT, Member, bits
from backends.common.templates import render_template
from backends.tofino.batch import EGRESS_PORT_KEY
from backends.tofino.bfrt import FORMAT, entry_json, pre_records
from backends.tofino.layout import TableLayout
from backends.tofino.op_tree import merged, op_tree
from backends.tofino.program import EGRESS_HEADERS, EGRESS_METADATA, SPEC_START
from backends.tofino.stack_program import (
    EGRESS_PARSE_BYTES,
    StackTable,
    exact_table,
    metadata_context,
    push_size,
    rset_width,
    stack_entry,
    subscription_context,
    subscription_layout,
    table_summary,
)
from backends.tofino.target import TOFINO1, Target
from backends.tofino.vt_edge import HOP, STOP, TREE, edge_args, edge_params
from compiler import ir
from compiler.base import TargetError, write_files
from compiler.delivery import ETH_HEADER, RSET_META
from compiler.delivery.vt import VT_DROP_REASONS, VtPlan, VtSwitchPlan, push_words

PROGRAM = "program.p4"
ENTRIES = "entries.bfrt.json"
INFO = "tofino.json"
BRIDGE = "vt_bridge"

#: The one multicast group of every switch: all its ports (the egress keeps the ports to serve).
GROUP = 1
IN_PORT_KEY = "ig_intr_md.ingress_port"


def label_key(i: int) -> str:
    """The BF Runtime name of position ``i``'s key. bf-p4c writes a header-stack element ``x[i]`` in a
    name as ``x$i`` (bf-rt.json said ``vt_label$2.ident`` for ``@name("vt_label[2].ident")``), so the
    program's ``@name`` and the entries use that spelling."""
    return f"vt_label${i}.ident"


def port_size(sp: VtSwitchPlan) -> int:
    return max(64, len(sp.ports))


def vt_tables(plan: VtPlan, sp: VtSwitchPlan, target: Target = TOFINO1) -> list[StackTable]:
    """The VT program's control-plane tables with this switch's entries."""
    w = plan.mask_width
    out = []
    for i in range(plan.max_labels):
        key = ((label_key(i), 16),)
        tree = ir.Action(f"vt_tree_{i}", (ir.Param("mask", w),))
        hop = ir.Action(f"vt_hop_{i}", (ir.Param("port_bit", w),))
        stop = ir.Action(f"vt_stop_{i}", (ir.Param("port_bit", w),))
        out += [
            exact_table(f"check_hop_{i}", key, hop, "ingress", link_size(sp),
                        [ir.Entry(f"check_hop_{i}", (ir.Exact(HOP | e),), hop.name, (1 << (p - 1),)) for e, p in sp.links]),
            exact_table(f"check_tree_{i}", key, tree, "ingress", tree_size(plan),
                        [ir.Entry(f"check_tree_{i}", (ir.Exact(TREE | t),), tree.name, (m,)) for t, m in sp.trees]),
            exact_table(f"check_stop_{i}", key, stop, "ingress", link_size(sp),
                        [ir.Entry(f"check_stop_{i}", (ir.Exact(STOP | e),), stop.name, (1 << (p - 1),)) for e, p in sp.links]),
        ]
    in_bit = ir.Action("vt_set_in_bit", (ir.Param("port_bit", w),))
    port_bit = ir.Action("vt_set_port_bit", (ir.Param("port_bit", w),))
    strip = ir.Action("vt_strip")
    out += [
        exact_table("vt_in_bit", ((IN_PORT_KEY, target.port_width),), in_bit, "ingress", port_size(sp),
                    [ir.Entry("vt_in_bit", (ir.Exact(p),), in_bit.name, (1 << (p - 1),)) for p in sp.ports]),
        exact_table("vt_port_bit", ((EGRESS_PORT_KEY, target.port_width),), port_bit, "egress", port_size(sp),
                    [ir.Entry("vt_port_bit", (ir.Exact(p),), port_bit.name, (1 << (p - 1),)) for p in sp.ports]),
        exact_table("vt_host_port", ((EGRESS_PORT_KEY, target.port_width),), strip, "egress", host_size(sp),
                    [ir.Entry("vt_host_port", (ir.Exact(p),), strip.name) for p in sp.host_ports]),
    ]
    if sp.ingress:
        c = chains(plan.max_labels)
        widths = {"send": w, "drop": 1, "reason": 8} | {f"pops_{k}": steps(plan.max_labels) for k in range(c)}
        push = ir.Action("vt_push_stack", (ir.Param("count", 16),)
                         + tuple(ir.Param(f"l{i}", 16) for i in range(plan.max_labels))
                         + tuple(ir.Param(name, widths[name]) for name in edge_params(c)))
        out.append(exact_table("vt_push", ((RSET_META, rset_width(plan)),), push, "ingress", push_size(plan),
                               [ir.Entry("vt_push", (ir.Exact(p.rsid),), push.name,
                                         push_words(plan, p) + edge_args(plan, sp, p, c))
                                for p in sp.pushes]))
    return out


def bridge_bytes(plan: VtPlan) -> int:
    """The ports to serve (W/8 bytes) and one byte of pop bits per chain."""
    return plan.mask_width // 8 + chains(plan.max_labels)


def _check(plan: VtPlan, sp: VtSwitchPlan, target: Target) -> None:
    bad = [p for p in sp.ports if not 1 <= p < 1 << target.port_width]
    if bad:
        raise TargetError(f"{target.name}: switch {sp.name}: port {bad[0]} is not a PortId_t "
                          f"(1..{(1 << target.port_width) - 1})")
    depth = bridge_bytes(plan) + ETH_HEADER + 4 + 2 * plan.max_labels
    if depth > EGRESS_PARSE_BYTES:
        raise TargetError(f"{target.name}: the egress would parse {depth} bytes (bridged {plan.mask_width}-bit port "
                          f"bitmap, Ethernet, stack of {plan.max_labels} labels), more than {EGRESS_PARSE_BYTES}; "
                          "lower --max-labels")


#: Label positions whose tables run in one stage: position i ORs its ports into chain ``i % CHAINS``'s
#: two bitmaps, so a chain's positions follow each other a stage apart and the OR trees fold CHAINS
#: bitmaps. One bitmap per position (16 leaves of an OR tree, plus the result and the ingress port's
#: bit) was one rotational cluster, more than bf-p4c can place in one MAU group of 16 containers.
CHAINS = 4


def chains(n: int) -> int:
    return min(CHAINS, n)


def steps(n: int) -> int:
    """Positions per chain: the stages the label scan takes."""
    return -(-n // chains(n))


def pop_groups(n: int) -> list[list[int]]:
    """The label positions of each chain, which its ``vt_popped_c`` table removes: ``[[0, 4, 8, 12], ...]``."""
    return [list(range(c, n, chains(n))) for c in range(chains(n))]


def pop_rows(size: int) -> list[dict[str, Any]]:
    """``vt_popped_c``'s const entries over a chain's ``size``-bit pop bitmap: every non-empty subset
    of popped positions -> the action that sets those labels invalid and counts them (none: a miss)."""
    return [{"subset": subset, "positions": [k for k in range(size) if subset >> k & 1]}
            for subset in range(1, 1 << size)]


def scan_metadata_bits(plan: VtPlan) -> int:
    """Ingress metadata bits the one-pass label scan takes: per chain three bitmaps (trees, hops, stops)."""
    return chains(plan.max_labels) * 3 * plan.mask_width


def program_text(plan: VtPlan, sp: VtSwitchPlan, target: Target = TOFINO1) -> str:
    """``program.p4`` for switch ``sp``; raises a :class:`TargetError` if it cannot be rendered."""
    _check(plan, sp, target)
    n, w = plan.max_labels, plan.mask_width
    unused = {"no-subscriber" if not sp.ingress else "not-a-stack"}
    reasons = [{"name": r, "const": r.upper().replace("-", "_"), "index": i} for i, r in enumerate(VT_DROP_REASONS)
               if r not in unused]
    members = [Member(bits(1), "vt_too_deep"), Member(bits(1), "vt_drop"), Member(bits(8), "vt_reason"),
               Member(bits(w), "vt_in_bit")]
    for c in range(chains(n)):
        members += [Member(bits(w), f"vt_add_{c}"), Member(bits(w), f"vt_hop_{c}"), Member(bits(w), f"vt_stop_{c}"),
                    Member(bits(steps(n)), f"vt_pops_{c}")]
    egress_members = [Member(bits(w), "vt_port_bit"), Member(bits(w), "vt_serve")]
    egress_members += [Member(bits(16), f"vt_popn_{c}") for c in range(chains(n))]
    context: dict[str, Any] = dict(
        switch=sp.name, switch_id=sp.switch_id, n=n, w=w, include=target.include, t=target, group=GROUP,
        reasons=reasons, n_reasons=len(VT_DROP_REASONS), H=HEADERS_STRUCT, M=METADATA_STRUCT,
        EH=EGRESS_HEADERS, EM=EGRESS_METADATA, bridge=BRIDGE, edge=sp.ingress, tree_size=tree_size(plan),
        link_size=link_size(sp), port_size=port_size(sp), host_size=host_size(sp), in_port_key=IN_PORT_KEY,
        label_keys=[label_key(i) for i in range(n)],
        host_port_key=EGRESS_PORT_KEY, spec_start=SPEC_START, header_types=[], spec_members=[], parser_states=[],
        emits=[], stopped=(), first_only=False,
        chains=chains(n), steps=steps(n), pop_groups=pop_groups(n),
        pop_rows={k: pop_rows(k) for k in {len(g) for g in pop_groups(n)}},
        or_levels=merged(op_tree("vt_add_or", [f"meta.vt_{kind}_{c}" for kind in ("add", "hop")
                                               for c in range(chains(n))]),
                         op_tree("vt_stop_or", [*(f"meta.vt_stop_{c}" for c in range(chains(n))), "meta.vt_in_bit"])),
        pop_levels=op_tree("vt_pop_sum", [f"meta.vt_popn_{c}" for c in range(chains(n))], "+"),
    )
    if sp.ingress:
        extra, pipeline_members = subscription_context(plan, target)
        context.update(extra)
        members += pipeline_members
    context.update(metadata_context(members, egress_members))
    return render_template(__file__, "vt.p4.j2", **context)


def document(plan: VtPlan, sp: VtSwitchPlan, target: Target = TOFINO1) -> dict[str, Any]:
    """The switch's ``entries.bfrt.json``: the VT tables' entries, on an ingress switch the
    subscription tables' entries, and the PRE records of the switch's group."""
    tables = vt_tables(plan, sp, target)
    entries = [stack_entry(e, t, target) for t in tables for e in t.layout.entries]
    layouts: list[TableLayout] = [t.layout for t in tables]
    if sp.ingress:
        layout = subscription_layout(plan, target)
        entries.extend(entry_json(e, t, layout.pipeline, target) for t in layout.tables for e in t.entries)
        layouts += list(layout.tables)
    return {"format": FORMAT, "target": target.name, "p4_name": Path(PROGRAM).stem,
            "pipeline": f"p4sub-vt-{sp.name}", "tables": [table_summary(t, target) for t in layouts],
            "entries": entries, "pre": pre_records((ir.MulticastGroup(GROUP, tuple(sp.ports)),))}


def render_vt(plan: VtPlan, switch: str, target: Target = TOFINO1) -> dict[str, str]:
    """Every file of one switch, as {name: text}, without writing anything."""
    sp = plan.switches[switch]
    text = program_text(plan, sp, target)
    doc = document(plan, sp, target)
    info = {
        "target": target.name, "architecture": "TNA", "mode": "virtual-trees", "strategy": plan.strategy,
        "max_rules": plan.max_rules, "switch": sp.name, "switch_id": sp.switch_id, "edge": sp.ingress,
        "controls": {"ingress": target.ingress_control, "egress": target.egress_control},
        "max_labels": plan.max_labels, "label_bytes": 2, "mask_bits": plan.mask_width,
        "drop_reasons": list(VT_DROP_REASONS), "check_tree_entries": len(sp.trees), "links": len(sp.links),
        "bridge_bytes": bridge_bytes(plan), "scan_metadata_bits": scan_metadata_bits(plan),
        "multicast_group": {"id": GROUP, "ports": list(sp.ports)}, "recirculations_per_packet": 0,
        "copies_per_packet": f"{len(sp.ports)} from the group, pruned in the egress to the ports to serve",
        "build": f"bf-p4c --target tofino --arch tna -o OUT {PROGRAM} (not run by p4sub; p4test checks the types)",
    }
    return {PROGRAM: text, ENTRIES: json.dumps(doc, indent=1) + "\n", INFO: json.dumps(info, indent=2) + "\n"}


def emit_vt(plan: VtPlan, switch: str, out_dir: str | Path, target: Target = TOFINO1) -> list[Path]:
    return write_files(render_vt(plan, switch, target), out_dir)
