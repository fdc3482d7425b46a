"""Hot-cluster cache: which IVF clusters live on the accelerator tier (HedraRAG technique 3).

Per-cluster access counters pick the `capacity` most used clusters; every `swap_every` steps, or
once `swap_probes` cluster probes have been counted since the last swap, a background thread loads the new set and publishes it as one immutable snapshot, so a step never sees
a half-swapped cache (it reads `resident` once). `prefetch` (TeleRAG lookahead) loads whole clusters
nearest to a query's embedding, within a byte budget, on behalf of an owner (a request); later calls
for the same owner fetch only what is missing, and `release` drops them.

Vectors are held in float32 on the device, as faiss holds them (half the memory of float64 tiles):
the accelerator tier only *chooses candidates*, with a bound on how far its float32 products can
be from faiss's values that follows the device's matmul precision (TF32 included, `bounds`), and
faiss re-scores them (`listmajor`, tiered.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.lists import Tile

BYTES_PER_ELEMENT = 4  # float32 on the device


@dataclass(frozen=True)
class HotCacheConfig:
    """`capacity`: clusters kept for their access counts (gc); swaps every `swap_every` steps."""

    capacity: int
    swap_every: int = 50
    # Also swap once this many probes were counted since the last swap (None: the index's nlist,
    # each cluster probed once on average). Steps alone are a poor clock: a wavefront that batches
    # 64 queries into one step would otherwise run 50 big steps on an empty cache, while a
    # one-query-per-step executor swaps within 50 queries.
    swap_probes: int | None = None
    # Counters are multiplied by `decay` at each swap so the hot set follows a shifting workload.
    decay: float = 0.5
    device: str | None = None  # None: CUDA when available, else CPU

    def __post_init__(self) -> None:
        if self.capacity < 0:
            raise ConfigError("capacity", f"must be non-negative, got {self.capacity}")
        if self.swap_every < 1:
            raise ConfigError("swap_every", f"must be at least 1, got {self.swap_every}")
        if self.swap_probes is not None and self.swap_probes < 1:
            raise ConfigError("swap_probes", f"must be at least 1, got {self.swap_probes}")
        if not 0 <= self.decay <= 1:
            raise ConfigError("decay", f"must be in [0, 1], got {self.decay}")


@dataclass(frozen=True)
class Resident:
    """An immutable snapshot of the accelerator tier: hot clusters plus owners' prefetched ones."""

    tiles: Mapping[int, Tile]
    hot: frozenset[int]
    prefetched: Mapping[object, frozenset[int]]

    def __contains__(self, cluster: int) -> bool:
        return cluster in self.tiles

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tiles.values())


@dataclass(frozen=True)
class PrefetchReport:
    """What one prefetch did: clusters newly loaded, already resident, and bytes moved."""

    fetched: tuple[int, ...]
    already: tuple[int, ...]
    bytes_fetched: int

    def coverage(self, probe: Iterable[int]) -> float:
        """Fraction of `probe` that this owner's prefetches made (or found) resident."""
        probe = list(probe)
        have = set(self.fetched) | set(self.already)
        return sum(1 for c in probe if c in have) / len(probe) if probe else 1.0


@dataclass(frozen=True)
class CacheStats:
    """Work (vectors scanned) over all steps, and how much of it the accelerator tier served."""

    steps: int
    swaps: int
    vectors_scanned: int
    vectors_on_accelerator: int

    @property
    def served_fraction(self) -> float:
        return self.vectors_on_accelerator / self.vectors_scanned if self.vectors_scanned else 0.0


