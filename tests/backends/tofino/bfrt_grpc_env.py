"""Where the tests find the real BF Runtime Python client, and the PRE's schema, when they are here.

The SDE installs ``bfrt_grpc`` (``client.py``, ``info_parse.py``, ``bfruntime_pb2*.py``) under
``$SDE_INSTALL/lib/python3.*/site-packages/tofino`` and the PRE's ``bf_rt_pre_tf1.json`` under
``$SDE_INSTALL/share/bf_rt_shared``; neither is on PyPI. Outside the SDE they can be generated
from open-p4studio's bf-drivers (``bfruntime.proto`` with grpcio-tools; docs/tofino.md says how).
``P4SUB_BFRT_GRPC`` names the directories (``os.pathsep``-separated) to append to ``sys.path``:
one holds ``bfrt_grpc/`` and, unless the running Python has them, grpcio, protobuf,
googleapis-common-protos and six; ``bf_rt_pre_tf1.json`` is looked for in each of them, in its
``bf_rt_shared/`` and in ``$SDE_INSTALL/share/bf_rt_shared``. The tests that need them skip with
the reason :func:`load` gives otherwise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

ENV = "P4SUB_BFRT_GRPC"
PRE_SCHEMA = "bf_rt_pre_tf1.json"


def _dirs() -> list[Path]:
    return [Path(d) for d in os.environ.get(ENV, "").split(os.pathsep) if d]


def load() -> tuple[ModuleType | None, bytes | None, str]:
    """(``bfrt_grpc.client``, the PRE schema, "") when both are here; else (None, None, why not)."""
    for d in _dirs():
        if str(d) not in sys.path:
            sys.path.append(str(d))
    try:
        import bfrt_grpc.client as gc  # type: ignore[import-not-found]
        from bfrt_grpc import bfruntime_pb2_grpc  # noqa: F401  (the server stand-in needs it)
    except ImportError as exc:
        return None, None, (f"the BF Runtime client bfrt_grpc is not importable ({exc}): set {ENV} to the directory "
                            "holding bfrt_grpc/ and its dependencies (docs/tofino.md, \"Installing\")")
    if getattr(gc, "__file__", None) is None or not hasattr(gc, "ClientInterface"):
        return None, None, "bfrt_grpc.client is not the SDE's client"
    places = [p for d in _dirs() for p in (d, d / "bf_rt_shared")]
    if os.environ.get("SDE_INSTALL"):
        places.append(Path(os.environ["SDE_INSTALL"]) / "share" / "bf_rt_shared")
    for p in places:
        if (p / PRE_SCHEMA).is_file():
            return gc, (p / PRE_SCHEMA).read_bytes(), ""
    return None, None, f"{PRE_SCHEMA} (the PRE's BF Runtime schema) not found in {', '.join(map(str, places)) or ENV}"
