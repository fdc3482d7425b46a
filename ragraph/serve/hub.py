"""The one scheduler run behind every HTTP request.

The server opens the engines once and starts one executor run whose arrivals are the HTTP
requests, as they come: concurrent clients share the wavefront and batch together, exactly as the
lines of `ragraph run --input` do. Each request gets a `Ticket`: the events the run reports for
it (units completed, text produced, speculation settled), then its outcome. A ticket whose
client went away is cancelled: the executor stops the request and aborts its generations.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ragraph.errors import FailureKind
from ragraph.ir.values import Value
from ragraph.runtime.app import make_executor
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import GenerationUsage, RunEvent
from ragraph.runtime.executors.base import Services
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import Request

log = logging.getLogger("ragraph.serve")


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass(eq=False)
class Ticket:
    """One HTTP request's view of its run: events in order, then the outcome."""

    request: Request
    workflow: str
    submitted: float
    watch: tuple[type, ...] = ()  # the events its consumer reads (the outcome always comes)
    served_by: str = "ragraph"  # the engine, as OpenAI's `system_fingerprint` says it
    events: asyncio.Queue[RunEvent | Outcome] = field(default_factory=asyncio.Queue)
    usage: Usage = field(default_factory=Usage)
    outcome: Outcome | None = None
    cancelled: str | None = None  # why the server gave up on it (client gone, time out)
    status: str | None = None  # the metrics' label once finished: ok, failed, cancelled, timeout
    handed: bool = False  # the executor has it

    @property
    def rid(self) -> str:
        return self.request.id

    def take(self, event: RunEvent) -> None:
        if isinstance(event, GenerationUsage):
            self.usage = Usage(self.usage.prompt_tokens + event.prompt_tokens,
                               self.usage.completion_tokens + event.completion_tokens)
        if isinstance(event, self.watch):
            self.events.put_nowait(event)

    def end(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.events.put_nowait(outcome)

    async def follow(self) -> AsyncIterator[RunEvent | Outcome]:
        """Every event, then the outcome (the last item)."""
        while True:
            item = await self.events.get()
            yield item
            if isinstance(item, Outcome):
                return

    async def wait(self) -> Outcome:
        async for item in self.follow():
            if isinstance(item, Outcome):
                return item
        raise AssertionError("follow() ends with the outcome")


class HubListener(Protocol):
    """Who else watches the run: metrics, the live page."""

    def submitted(self, ticket: Ticket) -> None: ...

    def event(self, ticket: Ticket, event: RunEvent) -> None: ...

    def finished(self, ticket: Ticket, outcome: Outcome) -> None: ...


class Hub:
    def __init__(self, catalog: Catalog, config: RuntimeConfig, services: Services,
                 listeners: tuple[HubListener, ...] = ()) -> None:
        self.catalog, self.config, self.services = catalog, config, services
        self.listeners = listeners
        self.tickets: dict[str, Ticket] = {}
        self.stopped: str | None = None  # why the run is over (it never ends while serving)
        self._queue: asyncio.Queue[Request | None] = asyncio.Queue()
        # Request ids: unique across restarts (the prefix) without a syscall per request.
        self._prefix, self._numbers = uuid.uuid4().hex[:8], itertools.count(1)
        self._task: asyncio.Task | None = None
        services.hooks.observer = self

    @property
    def served_by(self) -> str:
        """The engine answering, and whether it is the simulated one (always said)."""
        llm = self.services.llm
        return f"ragraph-{self.config.engine}" + ("-SIMULATED" if llm.simulated else "")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def in_flight(self) -> int:
        return len(self.tickets)

    def start(self) -> None:
        executor = make_executor(self.config, self.services)
        run = executor.run(self.catalog, self._arrivals(), self._done)
        self._task = asyncio.create_task(run)
        self._task.add_done_callback(self._run_ended)

    def submit(self, question: str, inputs: Mapping[str, Value], workflow: str,
               watch: tuple[type, ...] = ()) -> Ticket:
        request = Request(id=f"req-{self._prefix}-{next(self._numbers)}", question=question,
                          inputs=dict(inputs), workflow=workflow)
        ticket = Ticket(request, workflow, time.perf_counter(), watch, self.served_by)
        self.tickets[ticket.rid] = ticket
        for listener in self.listeners:
            listener.submitted(ticket)
        self._queue.put_nowait(ticket.request)
        return ticket

    def cancel(self, ticket: Ticket, reason: str, status: str = "cancelled") -> None:
        """Give up on `ticket` (`status`: cancelled or timeout): stop its request, or where the
        executor cannot stop one, let it run to its end unwatched. Nothing more is delivered."""
        if ticket.outcome is not None or ticket.cancelled is not None:
            return
        ticket.cancelled, ticket.status = reason, status
        if not ticket.handed:  # still in the arrivals queue: it never reaches the executor
            self.tickets.pop(ticket.rid, None)
            self._report(ticket, _failed(ticket, reason))
        else:
            self.services.hooks.cancel(ticket.rid, reason)

    async def drain(self, timeout_s: float) -> None:
        """No more arrivals; wait for the requests in flight, then the run ends."""
        self._queue.put_nowait(None)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
            except TimeoutError:
                log.warning("drain: %d requests still running after %.0f s; stopping them",
                            self.in_flight, timeout_s)
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    # -- the run's side --------------------------------------------------------------------------

    async def _arrivals(self) -> AsyncIterator[Request]:
        while (request := await self._queue.get()) is not None:
            if self._hand_over(request.id):
                yield request

    def _hand_over(self, rid: str) -> bool:
        """The request goes to the executor, unless it was cancelled while queued."""
        ticket = self.tickets.get(rid)
        if ticket is not None:
            ticket.handed = True
        return ticket is not None

    def emit(self, event: RunEvent) -> None:
        ticket = self.tickets.get(event.rid)
        if ticket is None:
            return
        if ticket.cancelled is None:
            ticket.take(event)
        for listener in self.listeners:
            listener.event(ticket, event)

    def _done(self, outcome: Outcome) -> None:
        ticket = self.tickets.pop(outcome.rid, None)
        if ticket is not None:
            self._report(ticket, outcome)

    def _report(self, ticket: Ticket, outcome: Outcome) -> None:
        if ticket.cancelled is None:
            ticket.status = "ok" if outcome.error is None else "failed"
            ticket.end(outcome)
        for listener in self.listeners:
            listener.finished(ticket, outcome)

    def _run_ended(self, task: asyncio.Task) -> None:
        """The run ends only when drained; anything else is a bug: fail what is waiting."""
        error = None if task.cancelled() else task.exception()
        self.stopped = "drained" if error is None else f"scheduler failed: {error!r}"
        if error is not None:
            log.error("the scheduler run failed", exc_info=error)
        for ticket in list(self.tickets.values()):
            self.tickets.pop(ticket.rid)
            self._report(ticket, _failed(ticket, self.stopped, "internal"))


def _failed(ticket: Ticket, error: str, kind: FailureKind = "cancelled") -> Outcome:
    now = time.perf_counter()
    return Outcome(rid=ticket.rid, question=ticket.request.question, answer=None, error=error,
                   path=(), passages=None, golden_answers=(), admitted_at=ticket.submitted,
                   finished_at=now, workflow=ticket.workflow, error_kind=kind)
