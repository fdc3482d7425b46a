"""Similarity-aware search order (HedraRAG technique 2).

Retrievals of one request tend to land near each other: a later retrieval v' often finds its results
in the clusters that held an earlier retrieval v's results (H_v), or at least in v's probe set (C_v).
So v' searches its own probe set C' in the order H_v ∩ C', then (C_v - H_v) ∩ C', then the rest,
each group in probe order. Order only changes *when* the top-k is complete, never what it is: the
final merge is order-independent (merge.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ragraph.errors import ConfigError

# HedraRAG keeps each retrieval's top-20 in the request-local cache.
HISTORY_TOPK = 20


@dataclass(frozen=True)
class RetrievalRecord:
    """One finished retrieval: its best ids (<= 20), their clusters (H_v) and its probe set (C_v)."""

    ids: tuple[int, ...]
    result_clusters: frozenset[int]
    probe_clusters: frozenset[int]


@dataclass(frozen=True)
class History:
    """A request's earlier retrievals, oldest first; `record` returns a new history."""

    records: tuple[RetrievalRecord, ...] = ()

    def record(
        self,
        ids: Sequence[int],
        probe: Sequence[int],
        cluster_of: Callable[[np.ndarray], np.ndarray],
    ) -> History:
        top = np.asarray(ids, dtype=np.int64)[:HISTORY_TOPK]
        top = top[top >= 0]
        held = cluster_of(top) if top.size else np.empty(0, np.int64)
        rec = RetrievalRecord(
            tuple(int(i) for i in top),
            frozenset(int(c) for c in held if c >= 0),
            frozenset(int(c) for c in probe),
        )
        return replace(self, records=(*self.records, rec))

    @property
    def result_clusters(self) -> frozenset[int]:
        """H: every cluster that held an earlier result."""
        return frozenset().union(*(r.result_clusters for r in self.records))

    @property
    def probe_clusters(self) -> frozenset[int]:
        """C: every cluster an earlier retrieval probed."""
        return frozenset().union(*(r.probe_clusters for r in self.records))

    @property
    def cached_ids(self) -> tuple[int, ...]:
        """The request-local cache: earlier results, most recent retrieval first, no repeats."""
        seen: dict[int, None] = {}
        for r in reversed(self.records):
            seen.update(dict.fromkeys(r.ids))
        return tuple(seen)


def reorder(probe: Sequence[int] | np.ndarray, history: History) -> np.ndarray:
    """`probe` (nearest centroid first) as H∩C', then (C−H)∩C', then the rest, each stably."""
    probe = np.asarray(probe, dtype=np.int64)
    held, probed = history.result_clusters, history.probe_clusters
    rank = np.array(
        [0 if c in held else 1 if c in probed else 2 for c in probe.tolist()], dtype=np.int64
    )
    return probe[np.argsort(rank, kind="stable")]


@dataclass(frozen=True)
class LocalityGroups:
    """How many of a probe set's clusters fall in each reorder group."""

    held: int
    probed: int
    rest: int


def groups(probe: Sequence[int], history: History) -> LocalityGroups:
    held, probed = history.result_clusters, history.probe_clusters
    h = sum(1 for c in probe if c in held)
    p = sum(1 for c in probe if c not in held and c in probed)
    return LocalityGroups(h, p, len(probe) - h - p)


def completion_point(result_clusters: np.ndarray, order: Sequence[int] | np.ndarray) -> int:
    """Clusters of `order` searched before every result's cluster was: the early-completion point.

    Once the clusters holding the final top-k are searched, the partial top-k is the final top-k
    (the final results are the best of any superset of themselves); later clusters only confirm it.
    """
    order = np.asarray(order, dtype=np.int64)
    position = {int(c): i for i, c in enumerate(order.tolist())}
    needed = [int(c) for c in np.unique(result_clusters) if c >= 0]
    missing = [c for c in needed if c not in position]
    if missing:
        raise ConfigError("order", f"results lie in clusters {missing[:8]} that the order omits")
    return 1 + max((position[c] for c in needed), default=-1)


def early_completion(engine, query: np.ndarray, order: Sequence[int] | np.ndarray, k: int) -> int:
    """After how many clusters of `order` the exact top-k of `query` over `order` was complete."""
    from ragraph.runtime.retrieval.protocol import SearchTask

    order = np.asarray(order, dtype=np.int64)
    step = engine.search_step([SearchTask.of(query, order)], k)
    final = engine.finish(query, order, step.partials, k)
    return completion_point(engine.cluster_of(final.valid_ids), order)
