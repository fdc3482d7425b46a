"""The LLM engine's work over one bench run, as its own counters kept it (`EngineCounters`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ragraph.runtime.llm.protocol import NO_PASSES, EngineCounters


@dataclass(frozen=True)
class LlmWork:
    """What the LLM engine counted over a run (0: not counted). Built from its counters in
    `of` alone; the bench's CSV and JSON write each field as a column of that name, and the
    bound (`bench.measure.bounds`) prices it whole: a new counter the bench should see is a field
    here, and nothing else copies it."""

    # Tokens computed: prompt tokens not served from reused KV, plus the generated ones. About
    # the same for every executor; prefix-cache hits depend on the order prompts arrive in,
    # and a rolled-back speculation adds its tokens.
    llm_tokens: int = 0
    # Seconds in prompt passes and in decode passes (0: no timers, e.g. HTTP).
    prefill_s: float = 0.0
    decode_s: float = 0.0
    cached_tokens: int = 0  # prompt tokens served from reused KV
    completion_tokens: int = 0
    # Batched decode passes (completion tokens / steps = mean batch); 0: not counted, one step
    # a sequence (the LangGraph app decodes alone).
    decode_steps: int = 0
    decode_tokens: int = 0  # sequences the decode steps advanced; 0: the completion tokens
    prefill_context: int = 0  # positions of the computed prompt tokens, summed
    decode_context: int = 0  # positions of the decoded tokens, summed
    # Not priced; where llama.cpp's time beyond the price goes (`EngineCounters`).
    prefill_forwards: int = 0  # forwards the prompt passes split into
    kv_copies: int = 0  # whole-stream KV copies
    copy_passes: int = 0  # passes that began by applying copies
    # Prompt passes by their tokens, in power-of-two buckets, and those tokens
    # (`EngineCounters.prompt_passes`): the bound prices each pass at no less than the weights
    # read once. All zero: not counted.
    prompt_passes: tuple[int, ...] = NO_PASSES
    prompt_pass_tokens: tuple[int, ...] = NO_PASSES
    # What decides whether decode rides in prompt passes (`EngineCounters`): decode-only
    # steps, mixed passes, the worst wait of a decoding sequence behind prompts, the engine's
    # idle seconds. Not priced.
    decode_only_steps: int = 0
    mixed_steps: int = 0
    worst_decode_wait_s: float = 0.0
    idle_s: float = 0.0

    @classmethod
    def of(cls, used: EngineCounters) -> LlmWork:
        same = {f.name: getattr(used, f.name) for f in fields(cls) if f.name != "llm_tokens"}
        return cls(llm_tokens=used.prompt_tokens - used.cached_tokens + used.completion_tokens,
                   **same)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens computed (those served from reused KV excluded)."""
        return self.llm_tokens - self.completion_tokens

    @property
    def prompt_pass_count(self) -> int:
        """Passes that computed prompt tokens (mixed ones included)."""
        return sum(self.prompt_passes)

    @property
    def busy_s(self) -> float:
        return self.prefill_s + self.decode_s
