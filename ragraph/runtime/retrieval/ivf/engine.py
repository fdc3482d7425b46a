"""Stepwise search over a faiss IVF index (IVF-Flat, IVF-SQ8; any IndexIVF without a transform).

One step is one `search_preassigned` call: each task becomes one or more rows of the assignment
matrix, clusters padded with -1 (faiss skips negative keys), laid out by the step's `ScanOrder` (see
`split`); a task's rows are merged back exactly. faiss's `parallel_mode` 3 splits that call over queries on
all OpenMP threads while each query still scans its lists sequentially with one heap, which is what
keeps its results identical to `index.search` (mode 2 splits one query's lists over threads and merges
per-thread heaps, which can break exact ties differently). `parallel_mode` 0, the default, runs
`search_preassigned` on one thread.

A list-order step on an IVF-Flat index whose lists are shared by enough queries is scanned
list-major instead (`listmajor`): each list read once for all its queries, faiss's kernel
re-scoring the candidates, so its partials are the same as a `search_preassigned` call's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.ivf.arrays import NumpyArrays
from ragraph.runtime.retrieval.ivf.listmajor import ListMajorRule, ListMajorScan
from ragraph.runtime.retrieval.ivf.lists import list_ids, list_view
from ragraph.runtime.retrieval.ivf.products import host_product
from ragraph.runtime.retrieval.ivf.sharing_trial import pinned as pinned_sharing
from ragraph.runtime.retrieval.ivf.sharing_trial import run_trial
from ragraph.runtime.retrieval.ivf.split import (
    Layout,
    balance,
    by_cluster,
    fits_in_cache,
    last_level_cache_bytes,
)
from ragraph.runtime.retrieval.merge import finish_exact, merge_rows
from ragraph.runtime.retrieval.protocol import (
    Metric,
    ScanOrder,
    SearchTask,
    StepResult,
    StepStats,
    TopK,
)

# Split over queries, one heap per query scanning its lists in order (see module docstring).
PARALLEL_OVER_QUERIES = 3


def ivf_of(index):
    """The index as an IndexIVF, or a SearchIndexError naming what was found instead."""
    import faiss

    if not isinstance(index, faiss.IndexIVF):
        raise SearchIndexError(
            f"stepwise search needs a faiss IndexIVF (IVF-Flat, IVF-SQ8), got {type(index).__name__}"
        )
    return index


def metric_of(ivf) -> Metric:
    import faiss

    if ivf.metric_type == faiss.METRIC_L2:
        return Metric.L2
    if ivf.metric_type == faiss.METRIC_INNER_PRODUCT:
        return Metric.IP
    raise SearchIndexError(f"unsupported metric type {ivf.metric_type} (need L2 or inner product)")


class FaissIVFEngine:
    """The CPU `SearchEngine`: faiss does every distance, so its answers are faiss's answers."""

    def __init__(self, index, cache_bytes: int | None = None,
                 min_sharing: float | None = None) -> None:
        """`cache_bytes`: the CPU cache a step's lists must exceed before cluster order or
        list-major scans pay (default: half the last-level cache). `min_sharing`: the queries a
        list from which a step goes list-major (else `RAGRAPH_LIST_MAJOR_SHARING`). Both pin
        facts of the host; where neither is given and the index outgrows the cache, the
        crossover is timed on this index before the first list-order step (`sharing_trial`),
        else the library's is taken."""
        self._ivf = ivf_of(index)
        self._metric = metric_of(self._ivf)
        if self._ivf.by_residual and self._metric is Metric.IP and not _flat_codes(self._ivf):
            # Residual IP scanners add the coarse distance, which steps do not carry.
            raise SearchIndexError("residual inner-product IVF indexes are not supported")
        self._ivf.parallel_mode = PARALLEL_OVER_QUERIES
        n = self._ivf.nlist
        self._sizes = np.array([self._ivf.invlists.list_size(c) for c in range(n)], np.int64)
        self._cluster_of: np.ndarray | None = None
        self._list_bytes = self._sizes * int(self._ivf.code_size)
        self._cache_bytes = last_level_cache_bytes() // 2 if cache_bytes is None else cache_bytes
        flat_codes = _flat_codes(self._ivf)
        self._lists = ListMajorScan(self._ivf, self._metric) if flat_codes else None
        if min_sharing is None:
            min_sharing = pinned_sharing()
        self._rule: ListMajorRule | None = None
        if flat_codes:
            self._rule = ListMajorRule(self._list_bytes, self._cache_bytes,
                                       host_product(self.dim), min_sharing)
        self._trial_pending = (flat_codes and min_sharing is None and cache_bytes is None
                               and not fits_in_cache(self._list_bytes, np.arange(n),
                                                     self._cache_bytes))
        self._trial_lock = threading.Lock()

    @property
    def index(self):
        return self._ivf

    @property
    def dim(self) -> int:
        return int(self._ivf.d)

    @property
    def nlist(self) -> int:
        return int(self._ivf.nlist)

    @property
    def metric(self) -> Metric:
        return self._metric

    def cluster_sizes(self) -> np.ndarray:
        return self._sizes.copy()

    def probe(self, queries: np.ndarray, nprobe: int) -> np.ndarray:
        x = self._queries(queries)
        nprobe = self._check_nprobe(nprobe)
        # The quantizer is asked exactly as `IndexIVF::search` asks it (same batch, same nprobe),
        # so probe lists, and hence faiss's scan order, match the one-shot search.
        _, assign = self._ivf.quantizer.search(x, nprobe)
        return assign.astype(np.int64, copy=False)

    def search_step(self, tasks: Sequence[SearchTask], k: int,
                    order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        _check_k(k)
        if not tasks:
            return StepResult([], StepStats(0))
        clusters = [t.clusters for t in tasks]
        lengths, flat = _flatten(clusters)
        self._check_clusters(lengths, flat)
        x = self._queries(np.stack([t.query for t in tasks]))
        list_major = self.takes_list_major(ScanOrder(order), flat)
        t0 = time.perf_counter()
        if list_major:
            dist, ids = self.scan_lists(x, clusters, k + 1)
        else:
            dist, ids = self._scan_rows(x, clusters, flat, k + 1, ScanOrder(order))
        elapsed = time.perf_counter() - t0
        scanned = int(self._sizes[flat].sum())
        partials = [TopK(dist[i], ids[i], c.copy()) for i, c in enumerate(clusters)]
        return StepResult(partials, StepStats(scanned, 0, elapsed, list_major))

    @property
    def list_rule(self) -> ListMajorRule | None:
        """When list-order steps go list-major (None: never, the index has no raw vectors)."""
        if self._trial_pending:
            self._measure_rule()
        return self._rule

    def _measure_rule(self) -> None:
        with self._trial_lock:
            if not self._trial_pending:
                return
            rule, trial = self._rule, run_trial(self)
            self._rule = replace(rule, measured=trial.min_sharing(rule.min_sharing), trial=trial)
            self._trial_pending = False

    def takes_list_major(self, order: ScanOrder, flat: np.ndarray) -> bool:
        """Whether a step over `flat` (every task's clusters) in `order` reads each list once
        for all its queries (`listmajor.ListMajorRule`)."""
        if order is not ScanOrder.LIST:
            return False
        rule = self.list_rule
        return rule is not None and rule.takes(flat)

    def scan_lists(self, x: np.ndarray, clusters: Sequence[np.ndarray], m: int, tiles=None,
                   arrays=None) -> tuple[np.ndarray, np.ndarray]:
        """The list-major scan of `clusters[i]` for query x[i]: (n, m) distances and ids equal
        to a faiss scan's; `tiles` and `arrays` place it on an accelerator (default: the host,
        on faiss's threads)."""
        import faiss

        if self._lists is None:
            raise SearchIndexError("list-major scans need an IVF-Flat index (raw vectors)")
        arrays = NumpyArrays(product=host_product(self.dim)) if arrays is None else arrays
        return self._lists.scan(x, clusters, m, arrays, faiss.omp_get_max_threads(), tiles)

    def _scan_rows(self, x: np.ndarray, clusters: Sequence[np.ndarray], flat: np.ndarray, m: int,
                   order: ScanOrder) -> tuple[np.ndarray, np.ndarray]:
        """faiss's own scan, the tasks laid out as rows by `order`, rows merged back per task."""
        layout = self._layout(clusters, flat, order)
        dist, ids = self._scan(x[np.maximum(layout.owner, 0)], layout.assign, m)
        if layout.split:
            # A task's rows are merged like partials: they hold the same elements as one row.
            dist, ids = merge_rows(layout.owner, dist, ids, len(clusters), m, self._metric)
        return dist, ids

    def _layout(self, clusters: Sequence[np.ndarray], flat: np.ndarray,
                order: ScanOrder) -> Layout:
        import faiss

        if order is ScanOrder.QUERY:
            return Layout.of(clusters)
        # A list-order step not taken list-major is laid out in cluster order.
        threads = faiss.omp_get_max_threads()
        if order in (ScanOrder.CLUSTER, ScanOrder.LIST) and not self._fits_in_cache(flat):
            return by_cluster(clusters, self._sizes, threads)
        return balance(clusters, self._sizes, threads)

    def _fits_in_cache(self, flat: np.ndarray) -> bool:
        """Whether the step's lists (`flat`: all its clusters) stay cached in any order (then
        rows per pair cost more than they save; see `split`)."""
        return fits_in_cache(self._list_bytes, flat, self._cache_bytes)

    def finish(
        self, query: np.ndarray, probe: np.ndarray, partials: Sequence[TopK], k: int
    ) -> TopK:
        return finish_exact(probe, partials, k, self._metric,
                            lambda probe: self._rescan(query, probe, k))

    def _rescan(self, query: np.ndarray, probe: np.ndarray, k: int) -> TopK:
        """One query's probe list in faiss's own order (an exact tie: only that order decides
        which of the tied ids faiss keeps)."""
        dist, ids = self._scan(self._queries(query), probe.reshape(1, -1), k)
        return TopK(dist[0], ids[0], np.sort(probe))

    def search_filtered(self, query: np.ndarray, probe: np.ndarray, k: int,
                        allowed: np.ndarray) -> TopK:
        """The top-k of one query over its whole probe list among the `allowed` ids, in one
        call on one thread: faiss's `index.search` with `SearchParametersIVF(sel=
        IDSelectorBatch(allowed))` at that nprobe. A filter applied after an unfiltered top-k
        would return fewer than k; the selector skips the others inside the scan."""
        import faiss

        _check_k(k)
        allowed = np.ascontiguousarray(allowed, dtype=np.int64)
        selector = faiss.IDSelectorBatch(allowed.size, faiss.swig_ptr(allowed))
        dist, ids = self._scan(self._queries(query), probe.reshape(1, -1), k, selector)
        return TopK(dist[0], ids[0], np.sort(probe))

    def search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        _check_k(k)
        x = self._queries(queries)
        return self._scan(x, self.probe(x, nprobe), k)

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        table = self._id_table()
        out = np.full(ids.shape, -1, dtype=np.int64)
        ok = (ids >= 0) & (ids < table.shape[0])
        out[ok] = table[ids[ok]]
        return out

    def list_ids(self, cluster: int) -> np.ndarray:
        return list_ids(self._ivf, cluster).copy()

    def scan_list(self, query: np.ndarray, cluster: int) -> tuple[np.ndarray, np.ndarray]:
        """(distances, ids) of every vector of one list, faiss's distances in storage order:
        the order faiss's scanner feeds its heap. Needs unique ids within the list."""
        ids = self.list_ids(cluster)
        dist = np.empty(ids.size, dtype=np.float32)
        if ids.size:
            found_d, found = self._scan(self._queries(query), np.array([[cluster]], np.int64),
                                        ids.size)
            by_id = np.argsort(ids, kind="stable")
            dist[by_id[np.searchsorted(ids[by_id], found[0])]] = found_d[0]
        return dist, ids

    def list_vectors(self, cluster: int) -> np.ndarray:
        """The raw float32 vectors of one IVF-Flat list, (n, d), in scan order (a copy)."""
        return list_view(self._ivf, cluster)[0].copy()

    def _id_table(self) -> np.ndarray:
        if self._cluster_of is None:
            per_list = [self.list_ids(c) for c in range(self.nlist)]
            top = max((int(a.max()) for a in per_list if a.size), default=-1)
            table = np.full(top + 1, -1, dtype=np.int64)
            for c, a in enumerate(per_list):
                table[a] = c
            self._cluster_of = table
        return self._cluster_of

    def _scan(self, x: np.ndarray, assign: np.ndarray, k: int, selector=None):
        import faiss

        n, width = assign.shape
        params = faiss.SearchParametersIVF()
        if selector is not None:
            params.sel = selector
        # nprobe = row width: the padded assignment, not the index's own nprobe, defines the scan.
        params.nprobe = max(width, 1)
        coarse = np.zeros(assign.shape, dtype=np.float32)
        dist = np.empty((n, k), dtype=np.float32)
        ids = np.empty((n, k), dtype=np.int64)
        if width == 0:
            dist.fill(self._metric.worst)
            ids.fill(-1)
            return dist, ids
        assign = np.ascontiguousarray(assign, dtype=np.int64)
        sp = faiss.swig_ptr
        self._ivf.search_preassigned_c(
            n, sp(x), k, sp(assign), sp(coarse), sp(dist), sp(ids), False, params
        )
        return dist, ids

    def _check_clusters(self, lengths: np.ndarray, flat: np.ndarray) -> None:
        if flat.size and (flat.min() < 0 or flat.max() >= self.nlist):
            bad = int(np.flatnonzero((flat < 0) | (flat >= self.nlist))[0])
            task = int(np.searchsorted(np.cumsum(lengths), bad, side="right"))
            raise ConfigError("clusters", f"task {task} names clusters outside [0, {self.nlist})")

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(queries, dtype=np.float32)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise SearchIndexError(
                f"query dimension {x.shape[-1]} does not match the index dimension {self.dim}"
            )
        return x

    def _check_nprobe(self, nprobe: int) -> int:
        if not 1 <= nprobe <= self.nlist:
            raise ConfigError("nprobe", f"must be in [1, {self.nlist}], got {nprobe}")
        return int(nprobe)


class OverIVF:
    """What an engine built over a `FaissIVFEngine` (`_base`) takes from it unchanged: the
    index's shape and the coarse quantizer's probes."""

    _base: FaissIVFEngine

    @property
    def dim(self) -> int:
        return self._base.dim

    @property
    def nlist(self) -> int:
        return self._base.nlist

    @property
    def metric(self) -> Metric:
        return self._base.metric

    def cluster_sizes(self) -> np.ndarray:
        return self._base.cluster_sizes()

    @property
    def list_rule(self) -> ListMajorRule | None:
        return self._base.list_rule

    def probe(self, queries: np.ndarray, nprobe: int) -> np.ndarray:
        return self._base.probe(queries, nprobe)

    def search_filtered(self, query: np.ndarray, probe: np.ndarray, k: int,
                        allowed: np.ndarray) -> TopK:
        return self._base.search_filtered(query, probe, k, allowed)


def _flatten(clusters: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's cluster count, and all their clusters in one array."""
    lengths = np.fromiter((c.shape[0] for c in clusters), np.int64, len(clusters))
    flat = np.concatenate(clusters) if lengths.sum() else np.empty(0, np.int64)
    return lengths, flat


def _check_k(k: int) -> None:
    if k <= 0:
        raise ConfigError("k", f"must be positive, got {k}")


def _flat_codes(ivf) -> bool:
    import faiss

    return isinstance(ivf, faiss.IndexIVFFlat)
