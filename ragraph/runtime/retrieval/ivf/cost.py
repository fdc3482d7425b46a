"""Per-cluster search cost and the time-budgeted choice of the next step's clusters.

HedraRAG cuts each retrieval into sub-stages: before a cycle, clusters from the pending retrievals
are added to the step until its time budget mb is spent. Scanning one IVF-Flat cluster costs about
size x dimension multiply-adds, plus a fixed per-(query, cluster) overhead (heap set-up, list lookup).
The seconds per unit are measured by a short micro-benchmark at start-up and then follow the measured
step times (an exponentially weighted moving average of measured / predicted), so the model tracks
thread contention and cache effects the benchmark did not see.
"""

from __future__ import annotations

import copy
import math
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.ivf.listmajor import ListMajorRule


@dataclass(frozen=True)
class SearchCostModel:
    """Milliseconds to scan one cluster: scale x (ns_per_element x size x dim + ns_per_cluster)."""

    sizes: tuple[int, ...]
    dim: int
    ns_per_element: float = 0.5
    ns_per_cluster: float = 2_000.0
    scale: float = 1.0
    # EWMA weight of the newest measured/predicted ratio: ~10 steps of memory, so one slow step
    # (a page fault, a GC pause) moves the budget by at most 20%.
    alpha: float = 0.2
    # A list scanned again within the same step (its queries are laid out back to back, see
    # `split.by_cluster`) is read from cache, at a fraction of a first scan's cost (measured:
    # docs/benchmarks/code-figures.md#list-major-scans).
    rescan_share: float = 0.45
    # A step the engine scans list-major (`list_rule`, the engine's own): each list costs
    # list_first faiss scans plus list_share per further query. Fitted on 512 lists of ~1,000
    # vectors (d 384) on 2 cores: 2.9 scans at 8 queries a list, 4.2 at 16.
    list_rule: ListMajorRule | None = field(default=None, repr=False)
    list_first: float = 1.7
    list_share: float = 0.17
    # Per-cluster milliseconds, computed once: the scheduler prices thousands of clusters a step.
    _ms: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.dim <= 0:
            raise ConfigError("dim", f"must be positive, got {self.dim}")
        for name in ("ns_per_element", "ns_per_cluster"):
            if not getattr(self, name) >= 0:
                raise ConfigError(name, f"must be non-negative, got {getattr(self, name)}")
        if not self.scale > 0:
            raise ConfigError("scale", f"must be positive, got {self.scale}")
        if not 0 < self.alpha <= 1:
            raise ConfigError("alpha", f"must be in (0, 1], got {self.alpha}")
        for name in ("rescan_share", "list_share"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(name, f"must be in (0, 1], got {getattr(self, name)}")
        if not self.list_first > 0:
            raise ConfigError("list_first", f"must be positive, got {self.list_first}")
        ns = self.ns_per_element * np.asarray(self.sizes, dtype=np.float64) * self.dim
        object.__setattr__(self, "_ms", (ns + self.ns_per_cluster) / 1e6)

    def each_ms(self, clusters: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.scale * self._ms[np.asarray(clusters, dtype=np.int64)]

    @property
    def mean_cluster_ms(self) -> float:
        return self.scale * float(self._ms.mean()) if self._ms.size else 0.0

    def clusters_ms(self, clusters: Sequence[int] | np.ndarray) -> float:
        return float(self.each_ms(clusters).sum()) if len(clusters) else 0.0

    def step_ms(self, clusters: np.ndarray) -> float:
        """A list-order step scanning `clusters` (one entry per query and cluster, repeats for
        lists shared by several queries): list-major where the engine's rule takes it, else
        each list's first scan at full cost and its repeats from cache."""
        if not len(clusters):
            return 0.0
        clusters = np.asarray(clusters, dtype=np.int64)
        lists, count = np.unique(clusters, return_counts=True)
        each = self.each_ms(lists)
        if self.list_rule is not None and self.list_rule.takes(clusters):
            return float((each * (self.list_first + self.list_share * (count - 1))).sum())
        return float((each * (1 + self.rescan_share * (count - 1))).sum())

    def observe(self, predicted_ms: float, measured_ms: float) -> SearchCostModel:
        """The model after a step predicted at `predicted_ms` took `measured_ms`."""
        if predicted_ms <= 0 or measured_ms <= 0:
            return self
        ratio = measured_ms / (predicted_ms / self.scale)
        # A copy, not `replace`: the per-cluster table does not depend on the scale, and
        # rebuilding it after every step was a visible cost in the scheduler loop.
        model = copy.copy(self)
        object.__setattr__(model, "scale", (1 - self.alpha) * self.scale + self.alpha * ratio)
        return model


@dataclass(frozen=True)
class Pending:
    """A retrieval waiting for clusters: its key, its remaining clusters in search order, and how
    many steps in a row it has waited without being given a cluster."""

    key: object
    clusters: tuple[int, ...]
    waited: int = 0


STARVATION_STEPS = 32  # a retrieval passed over this many steps in a row goes first
# Rescans of the step's lists by retrievals left behind may add this share of the budget: all of
# them would advance every retrieval a little each step (with nprobe 128 of 512 lists, nearly all
# lists are shared) and make them finish together at the end, the convoy the order avoids.
RESCAN_ROOM = 0.5


@dataclass(frozen=True)
class StepPlan:
    """The clusters each retrieval searches in the next step, and the predicted step time."""

    take: tuple[tuple[object, tuple[int, ...]], ...]
    predicted_ms: float

    @property
    def n_clusters(self) -> int:
        return sum(len(c) for _, c in self.take)


def plan_step(pending: Sequence[Pending], budget_ms: float, cost: SearchCostModel) -> StepPlan:
    """Fill the step's `budget_ms` with clusters, the retrievals with the least remaining work
    first (each in its own cluster order); a retrieval passed over for `STARVATION_STEPS` steps
    goes first. When the budget ends the filling, the retrievals left behind, in the same order,
    also take those of their clusters the step already scans, within `RESCAN_ROOM` more of the
    budget: their lists are read once for all of them (see `SearchCostModel.step_ms`), so they
    cost a fraction of a scan and bring those retrievals closer to done.

    With a fixed number of requests in flight, throughput is that number over the per-request
    latency, so a step should finish retrievals, not advance all of them a little: sharing every
    step round-robin makes similar retrievals all finish at the end of their joint work (on the
    oneshot bench it fell behind a thread pool: docs/benchmarks/code-figures.md). The first
    cluster is always taken, so every step makes progress even when one cluster exceeds the budget.
    """
    if not budget_ms >= 0:
        raise ConfigError("budget_ms", f"must be non-negative, got {budget_ms}")
    remaining = [cost.clusters_ms(p.clusters) for p in pending]
    order = sorted(range(len(pending)),
                   key=lambda i: (pending[i].waited < STARVATION_STEPS, remaining[i], i))
    taken: dict[int, int] = {}
    spent = 0.0
    full = True
    for i in order:
        clusters = pending[i].clusters
        if not clusters:
            continue
        # Running total after each cluster, added in the same order as one at a time.
        running = np.cumsum(np.concatenate(([spent], cost.each_ms(clusters))))[1:]
        fits = int(np.searchsorted(running, budget_ms, side="right"))
        n = max(fits, 1) if spent == 0 else fits
        if n:
            taken[i] = n
            spent = float(running[n - 1])
        if n < len(clusters):
            full = False
            break
    take = {i: list(pending[i].clusters[:n]) for i, n in taken.items()}
    if not full:
        _join_scanned_lists(pending, order, take, budget_ms * (1 + RESCAN_ROOM) - spent, cost)
    flat = np.fromiter((c for clusters in take.values() for c in clusters), np.int64)
    return StepPlan(tuple((pending[i].key, tuple(take[i])) for i in sorted(take)),
                    cost.step_ms(flat))


def _join_scanned_lists(pending: Sequence[Pending], order: Sequence[int],
                        take: dict[int, list[int]], room_ms: float, cost: SearchCostModel) -> None:
    """Add to `take`, least remaining work first, the lists of the step that each retrieval
    also probes and has not taken yet, priced as rescans, while `room_ms` lasts."""
    in_step = {c for clusters in take.values() for c in clusters}
    for i in order:
        shared = [c for c in pending[i].clusters[len(take.get(i, ())):] if c in in_step]
        if not shared:
            continue
        ms = cost.rescan_share * cost.clusters_ms(shared)
        if ms > room_ms:
            return
        take.setdefault(i, []).extend(shared)
        room_ms -= ms


def optimal_budget_ms(beta_ms: float, mean_retrieval_ms: float) -> float:
    """HedraRAG's sub-stage budget mb = sqrt(2 beta t_R), where (t_R - mb)/2 - (t_R/mb) beta peaks."""
    if beta_ms < 0 or mean_retrieval_ms < 0:
        raise ConfigError("beta_ms", "budget inputs must be non-negative")
    return math.sqrt(2.0 * beta_ms * mean_retrieval_ms)


_CALIBRATED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CALIBRATING = threading.Lock()


def calibrated(engine, seconds: float = 0.2) -> SearchCostModel:
    """`calibrate` once per engine: every scheduler run on it starts from the same model (and
    follows its own measurements from there). Per run, the micro-benchmark was 0.2 s of both
    search cores, a tenth of a 48-request offline bench run."""
    with _CALIBRATING:
        model = _CALIBRATED.get(engine)
        if model is None:
            model = _CALIBRATED[engine] = calibrate(engine, seconds)
        return model


def calibrate(engine, seconds: float = 0.3, seed: int = 0) -> SearchCostModel:
    """Fit ns_per_element and ns_per_cluster from a few timed steps on random queries.

    Two step shapes (one cluster vs eight clusters per query, same queries) separate the fixed
    per-cluster cost from the per-element cost; the cheaper repeat of each is kept (least noise).
    """
    sizes = engine.cluster_sizes()
    dim = engine.dim
    if sizes.sum() == 0:
        return SearchCostModel(tuple(int(s) for s in sizes), dim, list_rule=engine.list_rule)
    from ragraph.runtime.retrieval.protocol import SearchTask

    rng = np.random.default_rng(seed)
    queries = rng.standard_normal((16, dim)).astype(np.float32)
    nonempty = np.flatnonzero(sizes)
    deadline = time.perf_counter() + seconds
    best: dict[int, tuple[float, float, int]] = {}
    while time.perf_counter() < deadline or len(best) < 2:
        for width in (1, 8):
            # Distinct clusters within a query (a probe list has no repeats), per query.
            w = min(width, nonempty.size)
            pick = np.stack([rng.choice(nonempty, size=w, replace=False) for _ in range(16)])
            tasks = [SearchTask.of(q, c) for q, c in zip(queries, pick, strict=True)]
            t0 = time.perf_counter()
            engine.search_step(tasks, 10)
            ns = (time.perf_counter() - t0) * 1e9
            elements = float(sizes[pick].sum()) * dim
            if width not in best or ns < best[width][0]:
                best[width] = (ns, elements, pick.size)
    return _fit(best, tuple(int(s) for s in sizes), dim, engine.list_rule)


def _fit(best: dict[int, tuple[float, float, int]], sizes: tuple[int, ...], dim: int,
         rule: ListMajorRule | None) -> SearchCostModel:
    (ns1, el1, n1), (ns8, el8, n8) = best[1], best[8]
    # Solve ns = a * elements + b * clusters for the two shapes; fall back to all-per-element.
    det = el1 * n8 - el8 * n1
    a = (ns1 * n8 - ns8 * n1) / det if det else 0.0
    b = (el1 * ns8 - el8 * ns1) / det if det else 0.0
    if a <= 0 or b < 0:
        a, b = (ns1 + ns8) / (el1 + el8), 0.0
    return SearchCostModel(sizes, dim, ns_per_element=a, ns_per_cluster=b, list_rule=rule)
