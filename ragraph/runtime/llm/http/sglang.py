"""SGLang engines (optional extra `ragraph[gpu]`): in-process `sglang.Engine`, or a server's
native `POST /generate`.

sglang is imported only when the in-process engine starts; it needs a CUDA GPU (no CPU backend
for these machines). The request/response mapping lives in `sglang_map` and is tested without it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragraph.errors import ConfigError, EngineError, PromptTooLong, RagraphError
from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.failure import cause, overflow
from ragraph.runtime.llm.http.base import HttpStreamingEngine, StreamState
from ragraph.runtime.llm.http.sglang_map import ChunkFolder, generate_kwargs, generate_payload
from ragraph.runtime.llm.http.sse import iter_events
from ragraph.runtime.llm.protocol import GenerationRequest
from ragraph.runtime.llm.stream import GenerationStream

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig

INSTALL_HINT = "install the GPU extra: pip install 'ragraph[gpu]' (needs a CUDA GPU)"


@dataclass(frozen=True)
class SGLangConfig:
    """`mode="engine"`: load `model_path` in this process; `mode="http"`: talk to `base_url`."""

    mode: str = "engine"
    model_path: str = ""
    base_url: str = "http://127.0.0.1:30000"
    tp_size: int = 1
    # Fraction of GPU memory for weights + KV cache (SGLang's `mem_fraction_static`); None = its default.
    mem_fraction_static: float | None = None
    # 0 = the model's own context length.
    context_length: int = 0
    # Matches the server flag --incremental-streaming-output (chunks carry deltas).
    incremental_output: bool = False
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    name: str = "sglang"

    def __post_init__(self) -> None:
        if self.mode not in ("engine", "http"):
            raise ConfigError("mode", f"must be 'engine' or 'http', got {self.mode!r}")
        if self.mode == "engine" and not self.model_path:
            raise ConfigError("model_path", "is required for the in-process SGLang engine")
        if self.tp_size < 1:
            raise ConfigError("tp_size", "must be >= 1")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static < 1:
            raise ConfigError("mem_fraction_static", "must be in (0, 1)")
        if self.context_length < 0:
            raise ConfigError("context_length", "must be >= 0")

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `sglang.Engine(...)` (its ServerArgs fields)."""
        kwargs: dict[str, Any] = {"model_path": self.model_path, "tp_size": self.tp_size}
        if self.mem_fraction_static is not None:
            kwargs["mem_fraction_static"] = self.mem_fraction_static
        if self.context_length:
            kwargs["context_length"] = self.context_length
        if self.incremental_output:
            kwargs["incremental_streaming_output"] = True
        return kwargs

    @classmethod
    def of(cls, llm: LlmConfig, in_flight: int = 0) -> SGLangConfig:
        """In-process with --model, a server's native API with --url (SGLang batches
        whatever arrives: `in_flight` is its own)."""
        mode = "http" if llm.url else "engine"
        return cls(mode=mode, model_path=llm.model or "", base_url=llm.url or cls.base_url)


def import_sglang() -> Any:
    """The sglang module, or a clear EngineError when it or a GPU is missing."""
    try:
        import sglang  # noqa: PLC0415 - optional heavy dependency, imported only when selected
    except ImportError as e:
        raise EngineError(f"the SGLang engine needs the sglang package: {INSTALL_HINT}") from e
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:
        raise EngineError(f"the SGLang engine needs torch with CUDA: {INSTALL_HINT}") from e
    if not torch.cuda.is_available():
        raise EngineError("the SGLang engine needs a CUDA GPU and none is visible; "
                          "use the llama.cpp engine (default) or the simulated one on CPU")
    return sglang


