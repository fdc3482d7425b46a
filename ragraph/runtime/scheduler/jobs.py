"""The scheduler's in-flight work: one job per running retrieval or generation chain of a
request. A job records the stages its side has reached; a unit of the chain that waits for a
stage (probe, search-steps, decode, ...) completes when the job reaches it.

A job points back at the request that holds it (`live.LiveRequest`), which holds its jobs: the
two types name each other. Jobs sit below the request, so a job is generic in its request
(`Job[LiveRequest]` where the wavefront uses it) and this module names only what it reads of it
(`Holder`); nothing here imports `live`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ragraph.errors import EngineError
from ragraph.ir.values import Passages
from ragraph.program.program import GenerationChain, RetrievalChain
from ragraph.runtime.events import Searched
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.failure import error_of
from ragraph.runtime.llm.protocol import GenerationResult, PromptSegments
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.request import RequestState
from ragraph.runtime.retrieval.protocol import TopK
from ragraph.runtime.scheduler.search_worker import PreparedQuery, ScanItem, ScanResult
from ragraph.runtime.scheduler.speculation_rules import counts_for_speculation, topk_drift


class Holder(Protocol):
    """What a job reads of the request that holds it."""

    @property
    def state(self) -> RequestState: ...

    @property
    def speculative(self) -> Mapping[str, object]: ...  # its speculative generations, by origin


R = TypeVar("R", bound=Holder)


class Stage(Enum):
    EMBEDDED = "embedded"
    PROBED = "probed"
    ORDERED = "ordered"  # the cluster order from the request's local cache
    SEARCHED = "searched"
    PREFILLED = "prefilled"  # the first token arrived (or the generation ended without one)
    DECODED = "decoded"


class StageWaiter:
    """What a unit waits on for a stage: a job, or a map's branches (`fanout.Fan`). Subclasses
    hold `reached` and `awaiting`."""

    reached: set[Stage]
    awaiting: tuple[str, Stage] | None

    def wait(self, uid: str, stage: Stage) -> bool:
        """`uid` needs `stage`: True when it is already reached, else it waits for it."""
        if stage in self.reached:
            return True
        self.awaiting = (uid, stage)
        return False

    def released(self) -> str | None:
        """The waiting unit, once the stage it waits for is reached (it completes now)."""
        if self.awaiting is not None and self.awaiting[1] in self.reached:
            uid, self.awaiting = self.awaiting[0], None
            return uid
        return None


@dataclass
class Job(StageWaiter, Generic[R]):
    key: int
    req: R
    started: float
    reached: set[Stage] = field(default_factory=set)
    awaiting: tuple[str, Stage] | None = None  # the unit waiting for a stage of this job
    # A map's branch: units wait on its fanout.Fan (every branch), never on the branch alone.
    fan: Any = None
    branch: int = 0

    @property
    def state(self) -> RequestState:
        return self.req.state

    def reach(self, stage: Stage) -> str | None:
        """Record `stage`; the unit that was waiting for it, if any (it completes now)."""
        self.reached.add(stage)
        if self.fan is not None:
            return self.fan.branch_reached(stage)
        return self.released()


@dataclass(kw_only=True)
class GenJob(Job[R]):
    """A generation in the LLM engine. A speculative one started on a retrieval's partial top-k
    and is adopted only if the committed prompt is identical to `prompt`."""

    chain: GenerationChain
    prompt: Prompt = ""
    layout: PromptSegments | None = None  # (prefix-layout) the engine request's segments
    stream: GenerationStream | None = None
    speculative: bool = False
    result: GenerationResult | None = None
    error: BaseException | None = None
    task: asyncio.Task | None = None
    tokens: int = 0
    text: str = ""  # the text streamed so far (speculative retrieval reads it)
    warmed: bool = False

    @property
    def origin(self) -> str:
        return self.chain.origin

    @property
    def failed(self) -> bool:
        return self.failure() is not None

    def failure(self) -> BaseException | None:
        """Why the generation gave no usable text: its error, or an abort the scheduler did not
        ask for (the engine gave up on it: an engine fault, never a short answer)."""
        if self.error is not None:
            return self.error
        if self.result is None:
            return None
        where = f"node {self.origin!r}"
        asked = self.stream is not None and self.stream.abort_requested
        if self.result.finish_reason == "abort" and not asked:
            return EngineError(f"{where}: the engine stopped the generation on its own "
                               "(finish_reason abort; the scheduler did not abort it)")
        return error_of(self.result, where)


@dataclass(kw_only=True)
class RetJob(Job[R]):
    """A retrieval in the search engine, advanced one budgeted step per cycle."""

    chain: RetrievalChain
    query: str = ""
    warm_only: bool = False  # speculative retrieval: only warms the request's locality history
    vector: np.ndarray | None = None
    probe: np.ndarray | None = None
    remaining: tuple[int, ...] = ()
    # Where its search latency went (its trace span says): when it was embedded and probed,
    # the seconds its embedding batch took, and those of the search steps that scanned it.
    embedded_at: float | None = None
    embedding_s: float = 0.0
    scanning_s: float = 0.0
    partials: list[TopK] = field(default_factory=list)
    partial_passages: Passages | None = None
    passages: Passages | None = None
    drift: float = 1.0
    # Partial top-k results looked up past the share that may be speculated on
    # (`speculation_rules.counts_for_speculation`).
    views: int = 0
    steps: int = 0
    clusters: int = 0  # clusters searched so far
    hot_hits: int | None = None  # ... of them held by the accelerator tier (None: no tier)
    in_flight: bool = False
    waited: int = 0  # search steps in a row that gave it no cluster
    # Met while speculation backed off: whether it explores (True) or is held back (False);
    # None until then (`backoff.SpeculationBackoff.allows`).
    explores: bool | None = None

    @property
    def origin(self) -> str:
        return self.chain.origin

    @property
    def ready(self) -> bool:
        """Embedded and probed, not finished, and not in the running search cycle."""
        return (self.vector is not None and not self.in_flight
                and Stage.SEARCHED not in self.reached)

    @property
    def may_speculate(self) -> bool:
        """Whether a partial top-k of this retrieval could start its next generation now: a
        real retrieval with a speculative edge whose generation is not running on an earlier
        partial yet. Once one runs, the rest of the search goes on in whole steps to its
        verify point: splitting it further for partial results cost more than it saved
        (docs/benchmarks/ablation.md#online-latency-against-the-arrival-rate)."""
        into = self.chain.speculate_into
        return not self.warm_only and into is not None and into not in self.req.speculative

    def searched(self) -> Searched:
        """What the search did for this retrieval, once it finished (spans report it)."""
        assert self.probe is not None and self.passages is not None  # it finished
        return Searched(self.query, len(self.probe), self.steps, self.clusters, self.passages,
                        self.hot_hits)

    def take(self, prepared: PreparedQuery) -> None:
        self.vector, self.probe, self.remaining = prepared.vector, prepared.probe, prepared.order

    def scan_item(self, want_partial: bool) -> ScanItem:
        assert self.vector is not None and self.probe is not None  # embedded and probed
        spec = self.state.request.search.spec(self.chain.topk, self.chain.mode,
                                              self.chain.where)
        return ScanItem(key=self.key, k=spec.k, query=self.query, mode=spec.mode,
                        where=spec.where,
                        stepwise=self.chain.stepwise, vector=self.vector, probe=self.probe,
                        remaining=self.remaining, partials=tuple(self.partials),
                        want_partial=want_partial, waited=self.waited)

    def absorb(self, result: ScanResult) -> None:
        """Take one cycle's result (on the scheduler thread)."""
        assert self.probe is not None  # probed before its first search step
        self.waited = 0 if result.searched else self.waited + 1
        self.clusters += len(result.searched)
        if result.partials:
            self.partials.extend(result.partials)
            self.steps += 1
        self.remaining = result.remaining
        if result.partial_passages is not None:
            before = self.partial_passages.ids if self.partial_passages else ()
            self.drift = topk_drift(before, result.partial_passages.ids)
            self.partial_passages = result.partial_passages
            if counts_for_speculation(self.clusters, len(self.probe)):
                self.views += 1
        if result.passages is not None:
            self.passages = result.passages
