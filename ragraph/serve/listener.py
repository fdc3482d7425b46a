"""How uvicorn runs the app: its HTTP protocol with a deadline on each request's headers, the
connection limit, and a shutdown that tells the app when it stops accepting connections.

uvicorn has no timeout on receiving a request (uvicorn#157 lists one as never done): its
keep-alive timer is reset by every byte, so a client that sends half its headers, or one byte
a second, holds a connection for ever (slowloris: 150 such connections were never closed).
`HeaderDeadline` gives every request's headers an absolute deadline, armed when a connection
opens and when a request's first byte comes, and disarmed once the headers are complete, so a
request being answered (a stream that runs for minutes) is never cut by it. Between requests an
idle connection is uvicorn's keep-alive's (`--keep-alive`), kept longer than clients' pools
keep theirs so that the server never closes one a client is about to reuse. The body's own
deadline is the app's (`reading.py`, 408), where the route knows a body is expected.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ragraph.serve.settings import ServeSettings
from ragraph.serve.state import ServerState

# What the request streams get beyond --drain-timeout to send their last event before uvicorn
# (and sse-starlette, on a signal) stop waiting for them.
SHUTDOWN_SLACK_S = 5


def protocol(timeout_s: float, on_timeout: Callable[[], None]) -> type[asyncio.Protocol]:
    """httptools' protocol (the serve extra installs httptools) with the header deadline."""
    message = f"request headers not received within {timeout_s:g} s (--header-timeout)"
    timed_out = (f"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                 f"content-length: {len(message)}\r\nconnection: close\r\n\r\n{message}"
                 ).encode("ascii")

    class HeaderDeadline(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _begun = False  # a request's first bytes came: it is told why it is closed (408)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._begun = True
            self._arm()

        def on_headers_complete(self) -> None:
            self._begun = False
            self._disarm()
            super().on_headers_complete()

        def _arm(self) -> None:
            if self._deadline is None and not self.transport.is_closing():
                self._deadline = self.loop.call_later(timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            on_timeout()
            if self._begun:
                self.transport.write(timed_out)
            self.transport.close()

    return HeaderDeadline


class Server(uvicorn.Server):
    """uvicorn's server, telling the app the moment it stops accepting connections: uvicorn
    runs the app's own shutdown only once the last connection has closed, too late to tell the
    clients of cut streams why."""

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.state = state

    async def shutdown(self, sockets: Any = None) -> None:
        self.state.shut_down()
        await super().shutdown(sockets)


def make_server(app: Starlette, settings: ServeSettings, **overrides: Any) -> Server:
    """The server `ragraph serve` runs (tests pass `port=0`, `log_level`)."""
    state: ServerState = app.state.server

    def timed_out() -> None:
        if state.metrics is not None:
            state.metrics.timed_out.inc()

    options: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "log_level": "info",
        # The asyncio loop always: uvicorn would take uvloop whenever some extra (Ray Serve's)
        # happens to install it, and the server should not change with what else is installed.
        "loop": "asyncio", "http": protocol(settings.header_timeout_s, timed_out), "ws": "none",
        "timeout_graceful_shutdown": math.ceil(settings.drain_timeout_s) + SHUTDOWN_SLACK_S,
        "timeout_keep_alive": settings.keep_alive_s,
        # uvicorn counts the connection asking among those open (>=): one more lets N be served.
        "limit_concurrency": settings.max_connections + 1, "access_log": False, **overrides}
    return Server(uvicorn.Config(app, **options), state)


def run_server(app: Starlette, settings: ServeSettings) -> None:
    """Serve until SIGINT/SIGTERM, then drain (blocking)."""
    make_server(app, settings).run()
