"""The jinja2 environment for the P4 templates that live beside each backend."""

from __future__ import annotations

import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jinja2


def _loader(directory: Path) -> jinja2.BaseLoader:
    """Templates from ``directory``, or from inside the zip it lies in: on Spark executors p4sub is
    imported from the zip the driver shipped (compiler.base.spark_session), and ``__file__`` points into it."""
    if directory.is_dir():
        return jinja2.FileSystemLoader(directory)
    archive = next((p for p in directory.parents if p.is_file() and zipfile.is_zipfile(p)), None)
    if archive is None:
        return jinja2.FileSystemLoader(directory)  # absent: jinja2 reports the missing template
    inner = directory.relative_to(archive).as_posix()

    def load(name: str) -> tuple[str, str, Callable[[], bool]] | None:
        entry = zipfile.Path(archive, f"{inner}/{name}")
        if not entry.is_file():
            return None
        return entry.read_text(encoding="utf-8"), f"{archive}/{inner}/{name}", lambda: True

    return jinja2.FunctionLoader(load)


@lru_cache(maxsize=None)
def environment(directory: Path) -> jinja2.Environment:
    """Strict (an undefined name is an error, not an empty string in the P4 text) and tidy with
    whitespace around block tags, so that generated programs read like written ones."""
    return jinja2.Environment(
        loader=_loader(directory),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def render_template(module_file: str, template: str, **context: Any) -> str:
    """Render ``templates/<template>`` beside the module whose ``__file__`` is ``module_file``."""
    return environment(Path(module_file).parent / "templates").get_template(template).render(**context)
