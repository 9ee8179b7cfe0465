"""A batch of columns and its row count: the one definition the model and the ground truth share.

The ground truth (:mod:`runtime.groundtruth`) judges the model (:mod:`runtime.model`) and must
share no code with it; how many rows a dict of columns holds is no part of what either computes,
so it lives here, beside both, rather than in one of them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from compiler.base import P4subError


def batch_rows(columns: Mapping[str, Sequence[int] | np.ndarray], rows: int | None) -> int:
    """The number of rows of a batch of columns, which must agree with each other and with ``rows``."""
    lengths = {len(c) for c in columns.values()} | ({rows} if rows is not None else set())
    if len(lengths) > 1:
        raise P4subError(f"a batch's columns and row count disagree: lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0
