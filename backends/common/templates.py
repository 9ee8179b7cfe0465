"""The jinja2 environment for the P4 templates that live beside each backend."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2


@lru_cache(maxsize=None)
def environment(directory: Path) -> jinja2.Environment:
    """Strict (an undefined name is an error, not an empty string in the P4 text) and tidy with
    whitespace around block tags, so that generated programs read like written ones."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def render_template(module_file: str, template: str, **context: Any) -> str:
    """Render ``templates/<template>`` beside the module whose ``__file__`` is ``module_file``."""
    return environment(Path(module_file).parent / "templates").get_template(template).render(**context)
