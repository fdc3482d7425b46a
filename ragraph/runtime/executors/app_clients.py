"""The LLM and the index as a plain application calls them, for the LangGraph baseline.

A LangGraph (or LangChain) app serving concurrent users from a local model holds one
`llama_cpp.Llama` and a lock around it; against a server it uses the `openai` client; it searches
faiss directly. These clients are blocking and thread-safe: LangGraph runs each request's nodes
on its own worker thread.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from ragraph.errors import EngineError, PromptTooLong
from ragraph.ir import Sampling
from ragraph.ir.values import GeneratedText, Passages
from ragraph.runtime.llm.chat import ChatMessage, Prompt, as_dicts
from ragraph.runtime.llm.failure import overflow
from ragraph.runtime.llm.protocol import EngineCounters, LLMEngine, positions
from ragraph.runtime.llm.settings import LlmConfig
from ragraph.runtime.retrieval.options import SearchSpec
from ragraph.runtime.search_service import SearchService

# What the app's `Llama` holds: the prompt and answer of the workflows' longest generations.
APP_CONTEXT = 2048


class AppLLM(Protocol):
    name: str

    def complete(self, prompt: Prompt, params: Sampling) -> GeneratedText:
        """Completion text, or a chat turn (rendered with the model's chat template)."""
        ...

    def counters(self) -> EngineCounters: ...

    def close(self) -> None: ...


def _refusal(message: str) -> EngineError:
    """A client library's error as the engine's (PromptTooLong when it says the prompt does
    not fit)."""
    return PromptTooLong(message) if overflow(message) else EngineError(message)


def _token_logprobs(logprobs: object) -> list[float | None] | None:
    """A completion choice's per-token logprobs: OpenAI's legacy `token_logprobs` list (vLLM,
    SGLang, llama_cpp.server), or llama-server's `content` list of {token, logprob} (the chat
    API's shape, which it returns from /v1/completions too)."""
    if logprobs is None:
        return None
    legacy = getattr(logprobs, "token_logprobs", None)
    if legacy is not None:
        return legacy
    extra = getattr(logprobs, "model_extra", None) or {}
    content = extra.get("content")
    if isinstance(content, list):
        return [item.get("logprob") if isinstance(item, dict) else None for item in content]
    return None


def _as_chat(prompt: Prompt) -> tuple[ChatMessage, ...]:
    return (ChatMessage("user", prompt),) if isinstance(prompt, str) else prompt


def _min_prob(logprobs: list[float | None] | None) -> float:
    values = [lp for lp in logprobs or () if lp is not None]
    return math.exp(min(values)) if values else 1.0


class LlamaCppApp:
    """One llama-cpp-python `Llama` behind a lock. `Llama` reuses the KV of the longest prefix
    its previous call shares with the next one; the lock makes calls one at a time.
    llama-cpp-python returns logprobs only from a model loaded with `logits_all=True` (which
    computes the logits of every prompt token), so calls that need them (FLARE) go to a second
    `Llama` loaded that way on first use, behind the same lock."""

    name = "llama-cpp-python"

    def __init__(self, model_path: str | None, n_threads: int, n_ctx: int,
                 chat_template: str | None = None) -> None:
        # The package first: it bounds libgomp's spin before llama_cpp loads it (the same
        # process setting as ragraph's own engine).
        from ragraph.runtime.llm.llamacpp.engine import default_model_path  # noqa: PLC0415, I001

        import llama_cpp  # noqa: PLC0415 - optional at import time

        self._perf = llama_cpp.llama_perf_context
        self._path, self._n_threads, self._n_ctx = model_path or default_model_path(), n_threads, n_ctx
        self._chat_choice = chat_template
        self._template = None  # the chat template, read from the model on the first turn
        self.llm = self._load(logits_all=False)
        self._scored = None
        self.lock = threading.Lock()
        self._usage = EngineCounters()

    def _load(self, logits_all: bool):  # noqa: ANN202 - llama_cpp.Llama
        from ragraph.runtime.llm.llamacpp.reference import reference_llama  # noqa: PLC0415

        return reference_llama(self._path, n_ctx=self._n_ctx, n_threads=self._n_threads,
                               logits_all=logits_all)

    def _render(self, messages: tuple[ChatMessage, ...]) -> str:
        """A chat turn as the embedded engine renders it (`llamacpp_chat`): `create_completion`
        on that text tokenizes it as the engine does, so both give the same greedy answer
        (llama-cpp-python's own guess for a GGUF without a template is another format)."""
        from ragraph.runtime.llm.llamacpp.chat import (  # noqa: PLC0415
            chat_template_for,
            no_template,
        )

        if self._template is None:
            model = self.llm._model  # noqa: SLF001 - llama-cpp-python keeps the C handles here
            self._template = chat_template_for(self._chat_choice, model.model, model.vocab)
        if self._template is None:
            raise no_template(self._path)
        return self._template.render(messages)

    def complete(self, prompt: Prompt, params: Sampling) -> GeneratedText:
        if not isinstance(prompt, str):
            prompt = self._render(prompt)
        with self.lock:
            if params.logprobs and self._scored is None:
                self._scored = self._load(logits_all=True)
            llm = self._scored if params.logprobs else self.llm
            before = self._perf(llm.ctx)
            try:
                out = llm.create_completion(
                    prompt, max_tokens=params.max_tokens, temperature=params.temperature,
                    top_p=params.top_p, stop=list(params.stop) or None, seed=params.seed,
                    logprobs=1 if params.logprobs else None)
            except ValueError as err:  # llama-cpp-python's "Requested tokens exceed context"
                raise _refusal(f"llama-cpp-python: {err}") from err
            self._count(out["usage"], before, self._perf(llm.ctx))
        choice = out["choices"][0]
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        return GeneratedText(choice["text"], _min_prob(logprobs))

    def _count(self, usage, before, after) -> None:  # noqa: ANN001 - llama.cpp structs
        u = self._usage
        u.requests += 1
        u.count_finish("stop")
        u.prompt_tokens += usage["prompt_tokens"]
        u.completion_tokens += usage["completion_tokens"]
        computed = max(after.n_p_eval - before.n_p_eval, 0)
        u.cached_tokens += max(usage["prompt_tokens"] - computed, 0)
        u.prefill_s += (after.t_p_eval_ms - before.t_p_eval_ms) / 1000
        u.decode_s += (after.t_eval_ms - before.t_eval_ms) / 1000
        # One sequence: its computed prompt ends at the prompt's end, and each decode pass
        # (one token) follows it.
        decoded = max(after.n_eval - before.n_eval, 0)
        n = usage["prompt_tokens"]
        u.decode_tokens += decoded
        u.prefill_context += positions(max(n - computed, 0), min(computed, n))
        u.decode_context += positions(n, decoded)

    def counters(self) -> EngineCounters:
        return self._usage.snapshot()

    def close(self) -> None:
        self.llm.close()
        if self._scored is not None:
            self._scored.close()


@dataclass(frozen=True)
class SentCall:
    """One generation call of the app, as it went to the server."""

    worker: int  # the app's thread that made it (`threading.get_ident`)
    prompt: Prompt  # a completion to a chat-only server went as one user message
    params: Sampling


class OpenAIApp:
    """The official `openai` client against an OpenAI-compatible server (vLLM, SGLang,
    llama.cpp's server), one blocking call per generation from each of LangGraph's worker
    threads, so the server batches the app's concurrent requests. `sent` keeps every call in
    the order they were made: the bench replays each thread's calls against the server alone."""

    name = "openai-client"

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 endpoint: str = "completions") -> None:
        try:
            import openai  # noqa: PLC0415
        except ImportError as err:
            raise EngineError("the langgraph executor on an HTTP engine needs the openai "
                              "package: pip install 'ragraph[langgraph]'") from err
        # The client's default pool holds 1,000 connections: every worker thread has its own.
        self._client = openai.OpenAI(base_url=base_url.rstrip("/") + "/v1",
                                     api_key=api_key or "unused")
        self._endpoint = endpoint
        self._api_error = openai.APIError
        self._model = model
        self._usage = EngineCounters()
        self._lock = threading.Lock()
        self.sent: list[SentCall] = []

    def complete(self, prompt: Prompt, params: Sampling) -> GeneratedText:
        chat = not isinstance(prompt, str) or self._endpoint == "chat"
        try:
            out = self._chat(prompt, params) if chat else self._client.completions.create(
                model=self._model, prompt=prompt, max_tokens=params.max_tokens,
                temperature=params.temperature, top_p=params.top_p,
                stop=list(params.stop) or None, seed=params.seed,
                logprobs=1 if params.logprobs else None)
        except self._api_error as err:  # the server's refusal or fault, not a bug of ours
            raise _refusal(f"{self.name}: {type(err).__name__}: {err}") from err
        with self._lock:
            self.sent.append(SentCall(threading.get_ident(), _as_chat(prompt) if chat else prompt,
                                      params))
            self._usage.requests += 1
            self._usage.count_finish("stop")
            if out.usage is not None:
                self._usage.prompt_tokens += out.usage.prompt_tokens
                self._usage.completion_tokens += out.usage.completion_tokens
                details = out.usage.prompt_tokens_details
                self._usage.cached_tokens += (details.cached_tokens or 0) if details else 0
        choice = out.choices[0]
        if chat:
            content = choice.logprobs.content if choice.logprobs else None
            logprobs = [t.logprob for t in content] if content else None
            return GeneratedText(choice.message.content or "", _min_prob(logprobs))
        return GeneratedText(choice.text, _min_prob(_token_logprobs(choice.logprobs)))

    def _chat(self, prompt: Prompt, params: Sampling):  # noqa: ANN202 - openai's type
        """`/v1/chat/completions`: the server renders the turn with the model's template."""
        return self._client.chat.completions.create(
            model=self._model, messages=as_dicts(_as_chat(prompt)),  # type: ignore[arg-type]
            max_tokens=params.max_tokens, temperature=params.temperature,
            top_p=params.top_p, stop=list(params.stop) or None, seed=params.seed,
            logprobs=params.logprobs or None)

    def counters(self) -> EngineCounters:
        return self._usage.snapshot()

    def close(self) -> None:
        self._client.close()


