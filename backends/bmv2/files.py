"""The names of the files the BMv2 backend writes, and ``bmv2.json``'s text (shared by ``emit`` and the
update's reuse of an old output's files, backends/bmv2/reuse.py)."""

from __future__ import annotations

import dataclasses
import json

from backends.bmv2.program import Bmv2Program
from backends.bmv2.target import UNION_GROUP, V1MODEL

PROGRAM = "program.p4"
ENTRIES = "entries.p4rt.json"
COMMANDS = "commands.txt"
INFO = "bmv2.json"


def render_info(program: Bmv2Program) -> str:
    """``bmv2.json``: what the install and test tools need to know about the rendering."""
    info = {
        "target": V1MODEL.name,
        "architecture": V1MODEL.architecture,
        "mode": program.mode,
        "controls": {"ingress": V1MODEL.ingress_control, "egress": V1MODEL.egress_control},
        "layout": dataclasses.asdict(program.layout),
        "table_sizes": program.sizes,
        "union_group": UNION_GROUP if program.union_group else None,
        "extra_tables": [t.name for t in program.extra_tables],
    }
    return json.dumps(info, indent=2) + "\n"
