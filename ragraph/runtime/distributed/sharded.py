"""`ShardedEngine`: the `SearchEngine` protocol over lists held by Ray actors.

The coarse quantizer stays here, with the scheduler: `probe` is the single-node engine's own
(the index file read memory-mapped, so its lists are never paged in on this side). A step sends
each (query, clusters) task to the shards holding those clusters, one call per shard, and merges
a task's per-shard partials into one partial top-(k+1) exactly as a split row is merged on one
node (`merge`, fact 1). `finish` is the single-node one; on an exact tie at the k-th value it
replays faiss's heap over the tied candidates in faiss's scan order, which the shards send in
storage order (`merge.replay_heap`). Answers are therefore the single-node engine's, ids and
distances, whatever the number of shards.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragraph.errors import ConfigError
from ragraph.runtime.distributed.faults import Fault, FaultLog
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.shard_pool import (
    RunningShards,
    ShardPool,
    start_shards,
)
from ragraph.runtime.distributed.shard_server import ShardServer
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine, OverIVF
from ragraph.runtime.retrieval.ivf.shard_lists import open_plan, read_mapped
from ragraph.runtime.retrieval.merge import (
    empty_topk,
    finish_exact,
    merge_partials,
    replay_heap,
)
from ragraph.runtime.retrieval.protocol import (
    ScanOrder,
    SearchTask,
    StepResult,
    StepStats,
    TopK,
    search_in_one_step,
)


class ShardedEngine(OverIVF):
    """Exact stepwise IVF search with the lists on `pool`'s actors; `local`, the index read
    memory-mapped, answers probes (`OverIVF`)."""

    def __init__(self, local: FaissIVFEngine, pool: ShardPool, log: FaultLog) -> None:
        self._base = local
        self.pool = pool
        self._log = log

    @staticmethod
    def open(index_dir: Path, options: ScaleConfig,
             server: type = ShardServer) -> ShardedEngine:
        """Shards for an index directory: its prebuilt `shards-N/` or lists cut at start-up;
        closing the engine kills them."""
        plan, source, sizes = open_plan(Path(index_dir), options.shards, options.replicate)
        return ShardedEngine.attach(start_shards(plan, source, sizes, options, server),
                                    owner=True)

    @staticmethod
    def attach(shards: RunningShards, owner: bool = False) -> ShardedEngine:
        """An engine over shards already running (started by another process, or `open`)."""
        log = FaultLog()
        local = FaissIVFEngine(read_mapped(Path(shards.source.index_file)))
        return ShardedEngine(local, ShardPool(shards, log, owner), log)

    def faults(self) -> tuple[Fault, ...]:
        return self._log.snapshot()

    def search_step(self, tasks: Sequence[SearchTask], k: int,
                    order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        if k <= 0:
            raise ConfigError("k", f"must be positive, got {k}")
        self._check_clusters(tasks)
        if not tasks:
            return StepResult([], StepStats(0))
        queries = np.stack([t.query for t in tasks])
        start = time.perf_counter()

        def call(actor, rows: list[np.ndarray]):
            live = _nonempty(rows)
            return actor.search.remote(queries[live], [rows[i] for i in live], k,
                                       ScanOrder(order).value)

        shares = self.pool.scatter([t.clusters for t in tasks], call, "a search step")
        parts: list[list[TopK]] = [[] for _ in tasks]
        scanned = 0
        for rows, (dist, ids, n) in shares:
            scanned += n
            for j, i in enumerate(_nonempty(rows)):
                parts[i].append(TopK(dist[j], ids[j], rows[i]))
        partials = [self._combine(p, t, k) for p, t in zip(parts, tasks, strict=True)]
        return StepResult(partials, StepStats(scanned, 0, time.perf_counter() - start))

    def _combine(self, parts: list[TopK], task: SearchTask, k: int) -> TopK:
        """One task's partial top-(k+1) from its shards' partials."""
        if len(parts) == 1:
            return TopK(parts[0].distances, parts[0].ids, task.clusters.copy())
        if not parts:
            return empty_topk(k + 1, self.metric)
        return merge_partials(parts, k + 1, self.metric).topk

    def finish(self, query: np.ndarray, probe: np.ndarray, partials: Sequence[TopK],
               k: int) -> TopK:
        return finish_exact(probe, partials, k, self.metric,
                            lambda probe: self._replay(query, probe, partials, k))

    def _replay(self, query: np.ndarray, probe: np.ndarray, partials: Sequence[TopK],
                k: int) -> TopK:
        """An exact tie at the k-th value: faiss's heap replayed over every element at least as
        good as it, lists in probe order, each list in storage order."""
        bound = float(merge_partials(partials, k, self.metric).topk.distances[k - 1])
        x = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)

        def call(actor, rows: list[np.ndarray]):
            return actor.candidates.remote(x, rows[0], bound)

        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for rows, per_list in self.pool.scatter([probe], call, "a tie re-scan"):
            found.update(zip(rows[0].tolist(), per_list, strict=True))
        dist = np.concatenate([found[c][0] for c in probe.tolist()])
        ids = np.concatenate([found[c][1] for c in probe.tolist()])
        return replay_heap(dist, ids, k, self.metric, probe)

    def search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        return search_in_one_step(self, queries, k, nprobe)

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        """Asked of the shards: this side holds no ids."""
        ids = np.asarray(ids, dtype=np.int64)

        def call(actor, rows: list[np.ndarray]):
            return actor.cluster_of.remote(ids, rows[0])

        out = np.full(ids.shape, -1, dtype=np.int64)
        everything = np.arange(self.nlist, dtype=np.int64)
        for _, found in self.pool.scatter([everything], call, "a cluster lookup"):
            out = np.maximum(out, found)
        return out

    def close(self) -> None:
        self.pool.close()

    def _check_clusters(self, tasks: Sequence[SearchTask]) -> None:
        for i, t in enumerate(tasks):
            if t.clusters.size and (t.clusters.min() < 0 or t.clusters.max() >= self.nlist):
                raise ConfigError("clusters", f"task {i} names clusters outside [0, {self.nlist})")


def _nonempty(rows: list[np.ndarray]) -> list[int]:
    return [i for i, r in enumerate(rows) if r.size]
