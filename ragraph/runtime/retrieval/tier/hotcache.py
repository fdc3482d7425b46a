"""Hot-cluster cache: which IVF clusters live on the accelerator tier (HedraRAG technique 3).

Per-cluster access counters pick the `capacity` clusters that carried the most search work
(probes times list length: HedraRAG's "the top 20% of clusters carried 69% of the work" is work,
and a cluster probed often but holding few vectors saves little); every `swap_every` steps, or
once `swap_probes` cluster probes have been counted since the last swap, a background thread
loads the new set and publishes it as one immutable snapshot, so a step never sees a half-swapped
cache (it reads `resident` once). `prefetch` (TeleRAG lookahead) loads whole clusters nearest to a
query's embedding, within a byte budget, on behalf of an owner (a request); later calls for the
same owner fetch only what is missing, and `release` drops them. Prefetched clusters share
`prefetch_capacity` clusters of the tier among all owners: TeleRAG's budget (the link's bandwidth
times a generation's time) is tens of gigabytes on a PCIe 4 link, enough to make a whole index
resident one request at a time.

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
from ragraph.runtime.retrieval.ivf.lists import Tile, list_view
from ragraph.runtime.retrieval.settings import SearchConfig
from ragraph.runtime.retrieval.tier.devicelists import DeviceLists

BYTES_PER_ELEMENT = 4  # float32 on the device
# The tier's share that prefetches may hold: an eighth of 20% of IVF4096 is 102 clusters, about
# what one request's lookahead covers at nprobe 128 (TeleRAG: 62-92% of the probe list), while
# the hot set keeps the rest for the work every request shares.
PREFETCH_SHARE = 1 / 8


@dataclass(frozen=True)
class HotCacheConfig:
    """`capacity`: clusters kept for the work they carried (gc); swaps every `swap_every` steps.
    `prefetch_capacity`: clusters beyond those that prefetches may hold at once, all owners
    together."""

    capacity: int
    prefetch_capacity: int = 0
    swap_every: int = 50
    # Also swap once this many probes were counted since the last swap (None: the index's nlist,
    # each cluster probed once on average). Steps alone are a poor clock: a wavefront that batches
    # 64 queries into one step would otherwise run 50 big steps on an empty cache, while a
    # one-query-per-step executor swaps within 50 queries.
    swap_probes: int | None = None
    # Counters are multiplied by `decay` at each swap so the hot set follows a shifting workload.
    decay: float = 0.5
    device: str | None = None  # None: CUDA when available, else CPU
    # The resident tiles joined into one store on the device, each step's scan one product a
    # chunk over it (`devicelists`); None: on any device but the CPU, where the tier reads
    # faiss's lists in place rather than hold a copy.
    grouped: bool | None = None

    @classmethod
    def of(cls, search: SearchConfig, nlist: int) -> HotCacheConfig:
        """The tier the run's search part asks for over an index of `nlist` clusters: its
        `hot_fraction` of them resident in all (the hot set and the prefetch room), on the
        device its GPU paths name."""
        clusters = max(1, int(nlist * search.hot_fraction))
        room = int(clusters * PREFETCH_SHARE)
        return cls(capacity=clusters - room, prefetch_capacity=room, device=search.gpu.device)

    def __post_init__(self) -> None:
        if self.capacity < 0:
            raise ConfigError("capacity", f"must be non-negative, got {self.capacity}")
        if self.prefetch_capacity < 0:
            raise ConfigError("prefetch_capacity",
                              f"must be non-negative, got {self.prefetch_capacity}")
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
    lists: DeviceLists | None = None  # the tiles' store, when grouped (`tiles` are its views)

    def __contains__(self, cluster: int) -> bool:
        return cluster in self.tiles

    @property
    def owned(self) -> frozenset[int]:
        """Every cluster some owner prefetched (hot or not): what counts against the room."""
        return frozenset().union(*self.prefetched.values())

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tiles.values())


@dataclass(frozen=True)
class PrefetchReport:
    """What one prefetch did: clusters newly loaded, already resident, and bytes moved."""

    fetched: tuple[int, ...]
    already: tuple[int, ...]
    bytes_fetched: int


@dataclass(frozen=True)
class CacheStats:
    """Work (vectors scanned) over all steps, how much of it the accelerator tier served, and
    the vectors it holds now of the index's (its memory, which clusters alone do not tell:
    the hot set holds the clusters that carried the most work, the large ones among them)."""

    steps: int
    swaps: int
    vectors_scanned: int
    vectors_on_accelerator: int
    resident_vectors: int = 0
    index_vectors: int = 0

    @property
    def resident_fraction(self) -> float:
        return self.resident_vectors / self.index_vectors if self.index_vectors else 0.0

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
        self._grouped = config.grouped if config.grouped is not None else self._device != "cpu"
        self._lock = threading.Lock()
        self._counts = np.zeros(engine.nlist, dtype=np.float64)
        self._sizes = engine.cluster_sizes()
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

    def prefetch_room(self) -> int:
        """Clusters prefetches may still add (0: a prefetch would load nothing)."""
        return max(self._config.prefetch_capacity - len(self._resident.owned), 0)

    def prefetch(self, query: np.ndarray, budget_bytes: int, owner: object) -> PrefetchReport:
        """Load whole clusters nearest to `query`, in centroid order, until `budget_bytes` or
        the prefetch room is spent. The owner keeps what it fetched and what other owners had
        prefetched of it (free: it is resident already); hot clusters stay the swaps' to drop."""
        if budget_bytes < 0:
            raise ConfigError("budget_bytes", f"must be non-negative, got {budget_bytes}")
        snap = self._resident
        fetched, already, spent = self._plan_prefetch(query, budget_bytes, snap,
                                                      self.prefetch_room())
        loaded = self._tiles(snap, fetched)
        with self._lock:
            cur = self._resident
            owned = cur.owned
            # Another prefetch may have taken room since the plan: keep the nearest that fit.
            room = max(self._config.prefetch_capacity - len(owned), 0)
            fetched = [c for c in fetched if c not in owned][:room]
            spent = self._bytes(fetched)
            mine = (cur.prefetched.get(owner, frozenset()) | set(fetched)
                    | (set(already) & owned))
            prefetched = {**cur.prefetched, owner: frozenset(mine)}
            self._resident = self._assemble(cur, cur.hot, prefetched,
                                            {c: loaded[c] for c in fetched})
        return PrefetchReport(tuple(fetched), tuple(already), spent)

    def release(self, owner: object) -> None:
        """Drop an owner's prefetched clusters (those not also hot or another owner's)."""
        with self._lock:
            cur = self._resident
            if owner in cur.prefetched:
                prefetched = {o: s for o, s in cur.prefetched.items() if o != owner}
                self._resident = self._assemble(cur, cur.hot, prefetched, {})

    def _plan_prefetch(
        self, query: np.ndarray, budget_bytes: int, snap: Resident, room: int
    ) -> tuple[list[int], list[int], int]:
        fetched: list[int] = []
        already: list[int] = []
        spent = 0
        for c in self._rank_clusters(query).tolist():
            if c in snap:
                already.append(c)
                continue
            cost = self._bytes([c])
            if spent + cost > budget_bytes or len(fetched) == room:
                break  # whole clusters only, nearest first: stop at the first that does not fit
            fetched.append(c)
            spent += cost
        return fetched, already, spent

    def _bytes(self, clusters: Iterable[int]) -> int:
        return sum(int(self._sizes[c]) for c in clusters) * self._engine.dim * BYTES_PER_ELEMENT

    def stats(self) -> CacheStats:
        with self._lock:
            resident = sum(int(self._sizes[c]) for c in self._resident.tiles)
            return CacheStats(self._steps, self._swaps, self._scanned, self._on_acc, resident,
                              int(self._sizes.sum()))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _hottest(self, counts: np.ndarray) -> frozenset[int]:
        # Most work first (probes x vectors), ties by cluster id so the choice is deterministic:
        # by work the hot set holds far more of the work scanned than by probes alone
        # (docs/benchmarks/code-figures.md#hot-cluster-cache).
        work = counts * self._sizes
        order = np.lexsort((np.arange(work.shape[0]), -work))
        chosen = [int(c) for c in order[: self._config.capacity] if work[c] > 0]
        return frozenset(chosen)

    def _tiles(self, snap: Resident, clusters: Iterable[int]) -> dict[int, Tile]:
        return {c: snap.tiles[c] if c in snap.tiles else self._load(c) for c in clusters}

    def _assemble(
        self, cur: Resident, hot: frozenset[int], prefetched: dict, loaded: Mapping[int, Tile]
    ) -> Resident:
        want = set(hot).union(*prefetched.values())
        pool = {**cur.tiles, **loaded}
        tiles = {c: pool[c] if c in pool else self._load(c) for c in sorted(want)}
        lists = None
        if self._grouped:
            lists = cur.lists if cur.lists is not None and tiles.keys() == cur.tiles.keys() \
                else DeviceLists.joined(tiles, self._engine.nlist, self._engine.dim, self._device)
            tiles = {c: lists.tile(c) for c in tiles}  # views: the store is the one copy kept
        return Resident(MappingProxyType(tiles), hot, MappingProxyType(prefetched), lists)

    def _load(self, cluster: int) -> Tile:
        import torch

        if self._device == "cpu":
            # The host is the tier: scan faiss's list in place rather than hold a second copy
            # (a tier of 20% of the clusters holds about half the index's vectors).
            vectors, ids = list_view(self._engine.index, cluster)
        else:
            vectors, ids = self._engine.list_vectors(cluster), self._engine.list_ids(cluster)
        return Tile.of(vectors, ids, lambda a: torch.from_numpy(a).to(self._device))

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