class HotClusterCache:
    """Counters, the resident snapshot, asynchronous swaps and prefetch for one IVF-Flat engine."""

    def __init__(self, engine, config: HotCacheConfig) -> None:
        import faiss

        if not isinstance(engine.index, faiss.IndexIVFFlat):
            raise SearchIndexError("the accelerator tier needs an IVF-Flat index (raw vectors)")
        self._engine = engine
        self._config = config
        self._device = _pick_device(config.device)
        self._lock = threading.Lock()
        self._counts = np.zeros(engine.nlist, dtype=np.float64)
        self._steps = self._swaps = self._scanned = self._on_acc = 0
        self._probes_since_swap = 0
        self._swap_probes = config.swap_probes or engine.nlist
        self._resident = Resident(MappingProxyType({}), frozenset(), MappingProxyType({}))
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragraph-hotcache")
        self._swap: Future | None = None
        self._centroids: np.ndarray | None = None

    @property
    def config(self) -> HotCacheConfig:
        return self._config

    @property
    def device(self) -> str:
        return self._device

    @property
    def resident(self) -> Resident:
        return self._resident

    def record_step(self, clusters: np.ndarray, scanned: int, on_accelerator: int) -> None:
        """Count one step's cluster accesses and work; start an asynchronous swap when it is due."""
        with self._lock:
            probed = np.asarray(clusters, dtype=np.int64)
            np.add.at(self._counts, probed, 1.0)
            self._steps += 1
            self._scanned += scanned
            self._on_acc += on_accelerator
            self._probes_since_swap += probed.size
            due = (self._steps % self._config.swap_every == 0
                   or self._probes_since_swap >= self._swap_probes)
            idle = self._swap is None or self._swap.done()
            if due and idle:
                self._probes_since_swap = 0
                self._swap = self._pool.submit(self.swap_now)

    def wait_for_swap(self) -> None:
        """Block until the swap in flight (if any) is published; re-raises its error."""
        swap = self._swap
        if swap is not None:
            swap.result()

    def swap_now(self) -> Resident:
        """Load the current top-`capacity` clusters and publish them (the background job)."""
        with self._lock:
            counts = self._counts.copy()
            self._counts *= self._config.decay
            snap = self._resident
        hot = self._hottest(counts)
        # Loading happens outside the lock: steps keep running on the old snapshot meanwhile.
        loaded = self._tiles(snap, hot)
        with self._lock:
            cur = self._resident
            self._resident = self._assemble(cur, hot, dict(cur.prefetched), loaded)
            self._swaps += 1
            return self._resident

    def prefetch(self, query: np.ndarray, budget_bytes: int, owner: object) -> PrefetchReport:
        """Load whole clusters nearest to `query`, in centroid order, until `budget_bytes` is spent."""
        if budget_bytes < 0:
            raise ConfigError("budget_bytes", f"must be non-negative, got {budget_bytes}")
        snap = self._resident
        fetched, already, spent = self._plan_prefetch(query, budget_bytes, snap)
        loaded = self._tiles(snap, fetched)
        with self._lock:
            cur = self._resident
            owned = cur.prefetched.get(owner, frozenset()) | set(fetched) | set(already)
            prefetched = {**cur.prefetched, owner: frozenset(owned)}
            self._resident = self._assemble(cur, cur.hot, prefetched, loaded)
        return PrefetchReport(tuple(fetched), tuple(already), spent)

    def release(self, owner: object) -> None:
        """Drop an owner's prefetched clusters (those not also hot or another owner's)."""
        with self._lock:
            cur = self._resident
            if owner in cur.prefetched:
                prefetched = {o: s for o, s in cur.prefetched.items() if o != owner}
                self._resident = self._assemble(cur, cur.hot, prefetched, {})

    def _plan_prefetch(
        self, query: np.ndarray, budget_bytes: int, snap: Resident
    ) -> tuple[list[int], list[int], int]:
        sizes = self._engine.cluster_sizes()
        row_bytes = self._engine.dim * BYTES_PER_ELEMENT
        fetched: list[int] = []
        already: list[int] = []
        spent = 0
        for c in self._rank_clusters(query).tolist():
            if c in snap:
                already.append(c)
                continue
            cost = int(sizes[c]) * row_bytes
            if spent + cost > budget_bytes:
                break  # whole clusters only, nearest first: stop at the first that does not fit
            fetched.append(c)
            spent += cost
        return fetched, already, spent

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._steps, self._swaps, self._scanned, self._on_acc)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _hottest(self, counts: np.ndarray) -> frozenset[int]:
        # Highest count first, ties by cluster id so the choice is deterministic.
        order = np.lexsort((np.arange(counts.shape[0]), -counts))
        chosen = [int(c) for c in order[: self._config.capacity] if counts[c] > 0]
        return frozenset(chosen)

    def _tiles(self, snap: Resident, clusters: Iterable[int]) -> dict[int, Tile]:
        return {c: snap.tiles[c] if c in snap.tiles else self._load(c) for c in clusters}

    def _assemble(
        self, cur: Resident, hot: frozenset[int], prefetched: dict, loaded: Mapping[int, Tile]
    ) -> Resident:
        want = set(hot).union(*prefetched.values())
        pool = {**cur.tiles, **loaded}
        tiles = {c: pool[c] if c in pool else self._load(c) for c in sorted(want)}
        return Resident(MappingProxyType(tiles), hot, MappingProxyType(prefetched))

    def _load(self, cluster: int) -> Tile:
        import torch

        return Tile.of(self._engine.list_vectors(cluster), self._engine.list_ids(cluster),
                       lambda a: torch.from_numpy(a).to(self._device))

    def _rank_clusters(self, query: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        return self._engine.probe(q, self._engine.nlist)[0]


def _pick_device(device: str | None) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device", f"{device!r} requested but CUDA is not available")
    return device
