"""A step split between the accelerator tier (resident clusters, torch) and the CPU tier (faiss).

Exactness without trusting torch's last bits: torch scans the resident clusters and keeps, per task,
every vector whose distance is within 2·eps of its (k+1)-th best, where eps bounds how far faiss's
float32 distance can be from the (float64) torch value. That candidate set provably contains every
element faiss could keep in a top-(k+1) over those clusters. Then one faiss call scans the step: the
non-resident clusters in full and, through an IDSelectorBitmap, only the candidates of the resident
ones. Every returned distance is therefore computed by faiss's own kernel, and elements dropped by the
selector are strictly worse than the partial's (k+1)-th value, so they cannot change which elements a
heap keeps (merge.py, fact 1): the partials equal the CPU-only ones bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.hotcache import HotClusterCache, Resident
from ragraph.runtime.retrieval.ivf import FaissIVFEngine
from ragraph.runtime.retrieval.protocol import Metric, ScanOrder, SearchTask, StepResult, TopK

# Unit roundoff of float32 is 2**-24; one more factor of 2 of slack on the textbook bound
# |fl(sum) - sum| <= (d + O(1)) u sum|terms| for faiss's SIMD accumulation in any order.
_ROUNDOFF = 2.0**-23


class TieredEngine:
    """A `SearchEngine` whose steps use the hot-cluster cache; results identical to faiss."""

    def __init__(self, base: FaissIVFEngine, cache: HotClusterCache) -> None:
        self._base = base
        self._cache = cache
        ids = np.concatenate([base.list_ids(c) for c in range(base.nlist)] or [np.empty(0)])
        if ids.size and (ids.min() < 0 or np.unique(ids).size != ids.size):
            raise SearchIndexError("the accelerator tier needs unique, non-negative ids")
        self._id_bytes = (int(ids.max()) // 8 + 1) if ids.size else 1

    @property
    def index(self):
        """The faiss index behind both tiers."""
        return self._base.index

    @property
    def cache(self) -> HotClusterCache:
        return self._cache

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

    def probe(self, queries: np.ndarray, nprobe: int) -> np.ndarray:
        return self._base.probe(queries, nprobe)

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        return self._base.cluster_of(ids)

    def list_ids(self, cluster: int) -> np.ndarray:
        return self._base.list_ids(cluster)

    def finish(self, query, probe, partials: Sequence[TopK], k: int) -> TopK:
        return self._base.finish(query, probe, partials, k)

    def search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        probe = self.probe(x, nprobe)
        step = self.search_step([SearchTask.of(q, p) for q, p in zip(x, probe, strict=True)], k)
        out = [self.finish(q, p, [t], k) for q, p, t in zip(x, probe, step.partials, strict=True)]
        return np.stack([t.distances for t in out]), np.stack([t.ids for t in out])

    def search_step(self, tasks: Sequence[SearchTask], k: int,
                    order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        snap = self._cache.resident
        sizes = self._base.cluster_sizes()
        resident = [
            np.array([c for c in t.clusters.tolist() if c in snap], np.int64) for t in tasks
        ]
        on_acc = int(sum(int(sizes[r].sum()) for r in resident))
        if on_acc == 0:
            step = self._base.search_step(tasks, k, order)
        else:
            candidates, rows = _candidates(snap, tasks, resident, k + 1, self.metric)
            bitmap = self._bitmap(rows, candidates)
            import faiss

            selector = faiss.IDSelectorBitmap(bitmap)
            step = self._base.search_step_selected(tasks, k, selector, on_acc, order)
        clusters = np.concatenate([t.clusters for t in tasks]) if tasks else np.empty(0, np.int64)
        self._cache.record_step(clusters, step.stats.vectors_scanned, on_acc)
        return step

    def _bitmap(self, resident_ids: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Bits set for every id except the resident clusters' non-candidates."""
        bm = np.full(self._id_bytes, 0xFF, dtype=np.uint8)
        np.bitwise_and.at(bm, resident_ids >> 3, ~(1 << (resident_ids & 7)).astype(np.uint8))
        np.bitwise_or.at(bm, candidates >> 3, (1 << (candidates & 7)).astype(np.uint8))
        return bm


def _candidates(
    snap: Resident, tasks: Sequence[SearchTask], resident: list[np.ndarray], m: int, metric: Metric
) -> tuple[np.ndarray, np.ndarray]:
    """Ids within 2·eps of each task's m-th best on the resident clusters; all resident ids seen."""
    import torch

    used = sorted({int(c) for r in resident for c in r.tolist()})
    tiles = [snap.tiles[c] for c in used]
    vectors = torch.cat([t.vectors for t in tiles])
    sq_norms = torch.cat([t.sq_norms for t in tiles])
    row_ids = np.concatenate([t.ids for t in tiles])
    seg = torch.repeat_interleave(
        torch.arange(len(tiles), device=vectors.device),
        torch.tensor([t.ids.shape[0] for t in tiles], device=vectors.device),
    )
    slot = {c: i for i, c in enumerate(used)}
    member = np.zeros((len(tasks), len(tiles)), dtype=bool)
    for i, r in enumerate(resident):
        member[i, [slot[c] for c in r.tolist()]] = True
    mask = torch.from_numpy(member).to(vectors.device)[:, seg]
    q = torch.from_numpy(np.stack([t.query for t in tasks]).astype(np.float64)).to(vectors.device)
    score = _lower_is_better(q, vectors, sq_norms, metric)
    score = score.masked_fill(~mask, float("inf"))
    eps = _eps(q, max(t.max_norm for t in tiles), metric)
    kth = torch.topk(score, min(m, score.shape[1]), dim=1, largest=False).values[:, -1]
    # Rows with fewer than m resident vectors keep them all (kth is +inf there).
    keep = mask & (score <= (kth + 2 * eps)[:, None])
    chosen = keep.any(dim=0).cpu().numpy()
    return row_ids[chosen], row_ids


def _lower_is_better(q, vectors, sq_norms, metric: Metric):
    dots = q @ vectors.T
    if metric is Metric.IP:
        return -dots
    return (q * q).sum(dim=1, keepdim=True) + sq_norms[None, :] - 2.0 * dots


def _eps(q, max_norm: float, metric: Metric):
    """Bound on |faiss float32 distance - exact distance| for each query (see module docstring)."""
    d = q.shape[1]
    qn = (q * q).sum(dim=1).sqrt()
    scale = qn * max_norm if metric is Metric.IP else (qn + max_norm) ** 2
    return (d + 4) * _ROUNDOFF * scale
