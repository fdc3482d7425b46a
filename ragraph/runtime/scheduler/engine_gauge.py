"""What the generation side reads off an LLM engine that batches on its own (a simulated GPU, a
server) to feed it: its decode step's time, the prompt tokens one step absorbs at no cost, how
long the generations it holds can still take, and a prompt's tokens from its characters. All
from the engine's own counters; None wherever its steps are not observable (HTTP servers) or
where it computes on this machine's cores (llama.cpp, whose steps ragraph forms itself)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragraph.runtime.llm.protocol import EngineCounters


@dataclass
class EngineGauge:
    prompt_chars: int = 0  # characters of every prompt submitted to it

    def submitted(self, prompt: str) -> None:
        self.prompt_chars += len(prompt)

    def tokens(self, c: EngineCounters, prompt: str) -> float:
        """`prompt`'s tokens, estimated from its characters at the engine's measured ratio."""
        return len(prompt) * c.prompt_tokens / max(self.prompt_chars, 1)

    def free_prompt_tokens(self, c: EngineCounters) -> float | None:
        """The prompt tokens the engine computes in one decode step's time (None where its
        steps are not observable; 0 until a decode step and a prompt pass were timed)."""
        if not c.steps or not self.prompt_chars:
            return None
        computed = c.prompt_tokens - c.cached_tokens
        if not c.decode_steps or c.prefill_s <= 0 or computed <= 0:
            return 0.0  # not timed yet: one prompt at a time
        return c.decode_s / c.decode_steps * computed / c.prefill_s

    def drain_ms(self, c: EngineCounters, tokens_left: Sequence[int]) -> float | None:
        """The most the generations with `tokens_left` can still take: the longest at the
        measured decode step (None where the steps are not observable, or until a decode step
        was timed)."""
        if not tokens_left or not c.decode_steps:
            return None
        return max(tokens_left) * c.decode_s / c.decode_steps * 1e3
