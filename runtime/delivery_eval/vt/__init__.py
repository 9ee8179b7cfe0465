"""Evaluating virtual trees (dissertation chapters 5 and 6) with the compiler's VT encoder.

* :mod:`.evaluation`, :mod:`.checks`, :mod:`.report` — ``p4sub eval vt``: strategies x rules per
  switch, header bytes and network load, and the comparison with the dissertation's figures;
* :mod:`.churn`, :mod:`.churn_evaluation`, :mod:`.churn_report` — chapter 6: clustered clients,
  migration scenarios, ``p4sub eval vt --scenarios``.

The VT labels, installed tables, Algorithm 5.1 and the strategies stay in :mod:`compiler.delivery.vt`.
"""

__all__ = ["checks", "churn", "churn_evaluation", "churn_report", "evaluation", "report"]
