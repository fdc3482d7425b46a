"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp's) through streamed `/v1/completions`
or `/v1/chat/completions`.

A chat turn always goes to the chat endpoint, where the server renders it with the model's chat
template; a completion goes to the endpoint the config names (`completions` by default; `chat`
sends the prompt as one user message, for servers that offer only chat). The server applies stop
strings and sampling; this client maps the request, reads the SSE stream, and turns each chunk
into a `TokenEvent` (`openai_wire`). These APIs do not return token ids, so events carry
`token_id=None` and results an empty `token_ids`.

The upstream key (`api_key`) is sent as a Bearer header only: it is kept out of the config's
repr, and no error message carries request headers. The context length, when not configured,
is read from the server at start where it says (`openai_wire.served_context`): the scheduler
and the over-long-prompt diagnosis plan with it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from ragraph.errors import ConfigError, EngineError, PromptTooLong
from ragraph.runtime.llm.chat import prompt_text
from ragraph.runtime.llm.http.base import HttpStreamingEngine, StreamState
from ragraph.runtime.llm.http.openai_wire import (
    ENDPOINTS,
    PATHS,
    apply_chunk,
    endpoint_for,
    payload,
    served_context,
)
from ragraph.runtime.llm.http.sse import iter_events
from ragraph.runtime.llm.http.wire import whole
from ragraph.runtime.llm.protocol import GenerationRequest, TokenEvent
from ragraph.runtime.llm.stream import GenerationStream

log = logging.getLogger(__name__)
# Reading the server's context length at start waits no longer than this per endpoint.
DISCOVERY_TIMEOUT_S = 5.0

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig


@dataclass(frozen=True)
class OpenAIHttpConfig:
    base_url: str = "http://127.0.0.1:8000"
    # The `model` field of each request (servers with one model mostly ignore it).
    model: str = "default"
    api_key: str | None = field(default=None, repr=False)  # a secret: never printed
    # The server's context length, for the scheduler's planning; 0 = read it from the server
    # at start where it says, else unknown. Over-long prompts are rejected by the server (the
    # error names its limit).
    context_length: int = 0
    # Where a completion (not a chat turn) goes: "completions" or "chat" (as one user message).
    endpoint: str = "completions"
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    # Tokenizer endpoint: llama.cpp's Python server has /extras/tokenize, vLLM and SGLang /tokenize.
    tokenize_path: str = "/extras/tokenize"
    # Ask for a final usage chunk (OpenAI `stream_options.include_usage`; vLLM and SGLang send it).
    include_usage: bool = True
    name: str = "openai-http"

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url", f"must start with http:// or https://, got {self.base_url!r}")
        if self.context_length < 0:
            raise ConfigError("context_length", "must be >= 0 (0 = unknown)")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigError("timeout_s", "timeouts must be > 0")
        if self.endpoint not in ENDPOINTS:
            raise ConfigError("endpoint", f"must be one of {', '.join(ENDPOINTS)}, got "
                              f"{self.endpoint!r}")

    @classmethod
    def of(cls, llm: LlmConfig, in_flight: int = 0, url: str | None = None) -> OpenAIHttpConfig:
        """The client of the LLM part's server (the server batches: `in_flight` is its), or of
        `url`, one of its `replicas`: built for that URL, so validated with it."""
        base_url = url or llm.url or ""
        return cls(base_url=base_url, model=llm.model or "default",
                   api_key=api_key_from(llm.api_key_env), endpoint=llm.openai_endpoint,
                   context_length=llm.ctx or 0,
                   name=f"openai-http {url}" if url else "openai-http")


def api_key_from(variable: str | None) -> str | None:
    """The upstream key held in environment variable `variable` (named on the command line, so
    the key itself never is). An unset or empty variable is an error that names the variable."""
    if variable is None:
        return None
    key = os.environ.get(variable, "")
    if not key.strip():
        raise ConfigError("api_key_env", f"environment variable {variable} is not set (or "
                          "empty); export the upstream server's key in it")
    return key


def completion_payload(request: GenerationRequest, config: OpenAIHttpConfig) -> dict[str, Any]:
    """The JSON body of the streamed call for `request` (its endpoint: `endpoint_for`)."""
    return payload(request, endpoint_for(request, config.endpoint), config.model,
                   config.include_usage)


def apply_completion_chunk(obj: dict[str, Any], state: StreamState,
                           endpoint: str = "completions") -> TokenEvent | None:
    """Fold one streamed chunk of `endpoint` into `state`; the event to emit, if any."""
    return apply_chunk(obj, state, endpoint)


