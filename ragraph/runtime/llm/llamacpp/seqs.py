"""Sequences of the llama.cpp engine: their state and step planning (decode thread only)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragraph.runtime.llm.protocol import GenerationRequest, positions
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText

# llama.cpp sizes a forward's attention to the longest sequence in it, rounded up to this many
# KV cells (llama_kv_cache::get_n_kv, at least 256).
KV_PAD = 256


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
    (chunks of prompts), run as two `llama_decode` calls so each is timed on its own.

    llama.cpp computes a batch over per-sequence KV streams in runs of consecutive ids, one
    forward each (`split_equal(sequential=True)`): a decode pass over ids 0, 1, 3 is two
    forwards, each paying a step's fixed cost (the weights read again). So each prefilling
    sequence whose id lies between decoding ones (`fill`) gives the decode pass its next prompt
    token, and the pass stays one run.

    The counters (`EngineCounters`, priced by `bench.measure.bounds`) count a token by what it is,
    once: a prompt token is prompt work at its position wherever it is computed (a filler's, or a
    prompt's last when it is all that is left, as after a reused prefix), and only sequences
    that feed back a generated token are the decode step's. Each pass's seconds are its own
    `llama_decode`'s: no timer splits a forward, so a decode pass's prompt tokens (at most one a
    sequence, against up to `n_batch` in a prefill pass) are inside the decode seconds."""

    decode: list[Seq]
    prefill: list[tuple[Seq, int]]
    fill: list[Seq] = field(default_factory=list)

    def decode_pass(self) -> list[tuple[Seq, int]]:
        """The decode pass's sequences by id, one token each (a filler's: a prompt token)."""
        return [(seq, 1) for seq in sorted([*self.decode, *self.fill], key=lambda s: s.seq_id)]

    def generating(self) -> list[Seq]:
        """The decode pass's sequences that feed back a generated token (the others feed the
        last token of their prompt)."""
        return [seq for seq in self.decode if seq.n_past >= seq.n_prompt]

    def decode_context(self) -> int:
        """The positions of the generated tokens the decode pass feeds, summed (before it
        runs)."""
        return sum(seq.n_past for seq in self.generating())

    def pass_prompt_context(self) -> int:
        """The positions of the prompt tokens the decode pass computes, summed (before it
        runs): the fillers' and the prompts' last ones."""
        return sum(seq.n_past for seq, _ in self.decode_pass() if seq.n_past < seq.n_prompt)

    def prefill_context(self) -> int:
        """The positions the prefill pass computes, summed (after the decode pass, before it
        runs): each chunk's `take` tokens from `n_past` on."""
        return sum(positions(seq.n_past, take) for seq, take in self.prefill)


def plan_step(seqs: list[Seq], n_batch: int) -> StepPlan:
    """Every decoding sequence advances one token, with the prefilling ones between them
    (`StepPlan.fill`); prefills fill `n_batch` tokens in admission order, chunked to what is
    left. Both passes list sequences by id: llama.cpp batches per-sequence KV streams only in
    runs of consecutive ids, in increasing order."""
    decode = sorted((s for s in seqs if s.pending == 1), key=lambda s: s.seq_id)
    fill = _fillers(seqs, decode)
    filled = {id(s) for s in fill}
    prefill: list[tuple[Seq, int]] = []
    budget = n_batch - len(fill)  # the fillers' tokens went to the decode pass
    for seq in seqs:
        pending = seq.pending - (id(seq) in filled)
        if seq.pending > 1 and budget > 0:
            take = min(pending, budget)
            prefill.append((seq, take))
            budget -= take
    prefill.sort(key=lambda p: p[0].seq_id)
    return StepPlan(decode, prefill, fill)


def forwards(chunks: list[tuple[int, int]], n_ubatch: int) -> int:
    """The forward passes llama.cpp runs for one `llama_decode` over per-sequence KV streams:
    `chunks` are (sequence id, tokens) in increasing id order. Each forward takes the run of
    consecutive ids from the lowest with tokens left, and from each the same number of tokens
    (the fewest any has left, within `n_ubatch` in all): `split_equal(sequential=True)`. So
    prompts of different lengths are a forward each at least, and every forward pays a step's
    fixed cost (the weights read again). Counted for the bench (`EngineCounters`)."""
    left = {seq_id: n for seq_id, n in chunks if n > 0}
    count = 0
    while left:
        run: list[int] = []
        for seq_id in sorted(left):
            if run and seq_id != run[-1] + 1:
                break
            run.append(seq_id)
        take = min(min(left[i] for i in run), max(n_ubatch // len(run), 1))
        for seq_id in run:
            left[seq_id] -= take
            if left[seq_id] == 0:
                del left[seq_id]
        count += 1
    return count


def _fillers(seqs: list[Seq], decode: list[Seq]) -> list[Seq]:
    """The prefilling sequences between the lowest and highest decoding ids whose KV reaches
    no further than the decoding ones' (in KV_PAD cells): llama.cpp pads every sequence of a
    forward to the longest one's cells, so a filler that reached further would make each
    decoding sequence attend further than it does now."""
    if not decode:
        return []
    low, high = decode[0].seq_id, decode[-1].seq_id
    reach = max(_padded(s.n_past + 1) for s in decode)
    return sorted((s for s in seqs if s.pending > 1 and low < s.seq_id < high
                   and _padded(s.n_past + 1) <= reach), key=lambda s: s.seq_id)


def _padded(cells: int) -> int:
    return max(KV_PAD, -(-cells // KV_PAD) * KV_PAD)
