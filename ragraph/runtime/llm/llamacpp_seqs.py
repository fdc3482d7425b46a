"""Sequences of the llama.cpp engine: their state, step planning, and KV prefix reuse.

Used only by the decode thread. `SeqPool` owns the llama.cpp sequence ids: each running sequence
has one; a finished or aborted sequence keeps its id and KV for a while (a small LRU of retired
sequences) so that a continuation, a speculative restart, or another request with the same
document prefix can copy the KV of the shared prefix and prefill only the rest.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ragraph.runtime.llm.protocol import GenerationRequest, TokenEvent
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText


class KvOps(Protocol):
    def seq_rm(self, seq_id: int) -> None: ...

    def seq_cp(self, src: int, dst: int, n_tokens: int) -> None: ...

    def seq_pos_min(self, seq_id: int) -> int: ...


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
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reserve: int = 0  # KV cells set aside for this sequence at admission

    @property
    def rid(self) -> str:
        return self.request.rid

    @property
    def pending(self) -> int:
        """Tokens still to feed to the model before the next token can be sampled."""
        return len(self.tokens) - self.n_past


def plan_step(seqs: list[Seq], n_batch: int) -> list[tuple[Seq, int]]:
    """How many tokens of each sequence go into the next llama_decode call.

    Decoding sequences (one pending token) come first so that a long prefill never stalls them;
    prefills fill the rest of the batch in admission order, chunked to what is left.
    """
    plan: list[tuple[Seq, int]] = []
    budget = n_batch
    for seq in seqs:
        if seq.pending == 1 and budget > 0:
            plan.append((seq, 1))
            budget -= 1
    for seq in seqs:
        if seq.pending > 1 and budget > 0:
            take = min(seq.pending, budget)
            plan.append((seq, take))
            budget -= take
    return plan


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class SeqPool:
    def __init__(self, kv: KvOps, n_ids: int, keep_retired: int, n_swa: int) -> None:
        self._kv = kv
        self._free = list(range(n_ids - 1, -1, -1))
        self._keep = keep_retired
        self._n_swa = n_swa
        self._retired: OrderedDict[int, np.ndarray] = OrderedDict()

    @property
    def retired_cells(self) -> int:
        return sum(len(t) for t in self._retired.values())

    def acquire(self) -> int | None:
        if not self._free and not self.evict_oldest():
            return None
        return self._free.pop()

    def evict_oldest(self) -> bool:
        if not self._retired:
            return False
        seq_id, _ = self._retired.popitem(last=False)
        self._kv.seq_rm(seq_id)
        self._free.append(seq_id)
        return True

    def retire(self, seq_id: int, kv_tokens: list[int]) -> None:
        """`seq_id`'s KV holds exactly `kv_tokens`; keep it for reuse (LRU) or free it."""
        if not kv_tokens or self._keep == 0:
            self._kv.seq_rm(seq_id)
            self._free.append(seq_id)
            return
        self._retired[seq_id] = np.asarray(kv_tokens, dtype=np.int64)
        while len(self._retired) > self._keep:
            self.evict_oldest()

    def reuse_prefix(self, dst: int, prompt: list[int], running: list[Seq]) -> int:
        """Copy into `dst` the KV of the longest prefix of `prompt` already computed by a retired
        or running sequence; returns its length (0 if none). At least the last prompt token is
        always left to compute: its logits give the first generated token."""
        target = np.asarray(prompt, dtype=np.int64)
        best, best_src = 0, -1
        sources = list(self._retired.items()) + [
            (s.seq_id, np.asarray(s.tokens[: s.n_past], dtype=np.int64)) for s in running
        ]
        for src, toks in sources:
            n = min(common_prefix(target, toks), len(prompt) - 1)
            if n > best and self._window_present(src, n):
                best, best_src = n, src
        if best > 0:
            self._kv.seq_cp(best_src, dst, best)
            if best_src in self._retired:
                self._retired.move_to_end(best_src)
        return best

    def _window_present(self, src: int, n: int) -> bool:
        """Whether `src` still holds the KV that position `n` attends to. Sliding-window layers
        let llama.cpp overwrite a sequence's cells older than the window (llama_memory_seq_pos_min
        then rises); positions [pos_min, pos_max] are guaranteed present."""
        pos_min = self._kv.seq_pos_min(src)
        if pos_min <= 0:
            return True
        return self._n_swa > 0 and n - self._n_swa >= pos_min


def token_event(seq: Seq, token: int, text: str, logprob: float | None) -> TokenEvent:
    return TokenEvent(token, text, logprob if seq.request.params.logprobs else None)
