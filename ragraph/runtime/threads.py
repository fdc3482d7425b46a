"""How a run splits the machine's cores between the LLM engine and retrieval.

The defaults follow the machine (the cores this process may use) and the engine: llama.cpp
computes on the CPU and is nearly all of a request's work (docs/benchmarks/code-figures.md#cores),
so it takes every core and retrieval shares them; a GPU engine, real or
simulated, leaves the CPU to query embedding and IVF scans, which then take every core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CPU_ENGINES = frozenset({"llamacpp"})


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
    return CoreSplit(gen=1, search=cores)