class OpenAIHttpEngine(HttpStreamingEngine):
    """`LLMEngine` over an OpenAI-compatible HTTP server."""

    def __init__(self, config: OpenAIHttpConfig | None = None) -> None:
        self.config = config or OpenAIHttpConfig()
        super().__init__(self.config.name, self.config.context_length, self.config.base_url,
                         self.config.timeout_s, self.config.connect_timeout_s)

    @property
    def chat_template(self) -> str:
        return "the server's own, through /v1/chat/completions"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}

    async def _open(self) -> None:
        await super()._open()
        if self.context_length == 0:
            self.context_length = await self._served_context()

    async def _served_context(self) -> int:
        """The context length the server states (0 when it says none). Best effort: a server
        that is not up yet leaves it unknown, and its requests fail with their own errors."""
        assert self._client is not None  # opened just before
        answers = []
        for path in ("/props", "/v1/models"):
            try:
                resp = await self._client.get(path, headers=self._headers(),
                                              timeout=DISCOVERY_TIMEOUT_S)
                answers.append(resp.json() if resp.status_code == 200 else None)
            except (httpx.HTTPError, ValueError) as e:
                log.info("%s: no context length from %s (%s)", self._where, path,
                         type(e).__name__)
                answers.append(None)
        return served_context(*answers) or 0

    async def _drive(
        self, request: GenerationRequest, stream: GenerationStream, state: StreamState
    ) -> None:
        try:
            await self._read_stream(request, stream, state)
        except (EngineError, httpx.RemoteProtocolError) as e:  # a refusal, or a dropped stream
            if state.completion_tokens == 0 and not isinstance(e, PromptTooLong):
                hint = await asyncio.to_thread(self._diagnose_prompt, request)
                if hint:
                    raise PromptTooLong(f"{hint} ({e})") from e
            raise

    async def _read_stream(
        self, request: GenerationRequest, stream: GenerationStream, state: StreamState
    ) -> None:
        endpoint = endpoint_for(request, self.config.endpoint)
        resp = await self._post_stream(PATHS[endpoint], completion_payload(request, self.config),
                                       self._headers())
        # Local accounting counts chunks; a usage chunk, when sent, overrides it at the end.
        try:
            async for obj in iter_events(resp.aiter_lines()):
                event = apply_completion_chunk(obj, state, endpoint)
                if event is not None:
                    stream.push(event)
        finally:
            await resp.aclose()
        if state.finish_reason is None:
            # OpenAI servers end every completed choice with a finish_reason; llama.cpp's Python
            # server sends [DONE] without one when it interrupts a request.
            raise EngineError("server ended the stream without a finish_reason (interrupted?)")

    def _diagnose_prompt(self, request: GenerationRequest) -> str | None:
        """Why a stream may have failed before its first token: a prompt over the context.
        Servers that check the length only once streaming has begun (llama.cpp's Python server)
        just drop the connection. Best effort: the original error is reported either way."""
        if self.context_length <= 0:
            return None
        text = request.prompt if request.messages is None else prompt_text(request.messages)
        try:
            n = len(request.prompt_ids) if request.prompt_ids is not None else len(
                self.tokenize(text or ""))
        except EngineError:
            return None  # no tokenizer endpoint: nothing to add to the original error
        if n >= self.context_length:
            return (f"prompt has {n} tokens but the server's context length is "
                    f"{self.context_length}")
        return None

    def tokenize(self, text: str) -> tuple[int, ...]:
        """Token ids from the server's tokenizer endpoint. Blocking (one HTTP round trip)."""
        url = self._base_url + self.config.tokenize_path
        body = {"input": text, "prompt": text, "model": self.config.model}
        try:
            resp = httpx.post(url, json=body, headers=self._headers(), timeout=self._timeout)
        except httpx.HTTPError as e:
            raise EngineError(f"{self.name}: cannot tokenize via {url}: {e}") from e
        if resp.status_code != 200:
            raise EngineError(f"{self.name}: HTTP {resp.status_code} from {url}: {resp.text[:300]}")
        try:
            body = resp.json()
        except ValueError as e:
            raise EngineError(f"{self.name}: {url} answered with something that is not JSON") from e
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list):
            raise EngineError(f"{self.name}: {url} answered without a 'tokens' list")
        try:
            return tuple(whole(t, "tokens[]") for t in tokens)
        except EngineError as e:
            raise EngineError(f"{self.name}: {url}: {e}") from e
