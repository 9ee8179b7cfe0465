"""The BMv2 backend: a v1model P4_16 program, P4Runtime entries and simple_switch_CLI commands.

``emit(pipeline, out_dir, options=None)`` writes, into ``out_dir``:

* ``program.p4``: the v1model program (:mod:`backends.bmv2.program`);
* ``entries.p4rt.json``: the P4Runtime write request that installs every entry and multicast
  group (:mod:`backends.bmv2.p4runtime`);
* ``commands.txt``: the same state as ``simple_switch_CLI`` commands (:mod:`backends.bmv2.cli_commands`);
* ``bmv2.json``: what the install and test tools need to know about the rendering (mode, message
  layout, table sizes, the names of the controls).

``emit_control(pipeline, out_dir, IncludeOptions(...))`` is include mode (:mod:`backends.bmv2.include`):
only the subscription control ``p4sub_control.p4`` for the user's own program, and its entries.

Everything is rendered and checked before the first file is written, so a pipeline that cannot be
rendered leaves ``out_dir`` untouched. ``p4sub build OUT`` compiles ``program.p4`` with
``p4c-bm2-ss``; ``p4sub install OUT`` pushes it and the entries to a running switch.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from backends.bmv2.cli_commands import commands
from backends.bmv2.files import COMMANDS, ENTRIES, INFO, PROGRAM, render_info
from backends.bmv2.include import IncludeOptions, render_include
from backends.bmv2.p4runtime import one_update_per_line, write_request
from backends.bmv2.program import Bmv2Options, Bmv2Program, build_program
from backends.bmv2.target import MAX_GROUP_ID
from compiler import ir
from compiler.base import write_files
from compiler.compile import Budget

#: The batch modes (``--batch``) in which packets of several messages render with port bitmaps (a
#: bitmap per message kept across the passes, the egress keeping per port the messages whose bitmap
#: has its bit): compile's ``auto`` may then choose them for a header stack when groups do not fit
#: (backends.target_compile_options).
STACK_BITMAP_MODES = ("auto", "union", "prune")


def render(pipeline: ir.Pipeline, options: Bmv2Options | None = None) -> dict[str, str]:
    """Every file ``emit`` writes, as {name: text}, without writing anything."""
    program: Bmv2Program = build_program(pipeline, options or Bmv2Options())
    return {
        PROGRAM: program.text,
        ENTRIES: one_update_per_line(write_request(pipeline, program)),
        COMMANDS: "\n".join(commands(pipeline, program)) + "\n",
        INFO: render_info(program),
    }


def emit_update(old_out: str | Path, old: ir.Pipeline, new: ir.Pipeline, delta, out_dir: str | Path,
                options: Bmv2Options | None = None) -> bool:
    """``emit`` for an update that keeps the program: the old output's lines of the unchanged entities
    reused (:mod:`backends.bmv2.reuse`); False (nothing written) when they cannot be vouched for."""
    from backends.bmv2.reuse import emit_update as reuse

    return reuse(Path(old_out), old, new, delta, Path(out_dir), options)


def emit(pipeline: ir.Pipeline, out_dir: str | Path, options: Bmv2Options | None = None) -> list[Path]:
    """Render and write the BMv2 files into ``out_dir`` (created if missing); returns their paths."""
    return write_files(render(pipeline, options), out_dir)


def emit_control(pipeline: ir.Pipeline, out_dir: str | Path, options: IncludeOptions = IncludeOptions()) -> list[Path]:
    """Include mode: write the subscription control ``p4sub_control.p4`` and its entries
    (:mod:`backends.bmv2.include`) into ``out_dir``; nothing is written when it cannot be rendered."""
    return write_files(render_include(pipeline, options), out_dir)




def network_options(up_ports: tuple[int, ...]) -> Bmv2Options:
    """Options for one switch of a routed network (``p4sub route --target bmv2``): adds the network stage."""
    return Bmv2Options(network_up_ports=tuple(up_ports))


def compile_budget(base: Budget = Budget()) -> Budget:
    """The compile's budget on BMv2: P4Runtime accepts multicast group ids 1 to 32,766 for the
    rules' groups (32,767 is the batched path's union group; ids from 32,768 are clone sessions)."""
    return replace(base, groups=min(base.groups, MAX_GROUP_ID - 1))
