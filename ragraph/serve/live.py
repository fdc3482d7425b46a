"""What the page at `/` watches live: requests entering, their units completing, requests
finishing, and the engines' and the search's work as timed spans (the run's trace, bounded).

Each page gets its own bounded queue; a page that cannot keep up loses events rather than
holding the server's memory (the next event corrects what it shows)."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from ragraph.runtime.events import RunEvent, UnitCompleted
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.trace import Tracer, TraceSpan

PAGE_QUEUE = 2000  # events a page may lag behind
KEPT_SPANS = 4000  # the trace a server keeps (a run's tracer keeps every span)


class LiveFeed:
    """A HubListener that forwards to every open page."""

    def __init__(self) -> None:
        self._pages: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.dropped = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        """Events from now on; the first says the page is subscribed (so a page that asks a
        question once it has it sees that request from its start)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(PAGE_QUEUE)
        self._pages.add(queue)
        try:
            yield {"type": "hello"}
            while (item := await queue.get()) is not None:
                yield item
        finally:
            self._pages.discard(queue)

    def close(self) -> None:
        """End every page's feed (shutdown: an endless stream would hold the server open)."""
        for queue in self._pages:
            if queue.full():
                queue.get_nowait()  # the page lags: its oldest event gives way to the end
            queue.put_nowait(None)

    def publish(self, item: dict[str, Any]) -> None:
        for queue in self._pages:
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self.dropped += 1

    def publish_threadsafe(self, item: dict[str, Any]) -> None:
        if self._loop is not None and self._pages:
            try:
                self._loop.call_soon_threadsafe(self.publish, item)
            except RuntimeError:  # the loop closed under a worker thread: shutting down
                self.dropped += 1

    # -- HubListener -----------------------------------------------------------------------------

    def submitted(self, ticket: Ticket) -> None:
        self.publish({"type": "request", "rid": ticket.rid, "workflow": ticket.workflow,
                      "question": ticket.request.question[:120]})

    def event(self, ticket: Ticket, event: RunEvent) -> None:
        if isinstance(event, UnitCompleted) and self._pages:
            self.publish({"type": "unit", "rid": ticket.rid, "workflow": ticket.workflow,
                          "unit": event.unit, "kind": event.kind, "origin": event.origin})

    def finished(self, ticket: Ticket, outcome: Outcome) -> None:
        self.publish({"type": "done", "rid": ticket.rid, "workflow": ticket.workflow,
                      "status": ticket.status,
                      "latency_s": round(outcome.finished_at - ticket.submitted, 4)})


class RollingTracer(Tracer):
    """A tracer that keeps the last `KEPT_SPANS` spans (a server runs for days) and shows the
    engines' spans on the live page as they end (spans come from worker threads too)."""

    def __init__(self, feed: LiveFeed) -> None:
        super().__init__()
        self.feed = feed
        self._recent: deque[TraceSpan] = deque(maxlen=KEPT_SPANS)
        self._recent_lock = threading.Lock()

    def add(self, span: TraceSpan) -> None:
        with self._recent_lock:
            self._recent.append(span)
        if span.engine:
            self.feed.publish_threadsafe({
                "type": "span", "track": span.track, "name": span.name,
                "start": round(span.start - self._origin, 4),
                "end": round(span.end - self._origin, 4)})

    def spans(self) -> list[TraceSpan]:
        with self._recent_lock:
            return list(self._recent)
