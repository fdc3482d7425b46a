"""Sequence ids of the llama.cpp engine: each id is its own KV stream (`kv_unified=False`).

Why streams: with one unified KV buffer every token attends over every cell in use by any
sequence (masked), so prefills and decode steps beside other sequences slow down several-fold
(figures: docs/benchmarks/code-figures.md#the-llamacpp-engine). With a stream per sequence,
attention covers a sequence's own cells only.

Two rules come with streams:
- llama.cpp batches sequences into one forward pass only in runs of consecutive ids
  (`split_equal(sequential=True)`), so running sequences hold the lowest ids, densely: a new one
  takes the lowest free id, and when one ends in the middle the highest moves down into the hole.
- KV moves between streams only as a whole-stream copy (which llama.cpp performs at the start of
  the next decode). A prefix is shared by copying the stream and cutting the copy to the prefix.

Ids from `n_running` up hold the prefix store: finished sequences kept for reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ragraph.runtime.llm.llamacpp.prefix_store import PrefixStore, common_prefix
from ragraph.runtime.llm.llamacpp.seqs import Seq


class KvOps(Protocol):
    def seq_rm(self, seq_id: int) -> None: ...

    def seq_keep(self, seq_id: int, n_tokens: int) -> None: ...

    def seq_copy(self, src: int, dst: int) -> None: ...

    def seq_pos_min(self, seq_id: int) -> int: ...


class SeqSlots:
    def __init__(self, kv: KvOps, n_running: int, n_store: int, n_swa: int) -> None:
        self._kv = kv
        self._n_running = n_running
        self._busy: set[int] = set()
        self._n_swa = n_swa
        self.store = PrefixStore(range(n_running, n_running + n_store))
        self.copies = 0  # whole-stream copies made (each costs a memcpy of one stream)

    def acquire(self) -> int | None:
        """The lowest free running id, or None when every running id is taken."""
        for seq_id in range(self._n_running):
            if seq_id not in self._busy:
                self._busy.add(seq_id)
                return seq_id
        return None

    def reuse_prefix(self, dst: int, prompt: list[int], running: Sequence[Seq]) -> int:
        """Give `dst` the KV of the longest prefix of `prompt` that a stored or running sequence
        already computed; returns its length (0 if none). The last prompt token is always left to
        compute: its logits give the first generated token."""
        best, best_src, from_store = self._best_source(np.asarray(prompt, dtype=np.int64), running)
        if best > 0:
            self._copy(best_src, dst)
            self._kv.seq_keep(dst, best)
            if from_store:
                self.store.hit(best_src)
        return best

    def prefix_ready(self, prompt: list[int], running: Sequence[Seq]) -> int:
        """How much of `prompt` `reuse_prefix` would give now."""
        return self._best_source(np.asarray(prompt, dtype=np.int64), running)[0]

    @staticmethod
    def prefix_coming(prompt: list[int], running: Sequence[Seq]) -> int:
        """The longest prefix of `prompt` (but its last token) that a running sequence holds
        or is computing: its prompt counts whole, computed or not."""
        target = np.asarray(prompt, dtype=np.int64)
        return max((min(common_prefix(target, s.token_array()),
                        len(prompt) - 1) for s in running), default=0)

    def _best_source(self, target: np.ndarray,
                     running: Sequence[Seq]) -> tuple[int, int, bool]:
        """The longest reusable prefix of `target`: (its length, the stream, whether stored)."""
        best, best_src, from_store = 0, -1, False
        sources = [(e.slot, e.tokens, True) for e in self.store] + [
            (s.seq_id, s.token_array()[: s.n_past], False) for s in running
        ]
        for src, tokens, stored in sources:
            n = min(common_prefix(target, tokens), len(target) - 1)
            if n > best and self._window_present(src, n):
                best, best_src, from_store = n, src, stored
        return best, best_src, from_store

    def release(self, seq: Seq) -> None:
        """`seq` ended: keep its KV in the store when it is worth a slot, free its id."""
        kv_tokens = np.asarray(seq.tokens[: seq.n_past], dtype=np.int64)
        placement = self.store.place(kv_tokens) if self._window_present(seq.seq_id, 0) else None
        if placement is not None:
            self._copy(seq.seq_id, placement.slot)
        self._kv.seq_rm(seq.seq_id)
        self._busy.discard(seq.seq_id)

    def compact(self, running: Sequence[Seq]) -> None:
        """Move the highest running sequences down into holes below them."""
        by_id = {s.seq_id: s for s in running}
        while True:
            hole = next((i for i in range(self._n_running) if i not in self._busy), None)
            top = max(self._busy, default=-1)
            if hole is None or top < hole:
                return
            seq = by_id[top]
            self._copy(top, hole)
            self._kv.seq_rm(top)
            self._busy.discard(top)
            self._busy.add(hole)
            seq.seq_id = hole

    def _copy(self, src: int, dst: int) -> None:
        self._kv.seq_copy(src, dst)
        self.copies += 1

    def _window_present(self, src: int, n: int) -> bool:
        """Whether `src` still holds the KV that position `n` attends to. Sliding-window layers
        let llama.cpp overwrite a sequence's cells older than the window (llama_memory_seq_pos_min
        then rises); positions [pos_min, pos_max] are guaranteed present."""
        pos_min = self._kv.seq_pos_min(src)
        if pos_min <= 0:
            return True
        return self._n_swa > 0 and n - self._n_swa >= pos_min
