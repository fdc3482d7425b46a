"""Exact merging of partial top-k results.

faiss keeps a bounded heap per query: an element enters only if it is strictly better than the
current worst, and the worst among equal distances is the one with the larger id (L2; smaller for
inner product). The output is sorted best first with equal distances by id. Two facts follow, and
the merge rests on them:

1. In a heap of size m, every element strictly better than the final m-th value is kept, whatever
   the scan order. So a partial top-(k+1) whose (k+1)-th value is strictly worse than the merged
   k-th value T holds every element of its clusters that is at least as good as T.
2. If the union of the partials holds exactly k elements at least as good as T, those are faiss's
   answer (no element at T was ever turned away). With more than k, there is an exact tie at T and
   which tied ids faiss keeps depends on its scan order: the merge reports `tied` and the engine
   re-scans that one query in faiss's order (see `FaissIVFEngine.finish`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.protocol import Metric, TopK


@dataclass(frozen=True)
class Merged:
    """The merged top-k, and whether an exact tie at the k-th value makes it order-dependent."""

    topk: TopK
    tied: bool


def faiss_order(distances: np.ndarray, ids: np.ndarray, metric: Metric) -> np.ndarray:
    """Indices that sort (distance, id) pairs the way faiss orders its output, best first."""
    if metric is Metric.L2:
        return np.lexsort((ids, distances))
    # Inner product: faiss's min-heap pops (smallest distance, smallest id) last, so its output is
    # sorted by distance, then id, both descending.
    return np.lexsort((-ids, -distances.astype(np.float64)))


def empty_topk(k: int, metric: Metric) -> TopK:
    return TopK(
        np.full(k, metric.worst, dtype=np.float32),
        np.full(k, -1, dtype=np.int64),
        np.empty(0, dtype=np.int64),
    )


def merge_partials(partials: Sequence[TopK], k: int, metric: Metric) -> Merged:
    """Merge partial results of one query into its top-k, faiss's output order, ties flagged."""
    if k <= 0:
        raise ConfigError("k", f"must be positive, got {k}")
    if not partials:
        return Merged(empty_topk(k, metric), tied=False)
    dist = np.concatenate([p.distances for p in partials])
    ids = np.concatenate([p.ids for p in partials])
    clusters = np.concatenate([p.clusters for p in partials])
    keep = ids >= 0
    dist, ids = dist[keep], ids[keep]
    order = faiss_order(dist, ids, metric)
    dist, ids = dist[order], ids[order]
    tied = bool(ids.shape[0] > k and dist[k] == dist[k - 1])
    out = empty_topk(k, metric)
    n = min(k, ids.shape[0])
    out.distances[:n] = dist[:n]
    out.ids[:n] = ids[:n]
    return Merged(TopK(out.distances, out.ids, np.sort(clusters)), tied)


def merge_rows(owner: np.ndarray, distances: np.ndarray, ids: np.ndarray, n: int, k: int,
               metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    """The rows of one search call merged per owner, all at once: row r's results (distances,
    ids of shape (rows, m)) belong to query `owner[r]` (-1: none). Returns (n, k) distances and
    ids, each query's best k of its rows in faiss's order, as `merge_partials` gives them."""
    m = ids.shape[1]
    who = np.repeat(np.asarray(owner, dtype=np.int64), m)
    dist, idx = distances.reshape(-1), ids.reshape(-1)
    keep = (idx >= 0) & (who >= 0)
    who, dist, idx = who[keep], dist[keep], idx[keep]
    if metric is Metric.L2:
        order = np.lexsort((idx, dist, who))
    else:
        order = np.lexsort((-idx, -dist.astype(np.float64), who))
    who, dist, idx = who[order], dist[order], idx[order]
    first = np.searchsorted(who, who, side="left")  # start of each element's owner group
    rank = np.arange(who.size) - first
    top = rank < k
    out_d = np.full((n, k), metric.worst, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    out_d[who[top], rank[top]] = dist[top]
    out_i[who[top], rank[top]] = idx[top]
    return out_d, out_i


def check_coverage(probe: np.ndarray, partials: Sequence[TopK]) -> None:
    """Raise unless the partials' clusters cover `probe` exactly once (a scheduler bug otherwise)."""
    covered = np.concatenate([p.clusters for p in partials]) if partials else np.empty(0, np.int64)
    want = np.sort(np.asarray(probe, dtype=np.int64))
    got = np.sort(covered)
    if got.shape != want.shape or not np.array_equal(got, want):
        missing = np.setdiff1d(want, got)
        extra = got.shape[0] - np.unique(got).shape[0]
        raise ConfigError(
            "partials",
            f"steps must cover the probe list exactly once: {missing.size} cluster(s) missing"
            f" ({missing[:8].tolist()}), {extra} searched twice, "
            f"{np.setdiff1d(got, want).size} outside the probe list",
        )


def finish_exact(probe: np.ndarray, partials: Sequence[TopK], k: int, metric: Metric,
                 rescan: Callable[[np.ndarray], TopK]) -> TopK:
    """What every engine's `finish` does: check the coverage, merge, and on an exact tie at the
    k-th value let `rescan(probe)` decide in faiss's scan order (fact 2 above)."""
    check_coverage(probe, partials)
    merged = merge_partials(partials, k, metric)
    if not merged.tied:
        return merged.topk
    return rescan(np.asarray(probe, dtype=np.int64))


def replay_heap(distances: np.ndarray, ids: np.ndarray, k: int, metric: Metric,
                clusters: np.ndarray) -> TopK:
    """faiss's size-k heap fed `distances`/`ids` in scan order, as its IVF scanners feed it: an
    element enters a full heap only if strictly better than the top, the worst element (ties:
    the larger id for L2, the smaller for inner product). Fed only the elements at least as good
    as the final k-th value, it keeps what the whole scan keeps: a worse element only ever holds
    a slot that the next such element takes."""
    sign = 1.0 if metric is Metric.L2 else -1.0
    heap: list[tuple[float, int]] = []  # (-badness, -tie id): heapq's min is faiss's top
    for d, i in zip(distances.tolist(), ids.tolist(), strict=True):
        bad = sign * d
        if len(heap) < k:
            heapq.heappush(heap, (-bad, -sign * i))
        elif bad < -heap[0][0]:
            heapq.heapreplace(heap, (-bad, -sign * i))
    dist = np.array([-b * sign for b, _ in heap], dtype=np.float32)
    kept = np.array([-t * sign for _, t in heap], dtype=np.int64)
    order = faiss_order(dist, kept, metric)
    out = empty_topk(k, metric)
    out.distances[: order.size] = dist[order]
    out.ids[: order.size] = kept[order]
    return TopK(out.distances, out.ids, np.sort(clusters))
