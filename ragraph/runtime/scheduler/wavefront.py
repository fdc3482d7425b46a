"""The wavefront scheduler (HedraRAG): it runs the compiled graph. Every unit of it (embed, probe,
cache lookup, search steps, commit, prefill, decode, finish, fork, join, verify) is a unit of a
request that starts when its control or DATA predecessors are done; every cycle, the ready
sub-stages of all requests go to both engines at once — a budgeted batch of cluster searches to
the search thread, generations to the LLM engine — and what they report comes back through one
inbox.

    admit → start generations → dispatch a search step → wait → drain the inbox → advance

Answers are those of the -O0 run: each request follows `choose_edge` on its own variables;
searches are exact whatever the step split or cluster order; a speculative generation is
adopted only when its prompt equals the one the committed values render.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ragraph.runtime.catalog import Catalog
from ragraph.runtime.events import CancelRequest, RequestCancelled
from ragraph.runtime.executors.base import OnDone, Services, admit, clock, fail, finish
from ragraph.runtime.outcome import RunStats
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler.config import SchedulerConfig
from ragraph.runtime.scheduler.generation_side import GenerationSide
from ragraph.runtime.scheduler.inbox import (
    ArrivalsDone,
    Arrived,
    Generated,
    Inbox,
    PrefetchDone,
    PrepareDone,
    Retrieved,
    StepDone,
    Token,
)
from ragraph.runtime.scheduler.queues import RequestQueues
from ragraph.runtime.scheduler.retrieval_side import RetrievalSide
from ragraph.runtime.scheduler.units import Units

log = logging.getLogger(__name__)


class SchedulerStopped(RuntimeError):
    """The scheduler's loop could not go on (a bug that no request owns): the run ends with
    this error, which names the phase and the cause; a server restarts the run."""


@dataclass
class WavefrontExecutor:
    name: ClassVar[str] = "ragraph"
    services: Services
    config: SchedulerConfig = field(default_factory=SchedulerConfig)

    async def run(self, catalog: Catalog, arrivals: AsyncIterator[Request], on_done: OnDone) -> RunStats:
        loop = asyncio.get_running_loop()
        cost = await loop.run_in_executor(None, self.services.search.cost_model)
        return await _Run(self.services, catalog, self.config, on_done, cost).main(arrivals)


class _Run:
    """One scheduler run (one instance per `run` call: no state leaks across runs)."""

    def __init__(self, services: Services, catalog: Catalog, config: SchedulerConfig,
                 on_done: OnDone, cost) -> None:
        self.s, self.catalog, self.cfg, self.on_done = services, catalog, config, on_done
        self.inbox = Inbox()
        self.queues = RequestQueues(config.concurrency)
        self.arrivals_done = False
        self.n = RunStats()  # the sides count into it as they go
        self.gen = GenerationSide(services, config.concurrency, config.tau, self.n, self.inbox)
        self.ret = RetrievalSide(services, cost, self.n, self.inbox, config.initial_beta_ms,
                                 config.budget_ms, self.gen.has_room, self.gen.backoff,
                                 self.gen.feed_cap, config.release, self.gen.engine_share,
                                 self.gen.engine_alone)
        self.gen.upcoming = self.ret.feeding
        self.units = Units(services, config, self.gen, self.ret, self.inbox, self.queues)
        services.hooks.accept_cancel(self.inbox.put)  # a CancelRequest, in the loop's own turn

    async def main(self, arrivals: AsyncIterator[Request]) -> RunStats:
        feeder = asyncio.create_task(self._feed(arrivals))
        try:
            while not self.arrivals_done or self.queues.has_work:
                self._phase("admission", self._admit)
                self._phase("starting generations", self.gen.start_ready)
                self._phase("dispatching a search step", self.ret.dispatch)
                await self.inbox.wait()
                for event in self.inbox.drain():
                    self._take(event)
                self._report()
            await feeder  # the arrivals' own error, if they failed
        finally:
            feeder.cancel()
            self.gen.abort_all()  # a run that stopped leaves nothing generating in the engine
            self.ret.close()
        return self._stats()

    async def _feed(self, arrivals: AsyncIterator[Request]) -> None:
        try:
            async for request in arrivals:
                self.inbox.put(Arrived(request, clock()))
        finally:  # arrivals that fail still end: the run finishes what it admitted
            self.inbox.put(ArrivalsDone())

    def _phase(self, name: str, step: Callable[[], object]) -> None:
        """A phase of the loop that no request owns: when it fails, the loop cannot go on."""
        try:
            step()
        except Exception as err:
            raise SchedulerStopped(f"the scheduler's loop stopped while {name}: "
                                   f"{type(err).__name__}: {err}") from err

    def _take(self, event) -> None:  # noqa: ANN001 - an inbox Event
        """Apply one event. A bug outside the requests' own guards fails the requests the
        event touched (logged once, with its traceback) and the loop goes on."""
        touched = self._touched(event)
        try:
            self._handle(event)
        except Exception as err:
            log.error("the scheduler failed on %s (requests touched: %s)", type(event).__name__,
                      ", ".join(touched) or "none", exc_info=err)
            try:
                for rid in touched:
                    self.units.cancel(rid, err, logged=True)
            except Exception as again:
                raise SchedulerStopped(f"the scheduler's loop stopped failing requests "
                                       f"{touched} after a bug: {again!r}") from again

    def _touched(self, event) -> list[str]:  # noqa: ANN001 - an inbox Event
        """The requests an event concerns (before it is applied: applying it may forget them)."""
        if isinstance(event, Token | Generated):
            job = self.gen.jobs.get(event.key)
            return [job.state.rid] if job is not None else []
        if isinstance(event, PrepareDone):
            jobs = [self.ret.jobs.get(k) for k in event.keys]
            return sorted({j.state.rid for j in jobs if j is not None})
        if isinstance(event, StepDone):
            return sorted({j.state.rid for j in self.ret.jobs.values() if j.in_flight})
        if isinstance(event, Retrieved):
            jobs = [self.ret.jobs.get(r.key) for r in event.results]
            return sorted({j.state.rid for j in jobs if j is not None})
        if isinstance(event, CancelRequest):
            return [event.rid]
        return []

    def _handle(self, event) -> None:  # noqa: ANN001 - an inbox Event
        if isinstance(event, Arrived):
            self.queues.add(event.request, event.at)
        elif isinstance(event, ArrivalsDone):
            self.arrivals_done = True
        elif isinstance(event, Token):
            self.units.token(event)
        elif isinstance(event, Generated):
            self.units.generated(event)
        elif isinstance(event, PrepareDone):
            self.units.prepared(self.ret.prepared(event))
        elif isinstance(event, StepDone):
            self.units.searched(self.ret.collect(event))
        elif isinstance(event, Retrieved):
            self.units.searched(self.ret.released(event))
        elif isinstance(event, PrefetchDone):
            self.units.ahead.prefetched(event)
        elif isinstance(event, CancelRequest):
            self._cancel(event)

    def _admit(self) -> None:
        """Start the waiting requests, longest-waiting first, while a slot is free. Its state
        is made as it leaves the queue (`admit`: `arrived` to now is its wait for a slot); one
        that cannot start (a bad input) ends at once, failed."""
        while (req := self.queues.admit()) is not None:
            req.state = admit(self.catalog, req.request, req.arrived)
            if req.state.error is None:
                self.units.begin(req, self.catalog.workflow_for(req.request).program)
            else:
                self.queues.retire(req)
        self._report()

    def _cancel(self, event: CancelRequest) -> None:
        """Stop one request, running (its streams are aborted as it retires) or still waiting."""
        if self.units.cancel(event.rid, RequestCancelled(event.reason)):
            return
        for req in self.queues.waiting_requests(event.rid):
            req.state = admit(self.catalog, req.request, req.arrived)
            if req.state.error is None:
                fail(req.state, RequestCancelled(event.reason))
            self.queues.retire(req)

    def _report(self) -> None:
        """Report the requests that ended (retired: nothing of theirs is left to run)."""
        for state in self.queues.take_finished():
            finish(state, self.on_done, clock(), self.s.hooks)

    def _stats(self) -> RunStats:
        self.n.units = self.units.executed
        self.n.beta_ms = self.ret.beta.value or 0.0
        self.n.t_r_ms = self.ret.t_r.value or 0.0
        return self.n
