"""Sequences of the llama.cpp engine: their state and step planning (decode thread only)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragraph.runtime.llm.protocol import GenerationRequest, positions
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText


@dataclass(eq=False)
class Seq:
    request: GenerationRequest
    stream: GenerationStream
    tokens: list[int]  # prompt, then generated tokens
    n_prompt: int
    seq_id: int
    out: OutputText
    rng: np.random.Generator | None
    n_past: int = 0  # tokens whose KV is in the cache: always tokens[:n_past]
    cached: int = 0  # prompt tokens whose KV was reused
    held: int = 0  # admission rounds it waited for a running sequence's prefill (admission)
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    _array: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def rid(self) -> str:
        return self.request.rid

    def token_array(self) -> np.ndarray:
        """`tokens` as int64, rebuilt only when a token was appended (the only way they
        change): admission compares every running sequence with each waiting prompt, every
        round of the decode thread."""
        if self._array is None or len(self._array) != len(self.tokens):
            self._array = np.asarray(self.tokens, dtype=np.int64)
        return self._array

    @property
    def pending(self) -> int:
        """Tokens still to feed to the model before the next token can be sampled."""
        return len(self.tokens) - self.n_past


@dataclass(frozen=True)
class StepPlan:
    """One engine step: a decode pass (one token of every decoding sequence) and a prefill pass
    (chunks of prompts), run as two `llama_decode` calls so each is timed on its own."""

    decode: list[Seq]
    prefill: list[tuple[Seq, int]]

    def decode_context(self) -> int:
        """The positions the decode pass computes, summed (before it runs)."""
        return sum(seq.n_past for seq in self.decode)

    def prefill_context(self) -> int:
        """The positions the prefill pass computes, summed (before it runs): each chunk's
        `take` tokens from `n_past` on."""
        return sum(positions(seq.n_past, take) for seq, take in self.prefill)


def plan_step(seqs: list[Seq], n_batch: int) -> StepPlan:
    """Every decoding sequence advances one token; prefills fill `n_batch` tokens in admission
    order, chunked to what is left. Both passes list sequences by id: llama.cpp batches
    per-sequence KV streams only in runs of consecutive ids, in increasing order."""
    decode = sorted((s for s in seqs if s.pending == 1), key=lambda s: s.seq_id)
    prefill: list[tuple[Seq, int]] = []
    budget = n_batch
    for seq in seqs:
        if seq.pending > 1 and budget > 0:
            take = min(seq.pending, budget)
            prefill.append((seq, take))
            budget -= take
    prefill.sort(key=lambda p: p[0].seq_id)
    return StepPlan(decode, prefill)
