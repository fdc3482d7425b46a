"""OpenAI-compatible endpoints, as vLLM, SGLang and Hayhooks expose them: `model` names a
workflow, the question is the last user message (chat) or the prompt (completions).

`stream: true` sends the answer's deltas as the engine writes it (from a generation that is
certainly the final answer; else in one piece at the end: `answer.py`), then `data: [DONE]`.
`usage` counts the tokens of every generation the request's workflow ran."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragraph.runtime.answer_stream import AnswerDeltas
from ragraph.runtime.events import TextProduced
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import ANSWER
from ragraph.serve.bodies import Ask, parse_chat, parse_completion
from ragraph.serve.http_error import HttpError
from ragraph.serve.openai_fields import ignored_header
from ragraph.serve.results import failure, passages_json
from ragraph.serve.sse import event_stream
from ragraph.serve.state import ServerState

CHAT, TEXT = "chat.completion", "text_completion"


def routes() -> list[Route]:
    return [Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"])]


async def chat(request: Request) -> Response:
    return await _answer(request, CHAT)


async def completions(request: Request) -> Response:
    return await _answer(request, TEXT)


async def models(request: Request) -> Response:
    state: ServerState = request.app.state.server
    created = int(time.time())
    data = [{"id": name, "object": "model", "created": created, "owned_by": "ragraph"}
            for name in state.catalog.workflows]
    return JSONResponse({"object": "list", "data": data})


async def _answer(request: Request, kind: str) -> Response:
    state: ServerState = request.app.state.server
    ask = await state.read(request, parse_chat if kind == CHAT else parse_completion)
    ticket = state.submit(ask, watch=(TextProduced,) if ask.stream else ())
    headers = ignored_header(ask.ignored)
    if ask.stream:
        return event_stream(_chunks(state, ticket, ask, kind), state.settings,
                            gone=state.gone(ticket), headers=headers)
    outcome = await state.outcome(request, ticket)
    if outcome is None:
        return Response(status_code=499)  # nginx's "client closed request": nobody reads it
    if outcome.error is not None:
        return failure(outcome, ask).response()
    return JSONResponse(_whole(ticket, outcome, kind), headers=headers)


def _whole(ticket: Ticket, outcome: Outcome, kind: str) -> dict[str, Any]:
    answer = outcome.answer or ""
    choice: dict[str, Any] = ({"message": {"role": "assistant", "content": answer}}
                              if kind == CHAT else {"text": answer, "logprobs": None})
    return {**_head(ticket, kind), "choices": [{"index": 0, **choice, "finish_reason": "stop"}],
            "usage": ticket.usage.to_json(),
            "ragraph": {"path": list(outcome.path), "passages": passages_json(outcome.passages)}}


async def _chunks(state: ServerState, ticket: Ticket, ask: Ask, kind: str
                  ) -> AsyncIterator[dict[str, str]]:
    """Every stream ends with `[DONE]`; a failure, a timeout, shutdown or a bug (logged) first
    sends an `{"error": ...}` chunk with the status a whole answer would have had."""
    live, deltas = state.streamed[ask.workflow], AnswerDeltas()
    if kind == CHAT:
        yield _chunk(ticket, kind, {"role": "assistant", "content": ""})

    def render(item: object) -> list[dict[str, str]]:
        return _chunks_of(item, ticket, ask, kind, live, deltas)

    def last(err: HttpError) -> list[dict[str, str]]:
        return [{"data": json.dumps(err.body())}]

    async with aclosing(state.stream(ticket, render, last)) as chunks:
        async for chunk in chunks:
            yield chunk
    yield {"data": "[DONE]"}


def _chunks_of(item: TextProduced | Outcome | object, ticket: Ticket, ask: Ask, kind: str,
               live: frozenset[str], deltas: AnswerDeltas) -> list[dict[str, str]]:
    if isinstance(item, TextProduced):
        if item.origin in live and item.output == ANSWER and (text := deltas.add(item.text)):
            return [_chunk(ticket, kind, text)]
    elif isinstance(item, Outcome) and item.error is not None:
        return [{"data": json.dumps(failure(item, ask).body())}]
    elif isinstance(item, Outcome):
        rest = deltas.finish(item.answer or "")
        out = [_chunk(ticket, kind, rest)] if rest else []
        out.append(_chunk(ticket, kind, None, "stop"))
        if ask.include_usage:
            out.append({"data": json.dumps({**_head(ticket, _chunk_object(kind)),
                                            "choices": [], "usage": ticket.usage.to_json()})})
        return out
    return []


def _chunk(ticket: Ticket, kind: str, text: str | dict[str, str] | None,
           finish: str | None = None) -> dict[str, str]:
    if kind == CHAT:
        delta = text if isinstance(text, dict) else ({} if text is None else {"content": text})
        choice: dict[str, Any] = {"delta": delta}
    else:
        choice = {"text": text or "", "logprobs": None}
    body = {**_head(ticket, _chunk_object(kind)),
            "choices": [{"index": 0, **choice, "finish_reason": finish}]}
    return {"data": json.dumps(body, ensure_ascii=False)}


def _chunk_object(kind: str) -> str:
    return f"{kind}.chunk" if kind == CHAT else kind


def _head(ticket: Ticket, obj: str) -> dict[str, Any]:
    prefix = "chatcmpl" if obj.startswith("chat") else "cmpl"
    return {"id": f"{prefix}-{ticket.rid}", "object": obj, "created": int(time.time()),
            "model": ticket.workflow, "system_fingerprint": ticket.served_by}
