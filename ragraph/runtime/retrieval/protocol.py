"""The search engine's unit of work: "search these clusters for these queries".

A retrieval is cut into steps. `probe` gives each query its ordered cluster list (the coarse
quantizer's answer); `search_step` searches a ragged set of (query, clusters) tasks from many requests
in one call and returns a partial top-k per task; `finish` merges one query's partials into exactly
what `index.search` returns at the same nprobe, whatever the number and order of the steps.

Partials carry k + 1 entries, not k: a partial whose (k+1)-th distance is strictly worse than the
merged k-th distance provably holds every element that can reach the final top-k, so merging needs no
other information; when it is not (an exact tie at the k-th distance), `finish` re-scans the probe
list in faiss's own order so ties break exactly as faiss breaks them (see merge.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

import numpy as np


class Metric(StrEnum):
    """The distance of an index: smaller-is-better L2 or larger-is-better inner product."""

    L2 = "l2"
    IP = "ip"

    @property
    def worst(self) -> np.float32:
        # faiss fills missing results with the heap's neutral value (+/-FLT_MAX), id -1.
        big = np.finfo(np.float32).max
        return np.float32(big if self is Metric.L2 else -big)


class ScanOrder(StrEnum):
    """How a step's tasks become rows of faiss's call; every order returns the same partials.

    - `query`: one row per task, one thread per row: how faiss's own `search` runs a batch.
    - `balanced`: query-major, long tasks cut so every thread gets equal work (see `split`).
    - `cluster`: one row per (task, cluster), sorted by cluster: queries sharing a list scan it
      back to back, while it is in cache.
    - `list`: list-major (the wavefront's steps): each list read once, all its queries scored by
      one matrix product, the candidates re-scored by faiss (`listmajor`), when the step's
      lists are shared enough for that to pay on an IVF-Flat index; else `cluster`.
    """

    QUERY = "query"
    BALANCED = "balanced"
    CLUSTER = "cluster"
    LIST = "list"


@dataclass(frozen=True)
class SearchTask:
    """Search `clusters` (any order, no duplicates) for one query vector of shape (d,)."""

    query: np.ndarray
    clusters: np.ndarray

    @staticmethod
    def of(query: np.ndarray, clusters: Sequence[int] | np.ndarray) -> SearchTask:
        return SearchTask(
            np.ascontiguousarray(query, dtype=np.float32).reshape(-1),
            np.asarray(clusters, dtype=np.int64).reshape(-1),
        )


@dataclass(frozen=True)
class TopK:
    """Best-first distances (float32) and ids (int64) of one query; missing entries have id -1.

    `clusters` are the clusters these results were drawn from, so `finish` can check that the steps
    of a retrieval covered its probe list exactly once.
    """

    distances: np.ndarray
    ids: np.ndarray
    clusters: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def valid_ids(self) -> np.ndarray:
        return self.ids[self.ids >= 0]


@dataclass(frozen=True)
class StepStats:
    """What one step cost: vectors scanned in total (per query and list) and how many of them on
    the accelerator tier; `list_major`: whether each list was read once for all its queries."""

    vectors_scanned: int
    vectors_on_accelerator: int = 0
    seconds: float = 0.0
    list_major: bool = False


@dataclass(frozen=True)
class StepResult:
    """One partial top-(k+1) per task, in task order, and what the step cost."""

    partials: list[TopK]
    stats: StepStats


@runtime_checkable
class SearchEngine(Protocol):
    """A stepwise IVF search engine. Implementations: `ivf.FaissIVFEngine`, `hotcache.TieredEngine`."""

    @property
    def dim(self) -> int: ...

    @property
    def nlist(self) -> int: ...

    @property
    def metric(self) -> Metric: ...

    def cluster_sizes(self) -> np.ndarray:
        """Vectors per cluster, shape (nlist,), int64."""
        ...

    @property
    def list_rule(self):
        """When list-order steps are scanned list-major (`listmajor.ListMajorRule`; None:
        never), for the cost model to price them as the engine runs them."""
        ...

    def probe(self, queries: np.ndarray, nprobe: int) -> np.ndarray:
        """Each query's clusters, nearest centroid first: shape (n, nprobe), int64."""
        ...

    def search_step(self, tasks: Sequence[SearchTask], k: int,
                    order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        """Search all tasks in one multi-threaded call, rows laid out by `order`; one partial
        top-(k+1) per task."""
        ...

    def finish(
        self, query: np.ndarray, probe: np.ndarray, partials: Sequence[TopK], k: int
    ) -> TopK:
        """Merge the partials of one query whose steps covered `probe` into the exact top-k."""
        ...

    def search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """One-shot search: (distances, ids) of shape (n, k), identical to faiss `index.search`."""
        ...

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        """The cluster holding each id (-1 for unknown ids)."""
        ...


def search_in_one_step(engine: SearchEngine, queries: np.ndarray, k: int,
                       nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    """`search` as one step of whole probe lists and a `finish` per query: what engines whose
    steps are their only scan path answer `search` with."""
    x = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, engine.dim)
    probe = engine.probe(x, nprobe)
    step = engine.search_step([SearchTask.of(q, p) for q, p in zip(x, probe, strict=True)], k)
    out = [engine.finish(q, p, [t], k) for q, p, t in zip(x, probe, step.partials, strict=True)]
    if not out:
        return np.empty((0, k), np.float32), np.empty((0, k), np.int64)
    return np.stack([t.distances for t in out]), np.stack([t.ids for t in out])
