"""Server-sent events through sse-starlette: it watches for the client going away (the stream's
generator is then closed, which cancels its request) and, on shutdown, lets a stream run on for
the drain period instead of cutting it off."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

import anyio
from sse_starlette import EventSourceResponse
from starlette.types import Message

from ragraph.serve.settings import ServeSettings

PING_S = 15  # a comment line keeps proxies from closing a quiet stream (a long retrieval)
# On a signal sse-starlette would cancel a stream after its grace period, cutting it without a
# last event; the server itself cuts a request at --drain-timeout and its stream then ends with
# an `error` event, so the library's own cut comes this much later, never first.
LAST_WORD_S = 3


def event_stream(events: AsyncIterator[dict[str, str]], settings: ServeSettings,
                 drain: bool = True, gone: Callable[[], None] | None = None,
                 headers: Mapping[str, str] | None = None) -> EventSourceResponse:
    """`events`: {"data": text} or {"event": name, "data": text} items, framed `\\n`-separated
    as OpenAI's and LangGraph's servers do. `drain`: on shutdown the stream may run on to its end
    (a request's answer), else it is cut at once (the page's endless live feed). `gone`: called
    when the client disconnects, even before `events` started (its `finally` would not run)."""

    async def closed(message: Message) -> None:
        if gone is not None:
            gone()

    grace = settings.drain_timeout_s + LAST_WORD_S if drain else 0
    return EventSourceResponse(events, ping=PING_S, sep="\n", shutdown_event=anyio.Event(),
                               shutdown_grace_period=grace, client_close_handler_callable=closed,
                               headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                                        **(headers or {})})
