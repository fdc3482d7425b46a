"""Finished sequences' KV kept for prefix reuse, evicted by RAGCache's PGDSF priority.

A RAG prompt is [instruction][documents][question]; a later prompt that starts with the same
instruction and documents (another round of the same request, another request retrieving the same
passages, a restarted speculation) can copy that prefix's KV instead of computing it. The store
holds whole finished sequences, each in one KV slot, and answers "which slot shares the longest
prefix with this prompt".

Eviction follows RAGCache's PGDSF: priority = clock + frequency x cost / size. Every slot is one
KV stream of the same size, and what an entry saves is the prefill of its tokens, so here
priority = clock + hits x tokens; the clock rises to each evicted entry's priority, so entries
that stopped being hit age out behind newer ones (GDSF's inflation). Pure bookkeeping: the
engine does the KV copies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@dataclass
class StoredPrefix:
    slot: int
    tokens: np.ndarray  # the slot's KV holds exactly these tokens, at positions 0..n-1
    hits: int
    priority: float


@dataclass(frozen=True)
class Placement:
    """Where to copy a finished sequence's KV; `replaces` is the entry it overwrites, if any."""

    slot: int
    replaces: StoredPrefix | None


class PrefixStore:
    def __init__(self, slots: Sequence[int]) -> None:
        self._free = sorted(slots, reverse=True)
        self._entries: dict[int, StoredPrefix] = {}
        self.clock = 0.0
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return len(self._free) + len(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[StoredPrefix]:
        return iter(list(self._entries.values()))

    def hit(self, slot: int) -> None:
        """The entry in `slot` served a prefix: one more use raises its priority."""
        entry = self._entries[slot]
        entry.hits += 1
        entry.priority = self.clock + entry.hits * len(entry.tokens)

    def place(self, tokens: np.ndarray) -> Placement | None:
        """Where a finished sequence holding `tokens` should be kept, or None when it is not
        worth a slot: an entry already covers it, or every entry outranks it."""
        if not len(tokens):
            return None
        covering = self._related(tokens)
        if covering is not None:
            if len(covering.tokens) >= len(tokens):
                return None  # an entry already holds this prefix and more
            # The new sequence extends an entry (a continuation): take its slot and its uses.
            covering.tokens = tokens
            covering.priority = self.clock + covering.hits * len(tokens)
            return Placement(covering.slot, covering)
        priority = self.clock + len(tokens)
        if self._free:
            slot = self._free.pop()
            self._entries[slot] = StoredPrefix(slot, tokens, 1, priority)
            return Placement(slot, None)
        if not self._entries:
            return None
        victim = min(self._entries.values(), key=lambda e: (e.priority, e.slot))
        if victim.priority > priority:
            return None
        self.clock = victim.priority
        self.evictions += 1
        self._entries[victim.slot] = StoredPrefix(victim.slot, tokens, 1, self.clock + len(tokens))
        return Placement(victim.slot, victim)

    def _related(self, tokens: np.ndarray) -> StoredPrefix | None:
        """An entry whose tokens are a prefix of `tokens`, or that `tokens` is a prefix of."""
        for entry in self._entries.values():
            if common_prefix(entry.tokens, tokens) == min(len(entry.tokens), len(tokens)):
                return entry
        return None
