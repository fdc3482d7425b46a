"""List-major scans: each inverted list of a step read once for all the queries that probe it.

faiss scans a step query by query: a list probed by 8 queries is read 8 times (from memory, or
from cache when cluster order puts them back to back, see `split`), each time through a per-pair
SIMD loop. Here the step's (query, list) pairs are sorted by list, and each list's block of
queries is scored by one BLAS product over the list's vectors, in place in faiss's memory (over
lists held on a device, one product a chunk instead: `arrays.estimate_chunk`, tier/devicelists). The
float32 products are estimates, not faiss's values; `bounds` gives how far they can be, and the
candidates kept are every element a faiss heap of size m over the task's lists could hold. Those
few are re-scored by faiss's own kernel for the metric (`fvec_L2sqr_by_idx` /
`fvec_inner_products_by_idx` call the `fvec_L2sqr` / `fvec_inner_product` the IVF-Flat scanner
calls), and the exact merge (`merge.merge_rows`) keeps each task's best m in faiss's order: the
partials hold exactly the elements and distances faiss's would, and `finish` resolves a tie at
the k-th value by faiss's own scan as always.

Lists are processed in chunks (one padded buffer of estimates per chunk): the chunks run on the
worker threads, and each task's threshold is the best over its lists in the chunk, then over all
chunks before re-scoring, so a task re-scores about m elements plus those within the bound of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ragraph.runtime.retrieval.ivf.bounds import error_bound, round_up, row_norms
from ragraph.runtime.retrieval.ivf.lists import Chunk, Tile, list_view
from ragraph.runtime.retrieval.ivf.sharing_trial import Trial
from ragraph.runtime.retrieval.ivf.split import fits_in_cache
from ragraph.runtime.retrieval.merge import merge_rows
from ragraph.runtime.retrieval.protocol import Metric

# Products per chunk: a float32 buffer of about 1 MiB stays in one core's L2, and was faster than
# larger chunks (figures: docs/benchmarks/code-figures.md#list-major-scans).
CHUNK_ELEMENTS = 1 << 18
# Chunks per worker, so uneven chunks still leave no thread idle for long.
CHUNKS_PER_THREAD = 4
# Queries per list from which a list-order step is scanned list-major, by the library computing
# the products (`products`): where list-major first beat faiss's cluster order on each library
# (measured: docs/benchmarks/code-figures.md#list-major-scans).
MIN_SHARING = {"numpy": 6.0, "torch": 2.5}


@dataclass(frozen=True, eq=False)
class ListMajorRule:
    """When a list-order step is scanned list-major (else faiss's cluster order): its lists are
    probed by `min_sharing` queries each on average, and do not all fit in `cache_bytes` (while
    they do, faiss re-reads them from cache, and on the 30k-passage default index, 46 MB,
    balanced query order beat list-major 2-4x). The engine and the cost model ask the same rule.
    `measured`: the crossover timed on this machine (`sharing_trial`), which replaces the
    library's; infinite where list-major never paid."""

    list_bytes: np.ndarray  # per cluster
    cache_bytes: int
    product: str = "numpy"  # the library of the host products (`products.host_product`)
    measured: float | None = None
    trial: Trial | None = None  # what `measured` was timed from, where it was

    @property
    def min_sharing(self) -> float:
        """Queries a list, on average, from which this rule's steps go list-major."""
        return MIN_SHARING[self.product] if self.measured is None else self.measured

    def takes(self, flat: np.ndarray) -> bool:
        """Whether a step probing `flat` (all its tasks' clusters, repeats included) goes
        list-major."""
        flat = np.asarray(flat, dtype=np.int64)
        # An infinite crossover (list-major never paid here) fails this for every step.
        if flat.size == 0 or flat.size < self.min_sharing * np.unique(flat).size:
            return False
        return not fits_in_cache(self.list_bytes, flat, self.cache_bytes)


@dataclass(frozen=True)
class Pairs:
    """A step's (task, list) pairs sorted by list then task; `starts[j]` is the first pair of
    the j-th distinct list, `starts[-1]` the number of pairs."""

    task: np.ndarray
    cluster: np.ndarray
    starts: np.ndarray

    @staticmethod
    def of(clusters: Sequence[np.ndarray]) -> Pairs:
        lengths = np.fromiter((len(c) for c in clusters), np.int64, len(clusters))
        flat = np.concatenate(clusters).astype(np.int64) if lengths.sum() else np.empty(0, np.int64)
        task = np.repeat(np.arange(len(clusters), dtype=np.int64), lengths)
        order = np.lexsort((task, flat))
        flat, task = flat[order], task[order]
        starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]]) if flat.size else flat
        return Pairs(task, flat, np.r_[starts, flat.size].astype(np.int64))

    @property
    def lists(self) -> np.ndarray:
        return self.cluster[self.starts[:-1]]


