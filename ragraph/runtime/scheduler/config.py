"""The run's scheduler part: which executor runs the workflows, after which passes, with how
many requests in flight, and the wavefront's policy knobs. The `[scheduler]` table of a config
file; `WavefrontExecutor` takes it as it is."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.checks import MAX_CONCURRENCY, positive_int

EXECUTORS = ("ragraph", "sequential", "stage-batched", "langgraph")
# When the wavefront hands prompts to the LLM engine (`policies.stream_prompts`): "auto" as
# the measured rule decides, "step" a search step's together, "retrieval" each as its own
# retrieval finishes.
RELEASES = ("auto", "step", "retrieval")


@dataclass(frozen=True)
class SchedulerConfig:
    executor: str = "ragraph"
    passes: str = "-O2"
    # Requests in flight, the one meaning for every executor: the wavefront admits this many
    # and keeps as many engine streams (its T_max), a thread pool runs this many workers, a
    # stage-batched run batches this many, and the embedded llama.cpp engine makes room for a
    # speculative instance beside each (`LlamaCppConfig.of`).
    concurrency: int = 8
    tau: float = 0.6  # speculate only while generation load / capacity < tau
    budget_ms: float | None = None  # fixed sub-stage budget instead of sqrt(2·β·t_R)
    # Host-to-accelerator bandwidth (PCIe 4.0 x16): prefetch budget = it x expected generation.
    link_gb_per_s: float = 25.0
    initial_beta_ms: float = 0.3  # per-sub-stage overhead before it is measured
    # Speculate on a retrieval's first partial top-k, and on a later one only once it changed
    # at most this much over the last step (1 - Jaccard): an unsettled partial result is usually
    # rolled back, wasting engine time (`speculation_rules.speculate_on`).
    spec_max_drift: float = 0.0
    # One of RELEASES; "step" until "auto" is measured ahead (docs/benchmarks/seeds.md).
    release: str = "step"

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise ConfigError("executor",
                              f"must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        positive_int("concurrency", self.concurrency, MAX_CONCURRENCY)
        if self.release not in RELEASES:
            raise ConfigError("release", f"must be one of {', '.join(RELEASES)}, got "
                              f"{self.release!r}")
        if not 0 < self.tau <= 1:
            raise ConfigError("tau", f"must be in (0, 1], got {self.tau}")
        if self.link_gb_per_s <= 0:
            raise ConfigError("link_gb_per_s", f"must be positive, got {self.link_gb_per_s}")
        if self.budget_ms is not None and self.budget_ms <= 0:
            raise ConfigError("budget_ms", f"must be positive, got {self.budget_ms}")
