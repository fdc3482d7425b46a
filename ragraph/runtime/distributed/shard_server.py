"""One shard, as it runs inside its Ray actor: its own lists, scanned by faiss.

A plain class (Ray wraps it with `ray.remote` in `shard_pool`), so it runs and is tested without
Ray too. On a restart, Ray builds it again and it loads its lists again from the shared path.
Arguments and results are arrays, which Ray moves without pickling element by element.
"""

from __future__ import annotations

import os

import numpy as np

from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
from ragraph.runtime.retrieval.ivf.shard_lists import ShardSource, load_shard
from ragraph.runtime.retrieval.protocol import Metric, ScanOrder, SearchTask


class ShardServer:
    def __init__(self, source: ShardSource, shard: int, clusters: np.ndarray,
                 sizes: np.ndarray, threads: int) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        # cache_bytes=None: cluster order when this shard's share of a step outgrows its cache.
        self._engine = FaissIVFEngine(load_shard(source, shard, clusters, sizes))
        self._clusters = np.asarray(clusters, dtype=np.int64)

    def ready(self) -> int:
        """The process id (a restarted shard has a new one)."""
        return os.getpid()

    def search(self, queries: np.ndarray, clusters: list[np.ndarray], k: int,
               order: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Partial top-(k+1) per task, as (distances, ids) of shape (n, k+1), and the vectors
        scanned."""
        tasks = [SearchTask.of(q, c) for q, c in zip(queries, clusters, strict=True)]
        step = self._engine.search_step(tasks, k, ScanOrder(order))
        dist = np.stack([p.distances for p in step.partials])
        ids = np.stack([p.ids for p in step.partials])
        return dist, ids, step.stats.vectors_scanned

    def candidates(self, query: np.ndarray, clusters: np.ndarray,
                   bound: float) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per cluster, in storage order, the (distances, ids) at least as good as `bound`:
        what a tie at the k-th value is decided on (see `merge.replay_heap`)."""
        out = []
        for c in np.asarray(clusters, dtype=np.int64).tolist():
            dist, ids = self._engine.scan_list(query, c)
            good = dist <= bound if self._engine.metric is Metric.L2 else dist >= bound
            out.append((dist[good], ids[good]))
        return out

    def cluster_of(self, ids: np.ndarray, clusters: np.ndarray) -> np.ndarray:
        """The cluster of each id that lies in one of `clusters` of this shard, else -1."""
        found = self._engine.cluster_of(ids)
        return np.where(np.isin(found, clusters), found, -1)
