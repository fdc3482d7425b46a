"""The scheduler's in-flight work: one job per running retrieval or generation of a request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from ragraph.ir.nodes import Generate, Retrieve
from ragraph.ir.values import Passages
from ragraph.runtime.llm.protocol import GenerationResult
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.request import RequestState
from ragraph.runtime.retrieval.protocol import TopK
from ragraph.runtime.scheduler.policies import topk_drift
from ragraph.runtime.scheduler.search_worker import Prepared, ScanItem, ScanResult


@dataclass
class GenJob:
    """A generation in the LLM engine. A speculative one started on a retrieval's partial top-k
    and is adopted only if the committed prompt is identical to `prompt`."""

    state: RequestState
    node: Generate
    prompt: str
    stream: GenerationStream
    started: float
    speculative: bool = False
    result: GenerationResult | None = None
    error: BaseException | None = None
    task: asyncio.Task | None = None
    tokens: int = 0
    text: str = ""  # the text streamed so far (speculative retrieval reads it)
    warmed: bool = False


@dataclass
class RetJob:
    """A retrieval in the search engine, advanced one budgeted step per cycle."""

    key: int
    state: RequestState
    node: Retrieve
    query: str
    stepwise: bool
    order: str
    started: float
    warm_only: bool = False  # speculative retrieval: only warms the request's locality history
    vector: np.ndarray | None = None
    probe: np.ndarray | None = None
    remaining: tuple[int, ...] = ()
    partials: list[TopK] = field(default_factory=list)
    partial_passages: Passages | None = None
    drift: float = 1.0
    steps: int = 0
    spec: GenJob | None = None
    in_flight: bool = False
    waited: int = 0  # search steps in a row that gave it no cluster

    @property
    def ready(self) -> bool:
        """Embedded and probed, and not in the running search cycle."""
        return self.vector is not None and not self.in_flight

    def take(self, prepared: Prepared) -> None:
        self.vector, self.probe, self.remaining = prepared.vector, prepared.probe, prepared.order

    def scan_item(self, want_partial: bool) -> ScanItem:
        return ScanItem(key=self.key, k=self.node.topk, stepwise=self.stepwise,
                        vector=self.vector, probe=self.probe, remaining=self.remaining,
                        partials=tuple(self.partials), want_partial=want_partial,
                        waited=self.waited)

    def absorb(self, result: ScanResult) -> None:
        """Take one cycle's result (on the scheduler thread)."""
        self.waited = 0 if result.searched else self.waited + 1
        if result.partial is not None:
            self.partials.append(result.partial)
            self.steps += 1
        self.remaining = result.remaining
        if result.partial_passages is not None:
            before = self.partial_passages.ids if self.partial_passages else ()
            self.drift = topk_drift(before, result.partial_passages.ids)
            self.partial_passages = result.partial_passages
