"""What every layer of p4sub stands on: errors, reading inputs, writing outputs.

* :mod:`.errors` - the one error hierarchy (:class:`P4subError` and its kinds), with locations;
* :mod:`.inputs` - the one opener of files p4sub reads (regular files only, UTF-8, bounded size);
* :mod:`.atomic`, :mod:`.outputs` and :mod:`.manifest` - files and directories that appear whole
  or not at all, and the ``manifest.json`` that lists what a command wrote;
* :mod:`.gc_pause` - the garbage collector paused while large object graphs are built;
* :mod:`.spark_session` - Spark sessions whose executors can run p4sub (route and replay).

It imports nothing else of p4sub. Its public face is the names below; :mod:`.gc_pause`,
:mod:`.spark_session` and :mod:`.limits` (time and memory bounds on a compile) are public modules
(their users call them by module, as ``gc_pause.paused()``).
"""

from compiler.base.atomic import staged
from compiler.base.errors import (
    CompileError,
    P4subError,
    ParseError,
    ResourceError,
    SourceLocation,
    SpecError,
    TargetError,
    TypeCheckError,
    character_name,
    raise_all,
)
from compiler.base import limits
from compiler.base.gc_pause import bulk_objects, paused
from compiler.base.inputs import (
    InputError,
    check_regular,
    open_input,
    read_bytes,
    read_stdin,
    read_text,
    strip_bom,
    text_lines,
)
from compiler.base.manifest import MANIFEST, Listed, file_sha256, find_listed, listed
from compiler.base.outputs import (
    output_dir,
    report_dir,
    staged_dir,
    staged_outputs,
    staged_report,
    write_files,
)
from compiler.base.spark_session import SessionStart, local_parallelism, parse_conf, spark, spark_errors

__all__ = [
    "MANIFEST", "CompileError", "Listed", "file_sha256", "InputError", "P4subError", "ParseError", "ResourceError", "SessionStart",
    "SourceLocation", "SpecError", "TargetError", "TypeCheckError", "bulk_objects", "character_name", "check_regular", "find_listed",
    "gc_pause", "limits", "listed", "local_parallelism", "open_input", "output_dir", "parse_conf", "paused", "raise_all",
    "read_bytes", "read_stdin", "read_text", "report_dir", "spark", "spark_errors", "spark_session", "staged",
    "staged_dir", "staged_outputs", "staged_report", "strip_bom", "text_lines", "write_files",
]
