"""An OpenAI-compatible LLM server on loopback whose text is the simulated engine's, with a fault
switch: what a chaos test puts behind `ragraph serve --engine openai`.

Its `/v1/completions` and `/v1/chat/completions` stream the tokens an in-process `SimEngine`
generates for the prompt or the chat turn, so a
request served through it must answer exactly as `ragraph run --engine sim` does. `fault` turns it
into the servers users meet on a bad day: `error` answers 500, `garbage` streams a chunk no
OpenAI server sends (a usage count that is not a number), `hang` takes the request and never
answers, and `down()`/`up()` stop and restart it on the same port (connections refused meanwhile).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ragraph.ir import Sampling
from ragraph.runtime.llm.chat import ChatMessage
from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine

Fault = Literal["none", "error", "garbage", "hang"]


class SimUpstream:
    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.fault: Fault = "none"
        self.served = 0  # completions streamed to their end
        self.hanging = 0  # requests taken and not answered whose client is still there
        self._numbers = iter(range(1, 1 << 62))
        self._port = _free_port()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def up(self) -> None:
        import uvicorn

        app = Starlette(routes=[Route("/v1/completions", self._complete, methods=["POST"]),
                                Route("/v1/chat/completions", self._complete, methods=["POST"]),
                                Route("/v1/models", _models, methods=["GET"])],
                        lifespan=self._lifespan)
        # A short graceful timeout: `down()` cuts the streams of hung requests, as a crash does.
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self._port,
                                                     log_level="critical", loop="asyncio",
                                                     timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=self._server.run, name="upstream", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:  # uvicorn offers no event to wait on
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the upstream server did not start")
            time.sleep(0.02)

    def down(self) -> None:
        """Stop listening (clients get connection refused); streams in flight are cut."""
        if self._server is not None:
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(timeout=30)
            self._server = None

    def __enter__(self) -> SimUpstream:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with SimEngine(self.config) as engine:
            app.state.engine = engine
            yield

    async def _complete(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ClientDisconnect:
            return Response(status_code=499)  # the engine aborted while sending
        if self.fault == "error":
            return JSONResponse({"error": {"message": "upstream is failing (chaos)"}},
                                status_code=500)
        if self.fault == "hang":
            self.hanging += 1
            try:
                while (await request.receive())["type"] != "http.disconnect":
                    pass  # until the client goes away
            finally:
                self.hanging -= 1
            return Response(status_code=499)
        engine: SimEngine = request.app.state.engine
        # A chat goes to the engine as a chat, so the simulated text is what the sim engine
        # gives the same turn in-process.
        asked = ({"messages": tuple(ChatMessage(m["role"], m["content"]) for m in body["messages"])}
                 if "messages" in body else {"prompt": body["prompt"]})
        stream = engine.submit(GenerationRequest(rid=f"u{next(self._numbers)}", **asked,
                                                 params=_params(body)))
        return StreamingResponse(self._chunks(stream, body, self.fault, "messages" in body),
                                 media_type="text/event-stream")

    async def _chunks(self, stream, body: dict, fault: Fault, chat: bool  # noqa: ANN001
                      ) -> AsyncIterator[bytes]:
        try:
            async for event in stream:
                yield _data({"choices": [_choice(event.text, body, chat, event.logprob)]})
            result = await stream.result()
        finally:
            stream.abort()  # a client that went away stops the generation
        yield _data({"choices": [_choice("", body, chat, None, result.finish_reason)]})
        usage: dict[str, Any] = {"prompt_tokens": result.prompt_tokens,
                                 "completion_tokens": result.completion_tokens}
        if fault == "garbage":
            usage["prompt_tokens"] = "abc"
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _data({"choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"
        self.served += 1


def _choice(text: str, body: dict, chat: bool, logprob: float | None,
            finish: str | None = None) -> dict[str, Any]:
    """One streamed choice in the endpoint's own shape (chat: a delta; completions: text)."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    choice.update({"delta": {"content": text}} if chat else {"text": text})
    if body.get("logprobs") and logprob is not None:
        choice["logprobs"] = ({"content": [{"logprob": logprob}]} if chat
                              else {"token_logprobs": [logprob]})
    return choice


def _params(body: dict) -> Sampling:
    return Sampling(max_tokens=body.get("max_tokens", 16),
                          temperature=body.get("temperature", 0.0), top_p=body.get("top_p", 1.0),
                          stop=tuple(body.get("stop") or ()), seed=body.get("seed"),
                          logprobs=bool(body.get("logprobs")))


def _data(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


async def _models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "sim", "object": "model"}]})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
