"""How a run splits the machine's cores between the LLM engine and retrieval.

The defaults follow the machine (the cores this process may use) and the engine: llama.cpp
computes on the CPU and is nearly all of a request's work (docs/benchmarks/code-figures.md#cores),
so it takes every core and retrieval shares them; a GPU engine, real or
simulated, leaves the CPU to query embedding and IVF scans, which then take every core up to
`MAX_SEARCH_THREADS`.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

CPU_ENGINES = frozenset({"llamacpp"})
# Where a GPU engine leaves the CPU to retrieval, the search thread takes at most this many: on a
# 16-core machine its embedding batches and steps ran slower on all 16 than on 4 or 8, which
# served 1.4-1.6x the requests (figures: docs/benchmarks/code-figures.md#cores).
MAX_SEARCH_THREADS = 8


def usable_cores() -> int:
    """The affinity mask's size: what this process may really use (a container's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class CoreSplit:
    gen: int  # llama.cpp threads
    search: int  # faiss and query-embedder threads

    def describe(self, cores: int) -> str:
        return f"threads: LLM {self.gen}, search {self.search} ({cores} cores)"


def default_split(engine: str, cores: int | None = None) -> CoreSplit:
    cores = cores or usable_cores()
    if engine in CPU_ENGINES:
        # One search thread per 8 cores: a query's embedding and scan are milliseconds against
        # seconds of generation, and every thread retrieval holds is one llama.cpp waits for.
        return CoreSplit(gen=cores, search=max(1, cores // 8))
    return CoreSplit(gen=1, search=min(cores, MAX_SEARCH_THREADS))


def search_pool(threads: int, name: str) -> ThreadPoolExecutor:
    """One thread for search calls, whose faiss scans use `threads` OpenMP threads. libgomp
    keeps the thread count per thread: `faiss.omp_set_num_threads` in the thread that opened
    the index does not reach a new one, which would scan on every core (the default) beside
    the LLM engine's threads whatever the core split says."""
    return ThreadPoolExecutor(1, thread_name_prefix=name, initializer=_faiss_threads,
                              initargs=(threads,))


def _faiss_threads(threads: int) -> None:
    import faiss  # here: the split is read by code that never searches

    faiss.omp_set_num_threads(threads)