class SGLangEngine(EngineBase):
    """`LLMEngine` over an in-process `sglang.Engine`."""

    schedules_batches = False  # SGLang's own scheduler does

    def __init__(self, config: SGLangConfig) -> None:
        if config.mode != "engine":
            raise ConfigError("mode", "SGLangEngine is the in-process engine; use SGLangHttpEngine")
        super().__init__(config.name, config.context_length)
        self.config = config
        self._engine: Any = None
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def _open(self) -> None:
        sglang = import_sglang()
        self._engine = sglang.Engine(**self.config.engine_kwargs())
        tm = self._engine.tokenizer_manager
        self.context_length = self.context_length or int(getattr(tm, "context_len", 0))

    async def _shut(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None

    def tokenize(self, text: str) -> tuple[int, ...]:
        if self._engine is None:
            raise EngineError(f"{self.name}: tokenize() before start()")
        return tuple(self._engine.tokenizer_manager.tokenizer.encode(text))

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        task = asyncio.get_running_loop().create_task(self._drive(request, stream))
        self._tasks[request.rid] = task
        task.add_done_callback(lambda _: self._settle(request, stream))

    def _settle(self, request: GenerationRequest, stream: GenerationStream) -> None:
        """A task cancelled before it ran (or shut down mid-stream) still ends its stream: an
        abort when asked for, else the engine closed."""
        self._tasks.pop(request.rid, None)
        if stream.done:
            return
        if stream.abort_requested:
            self._end(stream, StreamState(request).result("abort"))
        else:
            self._fail(stream, f"{self.name}: engine closed while the request ran")

    def _abort(self, rid: str) -> None:
        # SGLang then ends the request's generator with finish_reason {"type": "abort"}.
        self._engine.tokenizer_manager.abort_request(rid=rid)

    async def _drive(self, request: GenerationRequest, stream: GenerationStream) -> None:
        state = StreamState(request)
        folder = ChunkFolder(state, self.config.incremental_output)
        try:
            generator = await self._engine.async_generate(**generate_kwargs(request))
            async for chunk in generator:
                for event in folder.apply(chunk, we_aborted=stream.abort_requested):
                    stream.push(event)
        except Exception as e:  # this request's failure, whatever it is; the others go on
            message, kind = cause(_rejection(e), self.name)
            self._fail(stream, f"{self.name}: {message}", state.prompt_tokens, kind)
            return
        finally:
            self._tasks.pop(request.rid, None)
        self._tally.prompt_tokens += state.prompt_tokens
        self._tally.cached_tokens += state.cached_tokens
        self._tally.completion_tokens += max(state.completion_tokens, len(state.token_ids))
        self._end(stream, state.result(state.finish_reason or "stop"))


def _rejection(err: Exception) -> Exception:
    """SGLang raises ValueError for input it rejects (too long, bad sampling params): the
    engine's refusal, a prompt over the context being the request's own."""
    if not isinstance(err, ValueError) or isinstance(err, RagraphError):
        return err
    if overflow(str(err)):
        return PromptTooLong(f"SGLang rejected the request: {err}")
    return EngineError(f"SGLang rejected the request: {err}")


class SGLangHttpEngine(HttpStreamingEngine):
    """`LLMEngine` over a running SGLang server's native `POST /generate` (SSE)."""

    health_path = "/health"

    def __init__(self, config: SGLangConfig) -> None:
        if config.mode != "http":
            raise ConfigError("mode", "SGLangHttpEngine needs mode='http'")
        self.config = config
        super().__init__(config.name, config.context_length, config.base_url, config.timeout_s,
                         config.connect_timeout_s)

    async def _drive(
        self, request: GenerationRequest, stream: GenerationStream, state: StreamState
    ) -> None:
        folder = ChunkFolder(state, self.config.incremental_output)
        resp = await self._post_stream("/generate", generate_payload(request))
        try:
            async for chunk in iter_events(resp.aiter_lines()):
                for event in folder.apply(chunk):
                    stream.push(event)
        finally:
            await resp.aclose()

    def tokenize(self, text: str) -> tuple[int, ...]:
        raise EngineError(f"{self.name}: tokenize over HTTP is not supported; "
                          "use the OpenAI-compatible engine with tokenize_path='/tokenize'")
