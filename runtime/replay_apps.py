"""The trace formats replay understands, as thin adapters over the apps' columnar readers.

A replay task needs, from a byte range of a capture: batches of rows (one row per message the
pipeline examines, as numpy columns named ``header.field``), and afterwards how many packets and
messages were read and what was damaged or skipped. Each app reader already provides this under
its own names; this module only maps them onto one shape, so that adding an app is one entry.

Row order matters to replay: the rows of one packet must be consecutive (both readers emit rows
in file order), which is how per-message verdicts become per-packet ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

import numpy as np

from apps.pcap import DamageCounter, PcapRange
from compiler import ir
from compiler.errors import P4subError


class BatchSource(Protocol):
    damage: DamageCounter
    skipped: DamageCounter
    packets_read: int

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]: ...


@dataclass(frozen=True)
class TraceApp:
    """How to read one protocol's traces.

    ``columns``: the packet fields rows carry. ``message_bytes``: the column holding a message's
    own size, when a message is a unit of its own on the wire (ITCH); None when it is not (an INT
    hop record only travels inside its packet). ``messages_read`` reads the reader's count of
    messages after iteration (ITCH counts every MoldUDP64 block, Add Order or not).
    """

    name: str
    columns: tuple[str, ...]
    message_bytes: str | None
    open: Callable[[PcapRange, int], BatchSource]
    messages_read: Callable[[BatchSource, int], int]
    field_prefixes: tuple[str, ...]


def _open_itch(rng: PcapRange, batch_packets: int) -> BatchSource:
    from apps.itch.columnar import ItchBatchReader

    return ItchBatchReader(rng.path, batch_packets=batch_packets, byte_range=rng)


def _open_int(rng: PcapRange, batch_packets: int) -> BatchSource:
    from apps.int.columnar import IntBatchReader

    return IntBatchReader(rng.path, batch_packets=batch_packets, byte_range=rng)


def _itch_columns() -> tuple[str, ...]:
    from apps.itch.columnar import ADD_ORDER_COLUMNS

    return tuple(ADD_ORDER_COLUMNS)


def _int_columns() -> tuple[str, ...]:
    from apps.int.columnar import INT_HOP_COLUMNS

    return tuple(INT_HOP_COLUMNS)


def app(name: str) -> TraceApp:
    """The adapter for ``name`` (``itch`` or ``int``)."""
    if name == "itch":
        return TraceApp("itch", _itch_columns(), "msg_len", _open_itch,
                        lambda source, rows: int(source.messages_read), ("add_order.",))  # type: ignore[attr-defined]
    if name == "int":
        # An INT "message" is one hop's metadata record: the rows themselves.
        return TraceApp("int", _int_columns(), None, _open_int, lambda source, rows: rows, ("int_hop.", "int_shim.", "int_md."))
    raise P4subError(f"unknown trace app {name!r}; replay reads 'itch' and 'int' traces")


APPS = ("itch", "int")


def detect_app(pipeline: ir.Pipeline) -> str:
    """The app whose header fields the pipeline matches on, or an error asking for ``--app``."""
    fields = {k.field for t in pipeline.tables for k in t.keys if not k.field.startswith("meta.")}
    found = [name for name in APPS if any(f.startswith(app(name).field_prefixes) for f in fields)]
    if len(found) == 1:
        return found[0]
    raise P4subError("cannot tell which trace format this pipeline reads"
                     f" (fields: {', '.join(sorted(fields)) or 'none'}); pass --app {'|'.join(APPS)}")
