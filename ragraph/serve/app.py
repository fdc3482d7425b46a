"""The ASGI application (Starlette); how uvicorn runs it is `listener.py`.

Startup opens the engines once and starts the one scheduler run (`runtime/hub.py`); shutdown stops
taking requests, lets the ones in flight finish (up to `--drain-timeout`, then cuts them with a
reason), ends the run and closes the engines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.search_service import SearchService
from ragraph.serve import assistant_routes, info_routes, openai_routes, run_routes
from ragraph.serve.adapt import AdaptPlan
from ragraph.serve.guards import guards
from ragraph.serve.http_error import HttpError
from ragraph.serve.settings import ServeSettings
from ragraph.serve.state import ServerState


def build_app(catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
              search: SearchService | None = None, adapt: AdaptPlan | None = None) -> Starlette:
    """The server of `catalog`'s workflows; `search` None: opened from `config` at startup;
    `adapt`: `serve --adapt`'s points of a front (adapt.py)."""
    state = ServerState(catalog, config, settings, adapt)

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
                await state.stop()

    app = Starlette(routes=[*openai_routes.routes(), *run_routes.routes(),
                            *assistant_routes.routes(), *info_routes.routes()],
                    lifespan=lifespan, middleware=guards(settings, state),
                    exception_handlers={HttpError: _refused, Exception: _crashed})
    app.state.server = state
    return app


async def _refused(request: Request, err: Exception) -> Response:
    """A request refused before it ran (a failed run answers through `results.failure`)."""
    assert isinstance(err, HttpError)  # registered for HttpError only
    state: ServerState = request.app.state.server
    if state.metrics is not None and err.status != 504:
        state.metrics.reject(err.status)
    return err.response()


async def _crashed(request: Request, err: Exception) -> Response:
    """A bug in a route: the client gets the error in the API's shape; Starlette then re-raises
    it, so uvicorn logs the traceback."""
    return HttpError(500, "internal error (the server log has the details)").response()
