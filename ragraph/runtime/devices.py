"""Which retrieval paths run on the GPU, decided once per run from the machine and the flags.

With a CUDA device the query embedder of a float64 index runs there (float64, so batching still
never changes a query's vector); an int8 index's queries stay on the CPU, exact (embedder.py's
`query_device`). The hot-cluster cache with TeleRAG prefetch (HedraRAG technique 3)
is off unless `--hot-cache` asks for it, on a GPU machine too: measured end to end on an H200 it
never made a run faster and cost up to 15% where retrieval was half the work, its scans sharing the
GPU with the query embedder (docs/benchmarks/gpu.md). Without CUDA its "accelerator" would be torch
on the same cores; `--hot-cache` still turns it on there (for tests and comparisons). Output says
which paths are on and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@cache
def cuda_available() -> bool:
    """Whether torch sees a CUDA device (asked once: the answer does not change in a run)."""
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class GpuPaths:
    cuda: bool  # a CUDA device is present
    device: str  # where the query embedder and the cache's tiles run: "cuda" or "cpu"
    hot_cache: bool  # the hot-cluster cache and prefetch
    hot_cache_why: str  # the flag or default that decided it

    def describe(self) -> str:
        """One line for run and bench output."""
        where = "cuda (an int8 index's: cpu)" if self.cuda else "cpu (no CUDA device)"
        state = f"on, {self.device}" if self.hot_cache else "off"
        return (f"GPU paths: query embedder {where}; hot-cluster cache + prefetch {state} "
                f"({self.hot_cache_why})")


def gpu_paths(hot_cache: bool | None, cuda: bool) -> GpuPaths:
    """`hot_cache`: the flag (None: not given, off)."""
    device = "cuda" if cuda else "cpu"
    if hot_cache is None:
        why = ("default: not faster end to end on a GPU yet; --hot-cache turns it on" if cuda
               else "no CUDA device; --hot-cache forces it")
        return GpuPaths(cuda, device, False, why)
    if hot_cache:
        why = "--hot-cache" if cuda else "--hot-cache: torch on the CPU, nothing to gain"
        return GpuPaths(cuda, device, True, why)
    return GpuPaths(cuda, device, False, "--no-hot-cache")
