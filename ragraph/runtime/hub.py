"""The one scheduler run behind every HTTP request.

The server opens the engines once and starts one executor run whose arrivals are the HTTP
requests, as they come: concurrent clients share the wavefront and batch together, exactly as the
lines of `ragraph run --input` do. Each request gets a `Ticket`: the events the run reports for
it (units completed, text produced, speculation settled), then its outcome. A ticket whose
client went away is cancelled: the executor stops the request and aborts its generations.

The run never ends while serving. If it dies (a bug outside every request's guard), the requests
it held fail, the traceback is logged once and a new run starts; the server keeps answering.
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
from ragraph.runtime import app as runtime_app
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import GenerationUsage, RunEvent
from ragraph.runtime.executors.base import Services
from ragraph.runtime.outcome import Outcome, RunStats
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.options import NO_OPTIONS, SearchOptions

log = logging.getLogger("ragraph.serve")

# A failed request's label in the metrics, by whose fault it was (`ragraph.errors`); the server
# answers each with its own status (`results.failure`). A request the server cut at shutdown
# is the only one that ends "cancelled" with an outcome its client reads.
FAILED_STATUS: dict[FailureKind, str] = {"input": "client_error", "engine": "upstream_error",
                                         "workflow": "internal_error",
                                         "internal": "internal_error", "cancelled": "shutdown"}
# A run that dies again before any request finished waits before the next start, doubling from
# the first delay to the last, so a run that cannot start does not spin.
RESTART_DELAYS_S = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


@dataclass(frozen=True)
class Usage:
    """What the engine computed for a request, over every generation whose output it used:
    prompt tokens (of which `cached_tokens` came from the prefix cache) and completion tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens}


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
    # The metrics' label once finished: ok, a FAILED_STATUS, client_gone or timeout.
    status: str | None = None
    handed: bool = False  # the executor has it

    @property
    def rid(self) -> str:
        return self.request.id

    def take(self, event: RunEvent) -> None:
        if isinstance(event, GenerationUsage):
            self.usage = Usage(self.usage.prompt_tokens + event.prompt_tokens,
                               self.usage.completion_tokens + event.completion_tokens,
                               self.usage.cached_tokens + event.cached_tokens)
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
        self.restarts = 0  # runs started again after one died
        self._quick_deaths = 0  # runs that died in a row before any request finished
        self._draining = False
        self._runs = 0  # runs started; a dead run's reader of the queue knows it is stale
        self._queue: asyncio.Queue[Request | None] = asyncio.Queue()
        # Request ids: unique across restarts (the prefix) without a syscall per request.
        self._prefix, self._numbers = uuid.uuid4().hex[:8], itertools.count(1)
        self._task: asyncio.Task | None = None
        self.executor = ""  # the running executor's name
        services.hooks.observer = self

    @property
    def served_by(self) -> str:
        """The engine answering, and whether it is the simulated one (always said)."""
        llm = self.services.llm
        return f"ragraph-{self.config.llm.engine}" + ("-SIMULATED" if llm.simulated else "")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def in_flight(self) -> int:
        return len(self.tickets)

    def start(self) -> None:
        executor = runtime_app.make_executor(self.config, self.services)
        self.executor = executor.name
        self._runs += 1
        run = executor.run(self.catalog, self._arrivals(self._runs), self._done)
        self._task = asyncio.create_task(run)
        self._task.add_done_callback(self._run_ended)

    def submit(self, question: str, inputs: Mapping[str, Value], workflow: str,
               watch: tuple[type, ...] = (), golden_answers: tuple[str, ...] = (),
               caller_id: str | None = None, search: SearchOptions = NO_OPTIONS) -> Ticket:
        """Queue a question under an id of the hub's own (callers' ids need not be unique);
        `caller_id`, the caller's name for it, is what its traces show."""
        request = Request(id=f"req-{self._prefix}-{next(self._numbers)}", question=question,
                          inputs=dict(inputs), workflow=workflow, golden_answers=golden_answers,
                          caller_id=caller_id, search=search)
        ticket = Ticket(request, workflow, time.perf_counter(), watch, self.served_by)
        self.tickets[ticket.rid] = ticket
        for listener in self.listeners:
            listener.submitted(ticket)
        self._queue.put_nowait(ticket.request)
        return ticket

    def cancel(self, ticket: Ticket, reason: str, status: str = "client_gone") -> None:
        """Give up on `ticket` (`status`: its metrics label): stop its request, or where the
        executor cannot stop one, let it run to its end unwatched. Nothing more is delivered."""
        if ticket.outcome is not None or ticket.cancelled is not None:
            return
        ticket.cancelled, ticket.status = reason, status
        if not ticket.handed:  # still in the arrivals queue: it never reaches the executor
            self.tickets.pop(ticket.rid, None)
            self._report(ticket, _failed(ticket, reason))
        else:
            self.services.hooks.cancel(ticket.rid, reason)

    def cut(self, reason: str) -> None:
        """Stop every request in flight (shutdown, past the drain timeout), telling each client
        `reason` (the outcome's kind "cancelled": the server answers 503)."""
        for ticket in list(self.tickets.values()):
            if ticket.outcome is None and ticket.cancelled is None:
                self.cancel(ticket, reason, "shutdown")
                ticket.end(_failed(ticket, reason))

    @property
    def stats(self) -> RunStats | None:
        """The counters of the run, once it has drained (None before, or when it failed)."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception():
            return None
        return task.result()

    async def drain(self, timeout_s: float | None) -> None:
        """No more arrivals; wait for the requests in flight (at most `timeout_s`; None: as
        long as they take), then the run ends."""
        self._draining = True
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

    async def _arrivals(self, run: int) -> AsyncIterator[Request]:
        while True:
            request = await self._queue.get()
            if run != self._runs:  # a dead run's reader still waiting: the item is the next's
                self._queue.put_nowait(request)
                return
            if request is None:
                return
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
        self._quick_deaths = 0
        ticket = self.tickets.pop(outcome.rid, None)
        if ticket is not None:
            self._report(ticket, outcome)

    def _report(self, ticket: Ticket, outcome: Outcome) -> None:
        if ticket.cancelled is None:
            ticket.status = "ok" if outcome.error is None else FAILED_STATUS.get(
                outcome.error_kind or "internal", "internal_error")
            if outcome.error_kind in ("internal", None) and outcome.error is not None:
                # The client is told only that it was a bug (results.failure); the log has it.
                log.error("request %s failed: %s", ticket.rid, outcome.error)
            ticket.end(outcome)
        for listener in self.listeners:
            listener.finished(ticket, outcome)

    def _run_ended(self, task: asyncio.Task) -> None:
        """The run ends when drained. Anything else is a bug outside every request's guard: the
        requests the run held fail, and a new run takes the queue from there."""
        error = None if task.cancelled() else task.exception()
        if error is None or self._draining:
            self.stopped = "drained"
            self._fail_held("the server is shutting down", "cancelled", handed_only=False)
            return
        log.error("the scheduler run failed; failing the %d requests it held and starting a "
                  "new run", sum(t.handed for t in self.tickets.values()), exc_info=error)
        self._fail_held(f"internal error: the scheduler run failed ({type(error).__name__})",
                        "internal", handed_only=True)
        delay = RESTART_DELAYS_S[min(self._quick_deaths, len(RESTART_DELAYS_S) - 1)]
        self._quick_deaths += 1
        # Said to anyone (`/readiness` answers without a key): the error itself is in the log.
        self.stopped = "restarting after a scheduler failure (the server's log says why)"
        if delay:
            asyncio.get_running_loop().call_later(delay, self._restart)
        else:
            self._restart()

    def _restart(self) -> None:
        if self._draining:
            return
        self.restarts += 1
        try:
            self.start()
        except Exception:  # the executor cannot even be built: say so, and stay down
            log.exception("the scheduler run could not be started again")
            self.stopped = "the scheduler could not be restarted (the server's log says why)"
            return
        self.stopped = None
        log.warning("scheduler run restarted (restart %d)", self.restarts)

    def _fail_held(self, reason: str, kind: FailureKind, handed_only: bool) -> None:
        """Fail the requests the run had taken (`handed_only`) or every one in the hub; the
        others are still in the arrivals queue, for the next run."""
        for ticket in list(self.tickets.values()):
            if ticket.handed or not handed_only:
                self.tickets.pop(ticket.rid)
                self._report(ticket, _failed(ticket, reason, kind))


def _failed(ticket: Ticket, error: str, kind: FailureKind = "cancelled") -> Outcome:
    now = time.perf_counter()
    return Outcome(rid=ticket.rid, question=ticket.request.question, answer=None, error=error,
                   path=(), passages=None, golden_answers=(), admitted_at=ticket.submitted,
                   finished_at=now, workflow=ticket.workflow, error_kind=kind)
