"""From how many queries a list a list-major step beats faiss's cluster order on this machine,
measured on the index itself.

The crossover is not a property of the library alone: on a 2-core Intel Xeon torch's products
overtook faiss's cluster order from 2.4 queries a list, while on a 2-core AMD EPYC (no AMX, the
same torch) list-major took 1.4-2.4x cluster order's time at every sharing from 2 to 16 (real
NQ queries, nprobe 128 on 1M vectors in 1,024 lists; docs/benchmarks/code-figures.md#list-major-
scans). A constant per library sent that host's steps list-major at twice the cost. So the
engine times both scans once, on a sample of its own lists, before its first list-order step.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError

ENV = "RAGRAPH_LIST_MAJOR_SHARING"
# The sharings timed: queries per list, each probing every sampled list.
LOW, HIGH = 4, 16
# Lists sampled: enough vectors for a timing well above the clock's resolution, few enough that
# the trial costs about a tenth of a second on 1M vectors (2 cores).
TRIAL_VECTORS = 16_384
MAX_LISTS = 64
REPEATS = 2  # each scan's best of: the first reads the lists from memory, both orders alike
# The sample's few lists make each of the list-major scan's chunks small, so its fixed cost
# weighs more than in a step over hundreds of lists: the trial errs toward cluster order, the
# order faiss itself scans in.


@dataclass(frozen=True)
class Trial:
    """Time of a list-major scan over cluster order's, at `LOW` and `HIGH` queries a list."""

    low: float
    high: float

    def min_sharing(self, default: float) -> float:
        """The sharing from which list-major is faster: `default` (the library's) where it won
        already at `LOW` and the library's own crossover is lower; infinite where it lost even
        at `HIGH`; in between, where the ratio crosses 1 (linear in the sharing)."""
        if self.low <= 1.0:
            return min(default, float(LOW))
        if self.high >= 1.0:
            return math.inf
        return LOW + (HIGH - LOW) * (self.low - 1.0) / (self.low - self.high)


    def describe(self, min_sharing: float) -> str:
        when = "never" if math.isinf(min_sharing) else f"from {min_sharing:.1f} queries a list"
        return (f"list-major steps {when} (timed on this index: {self.low:.2f}x faiss's cluster "
                f"order's time at {LOW} queries a list, {self.high:.2f}x at {HIGH})")


def pinned() -> float | None:
    """`RAGRAPH_LIST_MAJOR_SHARING`: a number of queries a list, or `never`; None when unset."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    if raw == "never":
        return math.inf
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(ENV, f"must be a positive number of queries a list or 'never', got {raw!r}")
    return value


def run_trial(engine, seed: int = 0) -> Trial:
    """Both scans of the same tasks on `engine` (a `FaissIVFEngine` over IVF-Flat), whose queries
    are vectors of the sampled lists (the index's own distribution, as real queries are near
    their passages)."""
    from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask

    rng = np.random.default_rng(seed)
    sizes = engine.cluster_sizes()
    lists = _sample_lists(sizes, rng)
    pool = np.concatenate([engine.list_vectors(int(c)) for c in lists])
    queries = pool[rng.choice(len(pool), HIGH, replace=False)].astype(np.float32)
    ratios = []
    for sharing in (LOW, HIGH):
        tasks = [SearchTask.of(q, lists) for q in queries[:sharing]]
        best = {"list": math.inf, "cluster": math.inf}
        for _ in range(REPEATS):  # interleaved: a load on the machine hits both alike
            t0 = time.perf_counter()
            engine.scan_lists(np.ascontiguousarray(queries[:sharing]), [lists] * sharing, 11)
            best["list"] = min(best["list"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            engine.search_step(tasks, 10, ScanOrder.CLUSTER)
            best["cluster"] = min(best["cluster"], time.perf_counter() - t0)
        ratios.append(best["list"] / max(best["cluster"], 1e-9))
    return Trial(*ratios)


def _sample_lists(sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random nonempty lists holding about `TRIAL_VECTORS` vectors, at most `MAX_LISTS`."""
    nonempty = rng.permutation(np.flatnonzero(sizes > 0))
    held = np.cumsum(sizes[nonempty])
    n = int(np.searchsorted(held, TRIAL_VECTORS)) + 1
    return np.sort(nonempty[:max(1, min(n, MAX_LISTS))]).astype(np.int64)