@dataclass
class EngineApp:
    """An in-process ragraph engine (the simulated GPU engine, SGLang's `Engine`) called from
    the app's threads, one request at a time per thread."""

    engine: LLMEngine
    loop: asyncio.AbstractEventLoop
    name: str = "engine"
    _ids: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def complete(self, prompt: Prompt, params: Sampling) -> GeneratedText:
        from ragraph.runtime.generate import (  # noqa: PLC0415
            engine_request,
            finish,
            generated_text,
        )

        with self._lock:
            self._ids += 1
            rid = f"app-{self._ids}"

        async def run():  # streams belong to the loop thread: submit there
            return await finish(self.engine.submit(engine_request(rid, prompt, params)))

        result = asyncio.run_coroutine_threadsafe(run(), self.loop).result()
        return generated_text(result)

    def counters(self) -> EngineCounters:
        return self.engine.counters()

    def close(self) -> None:
        pass


@dataclass
class AppRetriever:
    """faiss directly: the query embedded by the run's embedder (so vectors are bit-identical
    to every other executor's), `index.search` at the node's nprobe, the ids looked up in the
    passage store."""

    search: SearchService

    def retrieve(self, query: str, spec: SearchSpec, nprobe: int | None) -> Passages:
        if spec.where is not None:  # faiss's search with the filter's selector (a node's filter)
            return self.search.search(query, spec, nprobe)
        dense = self.search.faiss_search(self.search.embed(query), spec.k, nprobe)
        return self.search.ranked(dense, query, spec)

    def probes(self, nprobe: int | None) -> int:
        """The clusters a search at `nprobe` (None: the index's default) scans."""
        return self.search.probes(nprobe)



