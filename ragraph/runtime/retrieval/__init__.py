"""The retrieval half of ragraph: stepwise, exact IVF search on faiss, and what feeds it.

- `protocol`: the `SearchEngine` protocol (probe, search_step, finish, search) and its values;
  `merge`: how partial results combine, and why they equal a one-shot search.
- `ivf/`: `FaissIVFEngine`, the CPU engine, with its per-cluster cost model and `plan_step`
  (time-budgeted sub-stages), request locality, list-major scans and index shards.
- `tier/`: `TieredEngine`, the same engine with a hot-cluster cache on an accelerator tier.
- `embed/`: query and passage embedders (any sentence-transformers model, int8 queries for
  mean-pooled BERT models, or a server); `build/`: index building, document ingestion and the
  embedded default Wikipedia corpus; `store`, `manifest`: passages in SQLite and checked loading.

faiss and torch are imported inside functions, so importing this package stays cheap.
"""

from ragraph.runtime.retrieval.ivf.cost import (
    Pending,
    SearchCostModel,
    StepPlan,
    optimal_budget_ms,
    plan_step,
)
from ragraph.runtime.retrieval.ivf.locality import History, early_completion, reorder
from ragraph.runtime.retrieval.merge import merge_partials
from ragraph.runtime.retrieval.protocol import (
    Metric,
    ScanOrder,
    SearchEngine,
    SearchTask,
    StepResult,
    StepStats,
    TopK,
)

__all__ = [
    "History",
    "Metric",
    "Pending",
    "ScanOrder",
    "SearchCostModel",
    "SearchEngine",
    "SearchTask",
    "StepPlan",
    "StepResult",
    "StepStats",
    "TopK",
    "early_completion",
    "merge_partials",
    "optimal_budget_ms",
    "plan_step",
    "reorder",
]
