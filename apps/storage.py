"""Where traces are read from: local paths, and Hadoop-style URLs any cluster machine can open.

On a cluster every executor opens the trace ranges it was given, so a trace that sits on the
driver's disk is out of reach of executors on other machines. A URL (``hdfs://``, ``s3a://``,
``file://``) names the same bytes wherever it is opened. Reading goes through ``pyarrow.fs``
(already a dependency, and the library the Arrow project keeps for exactly this): random access
by byte range, which is what a replay task needs, not whole files as Spark's ``binaryFiles``
would give.

Plain paths keep going through Python's ``open`` (the fastest local reader, and unchanged
behaviour); :func:`absolute` makes them absolute on the driver, because an executor's working
directory is not the driver's.

Credentials and endpoints are pyarrow's: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
``AWS_DEFAULT_REGION`` (or ``?endpoint_override=HOST:PORT&scheme=http`` in an S3 URL); HDFS needs
libhdfs (``HADOOP_HOME`` or ``ARROW_LIBHDFS_DIR``, ``CLASSPATH=$(hadoop classpath --glob)``) and
``JAVA_HOME``, on the driver and every executor.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, BinaryIO

from compiler.base import P4subError

# URL schemes read through pyarrow.fs, and the pyarrow scheme each maps to. s3a/s3n are Hadoop's
# names for S3; gs:// and others are left out on purpose (pyarrow's GCS client waits for a metadata
# server when it has no credentials, which looks like a hang).
SCHEMES = {"file": "file", "hdfs": "hdfs", "viewfs": "viewfs", "s3": "s3", "s3a": "s3", "s3n": "s3"}
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class StorageError(P4subError):
    """A trace URL that cannot be read: unknown scheme, unreachable store, missing object."""


def is_url(path: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...``; everything else is a path on this machine."""
    return bool(_URL.match(os.fspath(path)))


def absolute(path: str | os.PathLike[str]) -> str:
    """The path as every process can use it: URLs unchanged, local paths made absolute."""
    text = os.fspath(path)
    return text if is_url(text) else os.path.abspath(text)


def _split(url: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for ``url``."""
    match = _URL.match(url)
    assert match is not None
    scheme = match.group(1).lower()
    if scheme not in SCHEMES:
        raise StorageError(f"{url}: cannot read {scheme}:// URLs; traces are read from local paths or "
                           f"{', '.join(s + '://' for s in SCHEMES)}")
    return _filesystem(SCHEMES[scheme] + url[len(scheme):])


@lru_cache(maxsize=32)
def _filesystem(url: str) -> tuple[Any, str]:
    """Cached per URL: making an S3 or HDFS client is slow, and a task opens its file once per range."""
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(url)
    except Exception as exc:  # pyarrow raises OSError/ArrowInvalid with the store's own words
        raise StorageError(f"{url}: cannot reach the file system: {_first_line(exc)}{_hint(url)}") from None


def _hint(url: str) -> str:
    if url.startswith(("hdfs:", "viewfs:")):
        return (" (pyarrow reads HDFS through libhdfs: set JAVA_HOME, HADOOP_HOME or ARROW_LIBHDFS_DIR, and "
                "CLASSPATH=$(hadoop classpath --glob), on the driver and on every executor)")
    if url.startswith("s3:"):
        return " (credentials and region from AWS_* variables; another endpoint: ?endpoint_override=HOST:PORT&scheme=http)"
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def file_size(path: str | os.PathLike[str]) -> int:
    """Size in bytes; :class:`StorageError` (a :class:`P4subError`) when there is no such file."""
    text = os.fspath(path)
    if not is_url(text):
        if not os.path.isfile(text):
            raise StorageError(f"{text}: no such trace file")
        return os.path.getsize(text)
    from pyarrow import fs

    filesystem, inner = _split(text)
    try:
        info = filesystem.get_file_info(inner)
    except Exception as exc:
        raise StorageError(f"{text}: cannot read: {_first_line(exc)}{_hint(text)}") from None
    if info.type != fs.FileType.File:
        raise StorageError(f"{text}: no such trace file" + (" (it is a directory)" if info.type == fs.FileType.Directory else ""))
    return int(info.size)


def open_url(url: str) -> BinaryIO:
    """A seekable binary file for ``url`` (pyarrow's ``RandomAccessFile``: ``read``, ``seek``, ``close``)."""
    filesystem, inner = _split(url)
    try:
        return filesystem.open_input_file(inner)
    except FileNotFoundError:
        raise StorageError(f"{url}: no such trace file") from None
    except Exception as exc:
        raise StorageError(f"{url}: cannot open: {_first_line(exc)}{_hint(url)}") from None
