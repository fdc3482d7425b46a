"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp's) through streamed `/v1/completions`.

The server applies stop strings and sampling; this client maps the request, reads the SSE
stream, and turns each chunk into a `TokenEvent`. The completions API does not return token ids,
so events carry `token_id=None` and results an empty `token_ids`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ragraph.errors import ConfigError, EngineError, PromptTooLong
from ragraph.runtime.llm.httpbase import HttpStreamingEngine, StreamState
from ragraph.runtime.llm.protocol import GenerationRequest, TokenEvent
from ragraph.runtime.llm.sse import iter_events
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.wire import count, malformed, whole

if TYPE_CHECKING:
    from ragraph.runtime.config import RuntimeConfig


@dataclass(frozen=True)
class OpenAIHttpConfig:
    base_url: str = "http://127.0.0.1:8000"
    # The `model` field of each request (servers with one model mostly ignore it).
    model: str = "default"
    api_key: str | None = None
    # The server's context length, for the scheduler's planning; 0 = unknown. Over-long prompts
    # are rejected by the server (the error names its limit).
    context_length: int = 0
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

    @classmethod
    def from_run(cls, run: RuntimeConfig) -> OpenAIHttpConfig:
        return cls(base_url=run.url or "", model=run.model or "default")


def completion_payload(request: GenerationRequest, config: OpenAIHttpConfig) -> dict[str, Any]:
    """The JSON body of a streamed `/v1/completions` call for `request`."""
    p = request.params
    body: dict[str, Any] = {
        "model": config.model,
        "prompt": request.prompt if request.prompt is not None else list(request.prompt_ids or ()),
        "max_tokens": p.max_new_tokens,
        "temperature": p.temperature,
        "top_p": p.top_p,
        "stream": True,
    }
    if p.stop:
        body["stop"] = list(p.stop)
    if p.seed is not None:
        body["seed"] = p.seed
    if p.logprobs:
        body["logprobs"] = 1
    if config.include_usage:
        body["stream_options"] = {"include_usage": True}
    return body


def apply_completion_chunk(obj: dict[str, Any], state: StreamState) -> TokenEvent | None:
    """Fold one streamed chunk into `state`; the event to emit, if the chunk carried text."""
    usage = obj.get("usage")
    if isinstance(usage, dict):
        state.prompt_tokens = count(usage, "prompt_tokens", "usage", state.prompt_tokens)
        state.completion_tokens = count(usage, "completion_tokens", "usage",
                                        state.completion_tokens)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            state.cached_tokens = count(details, "cached_tokens",
                                        "usage.prompt_tokens_details", 0)
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise malformed(f"chunk has no 'choices' list: {str(obj)[:200]}")
    if not choices:
        return None  # the usage-only chunk
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("text", ""), str):
        raise malformed(f"chunk has a malformed choice: {str(choice)[:200]}")
    text = choice.get("text") or ""
    reason = choice.get("finish_reason")
    if reason is not None:
        state.finish_reason = "length" if reason == "length" else "stop"
    logprob = _first_logprob(choice.get("logprobs"))
    if not text and logprob is None:
        return None
    state.text += text
    state.completion_tokens += 1
    if logprob is not None:
        state.logprobs.append(logprob)
    return TokenEvent(None, text, logprob)


def _first_logprob(logprobs: object) -> float | None:
    if not isinstance(logprobs, dict):
        return None
    values = logprobs.get("token_logprobs")
    if isinstance(values, list) and values and isinstance(values[0], int | float):
        return float(values[0])
    return None


class OpenAIHttpEngine(HttpStreamingEngine):
    """`LLMEngine` over an OpenAI-compatible HTTP server."""

    def __init__(self, config: OpenAIHttpConfig | None = None) -> None:
        self.config = config or OpenAIHttpConfig()
        super().__init__(self.config.name, self.config.context_length, self.config.base_url,
                         self.config.timeout_s, self.config.connect_timeout_s)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}

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
        resp = await self._post_stream("/v1/completions", completion_payload(request, self.config),
                                       self._headers())
        # Local accounting counts chunks; a usage chunk, when sent, overrides it at the end.
        try:
            async for obj in iter_events(resp.aiter_lines()):
                event = apply_completion_chunk(obj, state)
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
        try:
            n = len(request.prompt_ids) if request.prompt_ids is not None else len(
                self.tokenize(request.prompt or ""))
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
