"""The one protocol every LLM engine speaks: async streaming on asyncio.

A caller (the scheduler) runs an asyncio loop. It `submit`s a `GenerationRequest` and gets a
`GenerationStream` back at once; many streams run at the same time and the engine batches them.
The stream yields `TokenEvent`s as tokens are decoded, can be `abort()`ed at any point (speculation
rollback) and ends with a `GenerationResult`. A failure that belongs to one request (empty prompt,
prompt longer than the context, a server error) fails only that stream with `EngineError`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ragraph.errors import ConfigError
from ragraph.ir.nodes import Sampling
from ragraph.runtime.llm.chat import ChatMessage

if TYPE_CHECKING:
    from ragraph.runtime.llm.stream import GenerationStream

FinishReason = Literal["stop", "length", "abort", "error"]
FINISH_REASONS: tuple[str, ...] = ("stop", "length", "abort", "error")
# Whose fault a failed generation is (a subset of ragraph.errors.FailureKind): the request's
# ("input": a prompt over the context), the engine's or its server's ("engine"), or a bug in
# ragraph's engine code ("internal").
ErrorKind = Literal["input", "engine", "internal"]
ERROR_KINDS: tuple[str, ...] = ("input", "engine", "internal")


@dataclass(frozen=True)
class PromptSegments:
    """Where a RAG prompt's parts end, in characters of the prompt text (of a chat's
    `chat.prompt_text`): [static instruction][retrieved documents][the rest]. Requests whose
    prompts agree up to `docs_end` can share the documents' KV (RAGCache); up to `static_end`,
    every request of the workflow can."""

    static_end: int
    docs_end: int

    def __post_init__(self) -> None:
        if not 0 <= self.static_end <= self.docs_end:
            raise ConfigError("layout", f"needs 0 <= static_end <= docs_end, got "
                              f"{self.static_end}, {self.docs_end}")


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: exactly one of `prompt` (completion text), `prompt_ids` (token ids) or
    `messages` (a chat, which the engine renders with the model's chat template).

    An empty prompt is accepted here and fails its stream with `EngineError`: it is a per-request
    failure, not a programming error.
    """

    rid: str
    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    params: Sampling = Sampling()
    layout: PromptSegments | None = None  # (prefix-layout) where the documents sit in `prompt`
    messages: tuple[ChatMessage, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("prompt_ids", "messages"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if not isinstance(self.rid, str) or not self.rid:
            raise ConfigError("rid", f"must be a non-empty string, got {self.rid!r}")
        given = [f for f in ("prompt", "prompt_ids", "messages") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ConfigError("prompt", "give exactly one of prompt (text), prompt_ids or "
                              "messages (a chat)")
        if self.prompt is not None and not isinstance(self.prompt, str):
            raise ConfigError("prompt", f"must be a string, got {type(self.prompt).__name__}")
        if self.prompt is not None:
            _check_text(self.prompt)
        if self.messages is not None:
            _check_messages(self.messages)
        if self.prompt_ids is not None and not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.prompt_ids
        ):
            raise ConfigError("prompt_ids", "must be a tuple of non-negative integers")
        if not isinstance(self.params, Sampling):
            raise ConfigError("params", "must be a Sampling (ragraph.ir)")


def _check_messages(messages: tuple[ChatMessage, ...]) -> None:
    if not messages or not all(isinstance(m, ChatMessage) for m in messages):
        raise ConfigError("messages", "must be a non-empty tuple of ChatMessage")
    for m in messages:
        _check_text(m.content, "messages")


def _check_text(prompt: str, field: str = "prompt") -> None:
    """Text no engine can send or tokenize (a lone surrogate, as JSON's "\\ud800" decodes to)
    is the request's mistake, said here rather than deep inside a tokenizer."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(field, f"is not valid text: {e.reason} at character {e.start}") from None


@dataclass(frozen=True)
class TokenEvent:
    """One decoded token. `text` is the text it adds to the output; it can be empty while a
    possible stop string or an incomplete UTF-8 character is held back, and a later event then
    carries the held text. `token_id` is None where the engine does not report ids (OpenAI HTTP),
    and on a last, token-less event that releases text held back when the sequence ends."""

    token_id: int | None
    text: str
    logprob: float | None = None


@dataclass(frozen=True)
class GenerationResult:
    """The whole of one generation. `text` never contains a matched stop string. A failed one
    (finish_reason "error") says why in `error` and whose fault in `error_kind` ("engine"
    unless the engine said otherwise)."""

    rid: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    logprobs: tuple[float, ...] | None = None
    error: str | None = None
    simulated: bool = False
    error_kind: ErrorKind | None = None

    def __post_init__(self) -> None:
        if self.finish_reason not in FINISH_REASONS:
            raise ConfigError("finish_reason", f"must be one of {FINISH_REASONS}")
        if self.error_kind is not None and self.error_kind not in ERROR_KINDS:
            raise ConfigError("error_kind", f"must be one of {ERROR_KINDS}, got {self.error_kind!r}")
        if self.finish_reason == "error" and self.error_kind is None:
            object.__setattr__(self, "error_kind", "engine")


# Buckets of `EngineCounters.prompt_passes`: k holds passes of 2**(k-1) < tokens <= 2**k (k = 0:
# one token or none), the last every larger one.
PASS_BUCKETS = 17
NO_PASSES = (0,) * PASS_BUCKETS


def pass_bucket(tokens: int) -> int:
    return min(max(tokens - 1, 0).bit_length(), PASS_BUCKETS - 1)


def _bumped(counts: tuple[int, ...], k: int, by: int) -> tuple[int, ...]:
    return counts[:k] + (counts[k] + by,) + counts[k + 1:]


def _combined(a, b, sign: int):  # noqa: ANN001, ANN202 - a count or a tuple of bucket counts
    if isinstance(a, tuple):
        return tuple(x + sign * y for x, y in zip(a, b, strict=True))
    return a + sign * b


@dataclass
class EngineCounters:
    """Totals since the engine started. An engine counts into its own instance in place and
    hands out `snapshot()`s, so a caller's copy never moves under it."""

    requests: int = 0
    finished: int = 0
    aborted: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    # Forward passes (llama.cpp `llama_decode` calls, simulated steps); 0 where not observable.
    steps: int = 0
    # Seconds the engine spent in prompt passes and in decode passes, each pass's own (a
    # llama.cpp decode pass computes a few prompt tokens too: `llamacpp.seqs.StepPlan`); 0
    # where not observable (HTTP).
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_steps: int = 0
    # The work inside those passes, for pricing it at an engine's rates (`bench.measure.bounds`); 0
    # where not observable: sequences advanced by decode passes (a step's batch, summed; the
    # first token of a generation comes from its prompt's last token, prompt work wherever it
    # is computed), and the KV positions each computed token attended up to (its position,
    # summed), of prompt tokens and of decoded ones: attention costs grow with them.
    decode_tokens: int = 0
    prefill_context: int = 0
    decode_context: int = 0
    # Where time beyond that pricing goes on llama.cpp (0 elsewhere): the forwards its prompt
    # passes split into (`llamacpp.seqs.forwards`: prompts of different lengths in one pass are
    # a forward each, and each forward pays a step's fixed cost), the whole-stream KV copies
    # made, and the passes that began by applying them (llama.cpp then reserves its worst-case
    # graph again and builds the pass's graph anew).
    prefill_forwards: int = 0
    kv_copies: int = 0
    copy_passes: int = 0
    # Prompt passes (llama.cpp: `llama_decode` calls) by the prompt tokens each computed, in
    # power-of-two buckets (`pass_bucket`), and those tokens: each pass reads the weights once
    # whatever its size, which pricing its tokens alone misses (`bench.measure.bounds`). All zero
    # where not observable (HTTP).
    prompt_passes: tuple[int, ...] = NO_PASSES
    prompt_pass_tokens: tuple[int, ...] = NO_PASSES
    # How the engine's steps were made up, where it is observable (0 elsewhere): steps that
    # only decoded, and passes that computed prompt tokens with decode tokens riding in them
    # (stall-free batching); the longest a decoding sequence waited for its next token across
    # prompt work (a mixed pass, or a prefill batch it sat out), the worst since the engine
    # started; and the seconds the engine had nothing to compute, between its start and its
    # last step.
    decode_only_steps: int = 0
    mixed_steps: int = 0
    worst_decode_wait_s: float = 0.0
    idle_s: float = 0.0
    simulated: bool = False

    @property
    def busy_s(self) -> float:
        return self.prefill_s + self.decode_s

    def count_finish(self, reason: str) -> None:
        if reason == "abort":
            self.aborted += 1
        elif reason == "error":
            self.failed += 1
        else:
            self.finished += 1

    def count_prompt_pass(self, tokens: int) -> None:
        """One prompt pass that computed `tokens` prompt tokens."""
        k = pass_bucket(tokens)
        self.prompt_passes = _bumped(self.prompt_passes, k, 1)
        self.prompt_pass_tokens = _bumped(self.prompt_pass_tokens, k, tokens)

    def snapshot(self, simulated: bool = False) -> EngineCounters:
        return replace(self, simulated=simulated)

    def since(self, before: EngineCounters) -> EngineCounters:
        """What was counted after `before`, an earlier snapshot of the same engine (a worst
        case stays the engine's worst since it started)."""
        return replace(self, **{f.name: _combined(getattr(self, f.name), getattr(before, f.name),
                                                  -1)
                                for f in fields(self) if f.name not in _NOT_SUMMED})

    def plus(self, other: EngineCounters) -> EngineCounters:
        """Both engines' counts added up (replicas); the worse of their worst cases."""
        summed = {f.name: _combined(getattr(self, f.name), getattr(other, f.name), 1)
                  for f in fields(self) if f.name not in _NOT_SUMMED}
        return replace(self, **summed, worst_decode_wait_s=max(self.worst_decode_wait_s,
                                                               other.worst_decode_wait_s))


_NOT_SUMMED = frozenset({"simulated", "worst_decode_wait_s"})


def positions(start: int, count: int) -> int:
    """The positions `start` .. `start + count - 1` summed: what `count` tokens computed from
    position `start` on add to `EngineCounters.prefill_context` / `decode_context`."""
    return count * start + count * (count - 1) // 2


@runtime_checkable
class LLMEngine(Protocol):
    """What the scheduler needs from an LLM engine.

    Use inside a running asyncio loop: `async with engine:` (or `await engine.start()` /
    `await engine.close()`), then `stream = engine.submit(request)`; `async for ev in stream`;
    `await stream.result()`; `stream.abort()`.
    """

    name: str
    simulated: bool
    # True where a request's greedy tokens never depend on what else is batched with it or
    # cached before it (the sim engine; llama.cpp serial-exact): there every pass combination
    # and executor must give the same answers. False where batching may flip a near-tie (batched
    # llama.cpp, any server).
    batch_invariant: bool
    # True where ragraph's own code forms the batches (the llama.cpp decode thread, the
    # simulated GPU). False where a server or another runtime's scheduler does (an HTTP server,
    # SGLang): ragraph then controls neither what runs beside a request nor how, only that
    # each request gets its own stream.
    schedules_batches: bool
    context_length: int

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> LLMEngine: ...

    async def __aexit__(self, *exc: object) -> None: ...

    def submit(self, request: GenerationRequest) -> GenerationStream: ...

    def counters(self) -> EngineCounters: ...

    def tokenize(self, text: str) -> tuple[int, ...]: ...
