"""What the server says about itself: liveness (`/ok`, `/health`), readiness, Prometheus
metrics, the workflows with their compiled graphs, and the page at `/` with its live feed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragraph.errors import RagraphError
from ragraph.ir.serialize import to_dict
from ragraph.program.compiled import CompiledWorkflow
from ragraph.serve.http_error import HttpError
from ragraph.serve.sse import event_stream
from ragraph.serve.state import ServerState

PAGE_FILES = {"page.js": "text/javascript", "page.css": "text/css"}
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def routes() -> list[Route]:
    return [Route("/ok", ok), Route("/health", health), Route("/readiness", readiness),
            Route("/metrics", metrics), Route("/workflows", workflows),
            Route("/workflows/{name}", workflow), Route("/", page),
            Route("/page/{file}", page_file), Route("/live", live)]


def _state(request: Request) -> ServerState:
    return request.app.state.server


async def ok(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def health(request: Request) -> Response:
    """Alive: the scheduler run is going (a run that stopped says why: starting, restarting
    after a failure, shut down)."""
    state = _state(request)
    hub = state.hub
    if hub is None or not hub.running:
        reason = "starting" if hub is None else (hub.stopped or "stopped")
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    llm = hub.services.llm
    return JSONResponse({"status": "ok", "engine": llm.name, "simulated": bool(llm.simulated),
                         "executor": state.config.scheduler.executor, "in_flight": hub.in_flight,
                         "scheduler_restarts": hub.restarts})


async def readiness(request: Request) -> Response:
    """Ready: taking requests, and the engine answers (an upstream server's health, probed in
    the background: `health.py`); otherwise 503 with the reason."""
    why = _state(request).not_ready
    if why is None:
        return JSONResponse({"ready": True})
    return JSONResponse({"ready": False, "reason": why}, status_code=503)


async def metrics(request: Request) -> Response:
    state = _state(request)
    if state.metrics is None:
        raise HttpError(503, "the server is starting")
    return Response(state.metrics.render(), media_type=METRICS_TYPE)


async def workflows(request: Request) -> Response:
    state = _state(request)
    return JSONResponse({"workflows": [_summary(state, name, w)
                                       for name, w in state.catalog.workflows.items()]})


async def workflow(request: Request) -> Response:
    """One workflow: its listing and inputs, the compiled and the source graph as JSON (the
    format `ragraph.ir.serialize` reads back), and the drawing `ragraph show --format html`
    makes of the compiled graph."""
    state, name = _state(request), request.path_params["name"]
    compiled = state.catalog.workflows.get(name)
    if compiled is None:
        known = ", ".join(sorted(state.catalog.workflows))
        raise HttpError(404, f"workflow: no workflow named {name!r} (this server has {known})")
    from ragraph.viz import scenes_for
    from ragraph.viz.html import embeddable

    drawing, css = embeddable(scenes_for(compiled.graph, source=compiled.source), name)
    return JSONResponse({**_summary(state, name, compiled), "listing": compiled.listing(),
                         "graph": _graph_json(compiled, "graph"),
                         "source": _graph_json(compiled, "source"),
                         "drawing": drawing, "drawing_css": css})


def _summary(state: ServerState, name: str, compiled: CompiledWorkflow) -> dict[str, Any]:
    graph = compiled.source
    return {"name": name, "passes": compiled.passes,
            "inputs": [{"name": i.name, "default": i.default} for i in graph.inputs.values()],
            "nodes": len(list(compiled.graph.nodes())),
            "streams_answer_from": sorted(state.streamed[name])}


def _graph_json(compiled: CompiledWorkflow, which: str) -> dict[str, Any] | None:
    try:
        return to_dict(getattr(compiled, which))
    except RagraphError:  # a builder graph with a Python-callable condition has no JSON form
        return None


async def page(request: Request) -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8")


async def page_file(request: Request) -> Response:
    name = request.path_params["file"]
    if name not in PAGE_FILES:
        return PlainTextResponse("not found", status_code=404)
    return Response(_asset(name), media_type=PAGE_FILES[name])


def _asset(name: str) -> bytes:
    return resources.files("ragraph.serve").joinpath("page", name).read_bytes()


async def live(request: Request) -> Response:
    """The page's feed: requests, units, engine spans (see live.py), as server-sent events."""
    state = _state(request)

    async def events() -> AsyncIterator[dict[str, str]]:
        async for item in state.live.follow():
            yield {"event": item["type"], "data": json.dumps(item)}

    return event_stream(events(), state.settings, drain=False)
