"""What `Runtime.run` returns for one question."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ragraph.errors import FailureKind, RequestFailed
from ragraph.ir.values import Passage
from ragraph.runtime.hub import Ticket, Usage
from ragraph.runtime.outcome import Outcome


@dataclass(frozen=True)
class Timings:
    """Seconds, from `time.perf_counter`: waiting for a slot among the requests in flight
    (`queued_s`, with `concurrency` of them running), from reaching the scheduler to the end
    (`latency_s`, what `ragraph run` reports) and to the first generated token
    (`first_token_s`, None when it generated none), and all of it (`total_s`)."""

    queued_s: float
    latency_s: float
    first_token_s: float | None
    total_s: float


@dataclass(frozen=True)
class Answer:
    """One request's result: the answer text, the passages of its last retrieval (each with
    its store id, title, text, search score, cosine similarity on the default inner-product
    index, largest first, and, for ingested documents, its origin), the path it took through
    the workflow graph, token usage and timings. A failed request has `answer` None, `error`
    its message and `error_kind` whose fault it was."""

    id: str
    question: str
    answer: str | None
    passages: tuple[Passage, ...]
    path: tuple[str, ...]
    usage: Usage
    timings: Timings
    workflow: str
    # The run's own record of it: what `ragraph run --output` writes (`to_json`).
    outcome: Outcome = field(repr=False, compare=False)
    error: str | None = None
    error_kind: FailureKind | None = None
    golden_answers: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> Answer:
        """This answer, or `RequestFailed` (its message, kind and this answer) if it failed."""
        if self.error is not None:
            raise RequestFailed(self.error, self.error_kind or "internal", self)
        return self

    def to_json(self) -> dict[str, Any]:
        """The line `ragraph run --output` writes for it."""
        return self.outcome.to_json()


def answer_of(outcome: Outcome, ticket: Ticket, rid: str | None) -> Answer:
    """The answer to `ticket`'s request, named `rid` (the caller's id) when it has one."""
    outcome = replace(outcome, rid=rid or outcome.rid)
    first = outcome.first_token_at
    started = outcome.admitted_at if outcome.started_at is None else outcome.started_at
    timings = Timings(queued_s=max(started - ticket.submitted, 0.0),
                      latency_s=outcome.latency,
                      first_token_s=None if first is None else first - outcome.admitted_at,
                      total_s=outcome.finished_at - ticket.submitted)
    return Answer(id=outcome.rid, question=outcome.question, answer=outcome.answer,
                  passages=tuple(outcome.passages or ()), path=outcome.path, usage=ticket.usage,
                  timings=timings, workflow=outcome.workflow, outcome=outcome,
                  error=outcome.error, error_kind=outcome.error_kind,
                  golden_answers=outcome.golden_answers)