def uses_own_client(llm: LlmConfig, executor: str) -> bool:
    """The LangGraph app talks to llama.cpp and HTTP servers itself, not through ragraph's
    engine (which then need not be started)."""
    return executor == "langgraph" and llm.engine in ("llamacpp", "openai")


def open_app_llm(llm: LlmConfig, engine: LLMEngine,
                 loop: asyncio.AbstractEventLoop) -> AppLLM:
    """The LangGraph app's LLM client for the run's LLM part (blocking: loads a local model)."""
    if llm.engine == "llamacpp":
        return LlamaCppApp(llm.model, n_threads=llm.gen_threads,
                           n_ctx=llm.ctx or APP_CONTEXT, chat_template=llm.chat_template)
    if llm.engine == "openai":
        from ragraph.runtime.llm.http.openai import api_key_from  # noqa: PLC0415

        return OpenAIApp(llm.url or "", llm.model or "default",
                         api_key=api_key_from(llm.api_key_env), endpoint=llm.openai_endpoint)
    return EngineApp(engine, loop, name=engine.name)


@asynccontextmanager
async def opened_app_llm(llm: LlmConfig, engine: LLMEngine) -> AsyncIterator[AppLLM]:
    """`open_app_llm` off the event loop (it may load a model), closed on leaving."""
    loop = asyncio.get_running_loop()
    client = await loop.run_in_executor(None, open_app_llm, llm, engine, loop)
    try:
        yield client
    finally:
        client.close()
