"""What every route shares: the compiled workflows, the hub and its listeners, the settings; and
the two ways a route waits for its request (a whole answer, or a stream of events), both of
which give up on the request when its client goes away or its time runs out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request

from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import RunEvent
from ragraph.runtime.executors.base import Services
from ragraph.runtime.outcome import Outcome
from ragraph.serve.admission import Admission
from ragraph.serve.answer import answer_origins
from ragraph.serve.bodies import Ask
from ragraph.serve.http_error import HttpError
from ragraph.serve.hub import Hub, Ticket
from ragraph.serve.live import LiveFeed, RollingTracer
from ragraph.serve.metrics import ServerMetrics
from ragraph.serve.reading import read_json
from ragraph.serve.settings import ServeSettings

DISCONNECTED = "cancelled: the client disconnected"


class ServerState:
    def __init__(self, catalog: Catalog, config: RuntimeConfig, settings: ServeSettings) -> None:
        self.catalog, self.config, self.settings = catalog, config, settings
        self.live = LiveFeed()
        self.tracer = RollingTracer(self.live)
        self.admission = Admission(config.concurrency, settings.max_queue)
        self.streamed = {name: answer_origins(w.source) for name, w in catalog.workflows.items()}
        self.hub: Hub | None = None
        self.metrics: ServerMetrics | None = None
        self.draining = False

    def start(self, services: Services) -> None:
        """Called once the engines are open, on the server's loop."""
        self.live.bind(asyncio.get_running_loop())
        self.hub = Hub(self.catalog, self.config, services)
        self.metrics = ServerMetrics(self.hub)
        self.hub.listeners = (self.metrics, self.live)
        self.hub.start()

    @property
    def ready(self) -> bool:
        return self.hub is not None and self.hub.running and not self.draining

    async def read(self, request: Request, parse: Callable[[dict[str, Any], Catalog], Ask]
                   ) -> Ask:
        """The question a request body asks; an HttpError when it asks it wrong."""
        return parse(await read_json(request, self.settings), self.catalog)

    def submit(self, ask: Ask, watch: tuple[type, ...] = ()) -> Ticket:
        """Queue a question, or refuse it (503 starting or stopping, 429 full); `watch`: the
        run events the caller reads besides the outcome."""
        if not self.ready or self.hub is None or self.metrics is None:
            raise HttpError(503, "the server is starting or shutting down", headers={
                "Retry-After": "1"})
        self.admission.check(self.hub.in_flight, self.metrics.mean_latency_s)
        return self.hub.submit(ask.question, ask.inputs, ask.workflow, watch)

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
