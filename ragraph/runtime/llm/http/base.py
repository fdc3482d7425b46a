"""What the HTTP engines share: one asyncio task per request reading a streamed response.

Aborting a request cancels its task, which closes the connection; servers (vLLM, SGLang,
llama.cpp's) stop generating for a client that went away. The abort cancels through an anyio
cancel scope, not `Task.cancel()`: httpcore shields its pool's bookkeeping with anyio scopes,
which a native cancellation goes through, and a request cut there leaves its connection checked
out of the pool for good, its socket open (encode/httpcore#1093; measured: 159 of 2,000 requests
aborted within their first 0.1 s left a socket each). A failure of one request (connection
refused, an HTTP error status, garbage in the stream, a bug in reading it) ends only that
request's stream, with an error that names the engine, its server and the cause; nothing a
request's task raises is left for nobody to see.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import httpx

from ragraph.errors import EngineError, PromptTooLong
from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.failure import cause, overflow
from ragraph.runtime.llm.protocol import ErrorKind, GenerationRequest, GenerationResult
from ragraph.runtime.llm.stream import GenerationStream

Driver = Callable[[GenerationRequest, GenerationStream, "StreamState"], Awaitable[None]]


class StreamState:
    """What one request has produced so far (used for the result, also on abort)."""

    def __init__(self, request: GenerationRequest) -> None:
        self.request = request
        self.text = ""
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.completion_tokens = 0
        self.prompt_tokens = len(request.prompt_ids) if request.prompt_ids is not None else 0
        self.cached_tokens = 0
        self.finish_reason: str | None = None

    def result(self, reason: str) -> GenerationResult:
        return GenerationResult(
            rid=self.request.rid,
            text=self.text,
            token_ids=tuple(self.token_ids),
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            completion_tokens=max(self.completion_tokens, len(self.token_ids)),
            logprobs=tuple(self.logprobs) if self.request.params.logprobs else None,
        )


class HttpStreamingEngine(EngineBase):
    """Base of the HTTP engines: subclasses set `_base_url` and implement `_drive` (send the
    request, feed the stream, set `state.finish_reason`)."""

    # Answers 200 while the server is up (OpenAI-compatible servers list their models there).
    health_path = "/v1/models"
    schedules_batches = False  # the server does

    def __init__(self, name: str, context_length: int, base_url: str, timeout_s: float,
                 connect_timeout_s: float) -> None:
        super().__init__(name, context_length)
        self._base_url = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}  # of the requests whose task runs

    async def _open(self) -> None:
        # No connection-pool cap below the number of concurrent streams we may run.
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self._client = httpx.AsyncClient(base_url=self._base_url, timeout=self._timeout,
                                         limits=limits)

    async def _shut(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def alive(self, timeout_s: float = 5.0) -> bool:
        """Whether the server answers its health endpoint (a replica router's failover test)."""
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                resp = await client.get(self._base_url + self.health_path)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        task = asyncio.get_running_loop().create_task(self._run(request, stream))
        self._tasks[request.rid] = task
        task.add_done_callback(lambda _: self._settle(request, stream))

    def _settle(self, request: GenerationRequest, stream: GenerationStream) -> None:
        """A task cancelled before it ran never reached `_run`'s handlers: its stream ends
        here (an abort when asked for, else the engine closed), so nobody waits on it forever."""
        self._tasks.pop(request.rid, None)
        if stream.done:
            return
        if stream.abort_requested:
            self._finish(stream, StreamState(request), "abort")
        else:
            self._fail(stream, f"{self._where}: engine closed before the request was sent")

    def _abort(self, rid: str) -> None:
        scope = self._scopes.get(rid)
        if scope is not None:
            scope.cancel()
            return
        task = self._tasks.get(rid)
        if task is not None:  # not started yet: nothing of httpx's to cut short
            task.cancel()

    @property
    def _where(self) -> str:
        """The engine and its server, as errors name them."""
        return self.name if self._base_url in self.name else f"{self.name} at {self._base_url}"

    async def _run(self, request: GenerationRequest, stream: GenerationStream) -> None:
        state = StreamState(request)
        try:
            with anyio.CancelScope() as scope:
                self._scopes[request.rid] = scope
                await self._drive(request, stream, state)
            self._finish(stream, state, "abort" if scope.cancelled_caught
                         else state.finish_reason or "stop")
        except asyncio.CancelledError:
            # The engine closing (or an abort before the task ran); do not propagate: nobody
            # awaits this task, the stream is the request's only handle.
            if stream.abort_requested:
                self._finish(stream, state, "abort")
            else:
                self._fail(stream, f"{self._where}: engine closed while the request ran",
                           state.prompt_tokens)
        except Exception as err:  # this request's failure, whatever it is; the others go on
            message, kind = self._cause(err)
            self._fail(stream, f"{self._where}: {message}", state.prompt_tokens, kind)
        finally:
            self._scopes.pop(request.rid, None)
            self._tasks.pop(request.rid, None)

    def _cause(self, err: Exception) -> tuple[str, ErrorKind]:
        """What failed a request and whose fault it is (a bug is logged with its traceback)."""
        if isinstance(err, httpx.HTTPError):
            return f"{type(err).__name__} talking to the server: {err}", "engine"
        return cause(err, self._where)

    def _finish(self, stream: GenerationStream, state: StreamState, reason: str) -> None:
        self._tally.prompt_tokens += state.prompt_tokens
        self._tally.cached_tokens += state.cached_tokens
        self._tally.completion_tokens += max(state.completion_tokens, len(state.token_ids))
        self._end(stream, state.result(reason))

    async def _drive(
        self, request: GenerationRequest, stream: GenerationStream, state: StreamState
    ) -> None:
        raise NotImplementedError

    async def _post_stream(self, path: str, body: dict[str, object],
                           headers: dict[str, str] | None = None) -> httpx.Response:
        """Open a streamed POST; raises EngineError for a non-200 answer (with its body), and
        PromptTooLong when the server refused the request because its prompt does not fit."""
        if self._client is None:
            raise EngineError("engine closed")
        req = self._client.build_request("POST", path, json=body, headers=headers)
        resp = await self._client.send(req, stream=True)
        if resp.status_code != 200:
            detail = (await resp.aread()).decode("utf-8", errors="replace")
            await resp.aclose()
            message = f"HTTP {resp.status_code} from {path}: {detail[:500]}"
            if 400 <= resp.status_code < 500 and overflow(detail):
                raise PromptTooLong(f"prompt too long for the server's context: {message}")
            raise EngineError(message)
        return resp
