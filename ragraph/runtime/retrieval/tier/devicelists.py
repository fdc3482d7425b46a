"""An IVF-Flat index's lists held on a torch device, and list-major scans that estimate a whole
chunk of (query, list) pairs with one matrix product there.

Scanning one list at a time costs a kernel launch or two a list (thousands a step) and a product
too small to fill an accelerator. With every list in one contiguous tensor (cluster order), a
chunk's estimates come from one product of the chunk's distinct queries by the vectors of the
span of lists the chunk covers, and its pairs' rows are gathered from that in one indexing
operation. The product also computes (query, list) pairs no task asked for, which cost only time:
on a GPU the one large product is faster than the many small ones it replaces.

Exactness is the scan's (`listmajor`): each estimate is still one float32 dot product plus the
vector's float32 squared norm, so the bound (`bounds`) holds as it does for the per-list products,
and faiss re-scores every candidate on the host. The same code runs on torch CPU tensors (how the
tests cover it without a GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ragraph.runtime.retrieval.ivf.arrays import TorchArrays, per_list
from ragraph.runtime.retrieval.ivf.lists import Chunk, Tile, list_view

# Products per chunk on a device: a step of 64 queries at nprobe 256 over lists of about 1,000
# vectors is one chunk, its buffer 64 MiB.
DEVICE_CHUNK_ELEMENTS = 1 << 24
# The most entries a chunk's dense product may hold (1 GiB of float32); a chunk whose span of
# lists is wider than that for its queries is estimated one list at a time instead.
DENSE_LIMIT = 1 << 28


@dataclass(frozen=True)
class DeviceLists:
    """Lists `clusters` of an IVF-Flat index: vectors (n, d) float32 and squared norms on
    `device`, one list after another in cluster order (`start[c]`, -1 for a list not held), ids
    as views of faiss's memory, and each list's largest norm."""

    device: str
    vectors: object
    sq_norms: object
    start: np.ndarray
    size: np.ndarray
    max_norm: np.ndarray
    ids: tuple[np.ndarray, ...]  # by cluster; empty for a list not held

    @staticmethod
    def of(ivf, device: str, clusters: np.ndarray | None = None) -> DeviceLists:
        """The index's lists (all of them by default) copied to `device`."""
        import torch

        held = range(int(ivf.nlist)) if clusters is None else np.unique(clusters).tolist()
        tiles = {int(c): Tile.of(*list_view(ivf, int(c)), lambda a: torch.from_numpy(a).to(device))
                 for c in held}
        return DeviceLists.joined(tiles, int(ivf.nlist), int(ivf.d), device)

    @staticmethod
    def joined(tiles: Mapping[int, Tile], nlist: int, dim: int, device: str) -> DeviceLists:
        """Tiles already on `device` joined into one store (a copy on the device)."""
        import torch

        held = sorted(tiles)
        size = np.zeros(nlist, np.int64)
        size[held] = [tiles[c].size for c in held]
        start = np.full(nlist, -1, np.int64)
        start[held] = np.r_[0, np.cumsum(size[held])[:-1]]
        max_norm = np.zeros(nlist)
        max_norm[held] = [tiles[c].max_norm for c in held]
        ids = [np.empty(0, np.int64)] * nlist
        for c in held:
            ids[c] = tiles[c].ids
        if not held:
            empty = torch.empty((0, dim), dtype=torch.float32, device=device)
            return DeviceLists(device, empty, empty[:, 0], start, size, max_norm, tuple(ids))
        return DeviceLists(device, torch.cat([tiles[c].vectors for c in held]),
                           torch.cat([tiles[c].sq_norms for c in held]), start, size, max_norm,
                           tuple(ids))

    def tile(self, cluster: int) -> Tile:
        """List `cluster` as the scan reads it: views of the device tensors."""
        if self.start[cluster] < 0:
            raise KeyError(f"list {cluster} is not held on {self.device}")
        a = int(self.start[cluster])
        b = a + int(self.size[cluster])
        return Tile(self.vectors[a:b], self.sq_norms[a:b], self.ids[cluster],
                    float(self.max_norm[cluster]))

    @property
    def nbytes(self) -> int:
        return int(self.size.sum()) * int(self.vectors.shape[1]) * 4


@dataclass(frozen=True)
class GroupedArrays(TorchArrays):
    """Torch arrays whose chunk estimates are one product over `lists` (the scan's tiles must
    be `lists.tile`)."""

    lists: DeviceLists | None = None
    chunk_elements: int | None = DEVICE_CHUNK_ELEMENTS
    dense_limit: int = DENSE_LIMIT

    @staticmethod
    def over(lists: DeviceLists) -> GroupedArrays:
        return GroupedArrays(lists.device, int(lists.vectors.shape[1]), lists=lists)

    def estimate_chunk(self, buf, chunk: Chunk, l2: bool) -> None:
        import torch

        first = self.lists.start[chunk.clusters]
        size = self.lists.size[chunk.clusters]
        lo, hi = int(first.min(initial=0)), int((first + size).max(initial=0))
        tasks, where, row_of = np.unique(chunk.task, return_index=True, return_inverse=True)
        if tasks.size * (hi - lo) > self.dense_limit or buf.shape[1] == 0:
            per_list(self, buf, chunk, l2)
            return
        on = buf.device
        dense = chunk.queries[torch.from_numpy(where).to(on)] @ \
            self.lists.vectors[lo:hi].T.to(self._dtype)
        if l2:
            dense += self.lists.sq_norms[lo:hi].to(self._dtype)
        # Row r of the buffer is pair r: its task's row of `dense`, from its list's first column.
        pair_first = torch.from_numpy(np.repeat(first - lo, chunk.per_list)).to(on)
        pair_size = torch.from_numpy(np.repeat(size, chunk.per_list)).to(on)
        offset = torch.arange(buf.shape[1], device=on)
        cols = (pair_first[:, None] + offset).clamp_(max=max(hi - lo - 1, 0))
        rows = torch.from_numpy(row_of.reshape(-1)).to(on)[:, None]
        torch.where(offset < pair_size[:, None], dense[rows, cols],
                    torch.tensor(float("inf"), dtype=buf.dtype, device=on), out=buf)


def scan_step(engine, lists: DeviceLists, tasks, k: int) -> list:
    """A step's tasks scanned list-major over `lists` (each task's lists all held there): each
    task's exact top-(k+1) partial, as `engine.search_step` would give it."""
    from ragraph.runtime.retrieval.protocol import TopK

    if not tasks:
        return []
    x = np.stack([t.query for t in tasks]).astype(np.float32)
    dist, ids = engine.scan_lists(x, [t.clusters for t in tasks], k + 1, lists.tile,
                                  GroupedArrays.over(lists))
    return [TopK(dist[i], ids[i], t.clusters.copy()) for i, t in enumerate(tasks)]
