"""The run's scale-out part: the Ray cluster whose actors hold the index's lists, and how they
are spread and restarted. The `[scale]` table of a config file; the shard pool takes it as it is
(Ray is imported only where the actors start)."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.checks import MAX_SHARDS, positive_int


@dataclass(frozen=True)
class ScaleConfig:
    ray: str | None = None  # the cluster's HOST:PORT or "auto"; None: the index runs here
    shards: int = 2
    # The share of lists (the largest) held by two shards.
    replicate: float = 0.1
    # Ray CPUs per shard actor; faiss runs max(1, floor(cpus)) threads in it.
    shard_cpus: float = 1.0
    max_restarts: int = 3
    # Sends of one step's share before giving up (the first try included).
    attempts: int = 4
    # How long a re-send waits for a failed shard, the only holder of some of its lists, to
    # answer again (Ray restarting its process and the shard reloading its lists).
    restart_s: float = 120.0

    def __post_init__(self) -> None:
        positive_int("shards", self.shards, MAX_SHARDS)
        if not 0 <= self.replicate <= 1:
            raise ConfigError("replicate", f"must be in [0, 1], got {self.replicate}")
        if self.shard_cpus <= 0:
            raise ConfigError("shard_cpus", f"must be positive, got {self.shard_cpus}")
        if self.max_restarts < 0 or self.attempts < 1:
            raise ConfigError("attempts", "needs max_restarts >= 0 and attempts >= 1")
        if self.restart_s <= 0:
            raise ConfigError("restart_s", f"must be positive, got {self.restart_s}")
