"""The few array operations a list-major scan needs, on the CPU (numpy) or a torch device.

Both keep a chunk of lists' estimates in one padded buffer (rows: (query, list) pairs, padding
+inf) and answer the questions the scan asks of it: a row's smallest and m-th smallest estimate,
and where the estimates are within a row's threshold. numpy runs on as many worker threads as faiss
has, each with a single-threaded BLAS (a product per list is too small for BLAS's own threads to
pay: docs/benchmarks/code-figures.md#list-major-scans). A torch device runs one chunk at a time and parallelizes inside its kernels.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ragraph.runtime.retrieval.ivf.bounds import U32, gamma, matmul_roundoff
from ragraph.runtime.retrieval.ivf.lists import Chunk
from ragraph.runtime.retrieval.ivf.products import OneThread, matmul_into

# Below this many queries per list, numpy's products go one matrix-vector product per query:
# OpenBLAS's sgemm on a few rows is slower than as many sgemv; torch's MKL needs no such help
# (figures: docs/benchmarks/code-figures.md#list-major-scans).
GEMV_BELOW = 4


def per_list(arrays, buf, chunk: Chunk, l2: bool) -> None:
    """A chunk's estimates, one product a list into its pairs' rows of `buf` (+inf padding left
    where a list is shorter than the buffer)."""
    row = 0
    for tile, n in zip(chunk.tiles, chunk.per_list.tolist(), strict=True):
        arrays.estimate(buf[row:row + n, :tile.size], chunk.queries[row:row + n], tile.vectors,
                        tile.sq_norms if l2 else None)
        row += n


@dataclass(frozen=True)
class NumpyArrays:
    """Host arrays: the lists are faiss's own memory, read in place; `product`: the library
    computing the products ("numpy" or "torch", `products.host_product`), float32 in both."""

    parallel: bool = True
    product: str = "numpy"
    chunk_elements: int | None = None  # None: listmajor.CHUNK_ELEMENTS

    @property
    def matmul_u(self) -> float:
        return U32  # either library computes float32 products in float32

    def single_threaded(self) -> OneThread:
        """The products on one thread for the length of a chunk."""
        return OneThread(self.product)

    def queries(self, x: np.ndarray) -> np.ndarray:
        return x

    def buffer(self, rows: int, width: int) -> np.ndarray:
        return np.full((rows, width), np.inf, dtype=np.float32)

    def estimate_chunk(self, buf: np.ndarray, chunk: Chunk, l2: bool) -> None:
        per_list(self, buf, chunk, l2)

    def estimate(self, out, q, vectors, sq_norms) -> None:
        """out = q @ vectors.T (+ sq_norms when given)."""
        if self.product != "numpy":
            matmul_into(self.product, out, q, vectors)
        elif q.shape[0] < GEMV_BELOW:
            for row, query in zip(out, q, strict=True):
                np.matmul(vectors, query, out=row)
        else:
            np.matmul(q, vectors.T, out=out)
        if sq_norms is not None:
            out += sq_norms

    def row_min(self, buf: np.ndarray) -> np.ndarray:
        if buf.shape[1] == 0:  # a chunk of empty lists
            return np.full(buf.shape[0], np.inf)
        return buf.min(axis=1).astype(np.float64)

    def kth(self, buf: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
        """The m-th smallest estimate of each of `rows` (inf where a row is shorter)."""
        if buf.shape[1] < m:
            return np.full(rows.shape[0], np.inf)
        return np.partition(buf[rows], m - 1, axis=1)[:, m - 1].astype(np.float64)

    def within(self, buf: np.ndarray, threshold: np.ndarray):
        # 1-d nonzero: the 2-d `np.nonzero` is many times slower on a chunk's buffer.
        hits = np.flatnonzero(buf <= threshold[:, None])
        rows, cols = np.divmod(hits, buf.shape[1])
        return rows, cols, buf.reshape(-1)[hits]


@dataclass(frozen=True)
class TorchArrays:
    """Tensors on `device` (the accelerator tier's tiles); results come back to the host."""

    device: str
    dim: int
    parallel: bool = False
    chunk_elements: int | None = None  # None: listmajor.CHUNK_ELEMENTS
    _dtype: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import torch

        try:
            gamma(self.dim + 2, matmul_roundoff(self._device_type))
            dtype = torch.float32
        except ValueError:
            # bf16 products have no useful bound at this dimension: compute in float64 instead.
            dtype = torch.float64
        object.__setattr__(self, "_dtype", dtype)

    @property
    def _device_type(self) -> str:
        return self.device.split(":")[0]

    @property
    def matmul_u(self) -> float:
        import torch

        return 2.0**-53 if self._dtype is torch.float64 else matmul_roundoff(self._device_type)

    def single_threaded(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # the device's kernels run on the device

    def queries(self, x: np.ndarray):
        import torch

        return torch.from_numpy(x).to(self.device, self._dtype)

    def buffer(self, rows: int, width: int):
        import torch

        return torch.full((rows, width), float("inf"), dtype=self._dtype, device=self.device)

    def estimate_chunk(self, buf, chunk: Chunk, l2: bool) -> None:
        per_list(self, buf, chunk, l2)

    def estimate(self, out, q, vectors, sq_norms) -> None:
        import torch

        torch.matmul(q, vectors.T.to(self._dtype), out=out)
        if sq_norms is not None:
            out += sq_norms.to(self._dtype)

    def row_min(self, buf) -> np.ndarray:
        if buf.shape[1] == 0:  # a chunk of empty lists
            return np.full(buf.shape[0], np.inf)
        return buf.min(dim=1).values.double().cpu().numpy()

    def kth(self, buf, rows: np.ndarray, m: int) -> np.ndarray:
        if buf.shape[1] < m:
            return np.full(rows.shape[0], np.inf)
        import torch

        picked = buf[torch.from_numpy(rows).to(buf.device)]
        return picked.kthvalue(m, dim=1).values.double().cpu().numpy()

    def within(self, buf, threshold: np.ndarray):
        import torch

        thr = torch.from_numpy(threshold).to(self.device, self._dtype)
        rows, cols = torch.nonzero(buf <= thr[:, None], as_tuple=True)
        est = buf[rows, cols].double().cpu().numpy()
        return rows.cpu().numpy(), cols.cpu().numpy(), est
