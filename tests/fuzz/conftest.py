"""The fuzz suite (issue 19): every test here is marked ``fuzz``, so ``pytest -m fuzz`` runs just it
and ``-m 'not fuzz'`` leaves it out; CI runs it with everything else (bounded: a few seconds per
reader, see :mod:`tests.fuzz.helpers`)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)
