"""What include mode is on every P4 target: the subscription control for a user's own program.

Camus's deployment mode (``p4sub compile --emit control``): the user keeps their program and adds
the subscriptions as one control, ``#include "p4sub_control.p4"``. The BMv2 backend renders it for
v1model (:mod:`backends.bmv2.include`), the Tofino backend for TNA (:mod:`backends.tofino.include`).
Both make the same promises, so the pieces that carry them live here:

* the names: file ``p4sub_control.p4``, control ``P4subIngress``, metadata struct
  ``p4sub_metadata_t`` passed as ``p4sub``, whose first members are ``looked_at`` and ``matched``;
* :func:`include_pipeline`: a leaf table's miss leaves the packet alone (``NoAction``) instead of
  dropping it, so that the user's program decides for packets no rule claims;
* :func:`check_instance` and :func:`check_headers_type`: the ``--instance`` and ``--headers-type``
  arguments, which end up in the generated P4 and in every control-plane name;
* :func:`headers_read`: the contract's list of headers and fields the control reads;
* :func:`metadata_members`: the members of ``p4sub_metadata_t``.

Why shared: a user who moves a deployment from BMv2 to Tofino keeps the same apply call shape,
the same metadata bits and the same table names under the instance; only the architecture's
parameters differ.
"""

from __future__ import annotations

import dataclasses
import re

from backends.common.controls import pipeline_metadata_members, user_call_members
from backends.common.headers import Member, bits
from backends.common.names import NO_ACTION, is_intrinsic, is_meta, split_field
from compiler import ir
from compiler.base import TargetError

CONTROL_FILE = "p4sub_control.p4"
CONTROL = "P4subIngress"
METADATA_TYPE = "p4sub_metadata_t"
META_PARAM = "p4sub"
LOOKED_AT = "looked_at"
MATCHED = "matched"
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_instance(text: str, default: str) -> str:
    """The ``--instance`` argument checked: dotted P4 identifiers, at least two (the control that
    instantiates ``P4subIngress``, then the instance's name; deeper nesting adds components)."""
    if not _PATH.fullmatch(text):
        raise TargetError(f"--instance {text!r}: expected CONTROL.NAME, the control that instantiates "
                          f"{CONTROL} and the instance's name (default {default})")
    return text


def check_headers_type(name: str) -> str:
    """The ``--headers-type`` argument checked: a P4 identifier (it is written into the control's signature)."""
    if not _IDENT.fullmatch(name):
        raise TargetError(f"--headers-type {name!r}: expected the P4 name of your headers struct type")
    return name


def include_pipeline(pipeline: ir.Pipeline) -> ir.Pipeline:
    """The pipeline as the included control runs it: a leaf table's miss leaves the packet alone
    (``NoAction``) instead of dropping it, so that the user's program decides for packets no rule
    claims."""
    tables = []
    for t in pipeline.tables:
        if t.role == "leaf" and t.default_action != NO_ACTION:
            actions = t.actions + ((NO_ACTION,) if NO_ACTION not in t.actions else ())
            t = dataclasses.replace(t, actions=actions, default_action=NO_ACTION, default_args=())
        tables.append(t)
    actions = pipeline.actions
    if not any(a.name == NO_ACTION for a in actions):
        actions = (ir.Action(NO_ACTION),) + actions
    return dataclasses.replace(pipeline, tables=tuple(tables), actions=actions)


def headers_read(pipeline: ir.Pipeline) -> dict[str, list[tuple[str, int]]]:
    """Header instance -> the fields the control reads of it (every table key), for the contract."""
    spec = pipeline.spec
    out: dict[str, list[tuple[str, int]]] = {h: [] for h in pipeline.queried_headers()}
    for h in pipeline.guard_headers():
        out.setdefault(h, [])
    for t in pipeline.tables:
        for k in t.keys:
            if is_meta(k.field) or is_intrinsic(spec, k.field) or k.field in pipeline.state_reads():
                continue
            header, fld = split_field(k.field)
            entry = out.setdefault(header, [])
            if fld != "$valid" and (fld, k.width) not in entry:
                entry.append((fld, k.width))
    for u in pipeline.updates:  # counters read their keys and summed fields
        for ref in (u.index, u.value):
            if ref and not is_intrinsic(spec, ref):
                header, fld = split_field(ref)
                entry = out.setdefault(header, [])
                if (fld, spec.field_width(ref)) not in entry:
                    entry.append((fld, spec.field_width(ref)))
    return out


def metadata_members(pipeline: ir.Pipeline, extra: list[Member] | None = None) -> list[Member]:
    """``p4sub_metadata_t``'s members: ``looked_at`` and ``matched`` first (the contract), then the
    IR's metadata, the user-action call records and any target-specific ``extra`` members."""
    members = [Member(bits(1), LOOKED_AT), Member(bits(1), MATCHED)]
    return members + pipeline_metadata_members(pipeline) + user_call_members(pipeline) + list(extra or [])
