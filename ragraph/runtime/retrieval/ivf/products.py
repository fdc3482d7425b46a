"""Which library computes a list-major scan's float32 products on the host: numpy's BLAS or
torch's, whichever is faster on this machine, measured once per process.

Both compute float32 products with float32 accumulation, so the scan's error bound (`bounds.U32`)
holds for either and answers never depend on the choice (faiss re-scores every candidate). The
speeds do, and which library leads differs between machines (figures: docs/benchmarks/
code-figures.md#list-major-scans), so it is not assumed: the first scan times both on a product
of that shape. `RAGRAPH_HOST_MATMUL=numpy|torch` pins it.

torch's thread count is per calling thread (OpenMP's and MKL's settings are thread-local), but
`torch.set_num_threads` also stores the count a thread takes on its first parallel operation, so
a scan sets it only around its own products and puts it back.
"""

from __future__ import annotations

import functools
import os
import threading
import time

import numpy as np

from ragraph.errors import ConfigError

PRODUCTS = ("numpy", "torch")
ENV = "RAGRAPH_HOST_MATMUL"
# The timed product: a list of the size IVF4096 over 4M vectors gives, 8 queries sharing it.
_TRIAL_ROWS, _TRIAL_VECTORS, _TRIAL_REPEATS = 8, 1024, 7


class _SingleThreadedBlas:
    """numpy's BLAS on one thread while any scan's workers run: the first scan to enter limits
    it, the last to leave restores it, however scans on other threads overlap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._blas = None  # found once: looking up the loaded libraries is slow
        self._limit = None

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                if self._blas is None:
                    from threadpoolctl import ThreadpoolController

                    self._blas = ThreadpoolController().select(user_api="blas")
                self._limit = self._blas.limit(limits=1)
            self._inside += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._limit is not None:
                self._limit.restore_original_limits()
                self._limit = None


# One per process, as the BLAS thread count it guards is: per engine, two engines' overlapping
# scans would restore each other's limits out of order.
_BLAS = _SingleThreadedBlas()


@functools.cache
def host_product(dim: int) -> str:
    """"numpy" or "torch": the faster at a list product of dimension `dim` on this machine."""
    pinned = os.environ.get(ENV)
    if pinned:
        if pinned not in PRODUCTS:
            raise ConfigError(ENV, f"must be one of {', '.join(PRODUCTS)}, got {pinned!r}")
        return pinned
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    rng = np.random.default_rng(0)
    q = rng.standard_normal((_TRIAL_ROWS, dim)).astype(np.float32)
    vectors = rng.standard_normal((_TRIAL_VECTORS, dim)).astype(np.float32)
    out = np.empty((_TRIAL_ROWS, _TRIAL_VECTORS), dtype=np.float32)
    best = {name: np.inf for name in PRODUCTS}
    with OneThread("torch"):
        for _ in range(_TRIAL_REPEATS):  # interleaved, best of each: load hits both alike
            for name in PRODUCTS:
                start = time.perf_counter()
                matmul_into(name, out, q, vectors)
                best[name] = min(best[name], time.perf_counter() - start)
    return "torch" if best["torch"] < best["numpy"] else "numpy"


def matmul_into(product: str, out: np.ndarray, q: np.ndarray, vectors: np.ndarray) -> None:
    """out = q @ vectors.T with `product`'s library, in place (`out` may be a strided view)."""
    if product == "torch":
        import torch

        torch.matmul(torch.from_numpy(q), torch.from_numpy(vectors).T, out=torch.from_numpy(out))
    else:
        np.matmul(q, vectors.T, out=out)


class OneThread:
    """The products of the block on one thread: numpy's BLAS (process-wide, `_BLAS`) and, for
    torch, torch in the calling thread (thread-local, put back after)."""

    def __init__(self, product: str) -> None:
        self._product = product
        self._before = 0

    def __enter__(self) -> None:
        _BLAS.__enter__()
        if self._product == "torch":
            import torch

            self._before = torch.get_num_threads()
            if self._before != 1:
                torch.set_num_threads(1)

    def __exit__(self, *exc) -> None:
        if self._product == "torch" and self._before != 1:
            import torch

            torch.set_num_threads(self._before)
        _BLAS.__exit__(*exc)
