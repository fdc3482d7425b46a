"""The ASGI application (Starlette) and how uvicorn runs it.

Startup opens the engines once and starts the one scheduler run (`hub.py`); shutdown stops
taking requests (uvicorn), lets the ones in flight finish (up to `--drain-timeout`), ends the run
and closes the engines."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.search_service import SearchService
from ragraph.serve import info_routes, openai_routes, run_routes
from ragraph.serve.bodies import HttpError
from ragraph.serve.settings import ServeSettings
from ragraph.serve.state import ServerState

# Without the key: probes, and the page itself (its data comes from the guarded endpoints).
OPEN_PATHS = frozenset({"/", "/ok", "/health", "/readiness", "/page/page.js", "/page/page.css"})


def build_app(catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
              search: SearchService | None = None) -> Starlette:
    """The server of `catalog`'s workflows; `search` None: opened from `config` at startup."""
    state = ServerState(catalog, config, settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from ragraph.runtime.app import open_search, open_services

        loop = asyncio.get_running_loop()
        index = search or await loop.run_in_executor(None, open_search, config)
        async with open_services(config, index, state.tracer) as services:
            state.start(services)
            try:
                yield
            finally:
                state.draining = True
                assert state.hub is not None  # started above
                await state.hub.drain(settings.drain_timeout_s)

    middleware = [Middleware(RequireKey, key=settings.api_key, state=state)] \
        if settings.api_key else []
    app = Starlette(routes=[*openai_routes.routes(), *run_routes.routes(),
                            *info_routes.routes()],
                    lifespan=lifespan, middleware=middleware,
                    exception_handlers={HttpError: _refused})
    app.state.server = state
    return app


async def _refused(request: Request, err: Exception) -> Response:
    assert isinstance(err, HttpError)  # registered for HttpError only
    state: ServerState = request.app.state.server
    if state.metrics is not None and err.status != 504:
        state.metrics.reject(err.status)
    return err.response()


class RequireKey:
    """`Authorization: Bearer KEY` on every path but the probes and the page (pure ASGI, so
    streaming responses and disconnects pass through untouched)."""

    def __init__(self, app: ASGIApp, key: str, state: ServerState) -> None:
        self.app, self.key, self.state = app, f"Bearer {key}".encode(), state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.key):
                if self.state.metrics is not None:
                    self.state.metrics.reject(401)
                error = HttpError(401, "authorization: this server needs "
                                  "'Authorization: Bearer <key>' (--api-key)",
                                  headers={"WWW-Authenticate": "Bearer"})
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def run_server(app: Starlette, settings: ServeSettings) -> None:
    """Serve until SIGINT/SIGTERM, then drain (blocking)."""
    import uvicorn

    # The asyncio loop always: uvicorn would take uvloop whenever some extra (Ray Serve's) happens
    # to install it, and the server should not change under the user with what else is installed.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", loop="asyncio",
                timeout_graceful_shutdown=int(settings.drain_timeout_s) + 5,
                limit_concurrency=None, access_log=False)
