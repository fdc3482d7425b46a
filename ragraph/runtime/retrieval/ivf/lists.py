"""An inverted list as the scans read it: views of faiss's own memory, and tiles (a list's
vectors with their norms, on the host or an accelerator)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ragraph.runtime.retrieval.ivf.bounds import row_norms


@dataclass(frozen=True)
class Tile:
    """One inverted list as the scan reads it: vectors (n, d) float32 and their squared norms
    (float32, rounded once from float64) on the scan's device, ids in scan order, the largest
    vector norm."""

    vectors: object
    sq_norms: object
    ids: np.ndarray
    max_norm: float

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        return self.size * int(self.vectors.shape[1]) * 4

    @staticmethod
    def of(vectors: np.ndarray, ids: np.ndarray, to: Callable = lambda a: a) -> Tile:
        """A tile of host float32 `vectors`, moved by `to` (identity: stay in place)."""
        sq, row = row_norms(vectors)
        return Tile(to(vectors), to(sq), ids, float(row.max()) if row.size else 0.0)


@dataclass(frozen=True)
class Chunk:
    """The pairs of one chunk of a list-major scan, sorted by list: their query rows (on the
    scan's device) and tasks, the distinct lists with how many pairs each holds, their tiles."""

    queries: object
    task: np.ndarray
    clusters: np.ndarray
    per_list: np.ndarray
    tiles: tuple[Tile, ...]


def list_view(ivf, cluster: int) -> tuple[np.ndarray, np.ndarray]:
    """One IVF-Flat list's vectors (n, d) float32 and ids, as views of faiss's own memory
    (valid while the index is not modified)."""
    import faiss

    ids = list_ids(ivf, cluster)
    if ids.size == 0:
        return np.empty((0, ivf.d), dtype=np.float32), ids
    codes = faiss.rev_swig_ptr(ivf.invlists.get_codes(int(cluster)), ids.size * ivf.code_size)
    return codes.view(np.float32).reshape(ids.size, ivf.d), ids


def list_ids(ivf, cluster: int) -> np.ndarray:
    """The ids of one inverted list in scan order, a view of faiss's memory (any IndexIVF)."""
    import faiss

    n = ivf.invlists.list_size(int(cluster))
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return faiss.rev_swig_ptr(ivf.invlists.get_ids(int(cluster)), n)
