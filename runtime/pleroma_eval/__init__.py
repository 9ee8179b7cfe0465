"""``p4sub eval pleroma``: PLEROMA and Balogh's flow limits against p4sub on the same networks.

* :mod:`.workloads` - host subscriptions and events (ITCH, Siena, Balogh's six-dimensional space);
* :mod:`.evaluation` - both systems on each topology and workload, and Balogh's merge experiment;
* :mod:`.deployment` - change sets (churn, merges) as S2 Alg. 7 plans: steps and peak flows;
* :mod:`.report` - pleroma.json, pleroma.md and the PNG plots.
"""

from runtime.pleroma_eval.evaluation import QUICK, PleromaEvalConfig, evaluate
from runtime.pleroma_eval import report
from runtime.pleroma_eval.workloads import WORKLOADS

__all__ = ["QUICK", "PleromaEvalConfig", "WORKLOADS", "evaluate", "report"]
