"""The run API, after LangGraph's Agent Server: `POST /runs/stream` and `POST /runs/wait` with
`{workflow, input: {question, ...}}`.

The stream sends `metadata` (the run id), then as the request advances `updates` (a workflow node
completed: the variables it assigned, retrieved passages as ids and titles), `speculation` (a
speculative generation adopted or rolled back), with `stream_mode` "units" every unit of the
compiled graph and with "messages" the generated text as it comes (with "messages-tuple" as
LangGraph sends it: `messages` events of `[AIMessageChunk, {langgraph_node}]`); and at the end
`end` (the answer, path, passages, usage and timings), after a `values` event carrying the same
with "values" (LangGraph's final state: what `RemoteGraph.invoke` returns), or `error`.
`/runs/wait` answers with what `end` carries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragraph.runtime.events import RunEvent, SpeculationSettled, TextProduced, UnitCompleted
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome
from ragraph.serve.bodies import Ask, parse_run
from ragraph.serve.http_error import HttpError
from ragraph.serve.results import failure, finished_json, values_json
from ragraph.serve.sse import event_stream
from ragraph.serve.state import ServerState


def routes() -> list[Route]:
    return [Route("/runs/stream", stream, methods=["POST"]),
            Route("/runs/wait", wait, methods=["POST"])]


async def wait(request: Request) -> Response:
    state: ServerState = request.app.state.server
    ask = await state.read(request, parse_run)
    ticket = state.submit(ask)
    outcome = await state.outcome(request, ticket)
    if outcome is None:
        return Response(status_code=499)  # the client is gone
    if outcome.error is not None:
        return failure(outcome, ask).response()
    return JSONResponse(finished_json(ticket, outcome))


async def stream(request: Request) -> Response:
    state: ServerState = request.app.state.server
    ask = await state.read(request, parse_run)
    ticket = state.submit(ask, watch=(UnitCompleted, SpeculationSettled, TextProduced))
    return event_stream(_events(state, ticket, ask), state.settings, gone=state.gone(ticket))


async def _events(state: ServerState, ticket: Ticket, ask: Ask) -> AsyncIterator[dict[str, str]]:
    """`metadata`, the run's events, then `end` or `error` (`state.stream` sees that every
    stream ends so: a failure, a timeout, shutdown and a bug each end it with `error`)."""
    yield _sse("metadata", {"run_id": ticket.rid, "workflow": ticket.workflow})

    def render(item: RunEvent | Outcome) -> list[dict[str, str]]:
        if isinstance(item, Outcome) and item.error is not None:
            return [_error(ticket, failure(item, ask))]
        if isinstance(item, Outcome):
            body = finished_json(ticket, item)
            values = [_sse("values", body)] if "values" in ask.stream_modes else []
            return [*values, _sse("end", body)]
        return _events_of(item, ask.stream_modes, ticket.rid)

    async with aclosing(state.stream(ticket, render, lambda e: [_error(ticket, e)])) as events:
        async for event in events:
            yield event


def _error(ticket: Ticket, err: HttpError) -> dict[str, str]:
    return _sse("error", {"run_id": ticket.rid, **err.body()["error"]})


def _events_of(item: RunEvent, modes: tuple[str, ...], rid: str) -> list[dict[str, str]]:
    if isinstance(item, UnitCompleted):
        body = {"node": item.origin, "unit": item.unit, "kind": item.kind,
                "outputs": values_json(item.outputs),
                "ms": round((item.ended - item.started) * 1e3, 3)}
        return ([_sse("units", body)] if "units" in modes else []) + (
            [_sse("updates", body)] if item.outputs and "updates" in modes else [])
    if isinstance(item, SpeculationSettled):
        return [_sse("speculation", {"node": item.origin, "adopted": item.adopted})]
    if isinstance(item, TextProduced) and "messages" in modes:
        return [_sse("messages", {"node": item.origin, "output": item.output, "text": item.text})]
    if isinstance(item, TextProduced) and "messages-tuple" in modes:
        chunk = {"type": "AIMessageChunk", "content": item.text, "id": f"{rid}-{item.origin}"}
        return [_sse("messages", [chunk, {"langgraph_node": item.origin, "output": item.output}])]
    return []


def _sse(name: str, data: dict[str, Any] | list[Any]) -> dict[str, str]:
    return {"event": name, "data": json.dumps(data, ensure_ascii=False)}
