"""What every route shares: the compiled workflows, the hub and its listeners, the settings; and
the two ways a route waits for its request (a whole answer, or a stream of events), both of
which give up on the request when its client goes away or its time runs out.

Shutdown (`shut_down`, when the server stops accepting connections) refuses new requests, lets
those in flight run for --drain-timeout, then cuts the rest: each client is told so (503, or an
`error` event on a stream) rather than having its connection dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from starlette.requests import Request

from ragraph.runtime.answer_stream import answer_origins
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import RunEvent
from ragraph.runtime.executors.base import Services
from ragraph.runtime.hub import Hub, Ticket
from ragraph.runtime.outcome import Outcome
from ragraph.serve.adapt import Adapter, AdaptPlan
from ragraph.serve.admission import Admission
from ragraph.serve.bodies import Ask
from ragraph.serve.health import EngineHealth
from ragraph.serve.http_error import HttpError
from ragraph.serve.live import LiveFeed, RollingTracer
from ragraph.serve.metrics import ServerMetrics
from ragraph.serve.reading import read_json
from ragraph.serve.settings import ServeSettings

log = logging.getLogger("ragraph.serve")

DISCONNECTED = "cancelled: the client disconnected"
Event = dict[str, str]  # a server-sent event: {"data": text} or {"event": name, "data": text}


class ServerState:
    def __init__(self, catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
                 adapt: AdaptPlan | None = None) -> None:
        self.catalog, self.config, self.settings = catalog, config, settings
        self.adapt = adapt
        self.adapter: Adapter | None = None
        self.live = LiveFeed()
        self.tracer = RollingTracer(self.live)
        self.admission = Admission(config.scheduler.concurrency, settings.max_queue)
        self.streamed = {name: answer_origins(w.source) for name, w in catalog.workflows.items()}
        self.hub: Hub | None = None
        self.metrics: ServerMetrics | None = None
        self.health: EngineHealth | None = None
        self.draining = False

    def start(self, services: Services) -> None:
        """Called once the engines are open, on the server's loop."""
        self.live.bind(asyncio.get_running_loop())
        self.hub = Hub(self.catalog, self.config, services)
        self.metrics = ServerMetrics(self.hub)
        self.hub.listeners = (self.metrics, self.live)
        if self.adapt is not None:
            hub, running = self.hub, self.config.scheduler.concurrency
            self.adapter = Adapter(self.adapt, lambda: max(hub.in_flight - running, 0))
            self.adapter.register(self.metrics.registry)
            self.hub.listeners += (self.adapter,)
        self.hub.start()
        self.health = EngineHealth(services.llm)
        self.health.start()

    @property
    def unavailable(self) -> str | None:
        """Why no request is taken now (None: they are)."""
        if self.hub is None:
            return "the server is starting"
        if self.draining:
            return "the server is shutting down"
        if not self.hub.running:
            return self.hub.stopped or "the scheduler is not running"
        return None

    @property
    def not_ready(self) -> str | None:
        """Why a load balancer should send no request here now: unavailable, or the engine
        does not answer (requests are still taken: they fail with 502 on their own)."""
        return self.unavailable or (self.health.down if self.health is not None else None)

    async def read(self, request: Request, parse: Callable[[dict[str, Any], Catalog], Ask]
                   ) -> Ask:
        """The question a request body asks; an HttpError when it asks it wrong."""
        return parse(await read_json(request, self.settings), self.catalog)

    def submit(self, ask: Ask, watch: tuple[type, ...] = ()) -> Ticket:
        """Queue a question, or refuse it (503 starting, restarting or stopping, 429 full);
        `watch`: the run events the caller reads besides the outcome."""
        if (why := self.unavailable) is not None or self.hub is None or self.metrics is None:
            raise HttpError(503, why or "the server is starting", headers={"Retry-After": "1"})
        self.admission.check(self.hub.in_flight, self.metrics.mean_latency_s)
        workflow = ask.workflow if self.adapter is None else self.adapter.route(ask.workflow)
        return self.hub.submit(ask.question, ask.inputs, workflow, watch, search=ask.search)

    def shut_down(self) -> None:
        """The server stopped accepting: refuse new requests, and cut those still running
        after --drain-timeout (their clients get 503 or an `error` event saying why)."""
        if self.draining:
            return
        self.draining = True
        self.live.close()
        seconds = self.settings.drain_timeout_s
        reason = (f"the server is shutting down: the request did not finish within "
                  f"--drain-timeout {seconds:g} s")
        if self.hub is not None:
            asyncio.get_running_loop().call_later(seconds, self.hub.cut, reason)

    async def stop(self) -> None:
        """The last of shutdown, once every connection closed: end the run, stop probing."""
        self.shut_down()
        if self.health is not None:
            await self.health.stop()
        if self.hub is not None:
            await self.hub.drain(self.settings.drain_timeout_s)

    def broken(self, ticket: Ticket, err: Exception) -> HttpError:
        """A stream that failed on the server's side (a bug): logged with its traceback, its
        request stopped and counted as an internal error; the client's last event says so."""
        log.error("the stream of %s failed", ticket.rid, exc_info=err)
        if self.hub is not None:
            self.hub.cancel(ticket, f"internal error: {type(err).__name__}", "internal_error")
        return HttpError(500, f"internal error while streaming (run {ticket.rid}; the server "
                         "log has the details)")

    async def outcome(self, request: Request, ticket: Ticket) -> Outcome | None:
        """The ticket's outcome; None when the client went away first (the request is then
        cancelled); 504 when the request timeout passed (it is cancelled too)."""
        assert self.hub is not None  # submit() made the ticket
        waiter = asyncio.ensure_future(ticket.wait())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({waiter, gone}, timeout=self.settings.request_timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, gone):
                task.cancel()
        if waiter in done:
            return waiter.result()
        if gone in done:
            self.hub.cancel(ticket, DISCONNECTED)
            return None
        raise self._timed_out(ticket)

    async def follow(self, ticket: Ticket) -> AsyncIterator[RunEvent | Outcome]:
        """The ticket's events then its outcome, within the request timeout (504 after it). A
        stream closed early (its client went away) cancels the request."""
        assert self.hub is not None  # submit() made the ticket
        try:
            async with asyncio.timeout(self.settings.request_timeout_s):
                async for item in ticket.follow():
                    yield item
        except TimeoutError:
            raise self._timed_out(ticket) from None
        finally:
            self.hub.cancel(ticket, DISCONNECTED)  # no-op once the outcome came

    async def stream(self, ticket: Ticket, render: Callable[[RunEvent | Outcome], list[Event]],
                     last: Callable[[HttpError], list[Event]]) -> AsyncIterator[Event]:
        """A stream's events: `render` of each of the ticket's items, and `last` of the error
        that ends it early: a timeout (504), or a bug in rendering or following (500, logged
        once). So every stream ends with its last event, never a cut body."""
        try:
            async with aclosing(self.follow(ticket)) as items:
                async for item in items:
                    try:
                        events = render(item)
                    except Exception as err:  # a bug: logged by broken(), the client told
                        events = last(self.broken(ticket, err))
                        for event in events:
                            yield event
                        return
                    for event in events:
                        yield event
        except HttpError as err:  # timed out
            for event in last(err):
                yield event
        except Exception as err:  # a bug while following
            for event in last(self.broken(ticket, err)):
                yield event

    def gone(self, ticket: Ticket) -> Callable[[], None]:
        """What a stream's client leaving does: cancel its request (no-op once answered)."""
        hub = self.hub
        assert hub is not None  # submit() made the ticket
        return lambda: hub.cancel(ticket, DISCONNECTED)

    def _timed_out(self, ticket: Ticket) -> HttpError:
        assert self.hub is not None
        seconds = self.settings.request_timeout_s
        self.hub.cancel(ticket, f"timed out after {seconds:g} s", "timeout")
        return HttpError(504, f"request timed out after {seconds:g} s (--request-timeout)")


async def _disconnected(request: Request) -> None:
    """Returns when the client closes its connection (the body was read before)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