@dataclass(frozen=True)
class Candidates:
    """Elements that may be in a task's exact top-m: task, list, position in the list, estimate
    and its bound; `bound` per task is the chunk's threshold before the element's own bound."""

    task: np.ndarray
    cluster: np.ndarray
    col: np.ndarray
    est: np.ndarray
    slack: np.ndarray
    bound: np.ndarray


@dataclass(frozen=True)
class Step:
    """What every chunk of one scan shares."""

    pairs: Pairs
    queries: object  # the pairs' query rows, scaled so estimates are lower-is-better
    query_norms: np.ndarray  # per task, float64
    tile_of: Callable[[int], Tile]  # where each list is read
    sizes: np.ndarray  # vectors per distinct list
    m: int
    n_tasks: int


class ListMajorScan:
    """The scan of one IVF-Flat index in one metric; faiss re-scores, so answers are faiss's."""

    def __init__(self, ivf, metric: Metric) -> None:
        self._ivf = ivf
        self._metric = metric
        self._dim = int(ivf.d)
        self._host: dict[int, Tile] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._pool_lock = threading.Lock()

    def host_tile(self, cluster: int) -> Tile:
        """A list read in place from faiss's memory (its norms computed on first use)."""
        tile = self._host.get(cluster)
        if tile is None:
            vectors, ids = list_view(self._ivf, cluster)
            tile = self._host[cluster] = Tile.of(vectors, ids)
        return tile

    def scan(self, x: np.ndarray, clusters: Sequence[np.ndarray], m: int, arrays,
             threads: int, tiles: Callable[[int], Tile] | None = None):
        """Each task's (query x[i], lists clusters[i]) best m: (n, m) distances and ids in
        faiss's order, -1 where a task has fewer elements. `tiles`: where lists are read
        (default: in place on the host); `arrays`: the operations on them."""
        pairs = Pairs.of(clusters)
        tile_of = tiles or self.host_tile
        scale = -2.0 if self._metric is Metric.L2 else -1.0  # exact: a power of two
        _, qn = row_norms(x)
        sizes = np.array([self._ivf.invlists.list_size(int(c)) for c in pairs.lists], np.int64)
        step = Step(pairs, arrays.queries(np.ascontiguousarray(scale * x[pairs.task])), qn,
                    tile_of, sizes, m, len(clusters))
        threads = threads if arrays.parallel else 1
        chunks = self._chunks(step, threads, arrays.chunk_elements or CHUNK_ELEMENTS)
        found = self._run(step, arrays, chunks, threads)
        return self._rescore(x, step, _final(found, step.n_tasks), m)

    def _chunks(self, step: Step, threads: int, most: int) -> list[slice]:
        """Distinct lists cut into runs of about equal products, at most `most` each."""
        per_list = np.diff(step.pairs.starts) * step.sizes
        if per_list.size == 0:
            return []
        running = np.cumsum(per_list.astype(np.float64))
        spread = threads * CHUNKS_PER_THREAD if threads > 1 else 1
        parts = max(spread, int(np.ceil(running[-1] / most)))
        cuts = np.searchsorted(running, running[-1] * np.arange(1, parts) / parts, side="left")
        bounds = np.unique(np.r_[0, np.minimum(cuts + 1, per_list.size), per_list.size])
        return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def _run(self, step: Step, arrays, chunks: list[slice], threads: int) -> list[Candidates]:
        """The chunks on `threads` workers, each with a single-threaded BLAS (also when alone:
        BLAS's own threads cost more than they gave on products this small). The limit is taken
        on the threads that call BLAS: taken by a caller that is not the main thread (the
        scheduler's search thread), OpenBLAS 0.3.31 still ran the workers' products one at a
        time (figures: docs/benchmarks/code-figures.md#list-major-scans)."""
        def select(chunk: slice) -> Candidates:
            with arrays.single_threaded():
                return self._select(step, arrays, chunk)

        if len(chunks) < 2 or threads < 2:
            return [select(c) for c in chunks]
        return list(self._workers(threads).map(select, chunks))

    def _select(self, step: Step, arrays, lists: slice) -> Candidates:
        """One chunk's candidates: estimates for its pairs, each task's threshold over its
        lists in the chunk, and every element within its bound of that threshold."""
        pairs = step.pairs
        # Looked up here, on the workers: a host tile's norms are computed on its first use.
        tiles = tuple(step.tile_of(int(c)) for c in pairs.lists[lists])
        lo, hi = int(pairs.starts[lists.start]), int(pairs.starts[lists.stop])
        sizes = step.sizes[lists]
        per_list = np.diff(pairs.starts[lists.start:lists.stop + 1])
        row_size = np.repeat(sizes, per_list)
        buf = arrays.buffer(hi - lo, int(sizes.max(initial=0)))
        task = pairs.task[lo:hi]
        chunk = Chunk(step.queries[lo:hi], task, pairs.lists[lists], per_list, tiles)
        arrays.estimate_chunk(buf, chunk, self._metric is Metric.L2)
        max_norm = np.repeat([t.max_norm for t in tiles], per_list)
        slack = error_bound(self._metric, self._dim, step.query_norms[task], max_norm,
                            arrays.matmul_u)
        bound = np.full(step.n_tasks, np.inf)
        # One row per task bounds its threshold: of its lists holding m vectors, the one whose
        # best estimate is best (likely the nearest list); any row's is valid, and a partition
        # of every row cost three times one row per task (docs/benchmarks/code-figures.md).
        best = np.lexsort((arrays.row_min(buf), row_size < step.m, task))
        best = best[np.r_[True, task[best][1:] != task[best][:-1]]]
        bound[task[best]] = arrays.kth(buf, best, step.m) + slack[best]
        rows, cols, est = arrays.within(buf, round_up(bound[task] + slack))
        real = cols < row_size[rows]  # padding is +inf, within an infinite threshold
        rows, cols, est = rows[real], cols[real], est[real]
        return Candidates(task[rows], pairs.cluster[lo:hi][rows], cols, est, slack[rows], bound)

    def _rescore(self, x: np.ndarray, step: Step, found: Candidates, m: int):
        """faiss's own distances for the candidates, then each task's best m in faiss's order."""
        import faiss

        vectors, ids, task = self._gather(found)
        # One row per task: its candidates' positions in `vectors`, padded with -1.
        by_task = np.argsort(task, kind="stable")
        counts = np.bincount(task, minlength=step.n_tasks)
        slot = np.arange(task.size) - np.repeat(np.cumsum(counts) - counts, counts)
        index = np.full((step.n_tasks, int(counts.max(initial=0))), -1, dtype=np.int64)
        index[task[by_task], slot] = by_task
        dist = np.empty(index.shape, dtype=np.float32)
        exact = faiss.fvec_L2sqr_by_idx if self._metric is Metric.L2 else \
            faiss.fvec_inner_products_by_idx
        if index.size:
            sp = faiss.swig_ptr
            exact(sp(dist), sp(np.ascontiguousarray(x)), sp(vectors), sp(index), self._dim,
                  step.n_tasks, index.shape[1])
        owner = task[by_task]
        return merge_rows(owner, dist[owner, slot][:, None], ids[by_task][:, None],
                          step.n_tasks, m, self._metric)

    def _gather(self, found: Candidates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The candidates' vectors and ids from faiss's host lists (the tiles may be on a
        device), in list order, with their tasks."""
        order = np.lexsort((found.col, found.cluster))
        cluster, col = found.cluster[order], found.col[order]
        firsts = np.flatnonzero(np.r_[True, cluster[1:] != cluster[:-1]]) if cluster.size else []
        ends = np.r_[firsts[1:], cluster.size].astype(np.int64)
        vectors = np.empty((cluster.size, self._dim), dtype=np.float32)
        ids = np.empty(cluster.size, dtype=np.int64)
        for a, b in zip(firsts, ends, strict=True):
            view, list_ids = list_view(self._ivf, int(cluster[a]))
            vectors[a:b] = view[col[a:b]]
            ids[a:b] = list_ids[col[a:b]]
        return vectors, ids, found.task[order]

    def _workers(self, n: int) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None or self._pool_size != n:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = ThreadPoolExecutor(n, thread_name_prefix="ragraph-listmajor")
                self._pool_size = n
            return self._pool


def _final(found: list[Candidates], n_tasks: int) -> Candidates:
    """All chunks' candidates within their bound of each task's best threshold over all chunks."""
    bound = np.minimum.reduce([c.bound for c in found]) if found else np.full(n_tasks, np.inf)
    joined = [np.concatenate([getattr(c, f) for c in found]) if found else np.empty(0)
              for f in ("task", "cluster", "col", "est", "slack")]
    task, cluster, col, est, slack = joined
    task = task.astype(np.int64)
    keep = est <= round_up(bound[task] + slack)
    return Candidates(task[keep], cluster[keep].astype(np.int64), col[keep].astype(np.int64),
                      est[keep], slack[keep], bound)
