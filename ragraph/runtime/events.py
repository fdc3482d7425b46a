"""What a run reports while its requests are in flight, and how a caller cancels one request.

Executors call `RunHooks` at a few points (a unit completed, a generation produced text, a
speculative generation started, was adopted or rolled back, a generation ended); a caller that
wants to watch (the HTTP server) passes a `RunObserver`. Without one every call returns at once, so a
batch run pays nothing for it. Events are frozen and carry plain values: the observer runs on the
scheduler's loop thread and must not block it.

A run that records spans (`--otlp`, runtime/telemetry) also passes a `RunRecorder`: it is told
more than an observer (a request's end, a retrieval's search work, the prompt of a generation)
and turns each request into a tree of spans when it ends. Without one nothing is built.

Cancelling is the other direction: an executor that can stop one request says how with
`accept_cancel`; `cancel(rid)` then ends that request as failed and releases its engine work
(the wavefront aborts its generation streams as the request retires).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ragraph.errors import FailureKind, RagraphError
from ragraph.ir.nodes import Node
from ragraph.ir.values import Passages, Value
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.protocol import GenerationResult
from ragraph.runtime.request import RequestState


@dataclass(frozen=True)
class UnitCompleted:
    """A unit of the request's graph completed; `outputs`: the variables it assigned."""

    rid: str
    unit: str
    kind: str
    origin: str  # the workflow node the unit belongs to (itself when not split)
    outputs: Mapping[str, Value]
    started: float
    ended: float


@dataclass(frozen=True)
class TextProduced:
    """Text a generation of the request produced (tokens, or the text of an adopted speculation)."""

    rid: str
    origin: str
    output: str  # the variable the generation assigns
    text: str


@dataclass(frozen=True)
class SpeculationStarted:
    """A speculative generation started on a partial value (it settles later: adopted, or
    rolled back)."""

    rid: str
    origin: str


@dataclass(frozen=True)
class SpeculationSettled:
    """A speculative generation met its commit point: adopted, or rolled back and restarted."""

    rid: str
    origin: str
    adopted: bool


@dataclass(frozen=True)
class SpeculationHeldBack:
    """A retrieval that could have started a speculative generation of `origin` did not: the
    recent speculations were mostly rolled back (`scheduler.backoff`)."""

    rid: str
    origin: str


@dataclass(frozen=True)
class GenerationUsage:
    """A generation whose output the request used ended: what the engine computed for it."""

    rid: str
    origin: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class CancelRequest:
    """A caller gave up on a request (its client went away, its time ran out)."""

    rid: str
    reason: str


RunEvent = (UnitCompleted | TextProduced | SpeculationStarted | SpeculationSettled
            | SpeculationHeldBack | GenerationUsage)


class RunObserver(Protocol):
    def emit(self, event: RunEvent) -> None: ...


@dataclass(frozen=True)
class Searched:
    """What one retrieval of a request did in the search engine: the query it embedded, the
    clusters it probed (nprobe) and searched, in how many steps, how many of those clusters the
    accelerator tier held (None without the tier), and the passages it committed."""

    query: str
    nprobe: int
    steps: int
    clusters: int
    passages: Passages
    hot_hits: int | None = None


class RunRecorder(Protocol):
    """Who turns a run into spans (runtime/telemetry). Called where the observer is, plus the
    request's end; times are `time.perf_counter` seconds."""

    def unit(self, state: RequestState, node: Node, started: float, ended: float) -> None: ...

    def generated(self, rid: str, origin: str, result: GenerationResult,
                  prompt: Prompt | None) -> None: ...

    def retrieved(self, rid: str, origin: str, searched: Searched) -> None: ...

    def speculated(self, rid: str, origin: str) -> None: ...

    def speculation(self, rid: str, origin: str, adopted: bool) -> None: ...

    def finished(self, state: RequestState) -> None: ...


class RequestCancelled(RagraphError):
    """The error a cancelled request finishes with (its message is the reason)."""

    kind: ClassVar[FailureKind] = "cancelled"


class RunHooks:
    """The observer of a run (optional) and the way its executor cancels a request."""

    def __init__(self, observer: RunObserver | None = None,
                 recorder: RunRecorder | None = None) -> None:
        self.observer = observer
        self.recorder = recorder
        self._cancel: Callable[[CancelRequest], None] | None = None

    @property
    def recording(self) -> bool:
        """Whether spans are recorded: what only a recorder needs is worked out only then."""
        return self.recorder is not None

    def unit_completed(self, state: RequestState, node: Node, started: float,
                       ended: float) -> None:
        if self.recorder is not None:
            self.recorder.unit(state, node, started, ended)
        if self.observer is not None:
            outputs = {v: state.variables[v] for v in sorted(node.writes())
                       if v in state.variables}
            origin = getattr(node, "origin", node.id)  # a sub-stage's workflow node
            self.observer.emit(UnitCompleted(state.rid, node.id, node.kind, origin, outputs,
                                             started, ended))

    def text(self, rid: str, origin: str, output: str, text: str) -> None:
        if self.observer is not None and text:
            self.observer.emit(TextProduced(rid, origin, output, text))

    def speculated(self, rid: str, origin: str) -> None:
        """A speculative generation of `origin` started."""
        if self.recorder is not None:
            self.recorder.speculated(rid, origin)
        if self.observer is not None:
            self.observer.emit(SpeculationStarted(rid, origin))

    def speculation(self, rid: str, origin: str, adopted: bool) -> None:
        if self.recorder is not None:
            self.recorder.speculation(rid, origin, adopted)
        if self.observer is not None:
            self.observer.emit(SpeculationSettled(rid, origin, adopted))

    def held_back(self, rid: str, origin: str) -> None:
        """A speculation of `origin` was held back by the backoff."""
        if self.observer is not None:
            self.observer.emit(SpeculationHeldBack(rid, origin))

    def retrieved(self, rid: str, origin: str, searched: Callable[[], Searched]) -> None:
        """A retrieval committed; `searched` is called only when spans are recorded."""
        if self.recorder is not None:
            self.recorder.retrieved(rid, origin, searched())

    def finished(self, state: RequestState) -> None:
        """The request ended, answered or failed (its outcome is being reported)."""
        if self.recorder is not None:
            self.recorder.finished(state)

    def generated(self, rid: str, origin: str, result: GenerationResult | None,
                  prompt: Prompt | None = None) -> None:
        if self.recorder is not None and result is not None:
            self.recorder.generated(rid, origin, result, prompt)
        if self.observer is not None and result is not None:
            self.observer.emit(GenerationUsage(rid, origin, result.prompt_tokens,
                                               result.cached_tokens, result.completion_tokens))

    # -- cancelling ------------------------------------------------------------------------------

    def accept_cancel(self, cancel: Callable[[CancelRequest], None]) -> None:
        """The running executor's way to stop one request (called on the loop thread)."""
        self._cancel = cancel

    @property
    def can_cancel(self) -> bool:
        return self._cancel is not None

    def cancel(self, rid: str, reason: str) -> bool:
        """Ask the executor to stop `rid`; False when it cannot (the request then runs to its
        end and its outcome is reported as usual)."""
        if self._cancel is None:
            return False
        self._cancel(CancelRequest(rid, reason))
        return True
