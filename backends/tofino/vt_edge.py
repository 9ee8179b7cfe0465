"""What the TNA VT program's label scan decides for a stack its edge pushes, computed when it is rendered.

The counterpart of :mod:`backends.tofino.stack_edge` for virtual trees: an edge switch pushes a
receiver set's labels and then scans them with its own ``check_hop`` / ``check_tree`` / ``check_stop``
entries, as it scans a stack that arrives. In one pipeline that is a chain (the subscription tables,
the push, the scan), more stages than Tofino has. The pushed labels and the switch's entries are both
fixed by the plan, so the scan's outcome is too: :func:`edge_args` computes it from the entries the
switch installs (:func:`backends.tofino.vt_program.vt_tables`'s), and the push entry carries it. The
program applies the ingress port's bit at run time (the push does not know the port) and runs the scan
only for stacks that arrive.

What the push entry carries after the labels (parameter names of ``vt_push_stack``): ``send`` (ports
the trees and hops add, minus those the stops remove), ``pops_c`` per chain (bit k: the hop at position
``c + chains*k`` is removed), ``drop`` and ``reason`` (``empty-stack`` for a push of no labels; the
program itself drops a push whose ports to serve, the ingress port's bit removed, are none).
"""

from __future__ import annotations

from compiler.delivery.vt import VT_DROP_REASONS, VtPlan, VtPush, VtSwitchPlan, push_words

#: The label types in the high bits of a 16-bit VT label word (tree 1, hop 2, stop 3).
TREE, HOP, STOP = 0x4000, 0x8000, 0xC000


def edge_params(chains: int) -> tuple[str, ...]:
    """The parameters :func:`edge_args` appends to the push action's, in order."""
    return ("send", *(f"pops_{c}" for c in range(chains)), "drop", "reason")


def edge_args(plan: VtPlan, sp: VtSwitchPlan, push: VtPush, chains: int) -> tuple[int, ...]:
    """The scan's outcome for the stack ``push`` writes on switch ``sp``: per label position the
    program's hop, else tree, else stop lookup (each position holds the same entries)."""
    count, *words = push_words(plan, push)
    hops = {HOP | e: 1 << (p - 1) for e, p in sp.links}
    trees = {TREE | t: m for t, m in sp.trees}
    stops = {STOP | e: 1 << (p - 1) for e, p in sp.links}
    add = stop = 0
    pops = [0] * chains
    for i, word in enumerate(words[:count]):
        if word in hops:
            add |= hops[word]
            pops[i % chains] |= 1 << (i // chains)
        elif word in trees:
            add |= trees[word]
        elif word in stops:
            stop |= stops[word]
    if count == 0:
        # Dropped as an empty stack; ``send`` all ones keeps the program's test for no port (which
        # follows the push) from renaming the drop: the packet is dropped either way.
        return ((1 << plan.mask_width) - 1, *([0] * chains), 1, VT_DROP_REASONS.index("empty-stack"))
    return (add & ~stop, *pops, 0, 0)
