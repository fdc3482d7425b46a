"""A step split between the accelerator tier (resident clusters, torch) and the CPU tier (faiss).

The resident clusters of a step are scanned list-major on the device (`listmajor` with torch
arrays over the float32 tiles, one product a chunk where the tiles are joined in one store:
`devicelists`): each tile read once for the queries probing it, the candidates
chosen within a rigorous bound of the device's float32 products (`bounds`), and re-scored on the
host by faiss's own distance kernel. The other clusters are scanned by the CPU engine in the
step's order. Both halves are exact top-(k+1) partials of their clusters, distances computed by
faiss, so each task's merge of the two (merge.py, fact 1) equals the CPU-only partial. The two
halves run side by side (the device's on a thread of its own): a step takes the longer of
them, not their sum.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ragraph.runtime.retrieval.ivf.arrays import TorchArrays
from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine, OverIVF
from ragraph.runtime.retrieval.merge import merge_rows
from ragraph.runtime.retrieval.protocol import (
    ScanOrder,
    SearchTask,
    StepResult,
    StepStats,
    TopK,
    search_in_one_step,
)
from ragraph.runtime.retrieval.tier.devicelists import GroupedArrays
from ragraph.runtime.retrieval.tier.hotcache import HotClusterCache, Resident


class TieredEngine(OverIVF):
    """A `SearchEngine` whose steps use the hot-cluster cache; results identical to faiss."""

    def __init__(self, base: FaissIVFEngine, cache: HotClusterCache) -> None:
        self._base = base
        self._cache = cache
        # One scan on the device at a time: steps are issued one after another anyway.
        self._device = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragraph-tier")

    @property
    def index(self):
        """The faiss index behind both tiers."""
        return self._base.index

    @property
    def cache(self) -> HotClusterCache:
        return self._cache

    @property
    def list_rule(self):
        """The CPU tier's rule: the device scans its resident lists list-major in any case."""
        return self._base.list_rule

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        return self._base.cluster_of(ids)

    def list_ids(self, cluster: int) -> np.ndarray:
        return self._base.list_ids(cluster)

    def finish(self, query, probe, partials: Sequence[TopK], k: int) -> TopK:
        return self._base.finish(query, probe, partials, k)

    def search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        return search_in_one_step(self, queries, k, nprobe)

    def search_step(self, tasks: Sequence[SearchTask], k: int,
                    order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        snap = self._cache.resident
        sizes = self._base.cluster_sizes()
        split = [np.isin(t.clusters, np.fromiter(snap.tiles, np.int64)) for t in tasks]
        resident = [t.clusters[r] for t, r in zip(tasks, split, strict=True)]
        on_acc = int(sum(int(sizes[r].sum()) for r in resident))
        if on_acc == 0:
            step = self._base.search_step(tasks, k, order)
        else:
            start = time.perf_counter()
            device = self._device.submit(self._scan_resident, tasks, resident, k, snap)
            host = [SearchTask(t.query, t.clusters[~r]) for t, r in zip(tasks, split, strict=True)]
            host_step = self._base.search_step(host, k, order)
            step = self._merged(tasks, host_step, *device.result(), k,
                                time.perf_counter() - start, on_acc)
        clusters = np.concatenate([t.clusters for t in tasks]) if tasks else np.empty(0, np.int64)
        self._cache.record_step(clusters, step.stats.vectors_scanned, on_acc)
        return step

    def _scan_resident(self, tasks: Sequence[SearchTask], resident: list[np.ndarray], k: int,
                       snap: Resident) -> tuple[np.ndarray, np.ndarray]:
        """The resident clusters' list-major scan on the device, re-scored by faiss."""
        x = np.stack([t.query for t in tasks])
        if snap.lists is not None:
            return self._base.scan_lists(x, resident, k + 1, snap.lists.tile,
                                         GroupedArrays.over(snap.lists))
        return self._base.scan_lists(x, resident, k + 1, snap.tiles.__getitem__,
                                     TorchArrays(self._cache.device, self.dim))

    def _merged(self, tasks: Sequence[SearchTask], host: StepResult, dist: np.ndarray,
                ids: np.ndarray, k: int, seconds: float, on_acc: int) -> StepResult:
        """The host step's partials merged per task with the resident clusters' scan."""
        n = len(tasks)
        dist, ids = merge_rows(np.r_[np.arange(n), np.arange(n)],
                               np.vstack([np.stack([p.distances for p in host.partials]), dist]),
                               np.vstack([np.stack([p.ids for p in host.partials]), ids]),
                               n, k + 1, self.metric)
        partials = [TopK(dist[i], ids[i], t.clusters.copy()) for i, t in enumerate(tasks)]
        stats = StepStats(host.stats.vectors_scanned + on_acc, on_acc, seconds,
                          host.stats.list_major)
        return StepResult(partials, stats)
