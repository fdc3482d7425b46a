"""The run's search part: which index, how its queries are embedded and searched, and its
accelerator tier. The `[search]` table of a config file; the hot-cluster cache sizes itself
from it (`HotCacheConfig.of`)."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.checks import MAX_NPROBE, MAX_THREADS, http_url, positive_int
from ragraph.runtime.devices import GpuPaths, cuda_available, gpu_paths


@dataclass(frozen=True)
class SearchConfig:
    index: str | None = None  # index directory; None = the embedded default Wikipedia index
    # Queries embedded by this OpenAI-compatible /v1/embeddings server instead of the index's
    # model loaded here; it must serve the model the index was built with.
    embedder_url: str | None = None
    nprobe: int = 32
    # faiss/embedding threads; None = this machine's default beside the run's engine
    # (`threads.default_split`), filled in by `RuntimeConfig`.
    search_threads: int | None = None
    # The accelerator tier (hot-cluster cache + TeleRAG prefetch); None: off, on a GPU too
    # (devices.py says why; on a CPU-only machine its "accelerator" is the same CPU).
    hot_cache: bool | None = None
    hot_fraction: float = 0.2  # HedraRAG: the top 20% of clusters carried 69% of the work

    def __post_init__(self) -> None:
        positive_int("nprobe", self.nprobe, MAX_NPROBE)
        if self.search_threads is not None:
            positive_int("search_threads", self.search_threads, MAX_THREADS)
        if not 0 < self.hot_fraction <= 1:
            raise ConfigError("hot_fraction", f"must be in (0, 1], got {self.hot_fraction}")
        http_url("embedder_url", self.embedder_url)

    @property
    def gpu(self) -> GpuPaths:
        """Which retrieval paths run on the GPU on this machine, and why."""
        return gpu_paths(self.hot_cache, cuda_available())
