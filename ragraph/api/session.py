"""What a Runtime runs on its own loop: the engines opened once, the one scheduler run (the
hub, as `ragraph serve` keeps it) that every call joins, and a call's tickets from submission
to answers. Everything here runs on the runtime's loop thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack

from ragraph.api.answer import Answer, answer_of
from ragraph.api.events import WATCHED, Event, Finished, public_event
from ragraph.errors import RuntimeClosed
from ragraph.program.compiled import CompiledWorkflow
from ragraph.runtime.app import RunResult, open_search, open_services, run_result
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.hub import Hub, Ticket
from ragraph.runtime.outcome import Outcome, RunStats
from ragraph.runtime.request import Request
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.trace import Tracer

OnAnswer = Callable[[Answer], None]
Sink = Callable[[Event | BaseException], None]
GAVE_UP = "cancelled: the caller stopped waiting"


class Session:
    def __init__(self, config: RuntimeConfig, search: SearchService | None,
                 tracer: Tracer) -> None:
        self.config, self._search, self.tracer = config, search, tracer
        self.catalog = Catalog({}, "")
        self.hub: Hub | None = None
        self.services: Services | None = None
        self.executor = ""
        self.stats: RunStats | None = None  # the run's counters, once it has drained
        self._stack = AsyncExitStack()

    async def start(self) -> None:
        try:
            search = self._search or open_search(self.config)
            services = await self._stack.enter_async_context(
                open_services(self.config, search, self.tracer))
            hub = Hub(self.catalog, self.config, services)
            hub.start()
        except BaseException:
            await self._stack.aclose()
            raise
        self.hub, self.services, self.executor = hub, services, hub.executor

    async def stop(self) -> None:
        """No more calls; the requests in flight finish, then the run ends and the engines
        close."""
        hub, self.hub = self.hub, None
        try:
            if hub is not None:
                await hub.drain(None)
                self.stats = hub.stats
        finally:
            await self._stack.aclose()

    def submit(self, workflow: CompiledWorkflow, request: Request,
               watch: tuple[type, ...] = ()) -> Ticket:
        if self.hub is None:
            raise RuntimeClosed("the runtime is closed")
        # Added here, on the loop, in the same turn as the submission: the scheduler reads the
        # catalog when it admits the request.
        name = self.catalog.add(workflow)
        # A FlashRAG line may name its workflow: one this runtime has not run is that
        # request's error, as in `ragraph run --input`.
        return self.hub.submit(request.question, request.inputs, request.workflow or name, watch,
                               request.golden_answers, caller_id=request.id or None,
                               search=request.search)

    async def answers(self, workflow: CompiledWorkflow, requests: Sequence[Request],
                      on_answer: OnAnswer | None = None) -> list[Answer]:
        """Submitted in one turn of the loop, so they reach the scheduler together (as the
        lines of `ragraph run --input` do); answered in their order."""
        tickets = [self.submit(workflow, r) for r in requests]

        async def settle(ticket: Ticket, request: Request) -> Answer:
            answer = answer_of(await ticket.wait(), ticket, request.id or None)
            if on_answer is not None:
                on_answer(answer)
            return answer

        try:
            pairs = zip(tickets, requests, strict=True)
            return list(await asyncio.gather(*(settle(t, r) for t, r in pairs)))
        except BaseException:  # cancelled, or on_answer failed: stop what is left
            self._give_up(tickets)
            raise

    async def follow(self, workflow: CompiledWorkflow, request: Request, sink: Sink) -> None:
        """The request's events into `sink`, then `Finished`; a failure to submit goes there
        too (the consumer raises it)."""
        try:
            ticket = self.submit(workflow, request, WATCHED)
        except Exception as err:
            sink(err)
            return
        try:
            async for item in ticket.follow():
                event = (Finished(answer_of(item, ticket, request.id or None))
                         if isinstance(item, Outcome) else public_event(item))
                if event is not None:
                    sink(event)
        except BaseException:  # the consumer stopped reading
            self._give_up([ticket])
            raise

    def _give_up(self, tickets: Sequence[Ticket]) -> None:
        if self.hub is not None:
            for ticket in tickets:
                self.hub.cancel(ticket, GAVE_UP)

    def result(self, answers: Sequence[Answer], wall_s: float) -> RunResult:
        """`answers` reported as `ragraph run` reports a run, with the scheduler's counters
        once the run has drained."""
        if self.services is None:
            raise RuntimeClosed("the runtime was never opened")
        return run_result(tuple(a.outcome for a in answers),
                          self.stats or RunStats(), wall_s, self.executor, self.services)
