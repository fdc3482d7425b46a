"""The retrieval half of ragraph: stepwise, exact IVF search on faiss, and what feeds it.

- `protocol`: the `SearchEngine` protocol (probe, search_step, finish, search) and its values.
- `ivf`: `FaissIVFEngine`, the CPU engine; `tiered`: `TieredEngine`, the same with a hot-cluster
  cache on an accelerator tier (`hotcache`), results identical either way (`merge` says why).
- `cost`: per-cluster cost model and `plan_step` (time-budgeted sub-stages); `locality`: request
  history, the similarity-aware search order and the early-completion point.
- `store`, `embedder`, `builder`, `manifest`, `corpus`: passages in SQLite, sentence embedders
  (any sentence-transformers model, or a server: `http_embedder`; all-MiniLM-L6-v2 by default),
  index building and checked loading, and the embedded default Wikipedia corpus.

faiss and torch are imported inside functions, so importing this package stays cheap.
"""

from ragraph.runtime.retrieval.cost import (
    CostModel,
    Pending,
    StepPlan,
    optimal_budget_ms,
    plan_step,
)
from ragraph.runtime.retrieval.locality import History, early_completion, reorder
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
    "CostModel",
    "History",
    "Metric",
    "Pending",
    "ScanOrder",
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
